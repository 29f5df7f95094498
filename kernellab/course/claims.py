"""Claims as data: every sentence a lab's discussion states about its measurements, with the
comparisons that make it true.

A lab declares its claims in one place, `CLAIMS` in its experiments module:

    from kernellab.course.claims import Claim, need, row, says, states, target

    CLAIMS = [
        Claim("fusion_speedup",
              "unfused / fused = {measured:.2f}x at n = 2^26, {against} the {predicted:.2f}x its bytes predict",
              values=lambda records: {
                  "measured": row(need(records, "chain"), "unfused", 2**26)["median_ms"]
                              / row(need(records, "chain"), "fused", 2**26)["median_ms"],
                  "predicted": 2.14},
              checks=(says("against", "measured", ">=", "predicted", "at least", "short of"),)),
    ]

A claim is a sentence with placeholders, `values(records)` (the numbers, from the lab's records:
the `records` of data/reference/<gpu>/labNN.json, or what this run measured live), and its
`checks`: comparisons declared as data, each `left op right` on the values the sentence prints.
Why as data: the words that say which way a comparison went are rendered from the same
comparison the test checks, so a sentence cannot say "holds" where the numbers say "missed", and
the perturbation test (tests/instruments/test_claims.py) can move every number a check reads
across its threshold and see the verdict and the sentence change.

Three kinds of comparison:
- `says(slot, left, op, right, yes, no)`: a verdict in words ("faster"/"slower", "within"/
  "outside"), printed at `{slot}`; either outcome is a true sentence.
- `target(slot, left, op, right)`: a target, printed as "[holds]" or "[MISSED]" at `{slot}`,
  beside the measured value. A missed target is a true sentence that reports the miss.
- `states(left, op, right)`: what the sentence's fixed words assert. When it fails on the data
  the sentence is false: the claim is CONTRADICTED, and the claims test fails.

Every operand that is a name of the values is printed by the sentence (a placeholder), so the
check compares what the reader reads; a plain number as the right operand is a threshold the
sentence states in words ("faster" is a ratio against 1, "more than 10x" against 10).

`need(records, name, *keys)` and `row(result, variant, size)` raise `Missing` when the records
do not hold what a claim reads (a benchmark that was never recorded, a variant added after the
recording): such a claim is *awaiting data*, printed as such, never evaluated on something
else. Any other error is a bug in the claim and propagates.

`article` names the seed-article claim a claim gives the verdict on (`ARTICLE` lists them);
`explains` says why, where the claim is a model miss (model against measurement) or a figure
that needs a reason beside it; `headline` is its short form, filled from the same values and
words: the line a notebook prints (`report`), and README.md's table of labs
(kernellab.course.readme). A claim without one prints its sentence's first clause.
`for_instructors=True` marks a claim about the course's own instruments (the recorder's cost):
no notebook prints it, and docs/measuring.md names it, where an instructor reads it.

Where the numbers come from: `sources(lab)` merges the recorded reference with what this
process measured live (`reference.live_or_recorded` notes every live record in
`reference.LIVE`), record by record, and each printed claim says which it read:
"live" or "H200 reference, recorded <date>" (a claim whose numbers the live run did not
measure, a tour's shorter sweep say, falls back to the reference and says so). `report(lab)`
prints a lab's claims, one line each: a verdict tag and the headline; `report(lab, names,
detail=True)` prints each one's full sentence, what it compared and where its numbers come
from. `evaluate(claim, records)` returns a `Verdict`;
tests/instruments/test_claims.py evaluates every claim against data/reference/h200/ and fails
when a printed sentence is false, never because a target was missed.
"""

from __future__ import annotations

import dataclasses
import statistics
import operator
import string
from typing import Any, Callable

from kernellab.course import reference

# The seed article's six claims and its closing advice (shared/seeds), by the key a Claim's
# `article` names.
ARTICLE = {
    "grid": "grid size = 2-4x the SM count",
    "registers": "at most 64 registers per thread",
    "shared": "at most 32 KB of shared memory per block",
    "streams": "independent work on 4-8 streams",
    "graphs": "one CUDA graph per batch size",
    "gaps": "kernel gaps below 5% of compute time",
    # its closing advice, judged on the roofline of the course's kernels (Lab 09)
    "fusion": "compute-bound models gain from aggressive fusion",
    "occupancy": "memory-bound models need finer occupancy control",
}


