"""Figures: one look for every lab, and an honest label saying where the numbers came from.

A figure drawn from recorded reference data (no GPU here) says so in its title line;
a live one names the GPU it was measured on.

Every figure is drawn for a projector: at least `MIN_WIDTH_IN` inches wide, saved at `DPI` (1200 px
or more), with fonts sized for that canvas (`STYLE`; figure code names relative sizes, "small",
"x-small", never points). `layout_problems` says what a reader could not read in a drawn figure:
text boxes that overlap, text that leaves the canvas, a canvas too narrow.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

if not os.environ.get("MPLBACKEND"):
    matplotlib.use("Agg")  # files only (CI, the tour); Jupyter sets MPLBACKEND to its inline backend

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.backend_bases import RendererBase  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.text import Annotation, Text  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

FIGURES = Path("figures")
LEDGER_SOURCE = "declared by the ledgers, whose formulas the simulator's meter checks on small inputs"

DPI = 100                  # every figure is saved at this resolution
MIN_WIDTH_IN = 12.0        # 1200 px at DPI: what a projector needs
PANEL_WIDTH_IN = 7.5       # each panel of a figure of several panels, at the least
PANEL_HEIGHT_IN = 6.0
# Fonts for a 12-inch canvas: 1.6x matplotlib's defaults, which are sized for a 6.4-inch one.
# Relative sizes resolve against font.size: "xx-small" 9.3 pt, "x-small" 11.1, "small" 13.3.
STYLE = {
    "font.size": 16,
    "axes.titlesize": "medium",
    "axes.labelsize": "medium",
    "xtick.labelsize": "small",
    "ytick.labelsize": "small",
    "legend.fontsize": "x-small",
    "legend.title_fontsize": "x-small",
    "figure.titlesize": "large",
    "lines.linewidth": 2.0,
    "lines.markersize": 8.0,
    "figure.dpi": DPI,
}
LEGEND_INSIDE_MAX = 6      # a legend of more entries goes beside its axes
TOLERANCE_PX = 1.0         # a pixel of rounding: boxes that touch do not overlap, text that grazes an edge stays in


def source_label(record: dict | None) -> str:
    """'measured live on NVIDIA H200' or 'reference data: NVIDIA H200, 2026-11-29 (no GPU here)'."""
    if record is None:
        return "no measurement available"
    prov = record.get("provenance", {})
    gpu, date = prov.get("gpu", "unknown GPU"), prov.get("date", "")[:10]
    if record.get("live"):
        return f"measured live on {gpu}"
    return f"reference data: {gpu}, {date} (recorded, not measured here)"


def figure(width: float, height: float, ncols: int = 1, **subplots):
    """A blank course figure of `ncols` axes, `width` x `height` inches in all (widened to
    MIN_WIDTH_IN), in the course's style. The style is set here rather than at import: relative
    font sizes resolve when a text is made, and a notebook's inline backend may reset the
    parameters after this module was imported."""
    matplotlib.rcParams.update(STYLE)
    return plt.subplots(1, ncols, figsize=(max(width, MIN_WIDTH_IN), height), squeeze=False,
                        layout="constrained", **subplots)


def font_points(size: str) -> float:
    """A relative font size ("x-small") in points, in the course's style: for what takes a number
    only (a table's cells)."""
    return STYLE["font.size"] * matplotlib.font_manager.font_scalings[size]


def new_figure(title: str, record: dict | None, ncols: int = 1, width: float | None = None,
               height: float = PANEL_HEIGHT_IN, source: str | None = None, **subplots):
    """A figure with `ncols` axes of `width` inches each (by default an equal share of
    MIN_WIDTH_IN, at least PANEL_WIDTH_IN) whose title carries the data's source: the record's,
    or `source` for a figure drawn from something other than a measurement (LEDGER_SOURCE).
    `subplots` goes to matplotlib's (`width_ratios=`)."""
    width = width or max(MIN_WIDTH_IN / ncols, PANEL_WIDTH_IN)
    fig, axes = figure(width * ncols, height, ncols, **subplots)
    fig.suptitle(f"{title}\n{source or source_label(record)}")
    return fig, list(axes[0])


def save(fig, name: str, figures_dir: Path | None = None) -> Path:
    """Write `name`.png under figures/ (or figures_dir) and close the figure."""
    folder = Path(figures_dir or FIGURES)
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"{name}.png"
    fig.savefig(file, dpi=DPI)
    plt.close(fig)
    return file


# --- Labels that keep out of each other's way ---------------------------------------------------------

LABEL_DISTANCES_PT = (8, 16, 26, 38, 52)      # the rings of places a point's label may take
_DIRECTIONS = [(1, 0, "left", "center"), (1, 1, "left", "bottom"), (0, 1, "center", "bottom"),
               (-1, 1, "right", "bottom"), (-1, 0, "right", "center"), (-1, -1, "right", "top"),
               (0, -1, "center", "top"), (1, -1, "left", "top")]
LEADER_LINE = {"arrowstyle": "-", "color": "grey", "lw": 0.7, "shrinkA": 1, "shrinkB": 4}


def label_points(ax, xy: list[tuple[float, float]], labels: list[str], **text_options) -> list:
    """Annotate each data point `xy[i]` with `labels[i]`, in the first place on rings around it
    where the label's box overlaps no label placed before, no point's marker and no edge of the
    axes, and lies nearer its own point than any other (else it reads as another's); a label off
    the nearest ring gets a thin leader line to its point. Where nowhere is free it takes the place
    of least overlap (and `layout_problems` says so). Call it once the figure has all its axes:
    the layout is settled first, since it moves points on the screen."""
    fig = ax.figure
    fig.draw_without_rendering()
    renderer = fig.canvas.get_renderer()
    centres = ax.transData.transform(np.asarray(xy, dtype=float))
    half = matplotlib.rcParams["lines.markersize"] * fig.dpi / 72 / 2 + 1
    markers = [Bbox.from_extents(x - half, y - half, x + half, y + half) for x, y in centres]
    inside = ax.get_window_extent(renderer)
    placed, annotations = [], []
    for own, (point, label) in enumerate(zip(xy, labels)):
        best = None
        for distance, (dx, dy, ha, va) in ((d, way) for d in LABEL_DISTANCES_PT for way in _DIRECTIONS):
            reach = distance / np.hypot(dx, dy)
            note = ax.annotate(label, point, xytext=(dx * reach, dy * reach), textcoords="offset points",
                               ha=ha, va=va, arrowprops=LEADER_LINE if distance > LABEL_DISTANCES_PT[0] else None,
                               annotation_clip=False, **text_options)
            box = _grown(text_box(note, renderer), 2)
            area = box.width * box.height
            gaps = [_gap(box, centre) for centre in centres]
            misleading = area if min(gaps) < gaps[own] else 0.0     # nearer another point than its own
            cost = sum(_area(box, other) for other in placed + markers) + area - _area(box, inside) + misleading
            if best is not None and cost >= best[0]:
                note.remove()
                continue
            if best is not None:
                best[1].remove()
            best = (cost, note, box)
            if cost == 0:
                break
        _, note, box = best
        note.set_in_layout(False)              # a label must not move the axes it was placed in
        placed.append(box)
        annotations.append(note)
    return annotations


def _gap(box, centre) -> float:
    """How far a point is from a box, in pixels (0 inside it)."""
    return float(np.hypot(max(box.x0 - centre[0], 0, centre[0] - box.x1),
                          max(box.y0 - centre[1], 0, centre[1] - box.y1)))


def _grown(box, pixels: float):
    return Bbox.from_extents(box.x0 - pixels, box.y0 - pixels, box.x1 + pixels, box.y1 + pixels)


def _area(a, b) -> float:
    """The area two boxes share (0 when apart)."""
    return max(0.0, min(a.x1, b.x1) - max(a.x0, b.x0)) * max(0.0, min(a.y1, b.y1) - max(a.y0, b.y0))


# --- Can it be read? ------------------------------------------------------------------------------

def drawn_texts(fig) -> list:
    """Every Text artist the renderer is asked to draw when `fig` is drawn at its own size: tick
    labels in view, axis labels, titles, annotations, legend texts (none that is hidden, empty or
    out of view). The layout runs as for a file; nothing is painted (as matplotlib's own
    `draw_without_rendering` does), which would only cost time."""
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    renderer = canvas.get_renderer()
    drawn: dict[int, object] = {}
    being_drawn: list = []          # matplotlib hands each line of a multi-line text over without it
    text_draw = Text.draw

    def drawing(text, *args, **kwargs):
        being_drawn.append(text)
        try:
            return text_draw(text, *args, **kwargs)
        finally:
            being_drawn.pop()

    def recording(gc, x, y, s, prop, angle, ismath=False, mtext=None):
        text = mtext if mtext is not None else (being_drawn[-1] if being_drawn else None)
        if text is not None and s.strip():
            drawn.setdefault(id(text), text)

    painters = [name for name in dir(RendererBase) if name.startswith("draw_")]
    for name in painters:
        setattr(renderer, name, recording if name == "draw_text" else lambda *args, **kwargs: None)
    Text.draw = drawing
    try:
        fig.draw(renderer)
    finally:
        Text.draw = text_draw
        for name in painters:
            delattr(renderer, name)
    return list(drawn.values())


def text_box(text, renderer):
    """The box of a text's glyphs in display pixels, without an annotation's arrow (an
    annotation's place on the screen is worked out first: it is only done when drawn)."""
    if isinstance(text, Annotation):
        text.update_positions(renderer)
    return Text.get_window_extent(text, renderer)


def text_corners(text, renderer) -> np.ndarray | None:
    """The 4 corners (display pixels) of the box the text's glyphs fill: its rotated rectangle,
    which an axis-aligned extent would overstate for a slanted tick label; cut to its clip box for a
    clipped text, None when nothing of it is visible."""
    extent = text_box(text, renderer)
    if text.get_clip_on() and text.get_clip_box() is not None:
        visible = extent.intersection(extent, text.get_clip_box())
        if visible is None or visible.width <= 0 or visible.height <= 0:
            return None
        if visible.bounds != extent.bounds:
            return _polygon(visible)
    angle = np.deg2rad(text.get_rotation())
    if np.isclose(np.sin(2 * angle), 0):             # 0, 90, 180, 270 degrees: the extent is the box
        return _polygon(extent)
    rotation = text.get_rotation()
    try:
        text.set_rotation(0)
        upright = text_box(text, renderer)
    finally:
        text.set_rotation(rotation)
    half = np.array([[-1, -1], [-1, 1], [1, 1], [1, -1]]) * [upright.width / 2, upright.height / 2]
    turn = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    centre = np.array([(extent.x0 + extent.x1) / 2, (extent.y0 + extent.y1) / 2])
    return centre + half @ turn.T


def _polygon(box) -> np.ndarray:
    """A Bbox's corners in order around it (Bbox.corners() lists them column by column)."""
    return np.array([[box.x0, box.y0], [box.x1, box.y0], [box.x1, box.y1], [box.x0, box.y1]])


def _penetration(a: np.ndarray, b: np.ndarray) -> float:
    """How deep two convex quadrilaterals overlap, in pixels (<= 0: apart), by the separating-axis
    test: the smallest overlap of their projections on each edge's normal."""
    depth = np.inf
    for corners in (a, b):
        for edge in np.diff(np.vstack([corners, corners[:1]]), axis=0):
            norm = np.hypot(*edge)
            if norm == 0:
                continue
            axis = np.array([-edge[1], edge[0]]) / norm
            pa, pb = a @ axis, b @ axis
            depth = min(depth, min(pa.max(), pb.max()) - max(pa.min(), pb.min()))
    return depth


def _quoted(text) -> str:
    words = " / ".join(line.strip() for line in text.get_text().splitlines() if line.strip())
    return repr(words if len(words) <= 48 else words[:45] + "...")


def layout_problems(fig) -> list[str]:
    """What a reader could not read in `fig` as `save` would write it (drawing it runs its
    layout): one line per pair of overlapping text boxes, per text that leaves the canvas, and for
    a canvas under MIN_WIDTH_IN. An empty list: nothing found."""
    problems = []
    width_px, least_px = round(fig.get_size_inches()[0] * DPI), round(MIN_WIDTH_IN * DPI)
    if width_px < least_px:
        problems.append(f"the figure is {width_px} px wide at {DPI} dpi, under {least_px}")
    texts = drawn_texts(fig)
    renderer = fig.canvas.get_renderer()
    boxes = [(text, corners) for text in texts if (corners := text_corners(text, renderer)) is not None]
    canvas = fig.bbox
    for text, corners in boxes:
        outside = max(canvas.x0 - corners[:, 0].min(), corners[:, 0].max() - canvas.x1,
                      canvas.y0 - corners[:, 1].min(), corners[:, 1].max() - canvas.y1)
        if outside > TOLERANCE_PX:
            problems.append(f"{_quoted(text)} leaves the canvas by {outside:.0f} px")
    if not boxes:
        return problems
    # pairs whose upright extents overlap, found at once; only those take the exact test
    low = np.array([corners.min(axis=0) for _, corners in boxes])
    high = np.array([corners.max(axis=0) for _, corners in boxes])
    apart = np.minimum(high[:, None], high[None]) - np.maximum(low[:, None], low[None])
    for i, j in zip(*np.nonzero(np.triu((apart > TOLERANCE_PX).all(axis=2), k=1))):
        (first, a), (second, b) = boxes[i], boxes[j]
        depth = _penetration(a, b)
        if depth > TOLERANCE_PX:
            problems.append(f"{_quoted(first)} overlaps {_quoted(second)} by {depth:.0f} px")
    return problems


def colour_problems(fig) -> list[str]:
    """Two entries of one legend drawn alike (colour, line style, marker and hatch): a reader
    cannot tell which is which. One line per such pair (kernellab.course.pictures' test applies
    it; some course figures still repeat a colour, so `layout_problems` does not yet)."""
    problems = []
    for legend in [ax.get_legend() for ax in fig.axes] + list(fig.legends):
        if legend is None:
            continue
        seen: dict = {}
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            look = _look(handle)
            if look is None:
                continue
            if look in seen:
                problems.append(f"{_quoted(text)} and {seen[look]} share the colour {look[0]} in one legend")
            else:
                seen[look] = _quoted(text)
    return problems


def _look(handle) -> tuple | None:
    """How a legend handle looks: (colour, line style, marker, hatch); None for an invisible one."""
    if isinstance(handle, matplotlib.lines.Line2D):
        colour, style, marker, hatch = handle.get_color(), handle.get_linestyle(), handle.get_marker(), None
    elif isinstance(handle, matplotlib.patches.Patch):
        colour, style, marker, hatch = handle.get_facecolor(), None, None, handle.get_hatch()
        if colour[3] == 0:
            colour = handle.get_edgecolor()
    elif isinstance(handle, matplotlib.collections.Collection) and len(handle.get_facecolor()):
        colour, style, marker, hatch = handle.get_facecolor()[0], None, None, handle.get_hatch()
    else:
        return None
    return matplotlib.colors.to_hex(colour, keep_alpha=False), str(style), str(marker), hatch


# --- Shared charts for benchmark results (kernellab.course.bench's result dicts) -------------------------

def legend(ax, **options):
    """The axes' legend: where matplotlib finds room inside, or beside the axes, off the data, when
    it has more than LEGEND_INSIDE_MAX entries (a legend that long covers what it explains)."""
    if len(ax.get_legend_handles_labels()[1]) > LEGEND_INSIDE_MAX:
        options = {**options, "loc": "upper left", "bbox_to_anchor": (1.01, 1.0)}
    return ax.legend(**options)


def _variant_rows(result: dict):
    """(name, is_baseline, rows with a timing) per variant, in declaration order."""
    for name, info in result["variants"].items():
        rows = [r for r in result["rows"] if r["variant"] == name and r.get("median_ms")]
        if rows:
            yield name, info.get("baseline", False), rows


def _size_axis(ax, result: dict):
    sizes = [s for s in result["sizes"] if isinstance(s, (int, float))]
    if sizes and max(sizes) > 10 * min(sizes) > 0:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(result["axis"])
    ax.grid(True, which="both", alpha=0.3)


def time_vs_size(ax, result: dict):
    """Median time (p10-p90 band) against the sweep axis per variant, with the empty-launch floor."""
    timed = list(_variant_rows(result))
    if not timed:
        ax.text(0.5, 0.5, "no timings in this result", ha="center", transform=ax.transAxes)
        return
    for name, baseline, rows in timed:
        x = [r["size"] for r in rows]
        line, = ax.plot(x, [r["median_ms"] for r in rows], "--" if baseline else "-", marker="o",
                        markersize=5, label=name)
        low, high = zip(*(time_band(r) for r in rows))
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2)
    if result.get("launch_floor_ms"):
        ax.axhline(result["launch_floor_ms"], color="grey", linestyle=":",
                   label=f"an empty kernel, launched back to back ({result['launch_floor_ms'] * 1e3:.1f} us)")
    _size_axis(ax, result)
    ax.set_yscale("log")
    ax.set_ylabel(f"time per call (ms; band: {band_label(result)})")
    legend(ax)


