"""Lab 06's figures: the occupancy calculator drawn (and `explorer`, its sliders), the seed
article's fusion caps in the calculator's numbers, the calculator for TUNED, and the figures
drawn from the measurements."""

from __future__ import annotations

from pathlib import Path

from kernellab.show import plots
from kernellab.kernels import resources
from kernellab import occupancy as occ

from experiments.lab06_constants import H200
from experiments.lab06_measure import PROBES


# --- the calculator, drawn -------------------------------------------------------------------------

CALCULATED = "calculated by kernellab.occupancy (the rules of cuda_occupancy.h), not measured"


def occupancy_at(cc, block_size, registers, shared_bytes, carveout=-1):
    """The calculator for `shared_bytes` of shared memory per block in all (allowed up to the opt-in
    limit, as if the kernel had raised its max-dynamic attribute)."""
    arch = occ.architecture(cc)
    return occ.occupancy(arch, block_size, registers, 0, shared_bytes,
                         max_dynamic_shared=arch.shared_per_block_optin, carveout=carveout)


def plot_calculator(cc, block_size, registers, shared_bytes, carveout=-1, title=""):
    """Three panels as NVIDIA's occupancy calculator draws them, the current configuration marked."""
    arch = occ.architecture(cc)
    now = occupancy_at(arch, block_size, registers, shared_bytes, carveout)
    step = 256
    panels = [
        ("threads per block", sorted({*range(arch.warp_size, arch.max_threads_per_block + 1,
                                             arch.warp_size), block_size}), block_size,
         lambda v: occupancy_at(arch, v, registers, shared_bytes, carveout), 1),
        ("registers per thread", range(0, arch.max_registers_per_thread + 1), registers,
         lambda v: occupancy_at(arch, block_size, v, shared_bytes, carveout), 1),
        ("shared memory per block (KiB)", range(0, arch.shared_per_block_optin + 1, step), shared_bytes,
         lambda v: occupancy_at(arch, block_size, registers, v, carveout), 1024),
    ]
    fig, (axes,) = plots.figure(3 * plots.PANEL_WIDTH_IN, plots.PANEL_HEIGHT_IN, ncols=3)
    head = f"{title}: " if title else ""
    fig.suptitle(f"{head}{arch.label}, block {block_size}, {registers} registers/thread, "
                 f"{shared_bytes} B shared/block -> {now.active_blocks} blocks, "
                 f"{now.active_warps}/{now.max_warps} warps ({now.occupancy:.0%}), limited by "
                 f"{' and '.join(now.limiters)}\n{CALCULATED}")
    for ax, (label, values, current, at, unit) in zip(axes, panels):
        values = list(values)
        warps = [at(v).active_warps for v in values]
        style = dict(marker=".", ms=4) if label.startswith("threads") else dict(drawstyle="steps-post")
        ax.plot([v / unit for v in values], warps, color="C0", **style)
        ax.plot([current / unit], [now.active_warps], "o", color="C3", ms=9, zorder=3)
        near_the_right = current > 0.6 * max(values)      # label to the left, off the right axis
        ax.annotate(f"{now.occupancy:.0%}: {' + '.join(now.limiters)}", (current / unit, now.active_warps),
                    textcoords="offset points", xytext=(-6 if near_the_right else 6, 8),
                    ha="right" if near_the_right else "left", color="C3", fontsize="small")
        ax.set_xlabel(label)
        ax.set_ylabel("resident warps per SM")
        ax.set_ylim(0, arch.max_warps_per_sm * 1.12)
        ax.grid(alpha=0.3)
        ax.secondary_yaxis("right", functions=(lambda w, m=arch.max_warps_per_sm: 100 * w / m,
                                               lambda p, m=arch.max_warps_per_sm: p * m / 100)
                           ).set_ylabel("occupancy (%)")
    return fig


def fitted_image(fig):
    """`fig` as a PNG that shrinks to the width it is shown in: displayed as a figure, it kept its
    full width in pixels inside the explorer's narrower box, which cut off the third panel."""
    import base64
    import io
    from IPython.display import HTML
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=plots.DPI)
    encoded = base64.b64encode(png.getvalue()).decode()
    return HTML(f'<img alt="occupancy calculator" style="max-width: 100%; height: auto" '
                f'src="data:image/png;base64,{encoded}">')


