"""Lab 03's constants, shared by its declaration (lab03_horizontal_fusion) and its parts
(lab03_measure, lab03_figures, lab03_claims): here, the parts import them without importing the
declaration, which imports the parts."""

from kernellab.course import protocol

NUMBER = "03"
SIZES = [2**k for k in range(10, 27)]      # the largest task: 1K .. 64M elements, until the bytes
                                           # outlast four launches' submit time
GAIN_THAT_PAYS = 1.05                      # merging "pays" while it saves more than 5%
BLOCK = 128                                # every launcher's default block (the lab's DEFAULT_BLOCK)
SCALE_ARRAYS = 2                           # x0 and out: the arrays of the launch `host_launch` times
LAUNCHES = "_launches"                     # a variant's launches alone: `<variant>_launches`
KERNEL_PACE = 0.98                         # the merged kernel's target against the four, every size

# The lab's kernels (the declaration's LAB.kernels): `registers` records them and the claims read them.
KERNELS = (
    protocol.Kernel("scale_kernel", "1-D: one thread per element of task 0", block_size=BLOCK),
    protocol.Kernel("add_kernel", "1-D: one thread per element of task 1", block_size=BLOCK),
    protocol.Kernel("relu_kernel", "1-D: one thread per element of task 2", block_size=BLOCK),
    protocol.Kernel("square_kernel", "1-D: one thread per element of task 3", block_size=BLOCK),
    protocol.Kernel("horizontal_kernel",
                    "1-D: every task's blocks end to end, each block one task's part",
                    block_size=BLOCK),
)