def time_band(row: dict) -> tuple[float, float]:
    """The range a figure draws around a median: across repeats where there are repeats, else the
    p10-p90 of one run's samples."""
    if row.get("repeat_ms"):
        return min(row["repeat_ms"]), max(row["repeat_ms"])
    return row["p10_ms"], row["p90_ms"]


def band_label(result: dict) -> str:
    repeats = result.get("repeats")
    return f"range over {repeats} repeats" if repeats else "p10-p90 of one run"


REQUESTED_LABEL = "GB/s of requested bytes (ledger), not DRAM bytes"
COMPULSORY_LABEL = "GB/s of compulsory bytes: the ledger\nless re-reads a cache serves; not DRAM bytes"


def bandwidth_vs_size(ax, result: dict, dram_bytes: dict | None = None):
    """Achieved GB/s (requested bytes from the ledger / time) against the sweep axis, under the
    copy ceiling; error bars span the repeats. `dram_bytes` {(variant, size): bytes} from
    Nsight Compute (`kernellab.course.reference.variant_dram_bytes`) adds DRAM GB/s points where
    they were measured: hollow diamonds in their variant's colour, one legend entry for them all."""
    colours = {}
    for name, baseline, rows in _variant_rows(result):
        rows = [r for r in rows if "gbps" in r]
        gbps = [r["gbps"] for r in rows]
        bands = [time_band(r) for r in rows]
        # g * (1 - median / high), not g - g * median / high: a row whose median is its slowest
        # repeat (bench.merge_repeats) gets exactly 0, where the rounding of the other form can
        # leave -1e-13, which matplotlib refuses as an error bar
        spread = [[g * (1 - r["median_ms"] / high) for g, r, (_, high) in zip(gbps, rows, bands)],
                  [g * (r["median_ms"] / low - 1) for g, r, (low, _) in zip(gbps, rows, bands)]]
        bars = ax.errorbar([r["size"] for r in rows], gbps, yerr=spread, fmt="--" if baseline else "-",
                           marker="o", markersize=5, capsize=3, label=name)
        colours[name] = bars.lines[0].get_color()
    profiled = False
    for (variant, size), moved in (dram_bytes or {}).items():
        timed = [r for r in result["rows"] if r["variant"] == variant and r["size"] == size and "median_ms" in r]
        if timed:
            ax.plot([size], [moved / (timed[0]["median_ms"] * 1e6)], "D", mfc="none",
                    color=colours.get(variant, "black"))
            profiled = True
    if profiled:
        ax.plot([], [], "D", mfc="none", color="black", label="DRAM bytes (Nsight Compute) / time,\n"
                                                              "in its variant's colour")
    _copy_ceiling(ax, result)
    _size_axis(ax, result)
    compulsory = any("compulsory_bytes" in r for r in result["rows"])
    ax.set_ylabel("achieved bandwidth\n(" + (COMPULSORY_LABEL if compulsory else REQUESTED_LABEL) + ")",
                  fontsize="small")
    legend(ax)


