"""Planted bugs in Lab 07's solution, which the graded tests must catch, and valid alternatives,
which must score full marks.

(what it is, text in solutions/lab07_streams.py, its replacement)
"""

# The solution's chunk_bounds body, which three planted bugs and alternatives replace whole.
CHUNK_BOUNDS_BODY = ("    size, extra = divmod(n, chunks)\n"
                     "    bounds, lo = [], 0\n"
                     "    for c in range(chunks):\n"
                     "        hi = lo + size + (c < extra)              # the first `extra` chunks take one more\n"
                     "        bounds.append((lo, hi))\n"
                     "        lo = hi\n"
                     "    return bounds\n")

MUTANTS = [
    ("every kernel on the first stream, no round-robin",
     "busy(x, iters, out=out, stream=streams[k % len(streams)])   # round-robin over the streams",
     "busy(x, iters, out=out, stream=streams[0])   # round-robin over the streams"),
    ("run_independent stops the host after each kernel",
     "busy(x, iters, out=out, stream=streams[k % len(streams)])   # round-robin over the streams",
     "busy(x, iters, out=out, stream=streams[k % len(streams)])   # round-robin over the streams\n"
     "        cuda.synchronize()"),
    ("diamond: s2 does not wait for A",
     "    a_done.wait(s2)                               # s2 waits on the GPU; the host goes on\n",
     ""),
    ("diamond: C's event recorded on the wrong stream",
     "    c_done.record(s2)",
     "    c_done.record(s1)"),
    ("diamond: C reads x instead of y",
     "    c = busy(y, 2 * iters, stream=s2)             # C on s2, after A by the event",
     "    c = busy(x, 2 * iters, stream=s2)             # C on s2, after A by the event"),
    ("diamond: A's event recorded after B is queued, so C waits for B (serialized)",
     "    a_done.record(s1)                             # fires when s1 reaches this point: A is done\n"
     "    a_done.wait(s2)                               # s2 waits on the GPU; the host goes on\n"
     "    b = busy(y, iters, stream=s1)                 # B on s1, after A by stream order\n",
     "    b = busy(y, iters, stream=s1)\n"
     "    a_done.record(s1)\n"
     "    a_done.wait(s2)\n"),
    ("off-by-one in chunk_bounds' extra elements",
     "hi = lo + size + (c < extra)",
     "hi = lo + size + (c <= extra)"),
    ("chunk_bounds gives the whole remainder to the last chunk",
     "hi = lo + size + (c < extra)",
     "hi = lo + size + (extra if c == chunks - 1 else 0)"),
    ("run_independent: kernel k on stream (k + 1) % S",
     "busy(x, iters, out=out, stream=streams[k % len(streams)])   # round-robin over the streams",
     "busy(x, iters, out=out, stream=streams[(k + 1) % len(streams)])   # round-robin over the streams"),
    ("pipeline returns before its streams finish",
     "    for stream in streams:\n        stream.synchronize()                                     # only now is host_out complete\n",
     ""),
    ("pipeline runs every chunk's kernel on the first stream",
     "busy(d_in[lo:hi], iters, out=d_out[lo:hi], stream=stream)",
     "busy(d_in[lo:hi], iters, out=d_out[lo:hi], stream=streams[0])"),
    ("pipeline stages every chunk at the start of d_in: one buffer shared by the streams",
     "        d_in[lo:hi].copy_to_device(host_x[lo:hi], stream=stream)    # async H2D: returns at once\n"
     "        busy(d_in[lo:hi], iters, out=d_out[lo:hi], stream=stream)",
     "        d_in[:hi - lo].copy_to_device(host_x[lo:hi], stream=stream)\n"
     "        busy(d_in[:hi - lo], iters, out=d_out[lo:hi], stream=stream)"),
    ("pipeline copies each chunk back into a fresh pageable array (the host waits each chunk)",
     "        d_out[lo:hi].copy_to_host(host_out[lo:hi], stream=stream)   # async D2H after the kernel",
     "        host_out[lo:hi] = d_out[lo:hi].copy_to_host(stream=stream)"),
    ("pipeline ignores the device_buffers it is given",
     "    d_in, d_out = device_buffers or (cuda.device_array_like(host_x), cuda.device_array_like(host_x))",
     "    d_in, d_out = (cuda.device_array_like(host_x), cuda.device_array_like(host_x))"),
    ("predicted speed-up upside down",
     "    return one.makespan_ms / many.makespan_ms",
     "    return many.makespan_ms / one.makespan_ms"),
    ("speed-up bound ignores the SMs' capacity",
     "    return kernels * waves / max(busiest_stream, all_blocks)",
     "    return kernels * waves / busiest_stream"),
    # Each of these escaped the checks before issue 56; the check named kills it.
    ("run_independent returns one output too few (test_run_independent_round_robin counts them)",
     "        busy(x, iters, out=out, stream=streams[k % len(streams)])   # round-robin over the streams\n    return outs\n",
     "        busy(x, iters, out=out, stream=streams[k % len(streams)])   # round-robin over the streams\n"
     "    return outs[:-1]\n"),
    ("run_independent allocates its outputs in host memory (test_run_independent_allocates_and_rejects_no_streams)",
     "        raise ValueError(\"run_independent needs at least one stream\")\n    if outs is None:\n"
     "        outs = [cuda.device_array_like(x) for x in xs]",
     "        raise ValueError(\"run_independent needs at least one stream\")\n    if outs is None:\n"
     "        outs = [np.empty(x.shape, dtype=x.dtype) for x in xs]"),
    ("diamond records a third event, which nothing waits for (test_diamond_is_ordered_by_events counts 2)",
     "    c_done = cuda.event()\n",
     "    b_done = cuda.event()\n    b_done.record(s1)\n    c_done = cuda.event()\n"),
    ("chunk_bounds in floats: c * n / chunks (test_chunk_bounds: integers only)",
     CHUNK_BOUNDS_BODY,
     "    return [(c * n / chunks, (c + 1) * n / chunks) for c in range(chunks)]\n"),
    ("chunk_bounds takes a negative chunk count (test_chunk_bounds at chunks = -1)",
     "if chunks < 1 or n < chunks:", "if chunks == 0 or n < chunks:"),
    ("pipeline without its ValueError for no streams (test_pipeline_result)",
     "    if not streams:\n        raise ValueError(\"pipeline needs at least one stream\")\n", ""),
    ("speedup_bound checks only blocks_per_sm and sm_count (test_speedup_bound_closed_form, each argument at 0)",
     "if min(kernels, streams, blocks, blocks_per_sm, sm_count) < 1:", "if min(blocks_per_sm, sm_count) < 1:"),
]

