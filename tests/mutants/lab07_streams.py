"""Planted bugs in Lab 07's solution: the graded tests must catch every one.

(what the bug is, text in solutions/lab07_streams.py, its replacement)
"""

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
    ("off-by-one in chunk_bounds' extra elements",
     "hi = lo + size + (c < extra)",
     "hi = lo + size + (c <= extra)"),
    ("pipeline returns before its streams finish",
     "    for stream in streams:\n        stream.synchronize()                                     # only now is host_out complete\n",
     ""),
    ("pipeline runs every chunk's kernel on the first stream",
     "busy(d_in[lo:hi], iters, out=d_out[lo:hi], stream=stream)",
     "busy(d_in[lo:hi], iters, out=d_out[lo:hi], stream=streams[0])"),
    ("predicted speed-up upside down",
     "    return one.makespan_ms / many.makespan_ms",
     "    return many.makespan_ms / one.makespan_ms"),
    ("speed-up bound ignores the SMs' capacity",
     "    return kernels * waves / max(busiest_stream, all_blocks)",
     "    return kernels * waves / busiest_stream"),
]
