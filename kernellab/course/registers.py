"""The register report: registers, shared memory, spills and occupancy of a lab's kernels.

Labs 04 and 05 print it, record it (`registers` in data/reference/<gpu>/labNN.json, read by Lab
06's registers verdict) and draw it. Each kernel's block comes from the lab's declaration
(`protocol.Kernel.block_size`), never from its name. On a GPU the figures are the driver's;
without one, ptxas's (compiled in a child process, a few seconds per kernel).
"""

from __future__ import annotations

from pathlib import Path

from kernellab import occupancy
from kernellab.gpu import device
from kernellab.kernels import resources
from kernellab.show import plots


def declared_blocks(kernels, default: int | None = None, names=None) -> dict[str, int]:
    """{kernel name: threads per block} from a lab's declared kernels (`protocol.Kernel`), those
    named in `names` (default: all); a kernel whose block varies with its input takes `default`."""
    chosen = [k for k in kernels if names is None or k.name in names]
    missing = [k.name for k in chosen if k.block_size is None and default is None]
    if missing:
        raise ValueError(f"no block size for {', '.join(missing)}: the declaration leaves it to the "
                         f"launcher, so pass `default`")
    return {k.name: k.block_size or default for k in chosen}


def resources_rows(kernels, cc=None) -> list[dict]:
    """One row per (kernel, signature or None for its declared one, threads per block)."""
    cc = cc or device.facts().cc
    found = resources.kernel_resources_batch([(kernel, signature) for kernel, signature, _ in kernels], cc)
    rows = []
    for (_, _, block), res in zip(kernels, found):
        occ = occupancy.occupancy(res.cc, block, res.registers_per_thread, res.static_shared_bytes)
        rows.append({"block": block, "registers": res.registers_per_thread,
                     "shared_bytes": res.static_shared_bytes, "local_bytes": res.local_bytes,
                     "spill_bytes": res.spill_stores_bytes, "source": res.source,
                     "active_blocks": occ.active_blocks, "active_warps": occ.active_warps,
                     "occupancy": occ.occupancy, "limiters": list(occ.limiters)})
    return rows


def report(lab, blocks: dict[str, int], cc=None) -> list[dict]:
    """The register report of the lab module's kernels named in `blocks` ({name: threads per
    block}; the lab declares each one's signature in SIGNATURES)."""
    rows = resources_rows([(getattr(lab, name), None, block) for name, block in blocks.items()], cc)
    return [{"kernel": name, **row} for name, row in zip(blocks, rows)]


def table(rows: list[dict]) -> str:
    lines = [f"{'kernel':<52} {'block':>5} {'regs':>5} {'smem B':>7} {'spill B':>7} "
             f"{'blocks/SM':>9} {'occupancy':>9}  limited by"]
    for r in rows:
        spill = "-" if r["spill_bytes"] is None else r["spill_bytes"]
        lines.append(f"{r['kernel']:<52} {r['block']:>5} {r['registers']:>5} {r['shared_bytes']:>7} "
                     f"{spill:>7} {r['active_blocks']:>9} {r['occupancy']:>8.0%}  {', '.join(r['limiters'])}")
    return "\n".join(lines)


def figure(record: dict, figures_dir: Path, name: str) -> Path:
    """Registers per thread (bars) against occupancy (dots, right axis) for each kernel."""
    rows = record["rows"]
    fig, (ax,) = plots.new_figure("Registers per thread and the occupancy they allow", record, width=9.0)
    labels = [r["kernel"].removesuffix("_kernel") for r in rows]
    positions = range(len(rows))
    ax.bar(positions, [r["registers"] for r in rows], color="C0")
    ax.set_xticks(positions, labels, rotation=50, ha="right", fontsize="x-small")
    ax.set_ylabel("registers per thread", color="C0")
    twin = ax.twinx()
    twin.plot(positions, [100 * r["occupancy"] for r in rows], "o", color="C3")
    twin.set_ylim(0, 105)
    twin.set_ylabel("occupancy (% of warp slots)", color="C3")
    return plots.save(fig, name, figures_dir)
