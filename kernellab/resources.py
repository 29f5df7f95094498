"""Deprecated: the previous release's kernellab.resources, now kernellab.kernels.jit (the `jit`
decorator) and kernellab.kernels.resources. Import jit, kernel_resources and Resources from
kernellab.lab (the student API); this module goes in the next release."""

from kernellab import lab
from kernellab.kernels.jit import declared_signatures, jit  # noqa: F401
from kernellab.kernels.resources import (Resources, kernel_resources,  # noqa: F401
                                         kernel_resources_batch, occupancy_of)

lab.moved(__name__, lab.MOVED[__name__])
