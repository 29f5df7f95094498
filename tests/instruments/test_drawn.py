"""Hypothesis draws a grade's cases from the seed alone (kernellab.grading.drawn)."""

from hypothesis.internal.conjecture import providers

from kernellab.grading import drawn


def test_no_constant_from_the_loaded_modules_reaches_a_draw():
    assert providers._get_local_constants is drawn.Constants
    assert len(providers._get_local_constants()) == 0


def test_one_seed_one_set_of_cases():
    seen = []

    @drawn.drawn(examples=5, n=drawn.sizes(block=32, most=300), always=({"n": 1},))
    def draw(n):
        seen.append(n)
    for _ in range(2):
        __import__("hypothesis").seed(1234)(draw)()
    first, second = seen[:len(seen) // 2], seen[len(seen) // 2:]
    assert first == second and first[0] == 1
