"""The pictures of what a traced kernel's threads touched: which block, warp and request to show,
and its numbers by the meter's own rules (`kernellab.gpu.traffic`); the drawing is
`kernellab.show.pictures.kernel`'s."""

from __future__ import annotations

import ast
import linecache
import os

import numpy as np

from kernellab.course import target
from kernellab.course.pictures.tracing import KernelRun, shared_name
from kernellab.gpu import traffic
from kernellab.show.pictures import canvas, kernel, machine

Picture = canvas.Picture


def _title(run: KernelRun, launch: int) -> str:
    return f"Lab {run.lab}: {run.function} ({run.launches[launch].name})" if run.lab else run.launches[launch].name


def _linear_block(block: tuple, grid: tuple) -> int:
    return block[0] + grid[0] * (block[1] + grid[1] * block[2])


# --- threads over elements ----------------------------------------------------------------------------

def threads(run: KernelRun, array: str = "out", launch: int | None = None) -> Picture:
    """Which thread (block, thread) wrote which element of `array`, and the launch's idle threads
    (those that stored nothing). 1-D and 2-D launches and arrays. The caption says what this
    trace shows: one element per thread or several, at i or elsewhere, and where the idle are."""
    launch = run.first_launch(array, "store", "global") if launch is None else launch
    span, stores = run.launches[launch], run.of(array, "store", "global", launch)
    grid, block = span.grid, span.block
    writers = {a.index: (a.block, a.thread) for a in stores}
    written: dict = {}                                    # (block, thread) -> its elements, in order
    for a in stores:
        if a.index not in written.setdefault((a.block, a.thread), []):
            written[(a.block, a.thread)].append(a.index)
    everyone = {(b, t) for b in np.ndindex(*grid[::-1]) for t in np.ndindex(*block[::-1])}
    everyone = {(b[::-1], t[::-1]) for b, t in everyone}
    idle = sorted(everyone - set(written))
    shape = run.shapes.get(array) or tuple(np.max(list(writers), axis=0) + 1)
    counts = [len(elements) for elements in written.values()]
    data = {"array": array, "grid": grid, "block": block, "threads": len(everyone),
            "elements": int(np.prod(shape)), "idle": idle, "writer": writers,
            "elements_per_thread": (min(counts), max(counts)), "unwritten": int(np.prod(shape)) - len(writers)}
    if len(shape) == 1 and grid[1] == grid[2] == block[1] == block[2] == 1:
        thread_block = [gid // block[0] for gid in range(grid[0] * block[0])]
        for (b, t) in idle:
            thread_block[b[0] * block[0] + t[0]] = kernel.IDLE
        element_block = [kernel.IDLE] * shape[0]
        links = []
        for index, (b, t) in writers.items():
            element_block[index[0]] = b[0]
            if t[0] % traffic.WARP == 0:
                links.append((b[0] * block[0] + t[0], index[0]))
        by_thread = {b[0] * block[0] + t[0]: [index[0] for index in elements]
                     for (b, t), elements in written.items()}
        idle_ids = sorted(b[0] * block[0] + t[0] for b, t in idle)
        data.update(dims=1, thread_block=thread_block, element_block=element_block, links=sorted(links),
                    writes=_writes_1d(by_thread, len(thread_block)), neighbour_stride=_neighbour_stride(written))
        caption = (f"{_writes_caption(data['writes'], array, data['elements_per_thread'], len(thread_block), data['neighbour_stride'])}; "
                   f"{_idle_caption(idle_ids, len(thread_block), block[0], data['writes'], shape[0])}"
                   f"{_unwritten_caption(data['unwritten'])}.")
    else:
        height, width = grid[1] * block[1], grid[0] * block[0]
        thread_map = np.full((height, width), kernel.IDLE)
        for b in np.ndindex(grid[1], grid[0]):
            thread_map[b[0] * block[1]:(b[0] + 1) * block[1], b[1] * block[0]:(b[1] + 1) * block[0]] = \
                b[1] + grid[0] * b[0]
        for (b, t) in idle:
            thread_map[b[1] * block[1] + t[1], b[0] * block[0] + t[0]] = kernel.IDLE
        rows, cols = (shape[0], shape[1]) if len(shape) == 2 else (1, shape[0])
        element_map = np.full((rows, cols), kernel.IDLE)
        for index, (b, _) in writers.items():
            element_map[index if len(index) == 2 else (0, index[0])] = _linear_block(b, grid)
        along = _x_runs_along(stores)
        data.update(dims=2, thread_map=thread_map.tolist(), element_map=element_map.tolist(),
                    x_runs_along=along)
        fewest, most = data["elements_per_thread"]
        several = "" if most == 1 else f"each thread writes {_count_range(fewest, most)} elements; "
        idle_words = f"{len(idle)} grey threads store nothing" if idle else "no thread is idle"
        caption = (f"x runs along {along}: neighbouring threadIdx.x write neighbouring {along[:-1]}s; "
                   f"{several}{idle_words}{_unwritten_caption(data['unwritten'])}.")
    return canvas.picture(kernel.draw_threads, data, _title(run, launch), caption, run.source)


def _writes_1d(by_thread: dict, threads: int) -> str:
    """How the threads of a 1-D launch of `threads` threads chose their elements: "i" (thread i
    writes element i), "grid-stride" (i, i + threads, ...), or "elsewhere" (anything else)."""
    if all(elements == list(range(gid, gid + threads * len(elements), threads))
           for gid, elements in by_thread.items()):
        return "i" if all(len(elements) == 1 for elements in by_thread.values()) else "grid-stride"
    return "elsewhere"


def _neighbour_stride(written: dict) -> int | None:
    """How far apart the elements of threads t and t + 1 of one block are, where every such pair
    of a 1-D launch, each writing one element, is equally far apart (1: neighbours); else None."""
    gaps = {written[(b, (t[0] + 1, 0, 0))][0][0] - elements[0][0] for (b, t), elements in written.items()
            if len(elements) == 1 and len(written.get((b, (t[0] + 1, 0, 0)), ())) == 1}
    return gaps.pop() if len(gaps) == 1 else None


def _count_range(fewest: int, most: int) -> str:
    return str(most) if fewest == most else f"{fewest} to {most}"


def _writes_caption(writes: str, array: str, per_thread: tuple, threads: int, stride: int | None) -> str:
    fewest, most = per_thread
    if writes == "i":
        return f"Each thread i writes {array}[i]"
    if writes == "grid-stride":
        return (f"Each thread i writes {array}[i], [i + {threads}], [i + {2 * threads}] ...: "
                f"{_count_range(fewest, most)} elements each")
    if most == 1 and stride not in (None, 1):
        return f"Neighbouring threads write elements {stride} apart, not {array}[i]"
    if most == 1:
        return f"Each thread writes one element, not always {array}[i]"
    return f"Each thread writes {_count_range(fewest, most)} elements, not {array}[i] alone"


def _idle_caption(idle_ids: list, threads: int, block: int, writes: str, elements: int) -> str:
    """Where a 1-D launch's idle threads are: none, the last ones, or the tails of some blocks."""
    if not idle_ids:
        return "no thread is idle"
    runs = [[idle_ids[0], idle_ids[0] + 1]]                 # [first, past the last] of each run
    for gid in idle_ids[1:]:
        if gid == runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([gid, gid + 1])
    if len(runs) == 1 and runs[0][1] == threads:
        past = " find i past the end and" if writes == "i" and runs[0][0] == elements else ""
        return f"the last {len(idle_ids)} threads{past} stay idle"
    if all(end % block == 0 for _, end in runs):
        tails = [str(end // block - 1) for _, end in runs]
        if len(tails) == 1:
            return f"{len(idle_ids)} idle threads: the tail of block {tails[0]}"
        listed = ", ".join(tails[:-1]) + " and " + tails[-1] if len(tails) <= 4 else f"{len(tails)} blocks"
        return f"{len(idle_ids)} idle threads: the tails of blocks {listed}"
    return f"{len(idle_ids)} threads stay idle, in {len(runs)} runs"


def _unwritten_caption(unwritten: int) -> str:
    return f"; {unwritten} elements are never written" if unwritten else ""




def _x_runs_along(stores: list) -> str:
    """"columns" when threads next to each other in x store next to each other along a row,
    "rows" when down a column."""
    at = {(a.block, a.thread): a.index for a in stores}
    for (b, t), index in at.items():
        right = at.get((b, (t[0] + 1, *t[1:])))
        if right is not None and len(index) == 2:
            return "columns" if right[0] == index[0] else "rows"
    return "columns"


# --- one warp's request: sectors, banks ------------------------------------------------------------------

def _first_block(accesses: list) -> tuple:
    """The lowest block that made any of the accesses: (0, 0, 0) where it did."""
    return min({a.block for a in accesses}, key=lambda block: block[::-1])


def _request(run: KernelRun, accesses: list, warp: int, block, request: int, site=None):
    """{lane: offset} of one warp request: the given block (default: the first that made one),
    warp, site (default: the warp's first) and occurrence; with its width and site."""
    if not accesses:
        raise ValueError("no such accesses were traced")
    block = _first_block(accesses) if block is None else tuple(block) + (0,) * (3 - len(tuple(block)))
    mine = [a for a in accesses if a.block == block and a.warp == warp]
    if not mine:
        warps = sorted({a.warp for a in accesses if a.block == block})
        raise ValueError(f"warp {warp} of block {block} made none of these accesses (warps that did: {warps})")
    site = mine[0].site if site is None else site
    lanes = {a.lane: a.offset for a in mine if a.site == site and a.occurrence == request}
    if not lanes:
        raise ValueError(f"request {request} of {site} was never made by warp {warp}")
    return lanes, mine[0].width, site, block


def _requests_of(accesses: list, site) -> list[dict]:
    """Every warp request of one site: {lane: offset} per (block, warp, occurrence)."""
    grouped: dict = {}
    for a in accesses:
        if a.site == site:
            grouped.setdefault((a.block, a.warp, a.occurrence), {})[a.lane] = a.offset
    return list(grouped.values())


def warp_access(run: KernelRun, array: str, warp: int = 0, kind: str = "load", block=None,
                launch: int | None = None, request: int = 0) -> Picture:
    """One warp's `kind` ("load" or "store") of `array`: its lanes' addresses, the 32-byte sectors
    they touch, sectors per request against the fewest those bytes need (4 for a full warp of
    4-byte lanes, 8 for 8-byte, 16 for 16-byte)."""
    if kind not in ("load", "store"):
        raise ValueError(f"kind is 'load' or 'store', not {kind!r}")
    launch = run.first_launch(array, kind, "global") if launch is None else launch
    accesses = run.of(array, kind, "global", launch)
    lanes, width, site, block = _request(run, accesses, warp, block, request)
    row = min(run.launches[launch].block[0], traffic.WARP)
    touched, fewest = traffic.request_sectors(lanes, width, row)
    sectors = sorted({s for offset in lanes.values() for s in range(offset // 32, (offset + width - 1) // 32 + 1)})
    per_request = [traffic.request_sectors(r, width, row)[0] for r in _requests_of(accesses, site)]
    data = {"array": array, "kind": kind, "warp": warp, "block": block, "site": str(site), "width": width,
            "lanes": lanes, "sectors": sectors, "sectors_per_request": touched, "fewest": fewest,
            "ideal": traffic.ideal_sectors(width), "site_sectors_per_request": float(np.mean(per_request))}
    if touched <= fewest:
        verdict = "coalesced: every sector fetched is used"
    elif touched <= traffic.COALESCED_SLACK * fewest:
        verdict = f"{touched / fewest:.2g}x the fewest its bytes need, within the grader's slack"
    else:
        verdict = f"{touched / fewest:.2g}x the sectors its bytes need: neighbouring lanes are far apart"
    caption = f"Warp {warp}'s {kind} of {array} touches {touched} sectors; {verdict}."
    return canvas.picture(kernel.draw_warp_access, data, f"{_title(run, launch)}\n{site}", caption, run.source)


def shared_banks(run: KernelRun, array: str | None = None, warp: int = 0, block=None,
                 launch: int | None = None, kind: str | None = None, request: int = 0) -> Picture:
    """One warp's shared-memory request on the 32 banks, conflicts marked. Without `array`/`kind`:
    the traced site with the most wavefronts per request (the conflict, if there is one)."""
    shared = [a for a in run.accesses if a.space == "shared" and (array is None or a.array == array)
              and (kind is None or a.kind == kind)]
    if launch is not None:
        shared = [a for a in shared if run.launches[launch].first <= a.order < run.launches[launch].end]
    if not shared and array is None and not run.arrays("shared"):
        return _no_shared_banks(run, warp, launch or 0)
    if not shared:
        raise ValueError(f"{run.function} traced no shared-memory accesses"
                         + (f" to {array!r} (shared arrays: {', '.join(run.arrays('shared')) or 'none'})" if array else ""))
    sites = list(dict.fromkeys(a.site for a in shared))

    def cost(site):
        width = next(a.width for a in shared if a.site == site)
        counted = [traffic.request_wavefronts(r, width) for r in _requests_of(shared, site)]
        return sum(w for w, _ in counted) / sum(i for _, i in counted)
    site = max(sites, key=cost)
    chosen = [a for a in shared if a.site == site]
    lanes, width, site, block = _request(run, chosen, warp, block, request, site)
    words = {lane: offset // traffic.BANK_BYTES for lane, offset in lanes.items()}
    bank_words: dict = {}
    for word in sorted(set(words.values())):
        bank_words.setdefault(word % traffic.BANKS, []).append(word)
    wavefronts, ideal = traffic.request_wavefronts(lanes, width)
    data = {"array": chosen[0].array, "site": str(site), "warp": warp, "block": block, "width": width,
            "lane_words": words, "lane_banks": {lane: w % traffic.BANKS for lane, w in words.items()},
            "bank_words": bank_words, "ways": max(len(w) for w in bank_words.values()),
            "wavefronts": wavefronts, "ideal": ideal, "site_ways": cost(site)}
    caption = ("Every lane's word sits in its own bank (or shares a word): one wavefront serves the warp."
               if wavefronts <= ideal else
               f"Lanes ask one bank for {data['ways']} different words: the warp waits {wavefronts} wavefronts.")
    return canvas.picture(kernel.draw_shared_banks, data, f"{_title(run, run.launch_of(chosen[0]))}\n{site}",
                    caption, run.source)


def _no_shared_banks(run: KernelRun, warp: int, launch: int) -> Picture:
    """The banks picture of a kernel that used no shared memory (a transpose without its tile):
    the 32 banks empty, and a caption that says so."""
    data = {"array": None, "site": None, "warp": warp, "block": None, "width": 0, "lane_words": {},
            "lane_banks": {}, "bank_words": {}, "ways": 0, "wavefronts": 0, "ideal": 0, "site_ways": 0}
    caption = f"{run.function} made no shared-memory access: every load and store goes to global memory."
    return canvas.picture(kernel.draw_shared_banks, data, _title(run, launch), caption, run.source)


def shown_by(found) -> str:
    """The picture call that shows a site the grader judged (a `traffic.SiteSectors` not coalesced,
    a `traffic.SiteBanks` in conflict), for its feedback: 'see it: pictures.warp_access(...)'."""
    site = found.site
    try:
        lab = target.lab_number(os.path.basename(site.path))
    except ValueError:
        lab = "NN"
    call = f'pictures.trace("{lab}", "{_launcher(site)}", <a tiny input>)'
    if isinstance(found, traffic.SiteBanks):
        shown = shared_name(traffic.Access(0, "shared", found.array, site.kind, (0, 0, 0), (0, 0, 0), 0, 0,
                                            (), 0, found.width, site, 0))
        picture = f'pictures.shared_banks({call}, "{shown}", kind="{site.kind}")'
    else:
        picture = f'pictures.warp_access({call}, "{found.array}", kind="{site.kind}")'
    return f"see it: from kernellab.course import pictures; {picture}"


def _launcher(site) -> str:
    """The launcher of the kernel holding `site`, by the course's naming (axpb_kernel: axpb)."""
    text = linecache.getline(site.path, 1) and "".join(linecache.getlines(site.path))
    enclosing = [node for node in ast.walk(target.parse_source(text)) if isinstance(node, ast.FunctionDef)
                 and node.lineno <= site.line <= (node.end_lineno or node.lineno)] if text else []
    name = min(enclosing, key=lambda node: (node.end_lineno or 0) - node.lineno).name if enclosing else "launcher"
    return name.removesuffix("_kernel")


def _values_reaching(leaves: list, steps: list, slot: int) -> list:
    """The first values (leaves) that the arrows of the steps carry into `slot`, in slot order."""
    holds = {leaf: {leaf} for leaf in leaves}
    for edges in steps:
        before = {s: set(v) for s, v in holds.items()}
        for source, destination in edges:
            holds.setdefault(destination, set()).update(before.get(source, ()))
    return sorted(holds.get(slot, ()))


# --- a tiled matmul's walk, a reduction's tree ----------------------------------------------------------

def _box(indices) -> tuple:
    """((first row, past the last), (first column, past the last)) of 2-D indices."""
    rows, cols = zip(*indices)
    return (min(rows), max(rows) + 1), (min(cols), max(cols) + 1)


def _block_accesses(run: KernelRun, launch: int, block) -> tuple[tuple, dict]:
    """The block (default: the first that ran) and its accesses per thread, in each thread's order."""
    span = run.launches[launch]
    accesses = run.accesses[span.first:span.end]
    block = _first_block(accesses) if block is None else tuple(block) + (0,) * (3 - len(tuple(block)))
    threads: dict = {}
    for access in accesses:
        if access.block == block:
            threads.setdefault(access.thread, []).append(access)
    if not threads:
        raise ValueError(f"block {block} of {span.name} made no traced access")
    return block, threads


def tiles(run: KernelRun, a: str = "a", b: str = "b", block=None, launch: int | None = None) -> Picture:
    """A tiled matmul's walk: at each step, which tile of `a` and of `b` the block loads, and where
    in shared memory each element lands (the shared store that follows a thread's global load)."""
    launch = run.first_launch(a, "load", "global") if launch is None else launch
    block, threads = _block_accesses(run, launch, block)
    landed: dict = {}                                   # (array, step) -> [(global index, shared index)]
    shared_names: dict = {}
    for accesses in threads.values():
        pending = None
        for access in accesses:
            if access.space == "global" and access.kind == "load" and access.array in (a, b):
                pending = access
            elif access.space == "shared" and access.kind == "store" and pending is not None:
                landed.setdefault((pending.array, pending.occurrence), []).append((pending.index, access.index))
                shared_names[pending.array] = access.array
                pending = None
    steps = []
    for k in range(max((step for (_, step) in landed), default=-1) + 1):
        if (a, k) not in landed or (b, k) not in landed:
            break
        steps.append({"a": _box([g for g, _ in landed[(a, k)]]), "b": _box([g for g, _ in landed[(b, k)]]),
                      "a_shared": _box([t for _, t in landed[(a, k)]]), "b_shared": _box([t for _, t in landed[(b, k)]]),
                      "a_loads": len(landed[(a, k)]), "b_loads": len(landed[(b, k)])})
    if not steps:
        raise ValueError(f"no thread of block {block} loaded {a!r} and {b!r} into shared memory")
    stored = [x for x in sum(threads.values(), []) if x.space == "global" and x.kind == "store"]
    c = stored[0].array if stored else None
    data = {"block": block, "steps": steps, "c_array": c, "c": _box([x.index for x in stored if x.array == c]),
            "tile_arrays": (shared_names[a], shared_names[b]),
            "shapes": {"a": run.shapes[a], "b": run.shapes[b], "c": run.shapes[c]}}
    data["walks"] = {"a": _walk([s["a"] for s in steps]), "b": _walk([s["b"] for s in steps])}
    if data["walks"] == {"a": "left to right", "b": "top to bottom"}:
        caption = (f"Block {block[:2]} walks A's tiles left to right, B's top to bottom: one colour per step, "
                   f"{len(steps)} steps.")
    else:
        caption = (f"Block {block[:2]} walks A's tiles {data['walks']['a']}, B's {data['walks']['b']}: "
                   f"a row of C needs A left to right, B top to bottom.")
    return canvas.picture(kernel.draw_tiles, data, _title(run, launch), caption, run.source)


def _walk(boxes: list) -> str:
    """Which way a block's tiles move from step to step: "left to right", "top to bottom", "in
    place" (one tile every step), or "off its line" (any other way)."""
    rows = {box[0] for box in boxes}
    cols = {box[1] for box in boxes}
    if len(boxes) < 2 or (len(rows) == 1 and len(cols) == 1):
        return "in place"
    if len(rows) == 1 and [box[1][0] for box in boxes] == sorted(box[1][0] for box in boxes):
        return "left to right"
    if len(cols) == 1 and [box[0][0] for box in boxes] == sorted(box[0][0] for box in boxes):
        return "top to bottom"
    return "off its line"


def reduction(run: KernelRun, array: str | None = None, block=None, launch: int | None = None) -> Picture:
    """A block's reduction through shared array `array` (default: the first): which values of the
    input each thread folded into its slot (the global loads it made before storing that slot),
    then per step, which slot each thread read and combined with its own (a max or a sum: the trace
    holds accesses, not the operator, so captions say "combine"). Read from the trace: a
    thread's store after loads of other slots is a step; a slot many threads read (the result,
    broadcast) ends the reduction, so a kernel with two (a max, then a sum) shows its first. The
    simulator has no warp shuffles, so a shuffle reduction runs its shared-memory tree there."""
    shared = [x for x in run.accesses if x.space == "shared" and (array is None or x.array == array)]
    if not shared:
        raise ValueError(f"{run.function} traced no shared-memory accesses"
                         + (f" to {array!r} (shared arrays: {', '.join(run.arrays('shared')) or 'none'})" if array else ""))
    array = shared[0].array
    launch = run.launch_of(shared[0]) if launch is None else launch
    block, threads = _block_accesses(run, launch, block)
    broadcast = _broadcast_loads(threads, array)
    steps: list = []
    leaves: dict = {}                                  # slot -> the global elements folded into it
    for accesses in threads.values():
        loaded, combined, folded = [], 0, []
        for access in accesses:
            if access.space == "global":
                if access.kind == "load" and not combined:
                    folded.append((access.array, access.index))
                continue
            if access.array != array:
                continue
            if access.kind == "load":
                if (access.site, access.occurrence, access.index) in broadcast:
                    break                              # the result, read by all: the reduction is over
                loaded.append(access.index)
                continue
            sources = [index for index in loaded if index != access.index]
            if sources:
                while len(steps) <= combined:
                    steps.append([])
                steps[combined] += [(source[0], access.index[0]) for source in sources]
                combined += 1
            elif not combined:
                leaves.setdefault(access.index[0], []).extend(folded)
                folded = []
            loaded = []
    span = run.launches[launch]
    data = {"array": array, "block": block, "slots": int(np.prod(span.block)), "leaves": sorted(leaves),
            "steps": [sorted(set(edges)) for edges in steps]}
    data["reach_slot_0"] = _values_reaching(data["leaves"], data["steps"], 0)
    data.update(_inputs(run, leaves, data["reach_slot_0"], span))
    working = ", ".join(str(len({dst for _, dst in edges})) for edges in data["steps"])
    values, reached = len(data["leaves"]), len(data["reach_slot_0"])
    inputs, missing = data["inputs"], data["inputs_missing"]
    if reached < values and inputs:
        caption = (f"Slot 0 ends with {len(inputs) - len(missing)} of the {len(inputs)} values of "
                   f"{data['inputs_label']}: the tree leaves {values - reached} of its {values} slots out.")
    elif reached < values:
        caption = (f"Slot 0 ends with {reached} of the {values} values: {values - reached} never reach it "
                   f"({working} threads combine two slots at the steps).")
    elif missing:
        caption = (f"Slot 0 ends with {len(inputs) - len(missing)} of the {len(inputs)} values of "
                   f"{data['inputs_label']}: {_elements(missing)} never reach it.")
    elif inputs:
        caption = (f"Each thread folds its values of {data['inputs_label']} into its slot, then {working} "
                   f"threads combine two slots at the steps.")
    else:
        caption = (f"Each arrow combines one slot into another; {working} threads combine at the steps, "
                   f"the rest wait at the barrier.")
    return canvas.picture(kernel.draw_reduction, data, _title(run, launch), caption, run.source)


def _broadcast_loads(threads: dict, array: str) -> set:
    """(site, occurrence, slot) of the loads of `array` that more than one thread made: the
    result read back by all, where a tree step reads each slot once."""
    readers: dict = {}
    for thread, accesses in threads.items():
        for a in accesses:
            if a.space == "shared" and a.array == array and a.kind == "load":
                readers.setdefault((a.site, a.occurrence, a.index), set()).add(thread)
    return {key for key, who in readers.items() if len(who) > 1}


def _inputs(run: KernelRun, leaves: dict, reaching: list, span) -> dict:
    """The values the block reduces (the row of a 2-D input it read, else the elements of a
    one-block launch's input, else those it read), which slot each went into, and those that
    never reach slot 0. None of it where the threads loaded nothing before filling their slots."""
    folded = [(slot, element) for slot, elements in leaves.items() for element in elements]
    if not folded:
        return {"inputs": [], "inputs_label": None, "input_slot": {}, "inputs_missing": []}
    name = folded[0][1][0]
    shape = run.shapes.get(name, ())
    read = sorted({index for _, (array, index) in folded if array == name})
    rows = {index[0] for index in read}
    if len(shape) == 2 and len(rows) == 1:
        row = rows.pop()
        inputs, label = [(row, col) for col in range(shape[1])], f"{name}[{row}, :]"
    elif len(shape) == 1 and np.prod(span.grid) == 1:
        inputs, label = [(i,) for i in range(shape[0])], name
    else:
        inputs, label = read, name
    slot_of = {index: slot for slot, (array, index) in folded if array == name}
    reached = set(reaching)
    missing = [index for index in inputs if slot_of.get(index) not in reached]
    return {"inputs": inputs, "inputs_label": label,
            "input_slot": {inputs.index(i): slot for i, slot in slot_of.items() if i in inputs},
            "inputs_missing": missing}


def _elements(indices: list) -> str:
    """A few elements by their last index, runs joined: "columns 32-39", "elements 3, 5-6"."""
    last = [index[-1] for index in indices]
    runs, start = [], last[0]
    for previous, current in zip(last, last[1:] + [None]):
        if current != previous + 1:
            runs.append(f"{start}" if start == previous else f"{start}-{previous}")
            start = current
    noun = "columns" if len(indices[0]) == 2 else "elements"
    shown = ", ".join(runs[:3]) + (", ..." if len(runs) > 3 else "")
    return f"{len(indices)} ({noun} {shown})" if len(runs) > 3 else f"{noun} {shown}"


# --- the bytes a traced call moved, against its budget ---------------------------------------------------

def bytes_moved(*runs: KernelRun, budgets=()) -> Picture:
    """Memory below, the chip above: per traced call (e.g. Lab 02's unfused chain, then the fused
    one), one arrow per array and direction (read up, written down), as thick as the bytes the
    meter counted. `budgets`: a ledger per run, for the same n, declaring what it should move;
    each array is then labelled with both, and the caption names the first difference."""
    if not runs or (budgets and len(budgets) != len(runs)):
        raise ValueError("bytes_moved needs traced runs (pictures.trace(...)) and, if any, one budget ledger "
                         f"per run: got {len(runs)} runs and {len(budgets)} budgets")
    panels = [_moved(run, budget) for run, budget in zip(runs, tuple(budgets) or (None,) * len(runs))]
    data = {"panels": panels, "differences": [d for panel in panels for d in panel["differences"]]}
    if len(panels) == 2 and panels[1]["total"]:
        data["ratio"] = panels[0]["total"] / panels[1]["total"]
    caption = _moved_caption(data)
    return canvas.picture(machine.draw_bytes_moved, data, f"Lab {runs[0].lab}: bytes between global memory and the SMs, "
                          f"as the meter counted them" if runs[0].lab else "Bytes between global memory and the SMs",
                          caption, runs[0].source)


def _moved(run: KernelRun, budget) -> dict:
    """One run's panel: per global array, the elements it read and wrote per element of `out`
    (the meter's count from the trace) and, with a budget ledger, what the ledger declares.
    The launcher's own intermediates (arrays the meter could not name) take the names of the
    ledger's temporaries in the order they were first written, else "intermediate 1", ...."""
    counted: dict = {}
    for access in run.of(space="global"):
        entry = counted.setdefault(access.array, {"reads": 0, "writes": 0, "itemsize": access.width})
        entry["reads" if access.kind == "load" else "writes"] += 1
    declared = budget.by_array() if budget else {}
    declared_temporaries = list(dict.fromkeys(e.array for e in budget.entries if e.temporary)) if budget else []
    unnamed = [name for name in counted if traffic.GENERATED_NAME.match(name)]
    renamed = {name: (declared_temporaries[k] if k < len(declared_temporaries) else f"intermediate {k + 1}")
               for k, name in enumerate(unnamed)}
    counted = {renamed.get(name, name): entry for name, entry in counted.items()}
    temporaries = set(renamed.values())
    shape = run.shapes.get("out") or max(run.shapes.values(), key=lambda s: int(np.prod(s)))
    n = int(np.prod(shape))
    arrows, differences = [], []
    for name in dict.fromkeys([*counted, *declared]):
        got, want = counted.get(name), declared.get(name)
        for direction, key in (("read", "reads"), ("written", "writes")):
            measured = got[key] / n if got else 0.0
            planned = getattr(want, key) / n if want is not None else (None if not budget else 0.0)
            if not measured and not planned:
                continue
            itemsize = got["itemsize"] if got else want.itemsize
            arrows.append({"array": name, "direction": direction, "bytes": measured * n * itemsize,
                           "per_element": measured, "budget": planned, "temporary": name in temporaries})
            if planned is not None and measured != planned:
                differences.append({"function": run.function, "array": name, "direction": direction,
                                    "measured": measured, "budget": planned, "temporary": name in temporaries})
    panel = {"name": run.function, "n": n, "arrows": arrows, "differences": differences,
             "total": sum(a["bytes"] for a in arrows)}
    panel["budget_total"] = budget.total_bytes if budget else None
    return panel


def _moved_caption(data: dict) -> str:
    """The first difference from a budget ("fused_chain read x twice: 2 reads per element against
    a budget of 1"), else what fusing saved, else what the arrows are."""
    differences, panels = data["differences"], data["panels"]
    if differences:
        d = differences[0]
        verb, noun = ("read", "read") if d["direction"] == "read" else ("wrote", "write")
        array = "an intermediate" if d["temporary"] else d["array"]
        times = {1: "once", 2: "twice"}.get(d["measured"], f"{d['measured']:g} times")
        did = f"never {verb} {array}" if not d["measured"] else f"{verb} {array} {times}"
        more = f" ({len(differences) - 1} more differences)" if len(differences) > 1 else ""
        return (f"{d['function']} {did}: {d['measured']:g} {noun}{'s' * (d['measured'] != 1)} per element "
                f"against a budget of {d['budget']:g}{more}.")
    if "ratio" in data:
        kept = ("the intermediates stay in the SMs' registers" if not any(a["temporary"] for a in panels[1]["arrows"])
                else "fewer intermediates cross to memory")
        budgeted = ", as budgeted" if panels[1]["budget_total"] is not None else ""
        return f"{panels[1]['name']} moves {data['ratio']:.3g}x fewer bytes than {panels[0]['name']}{budgeted}: {kept}."
    return "Every arrow is bytes crossing between global memory and the SMs: fewer, thinner arrows are faster."
