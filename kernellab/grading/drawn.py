"""Inputs drawn by Hypothesis within a stub's contract: every grade also tries shapes nobody listed.

A graded test says what its contract allows (`@drawn(n=sizes(block=128, most=700))`) and Hypothesis
draws the cases. The draws are seeded from the grade's seed and the test's name (the plugin applies
`hypothesis.seed` at collection, `seed_for`), so one seed gives one set of cases on every machine,
in the grader's child and in its judge alike: the judge replays the child's tape, and the same seed
and the same outcomes take Hypothesis down the same path. A failing case shrinks to the smallest
input that still fails, and the report prints it ("Falsifying example: ..."). Sizes stay within the
simulator's budget (~150 us per simulated thread), so a test draws a few cases, not hundreds.
"""

import zlib

from hypothesis import HealthCheck, Phase, example, given, settings, strategies
from hypothesis.internal.conjecture import providers
from hypothesis.internal.constants_ast import Constants

EXAMPLES = 6   # cases a test draws; each is a launch in the simulator

# Hypothesis now and then draws a constant it read from the source of the "local" modules loaded
# (and caches them under ./.hypothesis). In a grade that is the student's own file in the child and
# not in the judge: the cases would depend on which modules are loaded, and a submission could steer
# them. A grade draws from the seed alone (hypothesis is pinned: tests/instruments/test_drawn.py
# fails if this hook moves).
providers._get_local_constants = Constants


def drawn(examples: int = EXAMPLES, always: tuple[dict, ...] = (), **arguments):
    """Decorate a graded test: Hypothesis draws its keyword `arguments` from the given strategies,
    `examples` cases, after the cases in `always` (the edges a contract names: 1 element, an exact
    multiple of the block), which every grade tries. No example database (a grade must not depend
    on an earlier run), no deadline and no health checks (the simulator is slow, and time must not
    change a verdict)."""
    def decorate(test):
        tried = given(**arguments)(test)
        for case in reversed(always):
            tried = example(**case)(tried)
        return settings(max_examples=examples, database=None, deadline=None, derandomize=False,
                        suppress_health_check=list(HealthCheck), print_blob=False,
                        phases=(Phase.explicit, Phase.generate, Phase.shrink))(tried)
    return decorate


def seed_for(run_seed: int, nodeid: str) -> int:
    """The Hypothesis seed of one test function in a grade seeded `run_seed` (parametrized cases
    share it: the name before '[')."""
    return zlib.crc32(f"{run_seed}:{nodeid.split('[')[0]}".encode())


def sizes(block: int, most: int, zero: bool = False):
    """Element counts a launch of `block` threads must handle: any size up to `most` (awkward ones
    above all), exact multiples of the block and one either side of one; 0 where the contract
    allows an empty input."""
    multiples = strategies.integers(1, max(1, most // block)).map(lambda k: k * block)
    either_side = multiples.flatmap(lambda m: strategies.sampled_from([m - 1, m + 1])).filter(
        lambda n: 1 <= n <= most)
    drawn_sizes = strategies.one_of(strategies.integers(1, most), multiples, either_side)
    return strategies.one_of(strategies.just(0), drawn_sizes) if zero else drawn_sizes


def one_of(*values):
    """One of the listed values (a block size, a flag), shrinking towards the first."""
    return strategies.sampled_from(values)


def integers(low: int, high: int):
    """An integer in [low, high], shrinking towards `low`."""
    return strategies.integers(low, high)
