"""Lab 07's constants, shared by its declaration (lab07_streams) and its parts (lab07_measure,
lab07_figures, lab07_claims): here, the parts import them without importing the declaration, which
imports the parts."""

NUMBER = "07"
KERNELS = 16
STREAM_COUNTS = (1, 2, 4, 8, 16)
FEW_BLOCKS = 8                          # 16 kernels x 8 blocks = 128 blocks < 132 SMs
KERNEL_MS = 1.5                         # long enough that 16 plain launches (~0.3 ms) stay small
REPS = 7
SIGNATURE = "void(float32[::1], int64, float32[::1])"   # busy_kernel's, slices included
PIPELINE_N = 1 << 26                    # 256 MiB of float32 each way
PIPELINE_CHUNKS, PIPELINE_STREAMS = 8, 4
# The tuning steps a student could try, each measured without the recorder: name -> (chunks,
# streams, issue order, why). Depth first is the lab's order (each chunk's copy in, kernel and copy
# out, chunk after chunk); breadth first issues every copy in, then every kernel, then every copy
# out. 8 chunks on 4 streams is the lab's: on the lent H200's slow host a chunk's 4 slices, 2 copies
# and a launch took 0.35-0.64 ms to submit against ~0.75 ms of copying (2026-12-02, sessions 6 and
# 7), so the host stays ahead; at 16 chunks it does in some repeats only (-1% to 79% hidden).
PIPELINE_STEPS = {
    "one_stream": (8, 1, "depth_first",
                   "8 chunks on one stream: every copy and kernel waits for the op before it, so nothing "
                   "overlaps (the floor the streams are measured against)"),
    "chunks_4": (4, 4, "depth_first",
                 "4 chunks: the first chunk's copy in and the last one's copy out (a quarter of the data "
                 "each) have nothing to overlap with"),
    "chunks_8": (8, 4, "depth_first",
                 "the lab's pipeline: 8 chunks on 4 streams, an eighth left unhidden at each end, and a host "
                 "that submits a chunk faster than the GPU copies it"),
    "chunks_12": (12, 4, "depth_first",
                  "12 chunks: a twelfth unhidden at each end, and 36 submissions, still fewer than the host "
                  "can make while the GPU copies"),
    "chunks_16": (16, 4, "depth_first",
                  "16 chunks: shorter ends, but 48 submissions that take about as long as the copies"),
    "chunks_64": (64, 4, "depth_first", "64 chunks: 192 submissions the host cannot keep ahead of the GPU"),
    "breadth_first": (8, 4, "breadth_first",
                      "the lab's 8 chunks issued breadth first: on a GPU with one copy engine and one hardware "
                      "queue, this order kept each copy in from waiting behind the copy out issued before it; "
                      "the H200 copies each direction on its own engine and gives each stream its own queue, "
                      "which leaves the host's order of submission to decide"),
    "one_copy_stream": (8, 4, "one_copy_stream",
                        "the lab's 8 chunks with every copy on one stream and the kernels on the other three, "
                        "ordered by events: a stream runs in order, so the copies in and out take turns and "
                        "the second copy engine waits"),
}
ISSUE_ORDERS = ("depth_first", "breadth_first", "one_copy_stream")
COPY_ENGINES_RATIO = 1.25   # copies alone on one stream over the same copies on 4: above it, two engines were seen
ONE_STREAM_OVERLAP_PCT = 10.0          # one stream hides at most this (%): what noise can leave of nothing
PIPELINE_STEPS_MAIN = "chunks_8"       # the step that is the lab's own pipeline
TARGETS = {"speedup_16_streams": 10.0, "model_error": 0.20, "hidden_fraction": 0.80,
           "methods_agree_points": 10.0, "recorder_us_per_op": 5.0, "recorder_slowdown": 0.05}
CONNECTIONS = (8, 32)                   # CUDA_DEVICE_MAX_CONNECTIONS of the two sweeps (8: driver default)
MAIN_CONNECTIONS = 32                   # the targets are judged here; the rest is measured here
CONCURRENCY_RECORD = {32: "concurrency", 8: "concurrency_8_connections"}
CONNECTIONS_OF = {"concurrency_8_connections": 8}   # every other record: MAIN_CONNECTIONS
SIM_ITERS = 3
# Nominal H200-like figures for model-only pictures (no measurement): 50 GB/s copies of a 16 MB
# chunk, a chunk's kernel half as long, ~15 us of host time per Numba launch.
NOMINAL = {"copy_ms": 0.32, "chunk_kernel_ms": 0.16, "host_launch_ms": 0.015}
# Two slowdowns of the pinned pipeline closer than this (percentage points) are not told apart: one
# repeat's paired slowdowns span more than that between their p10 and p90 (session 8, call C).
CLEAR_DIFFERENCE_POINTS = 3.0