ALTERNATIVES = [
    ("run_independent queues stream by stream (kernel k still on streams[k % S])",
     "    for k, (x, out) in enumerate(zip(xs, outs)):\n"
     "        busy(x, iters, out=out, stream=streams[k % len(streams)])   # round-robin over the streams",
     "    for s, stream in enumerate(streams):\n"
     "        for k in range(s, len(xs), len(streams)):\n"
     "            busy(xs[k], iters, out=outs[k], stream=stream)"),
    ("run_independent queues the kernels last to first",
     "    for k, (x, out) in enumerate(zip(xs, outs)):\n"
     "        busy(x, iters, out=out, stream=streams[k % len(streams)])   # round-robin over the streams",
     "    for k in reversed(range(len(xs))):\n"
     "        busy(xs[k], iters, out=outs[k], stream=streams[k % len(streams)])"),
    ("pipeline queues stream by stream",
     "    for c, (lo, hi) in enumerate(chunk_bounds(host_x.size, chunks)):\n"
     "        stream = streams[c % len(streams)]\n",
     "    bounds = chunk_bounds(host_x.size, chunks)\n"
     "    order = sorted(range(chunks), key=lambda c: c % len(streams))\n"
     "    for c, (lo, hi) in ((c, bounds[c]) for c in order):\n"
     "        stream = streams[c % len(streams)]\n"),
    ("pipeline queues every H2D copy, then every kernel, then every D2H copy",
     "    for c, (lo, hi) in enumerate(chunk_bounds(host_x.size, chunks)):\n"
     "        stream = streams[c % len(streams)]\n"
     "        d_in[lo:hi].copy_to_device(host_x[lo:hi], stream=stream)    # async H2D: returns at once\n"
     "        busy(d_in[lo:hi], iters, out=d_out[lo:hi], stream=stream)    # after its copy, same stream\n"
     "        d_out[lo:hi].copy_to_host(host_out[lo:hi], stream=stream)   # async D2H after the kernel\n",
     "    bounds = list(enumerate(chunk_bounds(host_x.size, chunks)))\n"
     "    for c, (lo, hi) in bounds:\n"
     "        d_in[lo:hi].copy_to_device(host_x[lo:hi], stream=streams[c % len(streams)])\n"
     "    for c, (lo, hi) in bounds:\n"
     "        busy(d_in[lo:hi], iters, out=d_out[lo:hi], stream=streams[c % len(streams)])\n"
     "    for c, (lo, hi) in bounds:\n"
     "        d_out[lo:hi].copy_to_host(host_out[lo:hi], stream=streams[c % len(streams)])\n"),
    ("pipeline stages each chunk in its stream's own buffer, reused in that stream's order",
     "    for c, (lo, hi) in enumerate(chunk_bounds(host_x.size, chunks)):\n"
     "        stream = streams[c % len(streams)]\n"
     "        d_in[lo:hi].copy_to_device(host_x[lo:hi], stream=stream)    # async H2D: returns at once\n"
     "        busy(d_in[lo:hi], iters, out=d_out[lo:hi], stream=stream)    # after its copy, same stream\n",
     "    width = -(-host_x.size // chunks)\n"
     "    staging = [cuda.device_array(width, dtype=host_x.dtype) for _ in streams]\n"
     "    for c, (lo, hi) in enumerate(chunk_bounds(host_x.size, chunks)):\n"
     "        stream = streams[c % len(streams)]\n"
     "        stage = staging[c % len(streams)][:hi - lo]\n"
     "        stage.copy_to_device(host_x[lo:hi], stream=stream)\n"
     "        busy(stage, iters, out=d_out[lo:hi], stream=stream)\n"),
    ("chunk_bounds gives the extra elements to the last chunks, not the first",
     "hi = lo + size + (c < extra)",
     "hi = lo + size + (c >= chunks - extra)"),
    ("chunk_bounds spreads the extra elements: chunk c is [c n // chunks, (c + 1) n // chunks)",
     CHUNK_BOUNDS_BODY,
     "    return [(c * n // chunks, (c + 1) * n // chunks) for c in range(chunks)]\n"),
    ("pipeline waits with one cuda.synchronize() after the last chunk is queued",
     "    for stream in streams:\n"
     "        stream.synchronize()                                     # only now is host_out complete\n",
     "    cuda.synchronize()\n"),
    ("pipeline synchronizes only the streams that carry a chunk",
     "    for stream in streams:\n"
     "        stream.synchronize()",
     "    for stream in streams[:chunks]:\n"
     "        stream.synchronize()"),
    ("diamond orders its streams with an untimed event (cuda.event(timing=False))",
     "    a_done = cuda.event()\n",
     "    a_done = cuda.event(timing=False)   # ordering needs no timing data\n"),
    ("diamond's second event created with the timing flag passed positionally",
     "    c_done = cuda.event()\n",
     "    c_done = cuda.event(True)\n"),
    ("chunk_bounds from integer edges (c * n) // chunks, NumPy integers",
     CHUNK_BOUNDS_BODY,
     "    edges = (np.arange(chunks + 1) * n) // chunks\n"
     "    return [(edges[c], edges[c + 1]) for c in range(chunks)]\n"),
]
