"""Mutants that cosmic-ray makes of the stubs' solutions and that no test can tell from the
solution, each with why (kernellab.grading.mutation reads this; docs/mutation/ reports them).

lab -> [(cosmic-ray operator, the mutated line's text stripped, why it computes the same)]
"""

EQUIVALENT: dict[str, list[tuple[str, str, str]]] = {
    "08": [("core/NumberReplacer",
            "gap = idle / (kernels - 1) if kernels > 1 else 0.0   # between kernels, none before or after",
            "the gap taken for one kernel only ever multiplies i = 0, so any number gives [(0, kernel_ms)]")],
}
