"""Lab 09's constants, shared by its declaration (lab09_roofline) and its parts (lab09_measure,
lab09_points, lab09_figures, lab09_claims): here, the parts import them without importing the
declaration, which imports the parts."""

NUMBER = "09"
SIM_SHAPE = (35, 45)             # rows, cols: neither a multiple of 32, not square
GPU_SHAPE = (8192, 8192)         # 256 MiB per matrix: 4x the 60 MB L2 (the simulator's shape is the awkward one)
SIM_SIZES = [SIM_SHAPE[0]]       # the benchmarks' sweep axis is rows (cols follow the shape)
GPU_SIZES = [GPU_SHAPE[0]]
SCALE_ROWS_VARIANTS = ("scale_rows_strided", "scale_rows", "scale_rows_wide")
TRANSPOSE_VARIANTS = ("transpose_naive", "transpose", "transpose_wide")
TUNED_TARGET_PCT = 85.0          # the tuned kernels: at least this % of their mix's ceiling (issue 27)
