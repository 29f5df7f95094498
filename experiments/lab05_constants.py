"""Lab 05's constants, and which re-reads a cache serves (`cached_rereads`), shared by its
declaration (lab05_reduction_fusion) and its parts (lab05_measure, lab05_figures, lab05_claims):
here, the parts import them without importing the declaration, which imports the parts."""

from kernellab.course import protocol

ROWS = 8192
HEADLINE_COLS = 8192                      # the size the targets are stated at
TARGET_PCT_OF_COPY = 80.0
# (threads, values per thread, register cap) for a row of 8192 in registers: the register-pressure experiment.
SHAPES = ((1024, 8, None), (512, 16, None), (256, 32, None), (1024, 8, 32))
# (threads, loads in flight per thread) for a row of 8192 staged in shared memory (solution side).
STAGED_SHAPES = ((256, 8), (256, 16), (256, 32), (512, 8))
# threads for a row of 8192 in 16-byte vectors held in registers (solution side): 8, 16, 32 values each.
VECTOR_BLOCKS = (1024, 512, 256)

STAGED_KERNEL = "softmax_staged_kernel"   # solution side: the starter lacks these two
VECTOR_KERNEL = "softmax_vector_kernel"
_ROW_BLOCK = "one block per row, row_block(cols) threads (1024 at 8192 columns)"
KERNELS = (
    *(protocol.Kernel(name, _ROW_BLOCK) for name in (
        "row_max_kernel", "row_exp_sum_kernel", "softmax_normalize_kernel", "softmax_online_kernel",
        "softmax_fused_kernel", "row_mean_kernel", "row_rstd_kernel", "layernorm_normalize_kernel",
        "layernorm_online_kernel", "layernorm_fused_kernel")),
    protocol.Kernel("softmax_fused_16_kernel", "one block of 512 threads per row, 16 values each in registers",
                    block_size=512),
    protocol.Kernel("softmax_fused_32_kernel", "one block of 256 threads per row, 32 values each in registers",
                    block_size=256),
    protocol.Kernel(STAGED_KERNEL, "one block of 256 threads per row, the row staged in shared memory, "
                    "bursts of 8 loads", block_size=256, solution_side=True),
    protocol.Kernel(VECTOR_KERNEL, "one block of 512 threads per row, 4 float32x4 each in registers "
                    "(x and out as 1-D views)", block_size=512, solution_side=True),
)
SOLUTION_SIDE_KERNELS = {k.name for k in KERNELS if k.solution_side}


ROW_STATISTICS = ("row_max", "row_sum", "mean", "rstd")   # the unfused forms' per-row temporaries


def cached_rereads(ledger, rows: int, cols: int):
    """The ledger with the re-reads a cache serves marked (`Ledger.with_distinct`): gamma and beta,
    `cols` values that every row reads again, and the unfused forms' row statistics, `rows` values
    that each thread of a row reads again (a warp's 32 reads of one are a single broadcast). The bench rates a row on the bytes left (the
    compulsory bytes): in requested bytes torch's layernorm ran above the DRAM ceiling, its
    re-reads of gamma and beta served by L2."""
    for name in ("gamma", "beta"):
        ledger = ledger.with_distinct(name, cols)
    for name in ROW_STATISTICS:
        ledger = ledger.with_distinct(name, rows)
    return ledger