def _copy_ceiling(ax, result: dict):
    if result.get("copy_gbps"):
        where = f"median of {result['repeats']} runs" if result.get("repeats") else "same run"
        ax.axhline(result["copy_gbps"], color="black", linestyle=":",
                   label=f"copy ceiling ({result['copy_gbps']:.0f} GB/s, {where})")


def bandwidth_bars(ax, result: dict, size):
    """Achieved GB/s of each variant at one size, against the copy ceiling, labelled with % of it."""
    rows = [r for r in result["rows"] if r["size"] == size and "gbps" in r]
    names = [r["variant"] for r in rows]
    bars = ax.bar(names, [r["gbps"] for r in rows],
                  color=["lightgrey" if result["variants"][n].get("baseline") else f"C{i}"
                         for i, n in enumerate(names)])
    for bar, r in zip(bars, rows):
        ax.annotate("instrument error" if "instrument_error" in r else f"{r['pct_of_copy']:.0f}%", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize="small")
    _copy_ceiling(ax, result)
    ax.set_ylabel(f"achieved bandwidth\n({REQUESTED_LABEL})", fontsize="small")
    ax.set_title(f"{result['axis']} = {size}")
    ax.tick_params(axis="x", labelrotation=20)
    legend(ax)


def stacked_bytes(ax, ledgers: dict, unit: float = 1e6, unit_name: str = "MB"):
    """One bar per ledger ({label: traffic.Ledger}), stacked by op: where the bytes go."""
    ops: list[str] = []
    for ledger in ledgers.values():
        ops += [op for op in ledger.by_op() if op not in ops]
    bottoms = [0.0] * len(ledgers)
    for i, op in enumerate(ops):
        heights = [ledger.by_op().get(op, 0) / unit for ledger in ledgers.values()]
        ax.bar(list(ledgers), heights, bottom=bottoms, label=op, color=f"C{i % 10}")
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    for x, total in enumerate(bottoms):
        ax.annotate(f"{total:,.4g} {unit_name}", (x, total), ha="center", va="bottom", fontsize="small")
    ax.set_ylabel(f"requested bytes ({unit_name}, reads + writes, ledger)")
    legend(ax, title="op")
