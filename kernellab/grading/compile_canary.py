"""A kernel that compiles wherever numba-cuda can compile at all: the compile check's control.

In a module of its own that imports only the device, so that the compile child loads nothing
else to find it (`kernellab.grading.compile_check.canary_request`).
"""

from kernellab.gpu import device

cuda = device.cuda()


@cuda.jit
def canary_kernel(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 1.0
