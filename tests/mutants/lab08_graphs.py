"""Planted bugs in Lab 08's solution: the graded tests must catch every one.

(what the bug is, text in solutions/lab08_graphs.py, its replacement)
"""

MUTANTS = [
    ("step kernel without a guard", "    if i < x.size:            # the guard", "    if True:                  # the guard"),
    ("step kernel adds b before scaling", "        x[i] = a * x[i] + b   # 1 read", "        x[i] = a * (x[i] + b) # 1 read"),
    ("pipeline grid rounds down", "    grid = (x.size + block - 1) // block          # one thread per element",
     "    grid = x.size // block                        # one thread per element"),
    ("pipeline ignores the stream", "        affine_step_kernel[grid, block, stream](x, a, b)",
     "        affine_step_kernel[grid, block](x, a, b)"),
    ("pipeline skips the last step", "    for a, b in coeffs:\n        affine_step_kernel",
     "    for a, b in list(coeffs)[:-1]:\n        affine_step_kernel"),
    ("graph captured on a buffer the call never fills",
     "        flat = static.reshape(batch * self.features)  # a view",
     "        flat = cuda.device_array(batch * self.features, dtype=np.float32)  # a view"),
    ("call runs the pipeline eagerly, no replay", "        graph.replay(stream)\n",
     "        pipeline(static.reshape(static.size), self.coeffs, stream=stream, block=self.block)\n"),
    ("call builds a new graph every time", "        static, graph = self.graphs[x.shape[0]]",
     "        static, graph = self.build(x.shape[0])"),
    ("idle gaps over the total, not kernel time", "    return (total_ms - busy) / busy",
     "    return (total_ms - busy) / total_ms"),
    ("idle gaps clamped at 0", "    return (total_ms - busy) / busy", "    return max(0.0, (total_ms - busy) / busy)"),
    ("timeline gaps clamped at 0", "    idle = total_ms - kernels * kernel_ms ",
     "    idle = max(0.0, total_ms - kernels * kernel_ms)"),
    ("timeline gap also after the last kernel", "    gap = idle / (kernels - 1) if kernels > 1 else 0.0",
     "    gap = idle / kernels"),
]
