"""Pictures of what a kernel's threads touched: threads over elements, one warp's sectors, one
warp's shared-memory banks, a tiled matmul's walk, a reduction's tree.

Each `draw_*` takes the plain data `kernellab.course.pictures` works out from a traced launch (the
same dict the Picture keeps as `.data`), a title, and where the data came from.
"""

from __future__ import annotations

import numpy as np
from matplotlib import colors
from matplotlib.patches import Patch, Rectangle

from kernellab.show.pictures.canvas import (BLACK, BLOCK_COLOURS, BLUE, GREY, ORANGE, PROBLEM, PURPLE, SKY,
                                            canvas)

IDLE = -1
HATCHES = ("", "//", "..", "xx", "\\\\", "++")    # one per round of BLOCK_COLOURS
_BLOCK_MAP = colors.ListedColormap([GREY, *BLOCK_COLOURS])
_BLOCK_NORM = colors.BoundaryNorm(np.arange(-0.5, len(BLOCK_COLOURS) + 1.5), _BLOCK_MAP.N)
ROW_GAP = 2.0             # a reduction's steps apart, in rows: room for its arrows
LABEL_BOX = {"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none"}


def block_style(block: int) -> tuple[str, str]:
    """A block's colour and hatching: the palette's colours in turn, a new hatching each time
    round, so no two blocks of a panel look alike (up to len(BLOCK_COLOURS) * len(HATCHES))."""
    return BLOCK_COLOURS[block % len(BLOCK_COLOURS)], HATCHES[block // len(BLOCK_COLOURS) % len(HATCHES)]


def _block_cells(ax, blocks: np.ndarray, x0: float = 0.0, y0: float = 0.0, height: float | None = None):
    """Cells coloured and hatched by the block that owns them (`block_style`; IDLE: grey); one
    row of `height` for a 1-D array."""
    blocks = np.atleast_2d(np.asarray(blocks))
    shade = np.where(blocks == IDLE, 0, blocks % len(BLOCK_COLOURS) + 1)
    rows, cols = shade.shape
    ys = np.linspace(y0, y0 + (height or rows), rows + 1)
    ax.pcolormesh(np.arange(cols + 1) + x0, ys, shade, cmap=_BLOCK_MAP, norm=_BLOCK_NORM,
                  edgecolors="white", linewidth=0.3 if cols <= 128 else 0)
    for row in range(rows):
        for block, start, end in _runs(list(blocks[row])):
            hatch = block_style(block)[1] if block != IDLE else ""
            if hatch:
                ax.add_patch(Rectangle((x0 + start, ys[row]), end - start, ys[row + 1] - ys[row], facecolor="none",
                                       edgecolor="none", hatch=hatch, hatchcolor="white", linewidth=0))


def _runs(values) -> list[tuple[int, int, int]]:
    """(value, start, end) for each run of equal values."""
    runs, start = [], 0
    for i in range(1, len(values) + 1):
        if i == len(values) or values[i] != values[start]:
            runs.append((values[start], start, i))
            start = i
    return runs


def draw_threads(data: dict, title: str, source: str):
    """Which thread wrote which element: 1-D as two strips, 2-D as the launch beside the array."""
    if data["dims"] == 1:
        return _threads_1d(data, title, source)
    return _threads_2d(data, title, source)


def _threads_1d(data: dict, title: str, source: str):
    fig, (ax,) = canvas(title, source, height=5.5)
    threads, elements = np.asarray(data["thread_block"]), np.asarray(data["element_block"])
    _block_cells(ax, threads, y0=1.6, height=1.0)
    _block_cells(ax, elements, y0=0.0, height=1.0)
    total = max(len(threads), len(elements))
    for thread, element in data["links"]:
        ax.plot([thread + 0.5, element + 0.5], [1.6, 1.0], color=BLACK, linewidth=1.2)
    width_px = fig.get_size_inches()[0] * fig.dpi * 0.85
    block = data["block"][0]
    if block / total * width_px >= 110:            # each block named over all its threads, idle too
        for value in range(data["grid"][0]):
            idle = sum(1 for b, _ in data["idle"] if b[0] == value)
            ax.text((value + 0.5) * block, 2.1, f"block {value}" + f"\n{idle} idle" * bool(idle), ha="center",
                    va="center", fontsize=15, bbox=LABEL_BOX)
    ax.set_xlim(0, total)
    ax.set_ylim(-0.1, 2.7)
    ax.set_yticks([0.5, 2.1], [f"{data['array']}[i]", "threads"])
    ax.set_xlabel("i = blockIdx.x * blockDim.x + threadIdx.x")
    ax.set_title(f"{data['threads']} threads in {data['grid'][0]} blocks of {data['block'][0]} for "
                 f"{data['elements']} elements: {len(data['idle'])} idle")
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    return fig


def _threads_2d(data: dict, title: str, source: str):
    fig, (launch, array) = canvas(title, source, ncols=2, width=16, height=6.5)
    thread_map, element_map = np.asarray(data["thread_map"]), np.asarray(data["element_map"])
    _block_cells(launch, thread_map)
    _block_cells(array, element_map)
    block_x, block_y = data["block"][:2]
    for by in range(data["grid"][1]):
        for bx in range(data["grid"][0]):
            launch.text((bx + 0.5) * block_x, (by + 0.5) * block_y, f"({bx}, {by})", ha="center",
                        va="center", fontsize=15, bbox=LABEL_BOX)
    for ax in (launch, array):
        ax.invert_yaxis()
    launch.set_xticks(np.arange(0, thread_map.shape[1] + 1, block_x))
    launch.set_yticks(np.arange(0, thread_map.shape[0] + 1, block_y))
    launch.set_xlabel("x = blockIdx.x * blockDim.x + threadIdx.x")
    launch.set_ylabel("y = blockIdx.y * blockDim.y + threadIdx.y")
    launch.set_title(f"the launch: blocks (blockIdx.x, blockIdx.y), grey idle ({len(data['idle'])})")
    array.set_xticks(np.arange(0, element_map.shape[1] + 1, block_x))
    array.set_yticks(np.arange(0, element_map.shape[0] + 1, block_y))
    array.set_xlabel("column")
    array.set_ylabel("row")
    array.set_title(f"{data['array']}[row, column] by the block that wrote it")
    return fig


def draw_warp_access(data: dict, title: str, source: str):
    """A warp's 32 lanes above the 32-byte sectors their bytes fall in: one box per sector
    touched, a gap where memory was skipped, the bytes no lane asked for marked."""
    fig, (ax,) = canvas(title, source, height=6.0)
    width, sectors = data["width"], data["sectors"]
    place, x = {}, 0.0
    for i, sector in enumerate(sectors):
        if i and sector != sectors[i - 1] + 1:
            x += 0.35                                 # skipped memory
        place[sector] = x
        x += 1.0
    span = x
    asked = {}                                        # sector -> set of byte ranges asked for
    for lane, offset in data["lanes"].items():
        for byte in range(offset, offset + width):
            asked.setdefault(byte // 32, set()).add(byte % 32)
    words = 32 // min(width, 32) or 1
    for sector, left in place.items():
        used = [any(b in asked.get(sector, ()) for b in range(w * width, (w + 1) * width)) for w in range(words)]
        for lit, start, end in _runs(used):
            ax.add_patch(Rectangle((left + start / words, 0), (end - start) / words, 1,
                                   facecolor=BLUE if lit else PROBLEM, linewidth=0))
        ax.add_patch(Rectangle((left, 0), 1, 1, fill=False, edgecolor=BLACK, linewidth=1.5))
    lanes = sorted(data["lanes"])
    lane_x = {lane: (lane + 0.5) * span / 32 for lane in range(32)}
    for lane in lanes:
        offset = data["lanes"][lane]
        target = place[offset // 32] + (offset % 32 + width / 2) / 32
        ax.plot([lane_x[lane], target], [2.6, 1.0], color=BLACK, linewidth=1.0)
    ax.scatter([lane_x[lane] for lane in lanes], [2.6] * len(lanes), s=60, color=BLACK, zorder=3)
    for lane in (0, 8, 16, 24, 31):
        ax.text(lane_x[lane], 2.85, str(lane), ha="center", va="bottom", fontsize=15)
    ax.set_xlim(-0.3, span + 0.3)
    ax.set_ylim(-0.2, 3.5)
    step = max(1, -(-len(sectors) // 6))
    shown = sectors[::step]
    ax.set_xticks([place[s] for s in shown], [f"byte {32 * s}" for s in shown])
    ax.set_yticks([0.5, 2.6], ["sectors", "lanes"])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"{data['sectors_per_request']} sectors of 32 B for {len(lanes)} lanes of {width} B "
                 f"(as few as {data['fewest']} would do)")
    ax.legend(handles=[Patch(facecolor=BLUE, label="bytes a lane asked for"),
                       Patch(facecolor=PROBLEM, label="bytes fetched for nothing")],
              loc="upper right", bbox_to_anchor=(1.0, 1.0), ncols=2, frameon=False)
    return fig


def draw_shared_banks(data: dict, title: str, source: str):
    """The 32 banks across, each lane in its bank's column, stacked by the distinct 4-byte words
    the bank must serve: a column taller than one is a conflict."""
    fig, (ax,) = canvas(title, source, height=6.5)
    depth = max(1, data["ways"])
    for bank in range(32):
        words = data["bank_words"].get(bank, [])
        conflicted = len(words) > 1
        for level, word in enumerate(words):
            lanes = sorted(lane for lane, w in data["lane_words"].items() if w == word)
            ax.add_patch(Rectangle((bank + 0.05, level + 0.05), 0.9, 0.9,
                                   facecolor=PROBLEM if conflicted else BLUE, edgecolor="white"))
            if depth <= 8:                      # which lanes ask for the word: a lane, or how many
                ax.text(bank + 0.5, level + 0.5, str(lanes[0]) if len(lanes) == 1 else f"{len(lanes)} lanes",
                        ha="center", va="center", fontsize=14, color="white", rotation=90 if len(lanes) > 1 else 0)
    ax.set_xlim(0, 32)
    ax.set_ylim(0, depth + 0.2)
    ax.set_xticks(np.arange(0, 32, 4) + 0.5, [str(b) for b in range(0, 32, 4)])
    ax.set_xlabel("bank (4-byte word address mod 32)")
    ax.set_ylabel("words one bank serves")
    ax.yaxis.get_major_locator().set_params(integer=True)
    free = data["wavefronts"] <= data["ideal"]
    if not data["wavefronts"]:
        ax.set_title("no shared-memory request: the banks stay empty")
    else:
        ax.set_title(f"{data['wavefronts']} wavefront{'s' * (data['wavefronts'] > 1)} where {data['ideal']} would do: "
                     + ("no conflict" if free else f"{data['ways']}-way conflict"))
    ax.legend(handles=[Patch(facecolor=BLUE, label="a bank serving one word"),
                       Patch(facecolor=PROBLEM, label="a bank serving several: conflict")],
              loc="upper right", frameon=False)
    return fig


def _box(ax, box, colour, label=None, fill=True, width=2.5):
    (r0, r1), (c0, c1) = box
    ax.add_patch(Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor=colour if fill else "none",
                           edgecolor=colour if not fill else BLACK, linewidth=width, alpha=0.85 if fill else 1.0,
                           label=label))


def draw_tiles(data: dict, title: str, source: str):
    """A, B and C with the block's tiles outlined, one colour per step, and the shared tiles
    every step lands in."""
    fig, axes = canvas(title, source, ncols=4, width=18, height=6.5)
    steps = data["steps"][:len(BLOCK_COLOURS)]
    a_ax, b_ax, c_ax, shared_ax = axes
    tile_rows, tile_cols = (max(step["a_shared"][i][1] for step in steps) for i in (0, 1))
    shapes = {**data["shapes"], "shared": (2 * tile_rows + 1, tile_cols)}
    tick = max(1, tile_cols)
    for ax, key, heading in ((a_ax, "a", "A: the tile of each step"), (b_ax, "b", "B: the tile of each step"),
                             (c_ax, "c", "C: the block's tile"), (shared_ax, "shared", "shared: every step")):
        rows, cols = shapes[key]
        if key != "shared":
            ax.add_patch(Rectangle((0, 0), cols, rows, facecolor="none", edgecolor=BLACK, linewidth=1.5))
        ax.set_xlim(-0.5, cols + 0.5)
        ax.set_ylim(rows + 0.5, -0.5)
        ax.set_xticks(np.arange(0, cols + 1, tick))
        ax.set_yticks(np.arange(0, rows + 1, tick) if key != "shared" else [])
        ax.set_aspect("equal")
        ax.set_title(heading)
    for k, step in enumerate(steps):
        colour = BLOCK_COLOURS[k]
        (_, _), (k0, k1) = step["a"]
        _box(a_ax, step["a"], colour, label=f"step {k}: k {k0}-{k1 - 1}")
        _box(b_ax, step["b"], colour)
    _box(c_ax, data["c"], PURPLE)
    last = steps[-1]
    _box(shared_ax, last["a_shared"], SKY)
    b_rows, b_cols = last["b_shared"]
    _box(shared_ax, ((b_rows[0] + tile_rows + 1, b_rows[1] + tile_rows + 1), b_cols), SKY)
    names = data.get("tile_arrays", ("A's tile", "B's tile"))
    shared_ax.text(tile_cols / 2, tile_rows / 2, names[0], ha="center", va="center", fontsize=15)
    shared_ax.text(tile_cols / 2, tile_rows * 1.5 + 1, names[1], ha="center", va="center", fontsize=15)
    a_ax.legend(loc="upper left", bbox_to_anchor=(0.0, -0.12), ncols=1, frameon=False)
    return fig


def draw_reduction(data: dict, title: str, source: str):
    """A reduction's tree: on top, the input values the threads folded into their slots (a line to
    each value's slot); then one row per step, each slot of the shared array a column, an arrow
    from the slot read to the slot it is added into. A value or slot that never reaches slot 0 is
    vermillion."""
    fig, (ax,) = canvas(title, source, height=8.0 if data["inputs"] else 7.0)
    slots, steps = data["slots"], data["steps"]
    depth = len(steps)
    lost = set(data["leaves"]) - set(data["reach_slot_0"])       # slots whose values never reach slot 0
    for level in range(depth + 1):
        active = set(data["leaves"]) if level == 0 else {dst for _, dst in steps[level - 1]}
        for slot in range(slots):
            colour = (PROBLEM if level == 0 and slot in lost else BLUE) if slot in active else GREY
            ax.add_patch(Rectangle((slot + 0.1, -ROW_GAP * level - 0.4), 0.8, 0.8, facecolor=colour,
                                   edgecolor="white"))
    for level, edges in enumerate(steps, start=1):
        for source_slot, dst in edges:
            ax.annotate("", xy=(dst + 0.5, -ROW_GAP * level + 0.4),
                        xytext=(source_slot + 0.5, -ROW_GAP * (level - 1) - 0.4),
                        arrowprops={"arrowstyle": "->", "color": ORANGE, "lw": 1.6})
    top, labels = 0.6, ["slots"] + [f"step {k + 1}" for k in range(depth)]
    ticks = [-ROW_GAP * level for level in range(depth + 1)]
    if data["inputs"]:
        inputs, missing = data["inputs"], set(map(tuple, data["inputs_missing"]))
        cell = slots / len(inputs)
        for i, index in enumerate(inputs):
            ax.add_patch(Rectangle((i * cell + 0.05 * cell, ROW_GAP - 0.4), 0.9 * cell, 0.8,
                                   facecolor=PROBLEM if tuple(index) in missing else BLUE, edgecolor="white"))
        for i, slot in data["input_slot"].items():
            ax.plot([(i + 0.5) * cell, slot + 0.5], [ROW_GAP - 0.4, 0.4], color=BLACK, linewidth=0.8)
        top, labels, ticks = ROW_GAP + 0.6, [data["inputs_label"], *labels], [ROW_GAP, *ticks]
    ax.set_xlim(0, slots)
    ax.set_ylim(-ROW_GAP * depth - 0.6, top)
    ax.set_yticks(ticks, labels)
    step = max(1, slots // 8)
    ax.set_xticks(np.arange(0, slots, step) + 0.5, [str(s) for s in range(0, slots, step)])
    ax.set_xlabel(f"slot of shared array {data['array']!r} (thread t writes slot t)")
    values, reached = len(data["leaves"]), len(data["reach_slot_0"])
    if reached < values:
        ax.set_title(f"{values} slots, {depth} steps: slot 0 ends with {reached} of them")
    elif data["inputs_missing"]:
        ax.set_title(f"{len(data['inputs'])} values into {values} slots, {depth} steps: "
                     f"{len(data['inputs_missing'])} never reach slot 0")
    else:
        into = f"{len(data['inputs'])} values into {values} slots" if data["inputs"] else f"{values} values"
        ax.set_title(f"{into}, to 1 in {depth} steps, a barrier after each")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig
