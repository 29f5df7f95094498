"""Memory-budget checks that say what the numbers mean.

A budget test meters a launch (`kernellab.gpu.traffic.meter`) and compares each array's loads and
stores with the budget the stub's docstring states, per element (or per launch, per row...):

    expect(traffic, "x", reads=1, writes=0, elements=n)
    expect_only(traffic, "x", "out")

A failure names the array, the count, what it comes to per unit, the budget, and the usual
cause: "x: 560 reads for 176 elements = 3.18 per element, the budget is 1: do threads overlap or
re-read?", then the meter's table of every array. `expect_coalesced` and
`expect_conflict_free` judge the same launch's warp requests (sectors per request, bank conflicts).
"""

from __future__ import annotations

from kernellab.gpu import checks
from kernellab.gpu.traffic import TrafficCount

# (direction, over budget or under budget) -> the usual cause, as a question to the student
CAUSES = {
    ("reads", "over"): "do threads overlap, or re-read a value they could keep in a register?",
    ("reads", "under"): "are some elements never read (a guard that stops early, a missed tail, "
                        "x and y swapped)? " + checks.THREADS_PICTURE,
    ("writes", "over"): "do threads overlap, or store a partial result to global memory?",
    ("writes", "under"): "are some elements never written (a guard that stops early, a missed tail, "
                         "x and y swapped)? " + checks.THREADS_PICTURE,
}
UNUSED = {
    "reads": "this array is write-only here: keep what you stored in a register instead of "
             "loading it back",
    "writes": "this array is an input: a kernel should never store into it",
}


def per_unit(count: int, units: int) -> str:
    return f"{count / units:.3g}" if units else "-"


def budget_problem(name: str, direction: str, count: int, budget: float, units: int,
                   per: str) -> str | None:
    """One line saying how `count` misses `budget` per unit, or None when it is on budget."""
    if count == budget * units:
        return None
    if budget == 0:
        return f"{name}: {count} {direction}, the budget is 0: {UNUSED[direction]}"
    side = "over" if count > budget * units else "under"
    return (f"{name}: {count} {direction} for {units} {per}s = {per_unit(count, units)} per {per}, "
            f"the budget is {budget:g}: {CAUSES[(direction, side)]}")


def expect(traffic: TrafficCount, name: str, *, elements: int, reads: float = 0,
           writes: float = 0, per: str = "element"):
    """Assert that array `name` saw `reads` loads and `writes` stores per `per` (there are
    `elements` of them), naming what each miss usually means."""
    counted = traffic[name]
    problems = [p for p in (budget_problem(name, "reads", counted.reads, reads, elements, per),
                            budget_problem(name, "writes", counted.writes, writes, elements, per))
                if p]
    if problems:
        raise AssertionError("\n".join(problems) + "\n" + traffic.table())


def expect_only(traffic: TrafficCount, *names: str):
    """Assert that the launches touched no global array besides `names`."""
    extra = [name for name in traffic if name not in names]
    if extra:
        raise AssertionError(
            f"global arrays beyond {', '.join(names)}: {', '.join(extra)}. An intermediate result "
            f"stored to global memory costs a write and a read per element: keep it in registers "
            f"or shared memory\n{traffic.table()}")


def _picture_of(site) -> str:
    """The picture call that shows a failed site, on a line of its own ('' where none can say)."""
    from kernellab.course import pictures
    try:
        return "\n  " + pictures.shown_by(site)
    except Exception:      # the site's file is gone or unreadable: the words above still say it
        return ""


def expect_coalesced(traffic: TrafficCount, *names: str, hint: str = "", aligned: bool = False):
    """Assert that every global load and store of the named arrays (all when none is named) is
    coalesced: each site's sectors per warp request within COALESCED_SLACK of the fewest its
    lanes' bytes need. A failure names the array, the line, its sectors per request against the
    ideal for its access width, and `hint` (the usual cause in this kernel).

    `aligned`: the launch's rows all start on a sector and its warps are all full, so a coalesced
    request touches exactly the ideal. The slack lets a row that starts mid-sector through; it also
    lets through a warp whose lanes walk down a column of a few rows each, as a tile staged
    transposed does (8 sectors a request where 4 do): only the aligned case tells them apart."""
    found = traffic.uncoalesced(*names)
    if aligned:
        found += [s for s in traffic.traced("global") if (not names or s.array in names)
                  and s.coalesced and s.per_request > s.ideal]
    if found:
        lines = [f"{s.describe()}: neighbouring lanes (threadIdx.x) should touch neighbouring "
                 f"elements, so that a warp's request needs "
                 f"{s.ideal if aligned else s.fewest / s.requests:.1f} sectors"
                 f"{_picture_of(s)}" for s in found]
        raise AssertionError("not coalesced: " + "\n".join(lines) + (f"\n{hint}" if hint else "")
                             + "\n" + traffic.requests_table())


def expect_conflict_free(traffic: TrafficCount, hint: str = ""):
    """Assert that no shared-memory access of the launches has a bank conflict: one wavefront
    per phase. A failure names the shared array, the line, how many ways it conflicts, and `hint`."""
    found = traffic.conflicted()
    if found:
        lines = [f"{s.describe()}: 32 banks of 4 bytes; lanes whose words differ but share a "
                 f"bank wait for each other{_picture_of(s)}" for s in found]
        raise AssertionError("shared-memory bank conflicts: " + "\n".join(lines)
                             + (f"\n{hint}" if hint else "") + "\n" + traffic.requests_table())
