"""Lab 03's experiments: four small tasks in four launches or in one, over task sizes 1K .. 16M.

`bench(out_dir)` (on a GPU: `kernellab bench 03 --out DIR`) validates both versions, times them
over the sweep (the largest task's elements; the others are 1/2, 1/4, 1/8 of it), and reports
where merging stops paying, measured and as predicted by `predicted_time_us` from the empty
launch time and the copy bandwidth measured in the same run.
`tour(figures_dir)` validates both versions on this device and draws the figures.
"""

from __future__ import annotations

from pathlib import Path

from kernellab.course import bench as harness
from kernellab.gpu import checks, device
from kernellab.show import plots
from kernellab.course import reference, target
from kernellab.course.claims import Claim, Missing, need
from kernellab.course.protocol import TourResult

LAB = "03"
ALPHA = 2.5
SIZES = [2**k for k in range(10, 25)]      # the largest task: 1K .. 16M elements
TOUR_SIZES = [2**10, 2**16, 2**22]
SIM_SIZES = [301]                          # tasks of 301, 150, 75 and 37 elements
GAIN_THAT_PAYS = 1.05                      # merging "pays" while it saves more than 5%
INPUTS = ("x0", "x1", "z1", "x2", "x3")


def task_sizes(n):
    """The four tasks at sweep value n: different sizes, as independent work usually is."""
    return (n, n // 2, n // 4, n // 8)


def tasks_benchmark(lab, sizes=SIZES) -> harness.Benchmark:
    def make_inputs(rng, n):
        n0, n1, n2, n3 = task_sizes(n)
        return {"x0": checks.nonzero(rng, n0), "x1": checks.nonzero(rng, n1),
                "z1": checks.nonzero(rng, n1), "x2": checks.nonzero(rng, n2),
                "x3": checks.nonzero(rng, n3)}

    def runner(launcher):
        return lambda d, out: launcher(*(d[k] for k in INPUTS), ALPHA, out=out)

    variants = [harness.Variant(name, runner(launcher), why,
                                ledger=lambda n, fused=(name == "horizontal"):
                                lab.tasks_ledger(task_sizes(n), fused=fused))
                for name, (launcher, why) in lab.VARIANTS.items()]
    return harness.Benchmark(
        name="tasks", axis="elements in the largest task", sizes=sizes, sim_sizes=SIM_SIZES,
        make_inputs=make_inputs,
        reference=lambda host: lab.reference_tasks(*(host[k] for k in INPUTS), ALPHA),
        variants=variants, rtol=1e-6)


def crossover(lab, result: dict) -> dict:
    """Speed-up per size, measured and predicted, and the first size where merging stops paying."""
    floor_us, gbps = result["launch_floor_ms"] * 1e3, result["copy_gbps"]
    rows = []
    for n in result["sizes"]:
        separate, merged = harness.row(result, "separate", n), harness.row(result, "horizontal", n)
        if not (separate["ok"] and merged["ok"]):
            continue  # a version that failed validation has no time to compare
        predicted = (lab.predicted_time_us(4, separate["bytes"], floor_us, gbps)
                     / lab.predicted_time_us(1, merged["bytes"], floor_us, gbps))
        rows.append({"n": n, "separate_ms": separate["median_ms"], "horizontal_ms": merged["median_ms"],
                     "measured_speedup": separate["median_ms"] / merged["median_ms"],
                     "predicted_speedup": predicted})

    def first_below(key):
        return next((r["n"] for r in rows if r[key] < GAIN_THAT_PAYS), None)

    return {"gain_that_pays": GAIN_THAT_PAYS, "rows": rows,
            "stops_paying_at_measured": first_below("measured_speedup"),
            "stops_paying_at_predicted": first_below("predicted_speedup"),
            "launch_floor_us": floor_us, "copy_gbps": gbps}


def report(summary: dict) -> str:
    lines = [f"Lab 03: separate / horizontal, measured and predicted (empty launch "
             f"{summary['launch_floor_us']:.1f} us, copy {summary['copy_gbps']:.0f} GB/s, same run):",
             f"{'largest task':>14} {'separate ms':>12} {'merged ms':>10} {'measured':>9} {'predicted':>9}"]
    for r in summary["rows"]:
        lines.append(f"{r['n']:>14,} {r['separate_ms']:>12.4f} {r['horizontal_ms']:>10.4f} "
                     f"{r['measured_speedup']:>8.2f}x {r['predicted_speedup']:>8.2f}x")
    for key, what in (("stops_paying_at_measured", "measured"), ("stops_paying_at_predicted", "predicted")):
        n = summary[key]
        lines.append(f"  merging stops paying (< {GAIN_THAT_PAYS:.2f}x) at largest task = "
                     f"{f'{n:,}' if n else 'never, in this sweep'} ({what})")
    return "\n".join(lines)


def bench(out_dir: Path | None = None) -> dict:
    """On a GPU: validate, time, find the crossover and save; in the simulator: validate only."""
    lab = target.load(LAB)
    result = harness.run(tasks_benchmark(lab), lab=LAB, out_dir=out_dir)
    if device.is_simulator():
        return {}
    if not result["ok"]:
        print("some versions failed validation: no crossover computed")
        return result
    summary = crossover(lab, result)
    reference.save(LAB, {"crossover": {"provenance": result["provenance"], **summary}}, out_dir)
    print(report(summary))
    return {**result, "crossover": summary}


def speedup_figure(lab, result: dict, figures_dir: Path) -> Path:
    summary = crossover(lab, result)
    fig, (ax_time, ax_gain) = plots.new_figure("Four tasks: four launches or one", result, ncols=2)
    plots.time_vs_size(ax_time, result)
    x = [r["n"] for r in summary["rows"]]
    ax_gain.plot(x, [r["measured_speedup"] for r in summary["rows"]], marker="o", label="measured")
    ax_gain.plot(x, [r["predicted_speedup"] for r in summary["rows"]], linestyle="--",
                 label="predicted: max(launches x launch, bytes / copy bandwidth)")
    ax_gain.axhline(GAIN_THAT_PAYS, color="grey", linestyle=":", label=f"{GAIN_THAT_PAYS}x: stops paying")
    ax_gain.set_xscale("log", base=2)
    ax_gain.set_xlabel(result["axis"])
    ax_gain.set_ylabel("separate time / horizontal time")
    ax_gain.grid(True, which="both", alpha=0.3)
    ax_gain.legend(fontsize=7)
    return plots.save(fig, "lab03_speedup", figures_dir)


def tour(figures_dir: Path) -> TourResult:
    lab = target.load(LAB)
    validated = harness.run(tasks_benchmark(lab, sizes=TOUR_SIZES), progress=False,
                            out=lambda line: None)
    if not validated["ok"]:
        return TourResult(False, "validation failed: " + "; ".join(harness.failures(validated)))
    result = reference.live_or_recorded(LAB, "tasks", lambda: validated)
    source = "live" if validated["live"] else "H200 reference"
    if result is None:
        return TourResult(True, "validated; no reference data yet: run `kernellab bench 03` on a GPU")
    summary = crossover(lab, result)
    if not summary["rows"]:
        return TourResult(False, f"the {source} data has no validated timings of both versions")
    figure = speedup_figure(lab, result, figures_dir)
    smallest = summary["rows"][0]
    stops = summary["stops_paying_at_measured"]
    return TourResult(True, f"one launch {smallest['measured_speedup']:.1f}x faster than four at "
                            f"{smallest['n']:,} elements; stops paying at "
                            f"{f'{stops:,}' if stops else 'no size in the sweep'} ({source})",
                      (str(figure),))


# --- claims: what the discussion says, checked against the records -----------------------------
# (the models a claim compares with are the solutions', so a claim never depends on a student's stub)

def _crossover_values(records):
    summary = crossover(target.load(LAB, "solutions"), need(records, "tasks"))
    if not summary["rows"]:
        raise Missing("tasks has no validated timings of both versions")
    smallest = summary["rows"][0]
    return {"n": smallest["n"], "measured": smallest["measured_speedup"],
            "predicted": smallest["predicted_speedup"], "merged_us": 1e3 * smallest["horizontal_ms"],
            "floor": summary["launch_floor_us"], "over_floor": 1e3 * smallest["horizontal_ms"] / summary["launch_floor_us"],
            "stops_measured": summary["stops_paying_at_measured"] or 0,
            "stops_predicted": summary["stops_paying_at_predicted"] or 0}


def _argument_cost_values(records):
    values = _crossover_values(records)
    from experiments.lab01_launch_overhead import per_array_us
    per_array, _ = per_array_us(need(records, "lab01"))
    arrays = 9                                # x0, y0, x1, z1, y1, x2, y2, x3, y3
    return {**values, "per_array": per_array, "arrays": arrays, "args_us": arrays * per_array}


CLAIMS = [
    Claim("small_tasks_gain",
          "At {n:,} elements in the largest task one launch is {measured:.2f}x faster than four; the "
          "launch-or-bytes model predicts {predicted:.1f}x.",
          values=_crossover_values, holds=lambda v: 1.0 < v["measured"] < v["predicted"],
          explains="the model charges a call its launches only, but each call also runs Python: both "
                   "launchers slice `out` into four device-array views, and the merged kernel takes 9 "
                   "array arguments, so the merged call costs several empty launches (next line), and "
                   "the four launches of the separate form are a smaller part of its time than the "
                   "model assumes."),
    Claim("merged_call_cost",
          "The merged call takes {merged_us:.0f} us at {n:,} elements, {over_floor:.0f}x the empty launch "
          "({floor:.1f} us): its {arrays} array arguments cost about {args_us:.0f} us at the {per_array:.1f} us "
          "per array Lab 01 measured; the rest is Python in the launcher (four slices of `out`: Lab 01 "
          "times a slice on its own).",
          values=_argument_cost_values, holds=lambda v: v["merged_us"] > 3 * v["floor"]),
    Claim("stops_paying",
          "Merging stops paying (a gain under 5%) at {stops_measured:,} elements in the largest task, "
          "measured; the model says {stops_predicted:,}.",
          values=_crossover_values,
          holds=lambda v: v["stops_measured"] > 0 and v["stops_predicted"] > 0
          and 0.25 <= v["stops_measured"] / v["stops_predicted"] <= 4),
]