def explorer(cc=H200, block_size=128, registers=40, shared_bytes=12288):
    """Sliders for block size, registers and shared memory that redraw `plot_calculator` live."""
    import ipywidgets as widgets
    from IPython.display import display

    def draw(cc, block_size, registers, shared_kib):
        arch = occ.architecture(cc)
        shared = min(int(shared_kib * 1024), arch.shared_per_block_optin)  # the cc's opt-in limit
        now = occupancy_at(arch, block_size, registers, shared)
        print(f"occupancy {now.occupancy:.0%}: {now.active_warps} of {now.max_warps} warps per SM, "
              f"limited by {' and '.join(now.limiters)}")  # as text too, for readers and the browser test
        fig = plot_calculator(arch, block_size, registers, shared)
        display(fitted_image(fig))
        plots.plt.close(fig)

    choices = [(arch.label, f"{arch.cc[0]}.{arch.cc[1]}") for arch in occ.ARCHITECTURES.values()]
    cc_value = "{}.{}".format(*occ.parse_cc(cc))
    return widgets.interactive(
        draw,
        cc=widgets.Dropdown(options=choices, value=cc_value, description="cc"),
        block_size=widgets.IntSlider(value=block_size, min=32, max=1024, step=32,
                                     continuous_update=False, description="block"),
        registers=widgets.IntSlider(value=registers, min=0, max=255, continuous_update=False,
                                    description="registers"),
        shared_kib=widgets.FloatSlider(value=shared_bytes / 1024, min=0, max=227, step=0.5,
                                       continuous_update=False, description="shared KiB"))


# --- the seed article's fusion caps, in numbers ------------------------------------------------------

ARTICLE_REGISTERS = 64
ARTICLE_SHARED = 32 * 1024


def article_rules(cc=H200, block_sizes=(64, 128, 256, 512, 1024)) -> list[dict]:
    """Occupancy at the article's caps, per block size, and the most each resource may take for 100%."""
    arch = occ.architecture(cc)
    rows = []
    for block in block_sizes:
        def full(registers, shared):
            return occupancy_at(arch, block, registers, shared).occupancy == 1.0
        rows.append({
            "block": block,
            "at_64_registers": occupancy_at(arch, block, ARTICLE_REGISTERS, 0).occupancy,
            "at_32k_shared": occupancy_at(arch, block, 32, ARTICLE_SHARED).occupancy,
            "at_both": occupancy_at(arch, block, ARTICLE_REGISTERS, ARTICLE_SHARED).occupancy,
            "registers_for_100": max((r for r in range(arch.max_registers_per_thread + 1) if full(r, 0)),
                                     default=None),
            "shared_for_100": max((s for s in range(0, arch.shared_per_block_optin + 1, 128) if full(32, s)),
                                  default=None),
        })
    return rows


def format_rules(rows: list[dict], cc=H200) -> str:
    lines = [f"{occ.architecture(cc).label}: occupancy at the seed article's fusion caps",
             f"{'block':>6} {'64 regs':>8} {'32 KiB shared':>14} {'both':>6} {'regs for 100%':>14} "
             f"{'shared for 100%':>16}"]
    for r in rows:
        shared = f"{r['shared_for_100']} B" if r["shared_for_100"] is not None else "none"
        regs = r["registers_for_100"] if r["registers_for_100"] is not None else "none"
        lines.append(f"{r['block']:>6} {r['at_64_registers']:>8.0%} {r['at_32k_shared']:>14.0%} "
                     f"{r['at_both']:>6.0%} {regs:>14} {shared:>16}")
    return "\n".join(lines)


# --- figures from measurements ------------------------------------------------------------------------

