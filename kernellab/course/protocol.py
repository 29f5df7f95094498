"""The lab protocol: a lab is declared once, and bench, tour, validate, profile and claims read it.

Each lab's experiments module (`experiments/labNN_topic.py`) ends with one declaration:

    LAB = lab.Lab(
        number="02", title="vertical fusion",
        kernels=(lab.Kernel("fused_chain_kernel", "1-D: 256 threads, one element each",
                            block_size=256),),
        references=("chain_reference",),       # NumPy float64 references, in the lab module
        validate=validate,                     # validate(lab, seed) -> names of what was validated
        benchmarks=chain_benchmarks,           # benchmarks(lab, torch) -> [bench.Benchmark]: data
        measurements=(lab.Measurement("grid_size_sweep", measure_grid_sweep, "why ..."),),
        figures=(lab.Figure("lab02_bandwidth", draw_bandwidth, needs=("chain",)),),
        claims=CLAIMS,                         # kernellab.course.claims.Claim, checked in CI
        targets=targets,                       # targets(lab, records) -> dict, or None
        key_figure=key_figure,                 # key_figure(lab, records) -> one line for the tour
    )

What the generic runs do with it (`bench`, `tour`, `validate` below; `kernellab profile` runs
`benchmarks` under Nsight Compute; `kernellab.course.claims` evaluates `claims`):
- validate: every declared kernel and reference is in the lab module (a starter lacks the
  kernels marked `solution_side`, on purpose); `validate(lab, seed)` on this device (small sizes
  in the simulator), then every benchmark's variants against their float64 references (the
  harness does that).
- bench (`kernellab bench NN`): validate; on a GPU, run each benchmark over its `sizes` and each
  measurement, saving each record as soon as it is finished (a run cut short keeps what it did),
  then the targets (judged on this run; `--repeat` judges on the worst repeat), then the figures.
  In the simulator it validates and says that no timing exists.
- tour (`kernellab tour`): validate, then the records: on a GPU each benchmark at its
  `tour_sizes` and each measurement with `in_tour`, live; in the simulator the recorded ones,
  labelled so. Figures whose records exist are drawn; the key figure is one line.

The code a notebook shows is the code this runs: notebooks call `measured(LAB, name)` (live on
a GPU, recorded otherwise) or `tour_records`, and the figure functions, never their own copies.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Sequence

from kernellab.course import bench as harness
from kernellab.course import reference, target
from kernellab.gpu import device
from kernellab.show import plots


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One of the lab's kernels, by its name in the lab module, with its launch shape."""

    name: str                      # e.g. "fused_chain_kernel"
    launch: str                    # the launch shape in words: grid, block, what one thread does
    block_size: int | None = None  # threads per block where the launcher fixes it (None: it varies)
    solution_side: bool = False    # the solutions' alone (its module's SOLUTION_SIDE): kept out of
                                   # the starter, where it would answer an exercise, so the labs
                                   # target skips what runs it (`solution_side_absent`)


@dataclasses.dataclass(frozen=True)
class Measurement:
    """A GPU measurement that is not a bytes-per-size benchmark (a sweep, a timeline, a probe)."""

    name: str                                   # its record's key in data/reference/<gpu>/labNN.json
    measure: Callable[..., dict]                # measure(lab) -> the record (GPU only)
    why: str                                    # one line: what it shows
    in_tour: bool = True                        # cheap enough to run live in `kernellab tour`
    needs: tuple[str, ...] = ()                 # records of the same run it reads: then
                                                # measure(lab, {name: record}) (e.g. a benchmark's timings)

    def run(self, lab: ModuleType, records: dict) -> dict:
        return self.measure(lab, {name: records[name] for name in self.needs}) if self.needs \
            else self.measure(lab)


@dataclasses.dataclass(frozen=True)
class Figure:
    """A figure drawn from the lab's records."""

    name: str                                               # its file name, without .png
    draw: Callable[[ModuleType, dict, Path], Path]          # draw(lab, records, figures_dir) -> path
    needs: tuple[str, ...] = ()                             # the records it reads ("" : none)


@dataclasses.dataclass(frozen=True)
class Lab:
    """Everything bench, tour, validate, profile and the claims need to know about one lab."""

    number: str
    title: str
    kernels: tuple[Kernel, ...]
    references: tuple[str, ...]                                   # NumPy references in the lab module
    validate: Callable[[ModuleType, int], list[str]]
    benchmarks: Callable[[ModuleType, Any], list] = lambda lab, torch: []
    measurements: tuple[Measurement, ...] = ()
    figures: tuple[Figure, ...] = ()
    claims: Sequence = ()
    targets: Callable[[ModuleType, dict], dict] | None = None
    key_figure: Callable[[ModuleType, dict], str] | None = None

    def module(self) -> ModuleType:
        """The lab module of the current target (labs/ or solutions/)."""
        return target.load(self.number)


