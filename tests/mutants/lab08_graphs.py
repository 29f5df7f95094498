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
    # Each of these escaped the checks before issue 56; the check named kills it.
    ("pipeline launches in blocks of DEFAULT_BLOCK whatever `block` says (test_pipeline_eager's drawn blocks)",
     "    grid = (x.size + block - 1) // block          # one thread per element\n    for a, b in coeffs:\n"
     "        affine_step_kernel[grid, block, stream](x, a, b)",
     "    grid = (x.size + DEFAULT_BLOCK - 1) // DEFAULT_BLOCK  # one thread per element\n    for a, b in coeffs:\n"
     "        affine_step_kernel[grid, DEFAULT_BLOCK, stream](x, a, b)"),
    ("pipeline launches a spare block when the block divides x (test_pipeline_eager's exact multiple)",
     "    grid = (x.size + block - 1) // block          # one thread per element",
     "    grid = x.size // block + 1                    # one thread per element"),
    ("build captures in the default block, not self.block (test_batched_pipeline_build)",
     "capture(pipeline, flat, self.coeffs, block=self.block)", "capture(pipeline, flat, self.coeffs)"),
    ("call refuses a batch of one row (test_batched_pipeline_one_graph_per_batch_size's batch of 1)",
     "or x.shape[0] == 0:", "or x.shape[0] < 2:"),
    ("call copies x on the default stream (test_batched_pipeline_replays_on_its_stream)",
     "static.copy_to_device(x, stream=stream)", "static.copy_to_device(x)"),
    ("call replays on the default stream (test_batched_pipeline_replays_on_its_stream)",
     "        graph.replay(stream)\n", "        graph.replay()\n"),
    ("call captures its size's graph again on every call (test_batched_pipeline_replays_on_its_stream)",
     "        static, graph = self.graphs[x.shape[0]]",
     "        static, graph = self.graphs[x.shape[0]][0], capture(pipeline, self.graphs[x.shape[0]][0].reshape("
     "x.size), self.coeffs, block=self.block)"),
    ("idle gaps refuse a single kernel (test_idle_gap_fraction at kernels = 1)",
     "    if kernels < 1 or kernel_ms <= 0:\n        raise ValueError(f\"need kernels >= 1 and kernel_ms > 0, got {kernels} "
     "and {kernel_ms}\")\n    busy",
     "    if kernels <= 1 or kernel_ms <= 0:\n        raise ValueError(f\"need kernels >= 1 and kernel_ms > 0, got {kernels} "
     "and {kernel_ms}\")\n    busy"),
    ("idle gaps accept a negative kernel time (test_idle_gap_fraction)",
     "    if kernels < 1 or kernel_ms <= 0:\n        raise ValueError(f\"need kernels >= 1 and kernel_ms > 0, got {kernels} "
     "and {kernel_ms}\")\n    busy",
     "    if kernels < 1 or kernel_ms == 0:\n        raise ValueError(f\"need kernels >= 1 and kernel_ms > 0, got {kernels} "
     "and {kernel_ms}\")\n    busy"),
    ("timeline accepts no kernels (test_reconstructed_timeline)",
     "    if kernels < 1 or kernel_ms <= 0:\n        raise ValueError(f\"need kernels >= 1 and kernel_ms > 0, got {kernels} "
     "and {kernel_ms}\")\n    idle",
     "    if kernel_ms <= 0:\n        raise ValueError(f\"need kernels >= 1 and kernel_ms > 0, got {kernels} "
     "and {kernel_ms}\")\n    idle"),
    ("timeline accepts a negative kernel time (test_reconstructed_timeline)",
     "    if kernels < 1 or kernel_ms <= 0:\n        raise ValueError(f\"need kernels >= 1 and kernel_ms > 0, got {kernels} "
     "and {kernel_ms}\")\n    idle",
     "    if kernels < 1 or kernel_ms == 0:\n        raise ValueError(f\"need kernels >= 1 and kernel_ms > 0, got {kernels} "
     "and {kernel_ms}\")\n    idle"),
    ("call takes a 3-D batch (test_batched_pipeline_rejects_wrong_shapes)",
     "if len(x.shape) != 2 or x.shape[1]", "if len(x.shape) < 2 or x.shape[1]"),
    ("call refuses only batches narrower than features (test_batched_pipeline_rejects_wrong_shapes)",
     "x.shape[1] != self.features", "x.shape[1] < self.features"),
]

ALTERNATIVES = [
    ("a ValueError that shows the shape without the word 'shape'",
     "raise ValueError(f\"expected a (batch, {self.features}) array with batch >= 1, \"\n"
     "                             f\"got shape {tuple(x.shape)}\")",
     "raise ValueError(f\"expected (batch, {self.features}) with batch >= 1, got {tuple(x.shape)}\")"),
    ("the grid by negative floor division", "    grid = (x.size + block - 1) // block ",
     "    grid = -(-x.size // block)           "),
    ("idle fraction as total / busy - 1", "    return (total_ms - busy) / busy", "    return total_ms / busy - 1"),
]