class Missing(LookupError):
    """The records lack what a claim reads: the claim awaits data, it is not false."""


def course_solution(lab: str):
    """The course's solution of `lab`, which some claims compute with (a ledger, a crossover, a
    roofline point), so that a student's stub never changes a claim. Missing in a student
    release, which ships no solutions: there the claim awaits them instead of failing."""
    from kernellab.course import target
    if not target.has_solutions():
        raise Missing("it computes with the course's solution, which the student release leaves out "
                      "(the recorded figures show the measurements)")
    return target.load(lab, "solutions")


OPERATORS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}
TARGET_WORDS = ("[holds]", "[MISSED]")


@dataclasses.dataclass(frozen=True)
class Compare:
    """One comparison a sentence makes, `left op right`, on the values the sentence prints.
    `words` (when it holds, when it does not; placeholders filled from the values) are printed
    at `{slot}`; without words the sentence's fixed text asserts the comparison (`states`)."""

    left: str                                # a name of the claim's values
    op: str                                  # a key of OPERATORS
    right: str | float                       # a name of the values, or a number the words state
    slot: str | None = None                  # the placeholder its words fill
    words: tuple[str, str] | None = None

    def operands(self) -> tuple[str, ...]:
        """The names of the values this comparison reads."""
        return tuple(x for x in (self.left, self.right) if isinstance(x, str))

    def outcome(self, values: dict) -> bool:
        right = values[self.right] if isinstance(self.right, str) else self.right
        return OPERATORS[self.op](values[self.left], right)

    def described(self, values: dict, op: str | None = None) -> str:
        """`left op right` with both numbers (a contradiction's line: the stated relation, false)."""
        def side(x):
            return f"{x} = {values[x]:.4g}" if isinstance(x, str) else f"{x:.4g}"
        return f"{side(self.left)} {op or self.op} {side(self.right)}"

    def held(self, values: dict) -> str:
        """The relation that holds on `values`: `left op right` where it does, its negation
        where it does not (a "compared:" line states only what is true)."""
        return self.described(values, self.op if self.outcome(values) else NEGATED[self.op])


def states(left: str, op: str, right: str) -> Compare:
    """What the sentence's fixed words assert: the claim is contradicted when it fails."""
    return Compare(left, op, right)


def says(slot: str, left: str, op: str, right: str | float, yes: str, no: str) -> Compare:
    """A verdict in words, `yes` or `no` printed at `{slot}`: either is a true sentence."""
    return Compare(left, op, right, slot, (yes, no))


def target(slot: str, left: str, op: str, right: str | float) -> Compare:
    """A target, "[holds]" or "[MISSED]" at `{slot}` beside the measured value."""
    return Compare(left, op, right, slot, TARGET_WORDS)


@dataclasses.dataclass(frozen=True)
class Claim:
    """A sentence with placeholders, the numbers it needs from the records, and its comparisons."""

    name: str
    sentence: str                                   # str.format placeholders, filled by `values`
    values: Callable[[dict], dict]                  # values(records) -> {placeholder: number}
    checks: tuple[Compare, ...]                     # what the sentence compares, as data
    article: str | None = None                      # a key of ARTICLE, for an article verdict
    explains: str | None = None                     # a model miss: why model and measurement differ
    headline: str | None = None                     # its short form (report's line, README.md's table), same placeholders
    for_instructors: bool = False                   # about the course's instruments: docs/measuring.md, not the lesson

    def __post_init__(self):
        if self.article is not None and self.article not in ARTICLE:
            raise ValueError(f"claim {self.name!r}: unknown article claim {self.article!r}; "
                             f"one of {', '.join(ARTICLE)}")
        if not self.checks:
            raise ValueError(f"claim {self.name!r}: no comparison, so nothing the data could contradict")
        printed = placeholders(self.sentence)
        if self.headline is not None and not placeholders(self.headline) <= printed:
            raise ValueError(f"claim {self.name!r}: its headline prints "
                             f"{', '.join(sorted(placeholders(self.headline) - printed))}, which its sentence does not")
        for check in self.checks:
            if check.op not in OPERATORS:
                raise ValueError(f"claim {self.name!r}: unknown operator {check.op!r}; one of {', '.join(OPERATORS)}")
            unprinted = [x for x in (*check.operands(), check.slot) if x is not None and x not in printed]
            if unprinted:
                raise ValueError(f"claim {self.name!r}: compares {', '.join(unprinted)}, which its sentence "
                                 f"does not print")


