"""Planted bugs in Lab 02's solution: the graded tests must catch every one.

(what the bug is, text in solutions/lab02_vertical_fusion.py, its replacement)
"""

MUTANTS = [
    ("chain drops the relu", "    if v < ZERO:\n        v = ZERO                     # relu\n", ""),
    ("chain forgets the dropout scale", "    v = v * scale if keep else ZERO  # dropout", "    v = v if keep else ZERO  # dropout"),
    ("chain drops where it should keep", "    v = v * scale if keep else ZERO  # dropout", "    v = ZERO if keep else v * scale  # dropout"),
    ("chain forgets the residual", "    return v + rv                    # the residual", "    return v                         # the residual"),
    ("fused kernel without a guard", "    i = cuda.grid(1)\n    if i < out.size:\n        xv, wv, bv, rv",
     "    i = cuda.grid(1)\n    if i < out.size + 64:\n        i = min(i, out.size - 1)\n        xv, wv, bv, rv"),
    ("fused kernel reads r twice", "        out[i] = chain_element(xv, wv, bv, rv, keep, scale)  # 1 write",
     "        out[i] = chain_element(xv, wv, bv, rv + r[i] - r[i], keep, scale)  # 1 write"),
    ("fused kernel skips x, w and b where dropout drops the element (right values, under the exact budget)",
     "        xv, wv, bv, rv = x[i], w[i], b[i], r[i]        # 4 reads, all issued before any use\n"
     "        keep = dropout_keep(i, mask, seed, threshold)  # 1 byte read with a mask, none without\n"
     "        out[i] = chain_element(xv, wv, bv, rv, keep, scale)  # 1 write\n",
     "        keep = dropout_keep(i, mask, seed, threshold)\n"
     "        out[i] = chain_element(x[i], w[i], b[i], r[i], keep, scale) if keep else r[i]\n"),
    ("fused launcher calls the unfused chain", "    fused_chain_kernel[grid, block](x, w, b, r, mask, seed, threshold, scale, out)",
     "    unfused_chain(x, w, b, r, p, seed, None if mask.size == 0 else mask, out, block)"),
    ("fused kernel ignores the mask", "        keep = dropout_keep(i, mask, seed, threshold)  # 1 byte read with a mask, none without",
     "        keep = hash32(i, seed) >= threshold"),
    ("grid stride steps by the block", "    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):",
     "    for i in range(cuda.grid(1), out.size, cuda.blockDim.x):"),
    ("grid stride starts at the thread index", "    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):",
     "    for i in range(cuda.threadIdx.x, out.size, cuda.gridsize(1)):"),
    ("grid stride starts at a thread-major index (each thread its own chunk)",
     "    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):  # any grid covers every element",
     "    per = (out.size + cuda.gridsize(1) - 1) // cuda.gridsize(1)\n"
     "    for i in range(cuda.grid(1) * per, min(cuda.grid(1) * per + per, out.size)):"),
    ("grid stride of half the grid: elements visited twice from the second pass on",
     "    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):",
     "    for i in range(cuda.grid(1), out.size, cuda.gridsize(1) // 2):"),
    ("fused kernel with the thread index transposed (right values, strided lanes)",
     "    i = cuda.grid(1)\n    if i < out.size:\n        xv, wv, bv, rv",
     "    i = cuda.threadIdx.x * cuda.gridDim.x + cuda.blockIdx.x\n    if i < out.size:\n        xv, wv, bv, rv"),
    ("ledger forgets the mask", "        ledger.add(\"fused_chain\", \"mask\", reads=n, itemsize=MASK)\n    return ledger.add(\"fused_chain\", \"out\"",
     "        pass\n    return ledger.add(\"fused_chain\", \"out\""),
    ("ledger counts the mask as float32", "        ledger.add(\"fused_chain\", \"mask\", reads=n, itemsize=MASK)\n    return ledger.add(\"fused_chain\", \"out\"",
     "        ledger.add(\"fused_chain\", \"mask\", reads=n)\n    return ledger.add(\"fused_chain\", \"out\""),
    ("chain in float64: bare 0.0 literals (PTX with add.f64, selp.f64; the values still agree)",
     "    if v < ZERO:\n        v = ZERO                     # relu\n"
     "    v = v * scale if keep else ZERO  # dropout",
     "    if v < 0.0:\n        v = 0.0                      # relu\n"
     "    v = v * scale if keep else 0.0   # dropout"),
    ("speed-up upside down", "    return unfused.total_bytes / fused.total_bytes", "    return fused.total_bytes / unfused.total_bytes"),
    ("speed-up hard-coded", "    return unfused.total_bytes / fused.total_bytes", "    return 2.2"),
    ("fused kernel keeps only mask bytes equal to 1 (dropout_keep keeps any byte but 0)",
     "        keep = dropout_keep(i, mask, seed, threshold)  # 1 byte read with a mask, none without",
     "        keep = mask[i] == 1 if mask.size > 0 else hash32(i, seed) >= threshold"),
    ("fused kernel assumes blocks of 128 threads", "    i = cuda.grid(1)\n    if i < out.size:\n        xv, wv, bv, rv",
     "    i = cuda.blockIdx.x * 128 + cuda.threadIdx.x\n    if i < out.size:\n        xv, wv, bv, rv"),
]

ALTERNATIVES = [
    ("chain's relu as relu_kernel's ternary (NaN to 0; the inputs are finite)",
     "    if v < ZERO:\n        v = ZERO                     # relu\n",
     "    v = v if v > ZERO else ZERO      # relu\n"),
]
