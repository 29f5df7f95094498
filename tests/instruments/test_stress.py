"""Stress mode exposes what plain simulation hides: a missing syncthreads, a dependency between
blocks, a read of shared memory nobody wrote; and it leaves correct kernels correct."""

import subprocess
import sys
import textwrap

import pytest

from kernellab.gpu import checks, device
from kernellab.course import target

pytestmark = pytest.mark.skipif(not device.is_simulator(), reason="stress mode is for the simulator")

PROGRAM = textwrap.dedent('''
    import kernellab, numpy as np
    from kernellab.gpu import stress
    from numba import cuda
    stress.enable(7)

    @cuda.jit
    def block_sum(x, out, sync):
        s = cuda.shared.array(64, dtype=np.float32)
        t = cuda.threadIdx.x
        s[t] = x[cuda.grid(1)]
        if sync:
            cuda.syncthreads()
        if t == 0:
            acc = 0.0
            for k in range(64):
                acc += s[k]
            out[cuda.blockIdx.x] = acc

    @cuda.jit
    def two_shared_arrays(x, out):
        a = cuda.shared.array(32, dtype=np.float32)
        b = cuda.shared.array(32, dtype=np.float32)
        t = cuda.threadIdx.x
        a[t] = x[t]
        b[t] = 2 * x[t]
        cuda.syncthreads()
        out[t] = a[31 - t] + b[t]

    @cuda.jit
    def reads_block_zero_flag(flag, out):
        if cuda.blockIdx.x == 0 and cuda.threadIdx.x == 0:
            flag[0] = 1.0
        if cuda.threadIdx.x == 0:
            out[cuda.blockIdx.x] = flag[0]

    x = np.ones(256, np.float32)
    wrong_without_sync = 0
    for trial in range(3):
        out = np.zeros(4, np.float32)
        block_sum[4, 64](x, out, False)
        wrong_without_sync += not np.allclose(out, 64)
        block_sum[4, 64](x, out, True)
        assert np.allclose(out, 64), out
    v = np.arange(32, dtype=np.float32) + 1
    out = np.zeros(32, np.float32)
    two_shared_arrays[1, 32](v, out)
    assert np.allclose(out, v[::-1] + 2 * v), out
    flag, seen = np.zeros(1, np.float32), np.zeros(16, np.float32)
    reads_block_zero_flag[16, 32](flag, seen)
    print("missing-sync", wrong_without_sync, "inter-block", int((seen == 0).sum()))
''')


def test_stress_mode_exposes_races_and_keeps_correct_kernels_correct():
    proc = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                          cwd=target.ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    words = proc.stdout.split()
    assert int(words[1]) == 3, "every run without syncthreads must read poisoned shared memory"
    assert int(words[3]) > 0, "some block must run before block 0 sets the flag"


POISON_PROGRAM = textwrap.dedent('''
    import math
    import kernellab, numpy as np
    from kernellab.gpu import checks, stress
    from numba import cuda
    stress.enable(7)

    @cuda.jit
    def misses_the_tail(x, out):
        i = cuda.grid(1)
        if i < x.size - 3:
            out[i] = x[i]

    @cuda.jit
    def reads_an_unfilled_tile(x, out):
        tile = cuda.shared.array(64, dtype=np.float32)
        t = cuda.threadIdx.x
        if t < 32:
            tile[t] = x[t]
        cuda.syncthreads()
        out[t] = tile[t] * np.float32(2.0) + x[t]

    @cuda.jit
    def exp_without_the_max(x, out):
        t = cuda.threadIdx.x
        total = np.float32(0.0)
        for k in range(x.size):
            total += math.exp(x[k])
        out[t] = math.exp(x[t]) / total

    def failure(check):
        try:
            check()
        except AssertionError as error:
            return str(error)
        return "passed"

    x = np.linspace(1.0, 2.0, 64).astype(np.float32)
    out = cuda.device_array(64, np.float32)              # allocated by the "launcher", not poisoned by hand
    misses_the_tail[2, 32](cuda.to_device(x), out)
    print(failure(lambda: checks.assert_matches(out, x, what="copy")))
    out = cuda.device_array_like(x)
    reads_an_unfilled_tile[1, 64](cuda.to_device(x), out)
    print(failure(lambda: checks.assert_matches(out, 3 * x, what="tile")))
    big = (x * 60).astype(np.float32)
    out = checks.poisoned(64)
    exp_without_the_max[1, 64](cuda.to_device(big), out)
    ref = np.exp(big - big.max()) / np.exp(big - big.max()).sum()
    print(failure(lambda: checks.assert_matches(out, ref, what="softmax")))
    print(int((cuda.device_array(5, np.int32).copy_to_host() == checks.POISON_INT).sum()),
          int(np.isnan(cuda.pinned_array(5, np.float32)).sum()))
''')


def test_poison_tells_never_written_from_shared_memory_from_overflow():
    """The three NaN origins, through the simulator's own arithmetic in stress mode; arrays a
    launcher allocates start as the output poison too."""
    proc = subprocess.run([sys.executable, "-c", POISON_PROGRAM], capture_output=True, text=True,
                          cwd=target.ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    unwritten, from_shared, overflowed, allocated = proc.stdout.strip().splitlines()
    assert unwritten == ("copy: 3 of 64 elements never written (still the output poison), "
                         "the first at index (61,); " + checks.THREADS_PICTURE)
    assert from_shared == ("tile: 32 of 64 elements computed from shared memory no thread wrote "
                           "(missing syncthreads or no fill?), the first at index (32,)")
    assert overflowed.startswith("softmax: ") and "overflowed to inf/NaN (subtract the max " \
        "before exp?)" in overflowed and "never written" not in overflowed
    assert allocated == "5 5"