def placeholders(sentence: str) -> set[str]:
    """The names a format string fills."""
    return {name for _, name, _, _ in string.Formatter().parse(sentence) if name}


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A claim evaluated on some records: its sentence, whether the data bear it out, and from where."""

    claim: Claim
    text: str | None             # the sentence with its numbers and words, or None while awaiting data
    true: bool | None            # does the data bear the sentence out? None while awaiting data
    missing: str | None = None   # what the records lack
    source: str = ""             # where the numbers came from
    contradicted: tuple[str, ...] = ()   # the stated comparisons the data contradict
    headline: str | None = None          # the claim's headline, filled from the same values
    values: dict = dataclasses.field(default_factory=dict)   # the numbers it was filled from

    def tag(self) -> str:
        """The verdict in one tag: [holds] or [MISSED] for a claim with targets (MISSED when any
        is), [measured] for a finding whose verdict is in its words, [CONTRADICTED] for a false
        sentence, [awaiting data]."""
        if self.true is None:
            return "[awaiting data]"
        if not self.true:
            return "[CONTRADICTED]"
        targets = [c.outcome(self.values) for c in self.claim.checks if c.words == TARGET_WORDS]
        if targets:
            return "[holds]" if all(targets) else "[MISSED]"
        return "[measured]"

    def short(self) -> str:
        """The tag and the headline (or the sentence's first clause); a missed target adds its why."""
        if self.true is None:
            return f"{self.tag()} {self.claim.name} ({self.missing})"
        text = f"{self.tag()} {self.headline or first_clause(self.text)}"
        if self.tag() == "[MISSED]" and self.claim.explains:
            text += f"\n    why: {self.claim.explains}"
        return text

    def detailed(self) -> str:
        """The claim's name, its full line (sentence, source, why) and what it compared: each
        relation that holds on the values, once."""
        text = f"{self.claim.name}: {self.line()}"
        if self.true is not None:
            compared = "; ".join(dict.fromkeys(c.held(self.values) for c in self.claim.checks))
            text += f"\n    compared: {compared}"
        return text

    def line(self) -> str:
        head = ""
        if self.claim.article:
            head = f'verdict on the article\'s "{ARTICLE[self.claim.article]}": '
        if self.true is None:
            return f"[awaiting data] {head}{self.claim.name}: not in the records yet ({self.missing})"
        if not self.true:
            head = f"[CONTRADICTED by the data: {'; '.join(self.contradicted)}] {head}"
        text = f"{head}{self.text} ({recorded_between(self.source.split('; '))})"
        if self.claim.explains:
            text += f"\n    why: {self.claim.explains}"
        return text


def recorded_between(sources: list[str]) -> str:
    """Sources as one line: one reference's recording dates as a range ("... recorded 2026-12-01 to
    12-05"), anything else (live) beside it."""
    prefix = "reference, recorded "
    dated = sorted(s for s in sources if prefix in s)
    gpus = {s.split(prefix)[0] for s in dated}
    if len(dated) < 2 or len(gpus) != 1:
        return "; ".join(sources)
    first, last = dated[0].split(prefix)[1], dated[-1].split(prefix)[1]
    span = f"{gpus.pop()}{prefix}{first} to {last[5:] if last[:4] == first[:4] else last}"
    return "; ".join([span, *(s for s in sources if prefix not in s)])


CLAUSE_ENDS = (": ", "; ", ". ")


def first_clause(text: str) -> str:
    """`text` up to its first colon, semicolon or full stop outside brackets, without the stop."""
    depth = 0
    for i, char in enumerate(text):
        depth += (char in "([{") - (char in ")]}")
        if depth == 0 and text[i:i + 2] in CLAUSE_ENDS:
            return text[:i]
    return text.rstrip(".")


def words_of(claim: Claim, values: dict) -> dict:
    """Each comparison's words, as its outcome on `values` chooses them, by slot."""
    return {c.slot: (c.words[0] if c.outcome(values) else c.words[1]).format(**values)
            for c in claim.checks if c.words}


def render(claim: Claim, values: dict, form: str | None = None) -> tuple[str, tuple[str, ...]]:
    """The sentence (or `form`, its headline) filled from `values` with each comparison's words,
    and the stated comparisons that fail (empty: the sentence is true)."""
    failed = tuple(c.described(values) for c in claim.checks if c.words is None and not c.outcome(values))
    return (form or claim.sentence).format(**values, **words_of(claim, values)), failed


def take_away(lab: str, lines) -> str:
    """A notebook's last cell: "What to take away", then `lines`, format strings of the lab's claims'
    values and words ("{claim[value]}", "{claim[slot]}"), from the records they read (live where this
    process measured them, the reference otherwise); awaiting data where one awaits it."""
    said, sources, read = {}, set(), {}
    for claim in claims_of(lab):
        if any(f"{{{claim.name}[" in line for line in lines):
            verdict = judge(claim, lab)[0]
            if verdict.true is None:
                return f"What to take away: awaiting data ({verdict.missing})"
            said[claim.name] = {**verdict.values, **words_of(claim, verdict.values)}
            read[claim.name] = verdict.source.split("; ")
            sources.update(read[claim.name])

    def labelled(line: str) -> str:      # in a live run, a line read from a recording names it
        label = recorded_label([part for name, parts in read.items() if f"{{{name}[" in line for part in parts])
        return f"{line.format(**said)} ({label})" if label else line.format(**said)
    return "\n".join(("What to take away", *(f"  {k}. {labelled(line)}" for k, line in enumerate(lines, 1)),
                      f"  ({recorded_between(sorted(sources))})"))


def need(records: dict, name: str, *keys) -> Any:
    """records[name][keys...], or `Missing` naming the first thing absent."""
    value = records
    for key in (name, *keys):
        if not isinstance(value, dict) or key not in value:
            raise Missing(f"no {'.'.join(map(str, (name, *keys)))} recorded")
        value = value[key]
    return value


def profile_rows_beside(record: dict, lab: str) -> list[dict]:
    """The lab's recorded Nsight Compute rows, to be set beside `record`'s figures. Missing when
    `record` was measured live on another GPU than the rows (a ratio of two GPUs' numbers): the
    claim is then judged on the reference alone (`judge`)."""
    profiled_on, measured_on = reference.profiled_on(lab), (record.get("provenance") or {}).get("gpu")
    if record.get("live") and measured_on != profiled_on:
        raise Missing(f"the Nsight Compute rows were recorded on the {profiled_on}, the live run on the {measured_on}")
    return reference.profile_rows(lab)


def repeats_of(records: dict, name: str, lab: str) -> list[dict]:
    """Record `name` in every repeat (`kernellab bench --repeat N` keeps them all), for a claim
    judged on the worst: a live record stands alone; a reference file without repeats gives its
    one record. `Missing` when the records lack it."""
    record = need(records, name)
    if record.get("live"):
        return [record]
    repeats = (reference.load(lab) or {}).get("repeats") or []
    return [r[name] for r in repeats if name in r] or [record]


def repeats_ms(timed: dict) -> list[float]:
    """A row's time in each repeat (its one median where it was recorded once)."""
    return list(timed.get("repeat_ms") or [timed["median_ms"]])


def typical_ms(timed: dict) -> float:
    """A row's time for a finding about a phenomenon: the median of its repeats' medians where it
    has repeats (a merged recording's `median_ms` is its worst repeat, which judges targets)."""
    return float(statistics.median(repeats_ms(timed)))


def row(result: dict, variant: str, size) -> dict:
    """A timed row of a bench result (kernellab.course.bench), or `Missing`."""
    for r in result["rows"]:
        if r["variant"] == variant and r["size"] == size:
            if "median_ms" not in r:
                raise Missing(f"{result['benchmark']}: {variant} at {size} has no timing")
            return r
    raise Missing(f"{result['benchmark']}: no {variant} row at {result['axis']} = {size}")


class _Tracked(dict):
    """The records a claim reads, remembering which names it read (for its source line)."""

    def __init__(self, records: dict):
        super().__init__(records)
        self.read: set[str] = set()

    def __getitem__(self, name):
        self.read.add(name)
        return super().__getitem__(name)

    def __contains__(self, name):
        self.read.add(name)
        return super().__contains__(name)


def _source(records: dict, names, profiled=()) -> str:
    """Where a claim's numbers came from: each record it read, live or recorded (GPU and date), and
    each lab's recorded profile it read (a live run does not profile)."""
    def one(name) -> set[str]:
        record = records.get(name) or {}
        if name.startswith("lab") and name[3:].isdigit():     # another lab's records, whole:
            dated = [r for r in record.values() if isinstance(r, dict) and r.get("provenance")]
            return {one_of(r) for r in dated or record.values()} or {"no records"}   # (its targets have no date)
        return {one_of(record)}

    def one_of(record):
        if record.get("live"):
            return "live"
        date = (record.get("provenance") or {}).get("date", "")[:10]
        gpu = (record.get("provenance") or {}).get("gpu", "reference")
        return f"{gpu} reference, recorded {date}" if date else "reference"
    profiles = {one_of((reference.load(lab) or {}).get("profile") or {}) for lab in profiled}
    return "; ".join(sorted(set().union(profiles, *(one(name) for name in names)))) or "no records"


def evaluate(claim: Claim, records: dict) -> Verdict:
    """Fill the claim's sentence from `records` and check it; awaiting data when something is Missing."""
    tracked, profiled = _Tracked(records), set()
    reference.PROFILES_READ.append(profiled)      # recorded Nsight Compute rows read: a source too
    try:
        values = claim.values(tracked)
    except Missing as missing:
        return Verdict(claim, None, None, missing=str(missing))
    finally:
        reference.PROFILES_READ.remove(profiled)
    text, failed = render(claim, values)
    headline = render(claim, values, claim.headline)[0] if claim.headline else None
    return Verdict(claim, text, not failed, source=_source(records, tracked.read, profiled),
                   contradicted=failed, headline=headline, values=values)


def lab_records(lab: str, live: bool = True) -> dict:
    """One lab's records: the recorded reference, each replaced by this process's live one if any."""
    from kernellab.course import target
    stored = (reference.load(lab) or {}).get("records", {})
    return {**stored, **(reference.LIVE.get(target.lab_number(lab), {}) if live else {})}


def sources(lab: str, live: bool = True) -> dict:
    """What a lab's claims read: its own records by name, and every lab's as `records["labNN"]`
    (a claim that explains one lab's figure with another's measurement reads it there).
    `live=False`: the recorded reference alone."""
    from kernellab.course import target
    return {**lab_records(lab, live),
            **{f"lab{number}": lab_records(number, live) for number in target.labs()}}


def judge(claim: Claim, lab: str) -> tuple[Verdict, dict]:
    """The claim on this process's records; where a live run did not measure what it reads (a
    tour's shorter sweep), on the recorded reference, which its source line then names."""
    records = sources(lab)
    verdict = evaluate(claim, records)
    if verdict.true is None and reference.LIVE:
        records = sources(lab, live=False)
        verdict = evaluate(claim, records)
    return verdict, records


def figures_of(lab: str, names, prefixed: bool = False) -> tuple[dict, list[str]]:
    """The values the named claims of `lab` read, as their verdicts read them (live where this
    process measured them, the reference otherwise; `prefixed`: keyed "claim.value"), and the
    sources they came from: what a notebook's take-away prints. Missing where one awaits data."""
    figures, found = {}, set()
    for claim in claims_of(lab):
        if claim.name in names:
            verdict, records = judge(claim, lab)
            if verdict.true is None:
                raise Missing(verdict.missing)
            figures.update({f"{claim.name}.{k}" if prefixed else k: v
                            for k, v in claim.values(records).items()})
            found.update(verdict.source.split("; "))
    return figures, sorted(found)


def claims_of(lab: str) -> list[Claim]:
    from kernellab.course import protocol
    return list(protocol.declaration(lab).claims)


def report(lab: str, names: list[str] | None = None, detail: bool = False, out=print,
           collapsed: bool | str = False) -> list[Verdict]:
    """Print the lab's claims (or those named), in their order: one line each, its verdict tag
    and headline, then where the numbers come from (once, when they share it). `detail=True`:
    each one's name, full sentence, source, why and what it compared.

    `collapsed` (in a notebook): True shows each claim as its headline, the detail one click
    away (an HTML <details> element); a string shows them all under one such element, the string
    its summary (for claims about the course's instruments, which a lesson keeps out of the way).
    Outside a notebook it prints as without it."""
    chosen = claims_of(lab)
    unknown = set(names or ()) - {c.name for c in chosen}
    if unknown:
        raise ValueError(f"lab {lab} declares no claim {', '.join(sorted(unknown))}")
    results = [judge(c, lab)[0] for c in chosen if names is None or c.name in names]
    if collapsed and _in_notebook():
        _display_collapsed(results, collapsed)
        return results
    if detail:
        for verdict in results:
            out(verdict.detailed())
        return results
    judged = {v.source for v in results if v.true is not None}
    for verdict in results:
        out(verdict.short() + (f" ({recorded_between(verdict.source.split('; '))})"
                               if len(judged) > 1 and verdict.true is not None else ""))
    if len(judged) == 1:
        out(f"(numbers: {recorded_between(judged.pop().split('; '))}; claims.report(\"{lab}\", detail=True) shows how each was judged)")
    return results


def _in_notebook() -> bool:
    import sys
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return shell is not None and "Terminal" not in type(shell).__name__


def _display_collapsed(results: list[Verdict], collapsed: bool | str) -> None:
    """Each verdict's detail under its headline (True), or all under one summary (a string)."""
    import html
    from IPython.display import display

    def element(summary: str, body: str) -> str:
        return (f"<details><summary>{html.escape(summary)}</summary>"
                f"<pre style='white-space: pre-wrap'>{html.escape(body)}</pre></details>")
    if isinstance(collapsed, str):
        shown = element(collapsed, "\n\n".join(v.detailed() for v in results))
        plain = collapsed
    else:
        shown = "".join(element(headline(v), v.detailed()) for v in results)
        plain = "\n".join(headline(v) for v in results)
    display({"text/html": shown, "text/plain": plain}, raw=True)


def headline(verdict: Verdict) -> str:
    """A collapsed claim's visible line: in a live run, a verdict read from a recording names the
    GPU it was recorded on (its detail has the full source), so that live and recorded lines
    side by side cannot be taken for one run."""
    text = verdict.short()
    label = recorded_label(verdict.source.split("; ")) if verdict.true is not None else ""
    if not label:
        return text
    first, _, rest = text.partition("\n")
    return f"{first} ({label})" + (f"\n{rest}" if rest else "")


def recorded_label(sources: list[str]) -> str:
    """In a live run, the recordings among `sources` as short labels ("H200 reference", "; partly live"
    where some are live); "" where none is a recording or nothing in this process was measured live."""
    recorded = sorted({part.split(" reference")[0].removeprefix("NVIDIA ") + " reference"
                       for part in sources if " reference" in part})
    if not reference.LIVE or not recorded:
        return ""
    return ", ".join(recorded) + ("; partly live" if "live" in sources else "")


def compare_prediction(prediction, lab: str, claim: str, key: str, what: str, unit: str = "",
                       out=print) -> float | None:
    """The student's number, written before the measurement, against `key` of a lab's claim
    (from the same records the claim prints). None written: the measurement alone, and a nudge.
    Returns measured / predicted, or None."""
    chosen = [c for c in claims_of(lab) if c.name == claim]
    if not chosen:
        raise ValueError(f"lab {lab} declares no claim {claim}")
    verdict, records = judge(chosen[0], lab)
    if verdict.true is None:
        out(f"{what}: not measured here yet ({verdict.missing})")
        return None
    measured = float(chosen[0].values(records)[key])
    if prediction is None:
        out(f"{what}: measured {measured:.3g}{unit} ({verdict.source}). Next time, write your "
            f"prediction in the cell above first.")
        return None
    ratio = measured / float(prediction)
    out(f"{what}: you predicted {float(prediction):.3g}{unit}, measured {measured:.3g}{unit} "
        f"({ratio:.2f}x your number; {verdict.source})")
    return ratio
