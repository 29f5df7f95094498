"""Pictures of a kernel at work, from the meter's trace of one tiny launch of the lab's own code.

    from kernellab.course import pictures
    run = pictures.trace("00", "axpb", np.arange(200, dtype=np.float32), np.float32(2), np.float32(1))
    pictures.threads(run)                    # which thread wrote which element; the idle ones
    pictures.warp_access(run, "x")           # one warp's request: its lanes, its 32-byte sectors
    pictures.shared_banks(run)               # one warp's shared-memory request on the 32 banks
    pictures.bytes_moved(unfused, fused, budgets=(ledger, ledger))  # bytes counted, against ledgers

`trace` runs a lab's function (of the target `kernellab.course.target.load` picks: labs or
solutions) with the traffic meter keeping every access, and returns a `KernelRun`: data only. The
picture functions choose what to show from it (one block, one warp, one request), work out its
numbers with the meter's own rules (`kernellab.gpu.traffic`), and hand them to the drawing in
`kernellab.show.pictures`. `bytes_moved` draws the bytes the meter counted in traced calls (Lab
02's unfused and fused chains), each beside the budget its ledger declares. The machine's pictures
take recorded data: `timeline` (Lab 07, and Lab 08's eager against replayed through
`replay_timelines`) and `sm_fill` (an occupancy result, Lab 06).

A trace always runs in the simulator: on a GPU, `trace` runs the same call in a child process
in simulator mode, and every picture says "traced in Numba's CUDA simulator". Keep the launch
tiny (a few hundred threads): the simulator runs each CUDA thread as a Python thread.
"""

from kernellab.course.pictures.kernel_views import (bytes_moved, reduction, shared_banks, shown_by, threads, tiles,
                                                   warp_access)
from kernellab.course.pictures.machine_views import replay_timelines, sm_fill, timeline
from kernellab.course.pictures.tracing import (KernelRun, LaunchSpan, trace, trace_call, trace_in_child,
                                               traced_for_parent)
from kernellab.show.pictures.canvas import Picture

__all__ = ["KernelRun", "LaunchSpan", "Picture", "bytes_moved", "reduction", "replay_timelines", "shared_banks",
           "shown_by", "sm_fill", "threads", "tiles", "timeline", "trace", "trace_call", "trace_in_child",
           "traced_for_parent", "warp_access"]
