"""Planted bugs in Lab 05's solution, which the graded tests must catch, and valid alternatives,
which must score full marks.

(what the bug is, text in solutions/lab05_reduction_fusion.py, its replacement)

block_reduce is tree_block_reduce in the simulator (where the graded tests run), so the missing
barriers are planted in the tree.
"""

MUTANTS = [
    ("tree reduction: no barrier after each thread stores its value",
     "    scratch[tid] = value\n    cuda.syncthreads()\n", "    scratch[tid] = value\n"),
    ("tree reduction: no barrier between the halving steps",
     "scratch[tid] + other\n        cuda.syncthreads()\n        stride //= 2",
     "scratch[tid] + other\n        stride //= 2"),
    ("tree reduction: no barrier before scratch is used again",
     "    result = scratch[0]\n    cuda.syncthreads()          # all have read the result before scratch is used again\n"
     "    return result\n\n\n@cuda.jit(device=True)\ndef warp_combine",
     "    result = scratch[0]\n    return result\n\n\n@cuda.jit(device=True)\ndef warp_combine"),
    ("online softmax: off-by-one, the statistics skip the last column",
     "# sum of exp(value - running_max)\n    for col in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):",
     "# sum of exp(value - running_max)\n    for col in range(cuda.threadIdx.x, x.shape[1] - 1, cuda.blockDim.x):"),
    ("fused layernorm: missing bounds guard in the variance pass",
     "            if tid + item * block < cols:\n                deviation",
     "            if True:\n                deviation"),
    ("fused softmax: stride hard-coded to a warp (32), not the block",
     "        block = cuda.blockDim.x\n        cols = x.shape[1]\n        local_max = NEG_INF",
     "        block = 32\n        cols = x.shape[1]\n        local_max = NEG_INF"),
    ("fused layernorm: writes at a blocked stride, not the strided columns it cached",
     "            col = tid + item * block\n            if col < cols:\n                out[row, col] = (cache[item] - mean)",
     "            col = tid * ITEMS + item\n            if col < cols:\n                out[row, col] = (cache[item] - mean)"),
    ("fused layernorm: reads gamma where it should read beta",
     "out[row, col] = (cache[item] - mean) * scale * gamma[col] + beta[col]",
     "out[row, col] = (cache[item] - mean) * scale * gamma[col] + gamma[col]"),
    ("online softmax: the running sum is not rescaled when the max grows",
     "            running_sum = running_sum * math.exp(running_max - value) + ONE",
     "            running_sum = running_sum + ONE"),
    ("fused softmax: reads x again to normalize (not from the registers)",
     "                out[row, col] = cache[item] * inverse       # the only write",
     "                out[row, col] = math.exp(x[row, col] - row_max) * inverse"),
    ("fused softmax: one block short (the last row is never written)",
     "    kernel[rows, block](x, out)                            # one block per row",
     "    kernel[max(rows - 1, 1), block](x, out)"),
    ("online launcher runs the unfused chain",
     "    softmax_online_kernel[rows, row_block(cols, block)](x, out)  # one block per row",
     "    softmax_unfused(x, out=out, block=block)"),
    ("fused layernorm: the naive variance E[x^2] - mean^2 (loses the digits far from zero)",
     "                deviation = cache[item] - mean              # two passes, both over registers\n"
     "                local_squares += deviation * deviation\n"
     "        scale = ONE / math.sqrt(block_sum(local_squares, scratch) / float32(cols) + eps)",
     "                local_squares += cache[item] * cache[item]\n"
     "        scale = ONE / math.sqrt(block_sum(local_squares, scratch) / float32(cols) - mean * mean + eps)"),
    ("fused softmax: idle slots (columns past the row) join the exp-sum",
     "            if tid + item * block < cols:\n                cache[item] = math.exp(cache[item] - row_max)",
     "            if True:\n                cache[item] = math.exp(cache[item] - row_max)"),
    ("online softmax: threads that saw no value feed NaN (-inf - -inf) into the sum",
     "    inverse = ONE / block_sum(running_sum * math.exp(running_max - row_max), scratch)",
     "    inverse = ONE / block_sum(running_sum * math.exp(running_max - row_max)\n"
     "                              * math.exp(running_max - running_max), scratch)"),
    ("online softmax: the second pass skips the last column (a missed remainder)",
     "    for col in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):\n"
     "        out[row, col] = math.exp(x[row, col] - row_max) * inverse  # read 2 of 2",
     "    for col in range(cuda.threadIdx.x, x.shape[1] - 1, cuda.blockDim.x):\n"
     "        out[row, col] = math.exp(x[row, col] - row_max) * inverse  # read 2 of 2"),
    ("ledger: the exp-sum kernel reads row_max once per row, not once per thread",
     ".add(\"row_exp_sum\", \"row_max\", reads=rows * block, temporary=True)",
     ".add(\"row_exp_sum\", \"row_max\", reads=rows, temporary=True)"),
    ("fused softmax: each thread owns contiguous columns (right values, strided lanes)",
     '            col = tid + item * block                        # strided: a warp reads 32 neighbours\n            if col < cols:\n                cache[item] = x[row, col]                   # the only read of x\n                local_max = max(local_max, cache[item])\n        row_max = block_max(local_max, scratch)\n        local_sum = ZERO\n        for item in range(ITEMS):\n            if tid + item * block < cols:\n                cache[item] = math.exp(cache[item] - row_max)\n                local_sum += cache[item]\n        inverse = ONE / block_sum(local_sum, scratch)\n        for item in range(ITEMS):\n            col = tid + item * block\n            if col < cols:\n',
     '            col = tid * ITEMS + item                        # strided: a warp reads 32 neighbours\n            if col < cols:\n                cache[item] = x[row, col]                   # the only read of x\n                local_max = max(local_max, cache[item])\n        row_max = block_max(local_max, scratch)\n        local_sum = ZERO\n        for item in range(ITEMS):\n            if tid * ITEMS + item < cols:\n                cache[item] = math.exp(cache[item] - row_max)\n                local_sum += cache[item]\n        inverse = ONE / block_sum(local_sum, scratch)\n        for item in range(ITEMS):\n            col = tid * ITEMS + item\n            if col < cols:\n'),
    ("online softmax: each thread's first pass walks its own contiguous columns",
     "# sum of exp(value - running_max)\n    for col in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):",
     "# sum of exp(value - running_max)\n    per = (x.shape[1] + cuda.blockDim.x - 1) // cuda.blockDim.x\n"
     "    for col in range(cuda.threadIdx.x * per, min(cuda.threadIdx.x * per + per, x.shape[1])):"),
    ("online softmax: the running max starts at 0, not -inf",
     "    running_max = NEG_INF\n", "    running_max = ZERO\n"),
    ("fused softmax: the max starts at 0, not -inf",
     "        local_max = NEG_INF\n", "        local_max = ZERO\n"),
    ("fused layernorm: eps outside the square root",
     "math.sqrt(block_sum(local_squares, scratch) / float32(cols) + eps)",
     "(math.sqrt(block_sum(local_squares, scratch) / float32(cols)) + eps)"),
    ("fused layernorm: the default eps, not the one given",
     "math.sqrt(block_sum(local_squares, scratch) / float32(cols) + eps)",
     "math.sqrt(block_sum(local_squares, scratch) / float32(cols) + float32(DEFAULT_EPS))"),
    ("fused softmax: the caching loop runs ITEMS_PER_THREAD times, not the kernel's ITEMS",
     "        local_max = NEG_INF\n        for item in range(ITEMS):",
     "        local_max = NEG_INF\n        for item in range(ITEMS_PER_THREAD):"),
    ("fused softmax: the caching loop stops one short (a row that fills every slot loses values)",
     "        local_max = NEG_INF\n        for item in range(ITEMS):",
     "        local_max = NEG_INF\n        for item in range(ITEMS - 1):"),
    ("fused layernorm: the caching loop stops one short (a row that fills every slot loses values)",
     "        local_sum = ZERO\n        for item in range(ITEMS):\n            col = tid + item * block",
     "        local_sum = ZERO\n        for item in range(ITEMS - 1):\n            col = tid + item * block"),
    ("online softmax: the running sum starts at 0.0 (float64; the values still agree)",
     "    running_sum = ZERO                                      # sum of exp",
     "    running_sum = 0.0                                       # sum of exp"),
    ("fused layernorm: the mean divided by the integer cols (float64; the values still agree)",
     "mean = block_sum(local_sum, scratch) / float32(cols)", "mean = block_sum(local_sum, scratch) / cols"),
]

ALTERNATIVES = [
    ("layernorm ledger (fused, online) declares gamma's and beta's cols distinct elements",
     "            ledger.add(\"layernorm\", name, reads=count)",
     "            ledger.add(\"layernorm\", name, reads=count, distinct=cols)"),
    ("layernorm ledger (unfused) declares gamma's and beta's cols distinct elements",
     "        ledger.add(\"normalize\", name, reads=count)",
     "        ledger.add(\"normalize\", name, reads=count, distinct=cols)"),
    ("online softmax: a thread that saw no value adds an explicit zero to the sum",
     "    inverse = ONE / block_sum(running_sum * math.exp(running_max - row_max), scratch)",
     "    share = running_sum * math.exp(running_max - row_max) if running_max != NEG_INF else ZERO\n"
     "    inverse = ONE / block_sum(share, scratch)"),
]
