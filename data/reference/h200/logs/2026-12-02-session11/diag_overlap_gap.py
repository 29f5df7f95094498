"""What parts Lab 07's two overlap shares? (Prepared in session 10, not yet run.) The copy-out's wait
for the first kernel (12.4-12.5% of the kernels' time) accounted for the gap on session 9's record
but not on session 10's (gaps 6.3-12.7 points). Offline, the copies' union inside the pipeline was
4.8-9.1 points longer than the copies alone, and the Makespan's pipeline run 1.4-11.3 points longer
than the recorded run's span; but those came from different runs and medians. Here every rep takes
in turn: the pipeline, its copies alone and its kernels alone in Makespans (the recorder-free
share), and the pipeline and its copies alone in the pipeline's recorder (the events' share, and
each copy direction's busy time alone and inside the pipeline). Per rep it prints the two shares and
the terms their difference is made of, each as points of the kernels' time alone:
  gap = by events - recorder-free
      ~ (copies inside - copies alone) + (kernels inside - kernels alone) + (Makespan - recorded span)
where "inside" and "recorded span" are the recorded pipeline's, "alone" the Makespans'."""
import contextlib
import os

import numpy as np

from kernellab.course import protocol, target
from kernellab.gpu import device
from kernellab.gpu.timeline import Makespan, Timeline, reserve_events
from experiments.lab07_measure import alternating_windows, recorder_free_hidden

REPS = int(os.environ.get("REPS", 20))
cuda = device.cuda()
lab, experiment = target.load("07"), protocol.experiment("07")
n, chunks, iters = experiment.PIPELINE_N, experiment.PIPELINE_CHUNKS, int(os.environ.get("ITERS", 176))
host_x = cuda.pinned_array(n, dtype=np.float32)
host_x[:] = 1.5
host_out = cuda.pinned_array_like(host_x)
d_in, d_out = cuda.device_array(n, dtype=np.float32), cuda.device_array(n, dtype=np.float32)
streams = [cuda.stream() for _ in range(experiment.PIPELINE_STREAMS)]
bounds = lab.chunk_bounds(n, chunks)
reserve_events(4 * chunks)


def pipeline():
    lab.pipeline(host_x, iters, streams, chunks, host_out, (d_in, d_out))


def copies():
    for c, (lo, hi) in enumerate(bounds):
        stream = streams[c % len(streams)]
        d_in[lo:hi].copy_to_device(host_x[lo:hi], stream=stream)
        d_out[lo:hi].copy_to_host(host_out[lo:hi], stream=stream)
    for stream in streams:
        stream.synchronize()


def kernels():
    for c, (lo, hi) in enumerate(bounds):
        lab.busy(d_in[lo:hi], iters, out=d_out[lo:hi], stream=streams[c % len(streams)])


recorded = {"pipeline": [], "copies": []}


def recorder(name):
    def opened():
        recorded[name].append(Timeline(infer_starts=True, streams=streams))
        return recorded[name][-1]
    return opened


ways = {"pipeline": (Makespan, pipeline), "copies": (Makespan, copies), "kernels": (Makespan, kernels),
        "recorded pipeline": (recorder("pipeline"), pipeline), "recorded copies": (recorder("copies"), copies),
        "bare": (contextlib.nullcontext, pipeline)}
figures = alternating_windows(ways, REPS)
runs = {name: [t.data for t in timelines[-REPS:]] for name, timelines in recorded.items()}
print(f"{REPS} reps, every way in turn; points of the kernels' time alone (its Makespan)")
print("rep  by-events  free    gap | copies in-alone  kernels in-alone  Makespan-span | sum  "
      "| h2d busy alone/in  d2h busy alone/in (ms)")
rows = []
for rep in range(REPS):
    m_pipe, m_copies, m_kernels = (figures[k]["makespan"][rep] for k in ("pipeline", "copies", "kernels"))
    inside, alone = runs["pipeline"][rep], runs["copies"][rep]
    by_events, free = inside.hidden_fraction(), recorder_free_hidden(m_pipe, m_copies, m_kernels)
    terms = [(inside.covered_ms("h2d", "d2h") - m_copies) / m_kernels,
             (inside.covered_ms("kernel") - m_kernels) / m_kernels,
             (m_pipe - inside.makespan_ms) / m_kernels]
    rows.append((by_events - free, *terms))
    print(f"{rep + 1:3d}  {100 * by_events:8.1f}  {100 * free:6.1f}  {100 * (by_events - free):5.1f} | "
          + "  ".join(f"{100 * t:+13.1f}" for t in terms) + f" | {100 * sum(terms):+5.1f} | "
          f"{alone.covered_ms('h2d'):.2f}/{inside.covered_ms('h2d'):.2f}  {alone.covered_ms('d2h'):.2f}/"
          f"{inside.covered_ms('d2h'):.2f}")
medians = np.median(np.array(rows), axis=0)
print("median gap {:.1f}: copies {:+.1f}, kernels {:+.1f}, Makespan - span {:+.1f} points".format(*(100 * medians)))
print("windows (ms, medians): " + ", ".join(f"{k} {np.median(v['window']):.3f}" for k, v in figures.items()))