def plot_occupancy_vs_speed(record: dict, figures_dir: Path) -> tuple[Path, str]:
    """Throughput against resident warps per SM, memory-bound beside compute-bound."""
    fig, (ax_mem, ax_fma) = plots.new_figure("Does occupancy buy speed? (occupancy set by unused "
                                             "dynamic shared memory; the code never changes)",
                                             record, ncols=2)
    max_warps = occ.architecture(record["provenance"]["cc"]).max_warps_per_sm
    panels = ((ax_mem, "memory", "gbps", "GB/s", 1.0), (ax_fma, "compute", "gflops", "TFLOP/s", 1e-3))
    for ax, kind, field, unit, scale in panels:
        for i, name in enumerate(n for n, (_, k, _) in PROBES.items() if k == kind):
            rows = [r for r in record["rows"] if r["probe"] == name]
            most = max(r["warps_per_sm"] for r in rows)
            short = (f"\n({rows[-1]['registers']} registers: at most {most} warps)"
                     if most < max_warps and "registers" in rows[-1] else "")
            ax.plot([r["warps_per_sm"] for r in rows], [scale * r[field] for r in rows], "o-", color=f"C{i}",
                    label=f"{'four' if name.endswith('ilp4') else 'one'} in flight per thread{short}")
        ceiling = (record["copy_ceiling"]["gbps"] if kind == "memory" else record.get("fp32_peak_gflops"))
        if ceiling:
            ax.axhline(scale * ceiling, color="k", ls=":", label="copy ceiling (same run)" if kind == "memory"
                       else "FP32 peak (sm_count x lanes x 2 x clock)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"resident warps per SM (of {max_warps})")
        ax.set_ylabel(unit)
        first = next(n for n, (_, k, _) in PROBES.items() if k == kind)
        ax.set_title(f"{kind}-bound: {record['why'][first].split(',')[0]}")
        ax.legend(loc="upper left", fontsize="small")   # the curves rise to the right: few warps, low speed
        ax.grid(alpha=0.3)
    return plots.save(fig, "lab06_occupancy_vs_speed", figures_dir), occupancy_headline(record)


def occupancy_headline(record: dict) -> str:
    """The fewest warps per SM at which each probe reaches 90% of its own best."""
    max_warps = occ.architecture(record["provenance"]["cc"]).max_warps_per_sm
    parts = []
    for name, (_, kind, _) in PROBES.items():
        field = "gbps" if kind == "memory" else "gflops"
        rows = [r for r in record["rows"] if r["probe"] == name]
        if not rows:
            continue
        best = max(r[field] for r in rows)
        enough = min(r["warps_per_sm"] for r in rows if r[field] >= 0.9 * best)
        parts.append(f"{name} {enough / max_warps:.0%}")
    return "occupancy needed for 90% of best speed: " + ", ".join(parts)


def plot_register_caps(record: dict, figures_dir: Path) -> tuple[Path, str]:
    """TFLOP/s, occupancy and spills of linear_relu against its register cap."""
    fig, (ax_speed, ax_occ) = plots.new_figure(f"linear_relu {record['size']}^3 under register caps "
                                               "(Lab 06.5's kernel)", record, ncols=2)
    ax_spill = ax_occ.twinx()
    tiles = sorted({r["tile_k"] for r in record["rows"]})
    for i, tile_k in enumerate(tiles):
        rows = [r for r in record["rows"] if r["tile_k"] == tile_k]
        labels = [str(r["max_registers"] or "none") for r in rows]
        ax_speed.plot(labels, [r["tflops"] for r in rows], "o-", color=f"C{i}", label=f"tile_k {tile_k}")
        ax_occ.plot(labels, [100 * r["occupancy"] for r in rows], "o-", color=f"C{i}",
                    label=f"occupancy, tile_k {tile_k}")
    first = [r for r in record["rows"] if r["tile_k"] == tiles[0]]   # spills do not depend on tile_k
    ax_spill.bar([str(r["max_registers"] or "none") for r in first], [r["spill_stores"] or 0 for r in first],
                 alpha=0.2, color="k", label="spill stores")
    ax_speed.set_xlabel("max_registers")
    ax_speed.set_ylabel("TFLOP/s")
    ax_speed.legend(fontsize="small")
    ax_occ.set_xlabel("max_registers")
    ax_occ.set_ylabel("occupancy (%)")
    ax_occ.set_ylim(0, 105)
    ax_spill.set_ylabel("spill stores (bytes per thread, bars)")
    ax_occ.legend(fontsize="small", loc="lower left")
    best = max(record["rows"], key=lambda r: r["tflops"])
    key = (f"linear_relu fastest at cap {best['max_registers']}, tile_k {best['tile_k']}: "
           f"{best['tflops']:.1f} TFLOP/s at {best['occupancy']:.0%} occupancy")
    return plots.save(fig, "lab06_register_caps", figures_dir), key


# --- the calculator for TUNED -------------------------------------------------------------------

def tuned_resources(lab) -> resources.Resources:
    """linear_relu_kernel (compiled for TUNED) as ptxas builds it for an H200."""
    return resources.kernel_resources(lab.linear_relu_kernel, None, cc=H200)


def draw_calculator_tuned(lab, records: dict, figures_dir: Path) -> Path:
    found = tuned_resources(lab)
    fig = plot_calculator(H200, lab.TUNED.block_size, found.registers_per_thread, found.static_shared_bytes,
                          title="linear_relu TUNED")
    return plots.save(fig, "lab06_calculator_tuned", figures_dir)
