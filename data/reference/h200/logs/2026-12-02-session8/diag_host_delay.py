"""Is the recorder's slowdown of Lab 07's pipeline the host's time per copy? The lab's pipeline
(2^26 float32, pinned, 16 chunks on 4 streams, 168 FMAs) bare, with the host spinning X us before
each copy or each kernel (a hook that does nothing else, no event), and inside the two recorders;
all taken in turn (lab07_measure.alternating_windows, 15 reps), each against bare per rep. Also the
host's submission time: from the call to the first stream synchronize (bare)."""
import contextlib
import time

import numpy as np

from kernellab.course import protocol, target
from kernellab.gpu import device, hooks
from kernellab.gpu.timeline import Timeline, reserve_events
from experiments.lab07_measure import alternating_windows, paired_ratio

cuda = device.cuda()
lab, experiment = target.load("07"), protocol.experiment("07")
n, chunks, iters = experiment.PIPELINE_N, experiment.PIPELINE_CHUNKS, 168
host_x = cuda.pinned_array(n, dtype=np.float32)
host_x[:] = 1.5
host_out = cuda.pinned_array_like(host_x)
buffers = (cuda.device_array(n, dtype=np.float32), cuda.device_array(n, dtype=np.float32))
streams = [cuda.stream() for _ in range(4)]
reserve_events(6 * chunks)


def run():
    lab.pipeline(host_x, iters, streams, chunks, host_out, buffers)


def spinning(us, ops):
    def spin(*args, **kwargs):
        until = time.perf_counter() + us * 1e-6
        while time.perf_counter() < until:
            pass
    bracket = hooks.Bracket(spin)
    return lambda: hooks.subscribe(**{op: bracket for op in ops})


copies, kernels = ("copy_to_device", "copy_to_host"), (hooks.LAUNCH,)
ways = {"bare": (contextlib.nullcontext, run),
        **{f"spin {us} us per copy": (spinning(us, copies), run) for us in (5, 10, 15)},
        "spin 15 us per kernel": (spinning(15, kernels), run),
        "recorder, starts inferred": (lambda: Timeline(infer_starts=True), run),
        "recorder, two events per op": (Timeline, run)}
figures = alternating_windows(ways, 15)
bare = figures["bare"]["window"]
print(f"bare window {np.median(bare):.3f} ms (median of {len(bare)})")
for name, figure in figures.items():
    if name != "bare":
        r = paired_ratio(figure["window"], bare)
        print(f"{name:30s} {np.median(figure['window']):7.3f} ms  {100 * r['median']:+6.1f}%  "
              f"(p10 {100 * r['p10']:+.1f}%, p90 {100 * r['p90']:+.1f}%)")

submit = []
for rep in range(12):
    seen = {}

    def first_sync(proceed, stream):
        seen.setdefault("t", time.perf_counter())
        return proceed()
    cuda.synchronize()
    with hooks.subscribe(stream_synchronize=first_sync):
        started = time.perf_counter()
        run()
        ended = time.perf_counter()
    submit.append(((seen["t"] - started) * 1e3, (ended - started) * 1e3))
submit = np.array(submit[2:])
print(f"host submission (call to first synchronize) {np.median(submit[:, 0]):.3f} ms of the call's "
      f"{np.median(submit[:, 1]):.3f} ms (medians of {len(submit)}, the hook on synchronize included)")
