"""Pictures of the machine a kernel runs on: work on streams, queues and engines over time; one
SM's resources filled by a launch; the bytes that cross between global memory and the SMs.

Each `draw_*` takes the plain data `kernellab.course.pictures` works out (the Picture's `.data`).
"""

from __future__ import annotations

import matplotlib
from matplotlib.patches import FancyBboxPatch, Patch, Rectangle

from kernellab.show import plots
from kernellab.show.pictures.canvas import BLACK, BLUE, GREEN, GREY, ORANGE, PROBLEM, PURPLE

KIND_COLOURS = {"h2d": ORANGE, "kernel": BLUE, "d2h": GREEN, "d2d": PURPLE}
KIND_NAMES = {"h2d": "copy to the GPU", "kernel": "kernel", "d2h": "copy to the host", "d2d": "copy on the GPU"}
BAR = 0.7                  # a row's bar, of its 1.0


def stacked(title: str, source: str, panels: int, height_each: float, width: float = 16.0, share: bool = True):
    """A figure of `panels` axes one above the other, in the course's style."""
    matplotlib.rcParams.update(plots.STYLE)
    fig, axes = plots.plt.subplots(panels, 1, figsize=(max(width, plots.MIN_WIDTH_IN), height_each * panels),
                                   squeeze=False, sharex=share, layout="constrained")
    fig.suptitle(f"{title}\n{source}", fontsize=18)
    return fig, [row[0] for row in axes]


