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
    ("chain returns nothing for count=0", "    if count < 0:", "    if count == 0:\n        return None\n    if count < 0:"),
    ("sum8 ignores the out it was given", "    if out is None:\n        out = cuda.device_array_like(arrays[0])",
     "    out = cuda.device_array_like(arrays[0])"),
    ("sum8 returns a host copy", "    sum8_kernel[grid, block](*arrays, out)        # 9 array arguments: ~9x the marshalling of one\n    return out",
     "    sum8_kernel[grid, block](*arrays, out)\n    return out.copy_to_host()"),
    ("sum8 ignores the block size", "    grid = (out.size + block - 1) // block        # one thread per element\n    sum8_kernel[grid, block]",
     "    grid = (out.size + 127) // 128\n    sum8_kernel[grid, 128]"),
    ("sum8 accepts more than 8 arrays", "    if len(arrays) != 8:", "    if len(arrays) < 8:"),
    ("sum8 compares only the first and last sizes", "    sizes = {a.size for a in arrays}",
     "    sizes = {arrays[0].size, arrays[-1].size}"),
    ("scale_rows lanes on strided columns (threadIdx.x * gridDim.x + blockIdx.x: right values, uncoalesced)",
     "    col, row = cuda.grid(2)   # x runs along a row",
     "    col, row = cuda.threadIdx.x * cuda.gridDim.x + cuda.blockIdx.x, cuda.grid(2)[1]   # x runs along a row"),
    ("scale_rows ignores the out it was given", "    if out is None:\n        out = cuda.device_array_like(x)\n    rows, n = x.shape",
     "    out = cuda.device_array_like(x)\n    rows, n = x.shape"),
    ("per_launch_cost returns an array, not a tuple of floats",
     "    return slope, float(total_us.mean() - slope * counts.mean())",
     "    return np.array([slope, total_us.mean() - slope * counts.mean()])"),
    ("per_launch_cost accepts 2D input", "    if counts.shape != total_us.shape or counts.ndim != 1:",
     "    if counts.shape != total_us.shape:"),
    ("per_launch_cost wants three different counts", "    if np.unique(counts).size < 2:", "    if np.unique(counts).size < 3:"),
    ("floor model assumes 8 bytes per element", "np.asarray(n, dtype=np.float64) * bytes_per_element /",
     "np.asarray(n, dtype=np.float64) * 8 /"),
    ("crossover returned as a float", "    return int(np.ceil(launch_us * bandwidth_gbps * 1e3 / bytes_per_element))",
     "    return np.ceil(launch_us * bandwidth_gbps * 1e3 / bytes_per_element)"),
    ("crossover refuses launch_us = 0", "    if launch_us < 0 or", "    if launch_us <= 0 or"),
    ("crossover accepts a negative size", "bytes_per_element <= 0 or bandwidth_gbps", "bytes_per_element == 0 or bandwidth_gbps"),
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
    ("per_launch_cost by np.polyfit, returned as Python floats",
     "    dc = counts - counts.mean()\n    slope = float(np.sum(dc * (total_us - total_us.mean())) / np.sum(dc * dc))\n"
     "    return slope, float(total_us.mean() - slope * counts.mean())",
     "    slope, intercept = np.polyfit(counts, total_us, 1)\n    return float(slope), float(intercept)"),
    ("crossover in seconds and bytes per second", "    return int(np.ceil(launch_us * bandwidth_gbps * 1e3 / bytes_per_element))",
     "    return int(np.ceil((launch_us * 1e-6) * (bandwidth_gbps * 1e9) / bytes_per_element))"),
    ("sum8 checks the sizes pairwise against the first", "    sizes = {a.size for a in arrays}\n    if len(sizes) != 1:",
     "    sizes = [a.size for a in arrays]\n    if any(size != sizes[0] for size in sizes):"),
]
