"""One cuEventRecord on the host, four ways, taken in turn (20 rounds of 2,000 records each way):
ctypes with int arguments (the recorder's way), ctypes with c_void_p objects made once, cuda.bindings
with ints, and cuda.bindings with CUevent/CUstream objects made once; then the recorder's way right
after a 1 KiB pinned copy and right after a one-block launch on the same stream, against the call alone."""
import ctypes, statistics, time
import numpy as np
import kernellab.gpu.device as device
from kernellab.gpu import timeline
from cuda.bindings import driver

cuda = device.cuda()
stream = cuda.stream()
key = timeline.Timeline._key(stream)
events = [timeline._new_event(cuda) for _ in range(64)]
handles = [h for _, h in events]
raw = ctypes.CDLL("libcuda.so.1").cuEventRecord
raw.argtypes, raw.restype = (ctypes.c_void_p, ctypes.c_void_p), ctypes.c_int
bare = ctypes.CDLL("libcuda.so.1").cuEventRecord
bare.restype = ctypes.c_int
vp_events, vp_stream = [ctypes.c_void_p(h) for h in handles], ctypes.c_void_p(key)
cu_events, cu_stream = [driver.CUevent(h) for h in handles], driver.CUstream(key)
ways = {
    "ctypes_ints": lambda i: raw(handles[i & 63], key),
    "ctypes_void_p": lambda i: bare(vp_events[i & 63], vp_stream),
    "bindings_ints": lambda i: driver.cuEventRecord(handles[i & 63], key),
    "bindings_objects": lambda i: driver.cuEventRecord(cu_events[i & 63], cu_stream),
}
small = cuda.device_array(256, dtype=np.float32)
host = cuda.pinned_array(256, dtype=np.float32)
host[:] = 1.0
inner, rounds = 2000, 20
samples = {w: [] for w in ways}
for r in range(rounds):
    for w, f in (list(ways.items())[r % 4:] + list(ways.items())[:r % 4]):
        t = time.perf_counter()
        for i in range(inner):
            f(i)
        samples[w].append((time.perf_counter() - t) / inner * 1e6)
        stream.synchronize()
for w, s in samples.items():
    print(f"{w:18s} median {statistics.median(s):.2f} us  p10 {np.percentile(s, 10):.2f}  p90 {np.percentile(s, 90):.2f}")
# after a copy / alone
pairs = {"copy": lambda: small.copy_to_device(host, stream=stream)}
for name, call in pairs.items():
    alone, with_event = [], []
    for r in range(rounds):
        for which in ((0, 1) if r % 2 else (1, 0)):
            t = time.perf_counter()
            for i in range(200):
                call()
                if which:
                    raw(handles[i & 63], key)
            (with_event if which else alone).append((time.perf_counter() - t) / 200 * 1e6)
            stream.synchronize()
    d = [b - a for a, b in zip(alone, with_event)]
    print(f"{name}: alone {statistics.median(alone):.2f} us, +event after {statistics.median(d):+.2f} us "
          f"(p10 {np.percentile(d, 10):+.2f}, p90 {np.percentile(d, 90):+.2f})")