def draw_timeline(data: dict, title: str, source: str):
    """Per panel, top to bottom: the host's submissions, each stream (and the hardware queue it
    feeds), then the engines that ran the work: copy engines and the SMs."""
    panels = data["panels"]
    rows_most = max(len(p["lanes"]) for p in panels)
    fig, axes = stacked(title, source, len(panels), max(3.2, 0.55 * rows_most + 1.6), share=data["share_time"])
    for ax, panel in zip(axes, panels):
        lanes = panel["lanes"]
        at = {name: len(lanes) - 1 - i for i, name in enumerate(lanes)}
        for span in panel["spans"]:
            for lane, level, levels in span["places"]:
                height = BAR / levels
                ax.add_patch(Rectangle((span["start"], at[lane] - BAR / 2 + level * height),
                                       max(span["end"] - span["start"], panel["least_width"]), height,
                                       facecolor=KIND_COLOURS.get(span["kind"], GREY), edgecolor="white",
                                       linewidth=0.5))
        submits = [span["submit"] for span in panel["spans"] if span["submit"] is not None]
        if submits:
            ax.vlines(submits, at["host"] - BAR / 2, at["host"] + BAR / 2, color=BLACK, linewidth=2)
        for boundary in panel["dividers"]:
            ax.axhline(len(lanes) - 1 - boundary + 0.5, color=GREY, linewidth=1)
        ax.set_yticks(list(at.values()), list(at))
        ax.set_ylim(-0.6, len(lanes) - 0.4)
        ax.set_title(panel["title"])
        kinds = list(dict.fromkeys(span["kind"] for span in panel["spans"]))
        ax.legend(handles=[Patch(facecolor=KIND_COLOURS.get(k, GREY), label=KIND_NAMES.get(k, k)) for k in kinds]
                  + [Patch(facecolor=BLACK, label="host submits")] * bool(submits),
                  loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
        ax.set_xlim(0, (max(p["end"] for p in panels) if data["share_time"] else panel["end"]) * 1.02)
    axes[-1].set_xlabel(data["unit"])
    if data["unit"] == "steps":                    # a trace's steps are whole
        axes[-1].xaxis.get_major_locator().set_params(integer=True)
    return fig


def draw_sm_fill(data: dict, title: str, source: str):
    """One bar per resource of one SM: the launch's blocks filling it, what is left, the limiter."""
    fig, ((ax,),) = plots.figure(plots.MIN_WIDTH_IN, 6.0)
    fig.suptitle(f"{title}\n{source}", fontsize=18)
    resources = data["resources"]
    for row, resource in enumerate(reversed(resources)):
        total, per_block, blocks = resource["total"], resource["per_block"], data["active_blocks"]
        share = per_block / total if total else 0.0
        for block in range(blocks):
            inside = min(share, max(0.0, 1.0 - block * share))
            if inside > 0:
                ax.add_patch(Rectangle((block * share, row - BAR / 2), inside, BAR, facecolor=BLUE,
                                       edgecolor="white", linewidth=1.5 if blocks <= 64 else 0))
        used = min(1.0, blocks * share)
        if used < 1.0:
            ax.add_patch(Rectangle((used, row - BAR / 2), 1.0 - used, BAR, facecolor=GREY, edgecolor="white"))
        if blocks * share > 1.0 + 1e-9:
            ax.add_patch(Rectangle((1.0, row - BAR / 2), blocks * share - 1.0, BAR, facecolor=PROBLEM))
        if resource["limiter"]:
            ax.add_patch(Rectangle((0, row - BAR / 2 - 0.06), 1.0, BAR + 0.12, fill=False, edgecolor=PROBLEM,
                                   linewidth=4))
        ax.text(1.02, row, resource["label"], va="center", ha="left", fontsize=15,
                fontweight="bold" if resource["limiter"] else "normal")
    ax.set_yticks(range(len(resources)), [r["name"] for r in reversed(resources)])
    ax.set_xlim(0, max(1.0, max(data["active_blocks"] * r["per_block"] / r["total"] for r in resources if r["total"])) + 0.45)
    ax.set_ylim(-0.6, len(resources) - 0.4)
    ax.set_xticks([0, 0.25, 0.5, 0.75, 1.0], ["0", "25%", "50%", "75%", "100%"])
    ax.set_xlabel("share of one SM")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title(data["headline"])
    handles = [Patch(facecolor=BLUE, label="a resident block's share"), Patch(facecolor=GREY, label="left over"),
               Patch(facecolor="white", edgecolor=PROBLEM, linewidth=3, label="the limiter")]
    if any(data["active_blocks"] * r["per_block"] > r["total"] for r in resources):
        handles.append(Patch(facecolor=PROBLEM, label="more than the SM has"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncols=len(handles), frameon=False)
    return fig


def draw_bytes_moved(data: dict, title: str, source: str):
    """Per traced run, global memory below and the SMs above, one arrow per array and direction: up for
    bytes read, down for bytes written, as thick as the bytes; each array labelled with how many
    times per element it crossed, and its budget where that differs (in vermillion)."""
    fig, axes = stacked(title, source, len(data["panels"]), 4.6, share=False)
    most = max((entry["bytes"] for panel in data["panels"] for entry in panel["arrows"]), default=0) or 1
    columns = max(len({e["array"] for e in panel["arrows"]}) for panel in data["panels"]) or 1
    for ax, panel in zip(axes, data["panels"]):
        for y, label in ((0.0, "global memory: the bytes requested"), (3.2, "the SMs: their registers")):
            ax.add_patch(FancyBboxPatch((0.05, y), columns - 0.1, 0.8, boxstyle="round,pad=0.02",
                                        facecolor="white", edgecolor=BLACK, linewidth=2))
            ax.text(columns / 2, y + 0.4, label, ha="center", va="center", fontsize=16)
        names = list(dict.fromkeys(e["array"] for e in panel["arrows"]))
        for entry in panel["arrows"]:
            if not entry["bytes"]:
                continue
            x = names.index(entry["array"]) + 0.5 + (-0.15 if entry["direction"] == "read" else 0.15)
            start, end = (0.85, 3.15) if entry["direction"] == "read" else (3.15, 0.85)
            ax.annotate("", xy=(x, end), xytext=(x, start),
                        arrowprops={"arrowstyle": "-|>", "color": ORANGE if entry["direction"] == "read" else BLUE,
                                    "lw": 2 + 8 * entry["bytes"] / most, "mutation_scale": 40})
        for i, name in enumerate(names):
            mine = [e for e in panel["arrows"] if e["array"] == name]
            lines = [f"{name}{'*' if mine[0]['temporary'] else ''}"]
            off = False
            for e in mine:
                lines.append(f"{e['direction']} {e['per_element']:g}x")
                if e["budget"] is not None and e["budget"] != e["per_element"]:
                    lines.append(f"(budget {e['budget']:g}x)")
                    off = True
            ax.text(i + 0.5, 2.0, "\n".join(lines), ha="center", va="center", fontsize=14,
                    color=PROBLEM if off else BLACK,
                    bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none"})
        ax.set_xlim(0, columns)
        ax.set_ylim(-0.1, 4.1)
        ax.axis("off")
        per_element = panel["total"] / panel["n"]
        budget = panel["budget_total"]
        ax.set_title(f"{panel['name']}: {per_element:.3g} B per element"
                     + (f" (budget {budget / panel['n']:.3g})" if budget is not None else ""))
    axes[-1].legend(handles=[Patch(facecolor=ORANGE, label="read: memory to the SMs"),
                             Patch(facecolor=BLUE, label="written: the SMs to memory")],
                    loc="upper left", bbox_to_anchor=(0.0, 0.0), ncols=2, frameon=False)
    notes = ["times per element of out"]
    if any(e["temporary"] for panel in data["panels"] for e in panel["arrows"]):
        notes.append("* an intermediate: written, then read back")
    axes[-1].text(columns, -0.05, "; ".join(notes), ha="right", va="top", fontsize=14)
    return fig
