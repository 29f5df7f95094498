"""Stress mode exposes what plain simulation hides: a missing syncthreads, a dependency between
blocks, a read of shared memory nobody wrote; and it leaves correct kernels correct."""

import subprocess
import sys
import textwrap

import pytest

from kernellab import device, target

pytestmark = pytest.mark.skipif(not device.is_simulator(), reason="stress mode is for the simulator")

PROGRAM = textwrap.dedent('''
    import kernellab, numpy as np
    from kernellab import stress
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
