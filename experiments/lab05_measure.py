"""Lab 05's measurements: the register report of every declared kernel, and each way of holding a
row of 8192 (its kernel's registers, shared memory and occupancy, the driver's figures, beside its
time in the same run's shapes benchmark); with the shapes' names, which the declaration's shapes
benchmark and the claims read too.

`lab05_reduction_fusion` declares them (its docstring says what each record holds).
"""

from __future__ import annotations

from kernellab.course import reference, registers

from experiments.lab05_constants import HEADLINE_COLS, KERNELS, SHAPES, STAGED_SHAPES, VECTOR_BLOCKS, VECTOR_KERNEL


def shape_name(block, items, max_registers):
    return f"fused_{block}x{items}" + (f"_max{max_registers}regs" if max_registers else "")


def staged_name(block, burst):
    return f"staged_{block}x{HEADLINE_COLS // block}_burst{burst}"


def vector_name(block):
    return f"vector_{block}x{HEADLINE_COLS // block}"


def shape_kernels(lab) -> list[tuple[str, int, int, object, str]]:
    """(shape name, threads, values per thread, kernel, signature) of every shape the shapes
    benchmark times."""
    rows_signature = lab.SIGNATURES["softmax_fused_kernel"]
    found = [(shape_name(block, items, cap), block, items,       # compiled as softmax_fused compiles it
              lab.fused_kernels(items, lab.register_cap(block, cap)).softmax, rows_signature)
             for block, items, cap in SHAPES]
    if hasattr(lab, "softmax_staged"):
        found += [(staged_name(block, burst), block, HEADLINE_COLS // block,
                   lab.staged_kernels(block, HEADLINE_COLS // block, burst), rows_signature)
                  for block, burst in STAGED_SHAPES]
        found += [(vector_name(block), block, HEADLINE_COLS // block,
                   lab.vector_kernels(block, lab.vector_shape(HEADLINE_COLS, block)),
                   lab.SIGNATURES[VECTOR_KERNEL]) for block in VECTOR_BLOCKS]
    return found


def measure_shape_registers(lab, records) -> dict:
    """Registers, shared memory and occupancy of each shape's kernel (the driver's figures, GPU
    only), beside its timing from this run's shapes benchmark."""
    shapes = shape_kernels(lab)
    found = registers.resources_rows([(kernel, signature, block) for _, block, _, kernel, signature in shapes])
    rows = []
    for (name, block, items, _, _), res in zip(shapes, found):
        timed = next((r for r in records["softmax_shapes"]["rows"]
                      if r["variant"] == name and r["size"] == HEADLINE_COLS), {})
        rows.append({"shape": name, "block": block, "items": items,
                     **{k: res[k] for k in ("registers", "shared_bytes", "local_bytes", "active_blocks",
                                            "occupancy", "limiters")},
                     **{k: timed.get(k) for k in ("median_ms", "gbps", "pct_of_copy")}})
        r = rows[-1]
        print(f"  {name:<26} {r['registers']:>4} registers, {r['shared_bytes']} B shared, {r['active_blocks']} "
              f"blocks/SM ({r['occupancy']:.0%}): {r['median_ms'] or float('nan'):.4f} ms, "
              f"{r['pct_of_copy'] or float('nan'):.1f}% of copy")
    return {"provenance": reference.provenance(), "rows": rows}


def measure_registers(lab) -> dict:
    """The register report of every declared kernel, at 8192 columns where the block varies."""
    rows = registers.report(lab, registers.declared_blocks(
        KERNELS, default=lab.row_block(HEADLINE_COLS), names=set(lab.SIGNATURES)))
    print(registers.table(rows))
    return {"provenance": reference.provenance(), "rows": rows}
