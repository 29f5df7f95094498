"""Lab 07's constants, shared by its declaration (lab07_streams) and its parts (measure, figures, claims):
here, the parts import them without importing the declaration, which imports the parts."""

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
# out, chunk after chunk); breadth first issues every copy in, then every kernel, then every copy out.
PIPELINE_STEPS = {
    "one_stream": (8, 1, "depth_first", "8 chunks on one stream: every op waits for the one before it"),
    "chunks_4": (4, 4, "depth_first", "4 chunks: the first copy in and the last copy out, a quarter each, overlap nothing"),
    "chunks_8": (8, 4, "depth_first", "the lab's pipeline: 8 chunks on 4 streams"),
    "chunks_16": (16, 4, "depth_first", "16 chunks: shorter ends, but 48 submissions"),
    "chunks_64": (64, 4, "depth_first", "64 chunks: 192 submissions, more than the host makes while the GPU copies"),
    "breadth_first": (8, 4, "breadth_first", "the lab's 8 chunks issued breadth first: each stream holds two chunks "
                                             "and runs in order, so its first kernel waits for its second copy in"),
}
ONE_STREAM_OVERLAP_PCT = 10.0          # one stream hides at most this (%): what noise can leave of nothing
MODEL_AGREES_PCT = 15.0               # the model's pipeline time within this (%) of the measured agrees
PIPELINE_STEPS_MAIN = "chunks_8"       # the step that is the lab's own pipeline
TARGETS = {"speedup_16_streams": 10.0, "model_error": 0.20, "hidden_fraction": 0.80, "recorder_over_floor_us": 1.0}
CONNECTIONS = (8, 32)                   # CUDA_DEVICE_MAX_CONNECTIONS of the two sweeps (8: driver default)
MAIN_CONNECTIONS = 32                   # the targets are judged here; the rest is measured here
CONCURRENCY_RECORD = {32: "concurrency", 8: "concurrency_8_connections"}
CONNECTIONS_OF = {"concurrency_8_connections": 8}   # every other record: MAIN_CONNECTIONS
SIM_ITERS = 3