@dataclasses.dataclass(frozen=True)
class TourResult:
    """What `kernellab tour` prints for a lab: whether it validated, and its key figure."""

    ok: bool
    key_figure: str          # one line: the number that matters, or why there is none
    figures: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()                  # lines the tour prints under the lab: what it skipped
    unfinished: tuple[target.Stub, ...] = ()     # the stubs still in the lab's file, when one stopped it


def experiment(lab: str) -> ModuleType:
    """The experiments module of a lab (`experiments/labNN_topic.py`)."""
    number = target.lab_number(lab)
    if str(target.ROOT) not in sys.path:
        sys.path.insert(0, str(target.ROOT))
    return importlib.import_module(f"experiments.{target.labs()[number]}")


def declaration(lab: str) -> Lab:
    """The `LAB` a lab's experiments module declares."""
    declared = getattr(experiment(lab), "LAB", None)
    if not isinstance(declared, Lab):
        raise TypeError(f"experiments/{target.labs()[target.lab_number(lab)]}.py declares no "
                        f"`LAB = kernellab.course.lab.Lab(...)`")
    return declared


def recorded(declared: Lab) -> dict:
    """The lab's recorded reference records (empty when nothing was recorded yet)."""
    return (reference.load(declared.number) or {}).get("records") or {}


def measured(declared: Lab, name: str) -> dict | None:
    """One of the lab's measurements, or a benchmark at its `tour_sizes`, live on a GPU (noted
    for the claims), else its recorded reference record (None when none was recorded yet): what
    a notebook cell shows."""
    declared_names = [m.name for m in declared.measurements]
    declared_names += [b.name for b in declared.benchmarks(declared.module(), None)]
    if name not in declared_names:
        raise ValueError(f"lab {declared.number} declares no measurement or benchmark {name!r}")
    if device.is_simulator():
        return recorded(declared).get(name)
    with contextlib.redirect_stdout(io.StringIO()):   # its progress lines are bench's, not the lesson's
        return measure_live(declared, declared.module(), name)


def solution_side_absent(declared: Lab, lab: ModuleType) -> list[str]:
    """The declared solution-side kernels a starter module (labs/, or a student's copy) lacks, as
    it should: what runs them is skipped there. The solutions must define every one."""
    if lab.__name__.partition(".")[0] == "solutions":
        return []
    return [k.name for k in declared.kernels if k.solution_side and not hasattr(lab, k.name)]


def skipped_note(declared: Lab, lab: ModuleType) -> str | None:
    """The one line bench and tour print where a starter module lacks solution-side kernels."""
    absent = solution_side_absent(declared, lab)
    return (f"{lab.__name__} has no {', '.join(absent)}: solution side, kept out of the starter "
            f"(it would answer an exercise), so what runs them is skipped") if absent else None


def validate(declared: Lab, seed: int = 0) -> list[str]:
    """Validate the lab's own checks, then every benchmark's variants at its simulator sizes
    (on a GPU the benchmarks validate themselves before they time). A starter lacks the
    solution-side kernels on purpose; any other declared name it lacks is an error."""
    lab = declared.module()
    absent = set(solution_side_absent(declared, lab))
    undefined = [name for name in (*(k.name for k in declared.kernels), *declared.references)
                 if not hasattr(lab, name) and name not in absent]
    if undefined:
        raise AssertionError(f"lab {declared.number} declares {', '.join(undefined)}, which "
                             f"{lab.__name__} does not define")
    names = list(declared.validate(lab, seed))
    for benchmark in declared.benchmarks(lab, None) if device.is_simulator() else ():
        result = harness.run(benchmark, progress=False, out=lambda line: None)
        if not result["ok"]:
            raise AssertionError(f"lab {declared.number} {benchmark.name}: "
                                 + "; ".join(harness.failures(result)))
        names.append(f"{benchmark.name} ({len(benchmark.variants)} variants)")
    return names


def record_names(declared: Lab) -> list[str]:
    """The records `bench` makes: the benchmarks', then the measurements'."""
    return ([b.name for b in declared.benchmarks(declared.module(), None)]
            + [m.name for m in declared.measurements])


def check_selection(declared: Lab, only) -> None:
    """A ValueError naming the lab's records when `only` names one it does not make."""
    unknown = sorted(set(only or ()) - set(record_names(declared)))
    if unknown:
        raise ValueError(f"lab {declared.number} records no {', '.join(unknown)}; its records are "
                         f"{', '.join(record_names(declared))}")


def bench_spec(spec: str) -> tuple[str, tuple[str, ...] | None]:
    """'06' -> ('06', None), every record; '06:compute_probe,memory_probe' -> ('06',
    ('compute_probe', 'memory_probe')): those records alone (ValueError for names the lab lacks)."""
    lab, _, names = str(spec).partition(":")
    number = target.lab_number(lab)
    if not names:
        return number, None
    only = tuple(name.strip() for name in names.split(",") if name.strip())
    check_selection(declaration(number), only)
    return number, only


