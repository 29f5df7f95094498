"""Planted bugs in Lab 01's solution, which the graded tests must catch, and valid alternatives,
which must score full marks.

(what it is, text in solutions/lab01_launch_overhead.py, its replacement)
"""

MUTANTS = [
    ("bump kernel: every thread bumps", "    if cuda.grid(1) == 0:     # one thread does the work",
     "    if True:                  # one thread does the work"),
    ("bump kernel: every thread bumps, atomically",
     "    if cuda.grid(1) == 0:     # one thread does the work, however many are launched\n"
     "        counter[0] += 1       # 1 read and 1 write of counter[0]",
     "    if True:\n        cuda.atomic.add(counter, 0, np.float32(1))"),
    ("chain one launch short", "    for _ in range(count):\n        bump_kernel",
     "    for _ in range(count - 1):\n        bump_kernel"),
    ("chain ignores the stream", "        bump_kernel[1, 1, stream](counter)", "        bump_kernel[1, 1](counter)"),
    ("sum8 without a guard", "    if i < out.size:          # the guard: the last block has threads past the end\n        out[i] = a[i]",
     "    if True:\n        out[i] = a[i]"),
    ("sum8 reads g twice, h never", "g[i] + h[i]  # 8 reads, 1 write", "g[i] + g[i]  # 8 reads, 1 write"),
    ("sum8 on the host, no kernel", "    sum8_kernel[grid, block](*arrays, out)",
     "    out.copy_to_device(sum(a.copy_to_host() for a in arrays))"),
    ("scale_rows guards only the columns", "    if row < out.shape[0] and col < out.shape[1]:   # guard both dimensions",
     "    if col < out.shape[1]:                          # guard both dimensions"),
    ("scale_rows writes row 0 for every row", "        out[row, col] = a * x[row, col]             # 1 read, 1 write",
     "        out[0, col] = a * x[row, col]               # 1 read, 1 write"),
    ("scale_rows launches once per row", "    scale_rows_kernel[grid, block](x, a, out)     # one launch, however many rows",
     "    scale_rows_separately(x, a, out=out)"),
    ("floor model sums instead of max", "    return np.maximum(launch_us, data_us)", "    return launch_us + data_us"),
]

ALTERNATIVES = [
    # Scores full marks once the meter counts an atomic as 1 read + 1 write (the simulator's
    # atomic reads the element twice).
    ("bump kernel: one atomic add from one thread",
     "    if cuda.grid(1) == 0:     # one thread does the work, however many are launched\n"
     "        counter[0] += 1       # 1 read and 1 write of counter[0]",
     "    if cuda.grid(1) == 0:\n        cuda.atomic.add(counter, 0, np.float32(1))"),
    ("bump kernel: thread 0 of block 0, by threadIdx and blockIdx",
     "    if cuda.grid(1) == 0:     # one thread does the work, however many are launched",
     "    if cuda.threadIdx.x == 0 and cuda.blockIdx.x == 0:"),
]
