"""A kernel that compiles wherever numba-cuda can compile at all.

The grader's compile check compiles it before the student's kernels. Where it fails too, the
check itself cannot work on this machine (for example, cuda.core without a usable nvJitLink falls
back to the driver's linker, which needs a CUDA context the compile child does not have), and
the grader says so instead of failing every kernel the student wrote.
"""

from kernellab.gpu import device

cuda = device.cuda()


@cuda.jit
def canary_kernel(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 1.0
