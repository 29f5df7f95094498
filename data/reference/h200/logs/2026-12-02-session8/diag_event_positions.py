"""Which event in a copy stream slows Lab 07's pipeline? The lab's pipeline (as diag_host_delay.py)
bare and with one raw timing event (cuEventRecord, pooled, no trace) recorded on the op's stream
right after each H2D copy, each kernel or each D2H copy, or before each H2D copy; and after each
D2H with timing disabled. All taken in turn with bare (lab07_measure.alternating_windows, 15 reps).
diag_host_delay.py showed the host's time per copy is not it (15 us of spinning per copy: -0.1%)."""
import contextlib

import numpy as np

from kernellab.course import protocol, target
from kernellab.gpu import device, hooks
from kernellab.gpu.timeline import Timeline, _event_recorder
from experiments.lab07_measure import alternating_windows, paired_ratio

cuda = device.cuda()
lab, experiment = target.load("07"), protocol.experiment("07")
n, chunks, iters = experiment.PIPELINE_N, experiment.PIPELINE_CHUNKS, 168
host_x = cuda.pinned_array(n, dtype=np.float32)
host_x[:] = 1.5
host_out = cuda.pinned_array_like(host_x)
buffers = (cuda.device_array(n, dtype=np.float32), cuda.device_array(n, dtype=np.float32))
streams = [cuda.stream() for _ in range(4)]
record = _event_recorder()
pools = {timing: [cuda.event(timing=timing) for _ in range(4 * chunks)] for timing in (True, False)}


def run():
    lab.pipeline(host_x, iters, streams, chunks, host_out, buffers)


def events(op, where, timing=True):
    """A subscription recording a pooled event on the op's stream before or after each `op`."""
    pool = pools[timing]
    used = iter(range(10 ** 9))

    def mark(key):
        if record(int(pool[next(used) % len(pool)].handle), key):
            raise RuntimeError("cuEventRecord failed")

    def key_of(*args, **kwargs):
        stream = args[1] if op == hooks.LAUNCH else kwargs.get("stream", 0)
        key = Timeline._key(stream)
        if where == "before":
            mark(key)
        return key
    after = mark if where == "after" else None
    return lambda: hooks.subscribe(**{op: hooks.Bracket(key_of, after)})


ways = {"bare": (contextlib.nullcontext, run),
        "timing event after each H2D": (events("copy_to_device", "after"), run),
        "timing event after each kernel": (events(hooks.LAUNCH, "after"), run),
        "timing event after each D2H": (events("copy_to_host", "after"), run),
        "timing event before each H2D": (events("copy_to_device", "before"), run),
        "timing event before each D2H": (events("copy_to_host", "before"), run),
        "untimed event after each D2H": (events("copy_to_host", "after", timing=False), run)}
for round_ in range(2):
    figures = alternating_windows(ways, 15)
    bare = figures["bare"]["window"]
    print(f"round {round_ + 1}: bare window {np.median(bare):.3f} ms (median of {len(bare)})")
    for name, figure in figures.items():
        if name != "bare":
            r = paired_ratio(figure["window"], bare)
            print(f"  {name:32s} {np.median(figure['window']):7.3f} ms  {100 * r['median']:+6.1f}%  "
                  f"(p10 {100 * r['p10']:+.1f}%, p90 {100 * r['p90']:+.1f}%)")
