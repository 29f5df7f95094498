"""Mutants that cosmic-ray makes of the stubs' solutions and that no test can tell from the
solution, each with why (kernellab.grading.mutation reads this; docs/mutation/ reports them).

lab -> [(cosmic-ray operator, the mutated line's text stripped, why it computes the same)]
"""

EQUIVALENT: dict[str, list[tuple[str, str, str]]] = {}