def bench(declared: Lab, out_dir: Path | None = None, only: tuple[str, ...] | None = None) -> dict:
    """`kernellab bench NN[:NAME]`: validate; on a GPU, measure (only the benchmarks and
    measurements named in `only`, when given), save record by record, judge, draw. A partial
    bench judges the targets on its new records over the recorded rest."""
    check_selection(declared, only)
    lab = declared.module()
    print(f"validated: {', '.join(declared.validate(lab, 0))}")
    note = skipped_note(declared, lab)
    if note:
        print(note)
    records = {}
    for benchmark in declared.benchmarks(lab, harness.optional_torch()):
        if only is None or benchmark.name in only:
            records[benchmark.name] = harness.run(benchmark, lab=declared.number, out_dir=out_dir)
    if device.is_simulator():
        print(f"simulator: no timing exists here; the recorded measurements are in "
              f"{reference.path(declared.number).relative_to(target.ROOT)}")
        return {}
    fresh = records
    if only is not None:
        records = {**recorded(declared), **records}   # the partial bench's inputs and targets' rest
    for measurement in declared.measurements:
        if only is not None and measurement.name not in only:
            continue
        started = time.perf_counter()
        print(f"== {measurement.name}: {measurement.why}")
        records[measurement.name] = fresh[measurement.name] = measurement.run(lab, records)
        reference.save(declared.number, {measurement.name: records[measurement.name]}, out_dir)
        print(f"   {measurement.name}: {time.perf_counter() - started:.0f} s")
    if declared.targets is not None:
        if all(r.get("ok", True) for r in records.values() if isinstance(r, dict)):
            goals = declared.targets(lab, records)
            provenance = next((r["provenance"] for r in fresh.values() if "provenance" in r),
                              reference.provenance())
            reference.save(declared.number, {"targets": {"provenance": provenance, **goals}}, out_dir)
            records["targets"] = goals
            for path, verdict in harness.targets_over_repeats([{"targets": goals}])["targets"].items():
                print(f"   {path}: {'met' if verdict['met'] else 'MISSED'}")
        else:
            print("some versions failed validation: no targets checked")
    draw(declared, lab, {**recorded(declared), **records}, Path(out_dir) if out_dir else plots.FIGURES)
    return records


def tour_records(declared: Lab, lab: ModuleType) -> tuple[dict, str]:
    """The records a tour shows and where they come from: live on a GPU, recorded otherwise."""
    records = dict(recorded(declared))
    live = not device.is_simulator()
    if live:
        names = [b.name for b in declared.benchmarks(lab, None)]
        names += [m.name for m in declared.measurements if m.in_tour]
        records.update((name, measure_live(declared, lab, name)) for name in names)
    source = f"live on {device.facts().name}" if live else f"{reference.DEFAULT_GPU.upper()} reference"
    return records, source


def measure_live(declared: Lab, lab: ModuleType, name: str) -> dict:
    """One record measured now (GPU only): a benchmark at its `tour_sizes`, or a measurement;
    kept for this process's claims (`reference.note_live`)."""
    for benchmark in declared.benchmarks(lab, None):
        if benchmark.name == name:
            result = harness.run(dataclasses.replace(benchmark, sizes=benchmark.tour_sizes or benchmark.sizes),
                                 progress=False, out=lambda line: None)
            if not result["ok"]:
                raise AssertionError(f"{benchmark.name}: " + "; ".join(harness.failures(result)))
            return reference.note_live(declared.number, name, result)
    for measurement in declared.measurements:
        if measurement.name == name:
            records = {**recorded(declared), **reference.LIVE.get(declared.number, {})}  # its `needs`
            return reference.note_live(declared.number, name, measurement.run(lab, records))
    raise ValueError(f"lab {declared.number} declares no measurement or benchmark {name!r}")


def draw(declared: Lab, lab: ModuleType, records: dict, figures_dir: Path) -> list[Path]:
    """Every figure whose records exist (a figure with nothing recorded yet is skipped)."""
    return [figure.draw(lab, records, figures_dir) for figure in declared.figures
            if all(name in records for name in figure.needs)]


def tour(declared: Lab, figures_dir: Path) -> TourResult:
    """`kernellab tour`: validate, gather the records (live or recorded), draw, one key line."""
    lab = declared.module()
    names = validate(declared)
    records, source = tour_records(declared, lab)
    figures = draw(declared, lab, records, figures_dir)
    if declared.key_figure is None or not records:
        key = f"validated {len(names)} checks; no reference data recorded yet"
    else:
        key = f"{declared.key_figure(lab, records)} ({source})"
    note = skipped_note(declared, lab)
    return TourResult(True, key, tuple(map(str, figures)), notes=(note,) if note else ())

