"""Mutants that cosmic-ray makes of the stubs' solutions and that no test can tell from the
solution, each with why (kernellab.grading.mutation reads this; docs/mutation/ reports them).

lab -> [(cosmic-ray operator, the mutated line's text stripped, why it computes the same)]
"""

EQUIVALENT: dict[str, list[tuple[str, str, str]]] = {
    "01": [("core/NumberReplacer", "out = cuda.device_array_like(arrays[0])",
            "the contract's 8 arrays are equally long: out allocated like any of them is the same"),
           *((operator, "grid = (out.size + block - 1) // block        # one thread per element",
              "one spare block of idle threads: sum8's contract fixes the launch count and the block size, "
              "not the grid") for operator in ("core/NumberReplacer", "core/ReplaceBinaryOperator_Sub_Add")),
           ("core/ReplaceBinaryOperator_Sub_Add",
            "slope = float(np.sum(dc * (total_us - total_us.mean())) / np.sum(dc * dc))",
            "dc is centred (it sums to 0), so adding the mean instead adds mean x 0: the same slope to "
            "the last digits, under the 1e-9 tolerance")],
    "02": [("core/ReplaceComparisonOperator_Lt_LtE", "if v < ZERO:",
            "at v == 0 both branches leave zero: relu's edge has one value")],
    "03": [("core/ReplaceComparisonOperator_Gt_GtE",
            "out[out_starts[2] + i] = v if v > ZERO else ZERO  # 1 write",
            "at v == 0 both branches write zero: relu's edge has one value")],
    "04": [("core/ReplaceComparisonOperator_Gt_GtE", "if value > ZERO and keep != 0:",
            "at value == 0 both branches give zero (0 x scale, or ZERO): relu's edge has one value"),
           ("core/AddNot", 'matmul = "matmul+epilogue" if fused else "matmul"',
            "linear_ledger's contract gives the bytes per array, not the ops' names (the tests compare per "
            "array), so the matmul op may be named either way"),
           ("core/AddNot", 'ledger = (Ledger("fused" if fused else "unfused")',
            "the ledger's own name is not in linear_ledger's contract (its ops and per-array bytes are), "
            "so any name gets full marks")],
    "05": [("core/ReplaceComparisonOperator_Gt_GtE", "if value > running_max:",
            "a tie rescales the running sum by exp(0) = 1 and keeps the same maximum")]
           + [("core/ReplaceTrueWithFalse", line,
               "a Ledger counts an array as temporary when any of its entries is (Ledger.temporaries, "
               "which the tests and the meter read), and every statistic keeps another entry marked")
              for line in (
            '.add("row_max", "x", reads=n).add("row_max", "row_max", writes=rows, temporary=True)',
            '.add("row_exp_sum", "x", reads=n).add("row_exp_sum", "row_max", reads=rows * block, temporary=True)',
            '.add("row_exp_sum", "row_sum", writes=rows, temporary=True)',
            '.add("normalize", "x", reads=n).add("normalize", "row_max", reads=rows * block, temporary=True)',
            '.add("normalize", "row_sum", reads=rows * block, temporary=True)',
            '.add("row_mean", "x", reads=n).add("row_mean", "mean", writes=rows, temporary=True)',
            '.add("row_rstd", "x", reads=n).add("row_rstd", "mean", reads=rows * block, temporary=True)',
            '.add("row_rstd", "rstd", writes=rows, temporary=True)',
            '.add("normalize", "x", reads=n).add("normalize", "mean", reads=rows * block, temporary=True)',
            '.add("normalize", "rstd", reads=rows * block, temporary=True))',
           )],
    "06": [(operator,
            "raise ValueError(f\"{name} must be in {low}..{high if high is not None else ''}, got {value}\")",
            "only the message's upper bound changes; the contract asks that the ValueError name the "
            "argument, which it still does") for operator in ("core/AddNot", "core/ReplaceComparisonOperator_IsNot_Is")]
           + [("core/ReplaceBinaryOperator_FloorDiv_Div",
               "warps_per_part = (arch.registers_per_sm // parts) // per_warp   # a warp lives in one quarter",
               "registers_per_sm is a multiple of parts on every architecture, so / gives the same count "
               "(as a float equal to the int)"),
              ("core/NumberReplacer",
               '"max_dynamic_shared": (max_dynamic_shared, 0, arch.shared_per_block_optin - static_shared),',
               "the contract bounds max_dynamic_shared from above only; a max_dynamic_shared of -1 accepted "
               "gives every launch 0 blocks (it asks for more dynamic shared memory than that), which the "
               "contract's other clause allows: both readings get full marks")],
    "08": [("core/NumberReplacer",
            "gap = idle / (kernels - 1) if kernels > 1 else 0.0   # between kernels, none before or after",
            "the gap taken for one kernel only ever multiplies i = 0, so any number gives [(0, kernel_ms)]")],
    "09": [("core/NumberReplacer", '"compute": flops / (ceilings["fp32_fma_tflops"] * 1e12),',
            "1e12 +- 1 moves the time by 1e-12 of itself, under the 1e-9 relative tolerance the docstring "
            "states"),
           ("core/NumberReplacer",
            'roof = min(ceilings["fp32_fma_tflops"] * 1e12, point_intensity * ceilings["copy_gbps"] * 1e9)',
            "1e12 +- 1 moves the roof by 1e-12 of itself, under the 1e-9 relative tolerance the docstring "
            "states")],
}
