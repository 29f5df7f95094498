"""Pictures of a kernel at work, from the meter's trace of one tiny launch of the lab's own code.

    from kernellab.course import pictures
    run = pictures.trace("00", "axpb", np.arange(200, dtype=np.float32), np.float32(2), np.float32(1))
    pictures.threads(run)                    # which thread wrote which element; the idle ones
    pictures.warp_access(run, "x")           # one warp's request: its lanes, its 32-byte sectors
    pictures.shared_banks(run)               # one warp's shared-memory request on the 32 banks

`trace` runs a lab's function (of the target `kernellab.course.target.load` picks: labs or
solutions) with the traffic meter keeping every access, and returns a `KernelRun`: data only. The
picture functions choose what to show from it (one block, one warp, one request), work out its
numbers with the meter's own rules (`kernellab.gpu.traffic`), and hand them to the drawing in
`kernellab.show.pictures`. The machine's pictures take recorded data: `timeline` (Lab 07, and
Lab 08's eager against replayed through `replay_timelines`), `sm_fill` (an occupancy result,
Lab 06) and `bytes_moved` (two ledgers, Lab 02).

A trace always runs in the simulator: on a GPU, `trace` runs the same call in a child process
in simulator mode, and every picture says "traced in Numba's CUDA simulator". Keep the launch
tiny (a few hundred threads): the simulator runs each CUDA thread as a Python thread.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import linecache
import math
import os
import pickle
import re
import subprocess
import sys
import tempfile

import numpy as np

from kernellab import occupancy
from kernellab.course import reference, target
from kernellab.gpu import device, launches, traffic
from kernellab.gpu.timeline import SHARED_AXIS_RATIO
from kernellab.show import plots
from kernellab.show.pictures import canvas, kernel, machine

Picture = canvas.Picture


@dataclasses.dataclass(frozen=True)
class LaunchSpan:
    """One kernel launch of a traced call: its shape, and which accesses it made."""

    name: str
    grid: tuple
    block: tuple
    first: int          # accesses[first:end] are this launch's
    end: int


@dataclasses.dataclass
class KernelRun:
    """What a traced call did: its launches, its arrays' shapes, every global and shared access
    (`kernellab.gpu.traffic.Access`), and what it returned (copied to the host)."""

    lab: str
    function: str
    launches: list
    shapes: dict             # global array name -> shape
    accesses: list
    result: object = None
    source: str = canvas.TRACED

    def of(self, array: str | None = None, kind: str | None = None, space: str | None = None,
           launch: int | None = None) -> list:
        """The accesses to `array` (any when None) of `kind` and `space`, in one launch or all."""
        span = self.launches[launch] if launch is not None else None
        chosen = self.accesses[span.first:span.end] if span else self.accesses
        return [a for a in chosen if (array is None or a.array == array) and (kind is None or a.kind == kind)
                and (space is None or a.space == space)]

    def arrays(self, space: str = "global") -> list[str]:
        return list(dict.fromkeys(a.array for a in self.accesses if a.space == space))

    def launch_of(self, access) -> int:
        return next(i for i, span in enumerate(self.launches) if span.first <= access.order < span.end)

    def first_launch(self, array: str, kind: str | None = None, space: str | None = None) -> int:
        """The first launch that touched `array` (with `kind`); a clear error where none did."""
        found = self.of(array, kind, space)
        if not found:
            seen = ", ".join(self.arrays(space or "global")) or "none"
            what = f"{kind}s of" if kind else "accesses to"
            raise ValueError(f"{self.function} made no {what} {array!r} (arrays it touched: {seen})")
        return self.launch_of(found[0])


# --- tracing a call ----------------------------------------------------------------------------------

def trace(lab, function, *args, **kwargs) -> KernelRun:
    """Run `function` (a name, or the function itself) of lab `lab` of the current target on a tiny
    launch with every access traced. NumPy arrays among the arguments go to the device first and
    are named by their parameter. On a GPU the call runs in a simulator child process."""
    number = target.lab_number(lab)
    name = function if isinstance(function, str) else function.__name__
    if not device.is_simulator():
        return trace_in_child(number, name, args, kwargs)
    module = target.load(number)
    call = getattr(module, name, None) if isinstance(function, str) else function
    if call is None:
        raise ValueError(f"lab {number} ({target.module_name(number)}) has no function {name!r}")
    return trace_call(call, *args, lab=number, **kwargs)


def trace_call(call, *args, lab: str = "", **kwargs) -> KernelRun:
    """`trace` on any launcher (simulator only): the part that runs it under the meter."""
    cuda = device.cuda()
    try:
        bound = inspect.signature(call).bind(*args, **kwargs)
    except TypeError as error:
        raise ValueError(f"{call.__name__}{inspect.signature(call)} cannot take these arguments: {error}") from None
    named = {}
    for parameter, value in bound.arguments.items():
        if isinstance(value, np.ndarray):
            value = bound.arguments[parameter] = cuda.to_device(value)
        if hasattr(value, "copy_to_host"):
            named[parameter] = value
    spans = []
    with traffic.meter(trace=("global", "shared", "accesses"), **named) as counts, \
            launches.record_launches(on_launch=lambda launch: spans.append((launch, len(counts.accesses)))):
        result = call(*bound.args, **bound.kwargs)
    ends = [first for _, first in spans[1:]] + [len(counts.accesses)]
    launched = [LaunchSpan(launch.name, tuple(launch.grid), tuple(launch.block), first, end)
                for (launch, first), end in zip(spans, ends)]
    if not launched:
        raise ValueError(f"{call.__name__} launched no kernel: nothing to picture")
    renamed = _names(counts, result)
    shapes = {renamed.get(name, name): _shape(name, named) for name in counts}
    accesses = [a._replace(array=renamed.get(a.array, a.array)) if a.space == "global"
                else a._replace(array=_shared_name(a)) for a in counts.accesses]
    host_result = result.copy_to_host() if hasattr(result, "copy_to_host") else result
    return KernelRun(lab, call.__name__, launched, shapes, accesses, host_result)


def _names(counts, result) -> dict:
    """The meter's generated name of the array the call returned -> "out"."""
    if not hasattr(result, "copy_to_host") or "out" in counts:
        return {}
    address = traffic.buffer_address(result)
    return {name: "out" for name, at in (counts.addresses or {}).items()
            if at == address and name.startswith("temp")}


def _shape(name: str, named: dict) -> tuple:
    if name in named:
        return tuple(named[name].shape)
    found = re.match(r"^temp\d+ (\(.*\)) \w+$", name)     # the meter's name for an unnamed array
    return tuple(ast.literal_eval(found.group(1))) if found else ()


def _shared_name(access) -> str:
    """A shared array by its variable (`tile`), read from the line that declared it (the meter
    names it "file.py:12"), where that is the file of the access; else the meter's name."""
    file, _, line = access.array.rpartition(":")
    if not line.isdigit() or os.path.basename(access.site.path) != file:
        return access.array
    found = re.search(r"(\w+)\s*=\s*cuda\.shared\.array", linecache.getline(access.site.path, int(line)))
    return found.group(1) if found else access.array


def _picture(draw, data: dict, title: str, caption: str, source: str) -> Picture:
    return canvas.finish(draw(data, title, source), caption, data)


def _title(run: KernelRun, launch: int) -> str:
    return f"Lab {run.lab}: {run.function} ({run.launches[launch].name})" if run.lab else run.launches[launch].name


def _linear_block(block: tuple, grid: tuple) -> int:
    return block[0] + grid[0] * (block[1] + grid[1] * block[2])


# --- threads over elements ----------------------------------------------------------------------------

def threads(run: KernelRun, array: str = "out", launch: int | None = None) -> Picture:
    """Which thread (block, thread) wrote which element of `array`, and the launch's idle threads
    (those whose guard was false: they stored nothing). 1-D and 2-D launches and arrays."""
    launch = run.first_launch(array, "store", "global") if launch is None else launch
    span, stores = run.launches[launch], run.of(array, "store", "global", launch)
    grid, block = span.grid, span.block
    writers = {a.index: (a.block, a.thread) for a in stores}
    everyone = {(b, t) for b in np.ndindex(*grid[::-1]) for t in np.ndindex(*block[::-1])}
    everyone = {(b[::-1], t[::-1]) for b, t in everyone}
    idle = sorted(everyone - set(writers.values()))
    shape = run.shapes.get(array) or tuple(np.max(list(writers), axis=0) + 1)
    data = {"array": array, "grid": grid, "block": block, "threads": len(everyone),
            "elements": int(np.prod(shape)), "idle": idle, "writer": writers}
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
        data.update(dims=1, thread_block=thread_block, element_block=element_block, links=sorted(links))
        caption = (f"Each thread i writes {array}[i]; the last {len(idle)} threads find i past the end "
                   f"and stay idle.")
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
        caption = (f"x runs along {along}: neighbouring threadIdx.x write neighbouring {along[:-1]}s; "
                   f"grey threads fall outside the array.")
    return _picture(kernel.draw_threads, data, _title(run, launch), caption, run.source)


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
    verdict = ("coalesced: every sector fetched is used" if touched <= fewest else
               f"{touched / fewest:.0f}x the sectors its bytes need: neighbouring lanes are far apart")
    caption = f"Warp {warp}'s {kind} of {array} touches {touched} sectors; {verdict}."
    return _picture(kernel.draw_warp_access, data, f"{_title(run, launch)}: {site}", caption, run.source)


def shared_banks(run: KernelRun, array: str | None = None, warp: int = 0, block=None,
                 launch: int | None = None, kind: str | None = None, request: int = 0) -> Picture:
    """One warp's shared-memory request on the 32 banks, conflicts marked. Without `array`/`kind`:
    the traced site with the most wavefronts per request (the conflict, if there is one)."""
    shared = [a for a in run.accesses if a.space == "shared" and (array is None or a.array == array)
              and (kind is None or a.kind == kind)]
    if launch is not None:
        shared = [a for a in shared if run.launches[launch].first <= a.order < run.launches[launch].end]
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
    return _picture(kernel.draw_shared_banks, data, f"{_title(run, run.launch_of(chosen[0]))}: {site}",
                    caption, run.source)


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
        shown = _shared_name(traffic.Access(0, "shared", found.array, site.kind, (0, 0, 0), (0, 0, 0), 0, 0,
                                            (), 0, found.width, site, 0))
        picture = f'pictures.shared_banks({call}, "{shown}", kind="{site.kind}")'
    else:
        picture = f'pictures.warp_access({call}, "{found.array}", kind="{site.kind}")'
    return f"see it: from kernellab.course import pictures; {picture}"


def _launcher(site) -> str:
    """The launcher of the kernel holding `site`, by the course's naming (axpb_kernel: axpb)."""
    text = linecache.getline(site.path, 1) and "".join(linecache.getlines(site.path))
    enclosing = [node for node in ast.walk(ast.parse(text)) if isinstance(node, ast.FunctionDef)
                 and node.lineno <= site.line <= (node.end_lineno or node.lineno)] if text else []
    name = min(enclosing, key=lambda node: (node.end_lineno or 0) - node.lineno).name if enclosing else "launcher"
    return name.removesuffix("_kernel")


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
    caption = (f"Block {block[:2]} walks A's tiles left to right, B's top to bottom: one colour per step, "
               f"{len(steps)} steps.")
    return _picture(kernel.draw_tiles, data, _title(run, launch), caption, run.source)


def reduction(run: KernelRun, array: str | None = None, block=None, launch: int | None = None) -> Picture:
    """A block's reduction through shared array `array` (default: the first): per step, which slot
    each thread read and added into its own. Read from the trace: a thread's store after loads of
    other slots is a step (the simulator has no warp shuffles, so a shuffle reduction runs its
    shared-memory tree there)."""
    shared = [x for x in run.accesses if x.space == "shared" and (array is None or x.array == array)]
    if not shared:
        raise ValueError(f"{run.function} traced no shared-memory accesses"
                         + (f" to {array!r} (shared arrays: {', '.join(run.arrays('shared')) or 'none'})" if array else ""))
    array = shared[0].array
    launch = run.launch_of(shared[0]) if launch is None else launch
    block, threads = _block_accesses(run, launch, block)
    steps: list = []
    leaves: set = set()
    for accesses in threads.values():
        loaded, combined = [], 0
        for access in accesses:
            if access.space != "shared" or access.array != array:
                continue
            if access.kind == "load":
                loaded.append(access.index)
                continue
            sources = [index for index in loaded if index != access.index]
            if sources:
                while len(steps) <= combined:
                    steps.append([])
                steps[combined] += [(source[0], access.index[0]) for source in sources]
                combined += 1
            else:
                leaves.add(access.index[0])
            loaded = []
    span = run.launches[launch]
    data = {"array": array, "block": block, "slots": int(np.prod(span.block)), "leaves": sorted(leaves),
            "steps": [sorted(set(edges)) for edges in steps]}
    working = ", ".join(str(len({dst for _, dst in edges})) for edges in data["steps"])
    caption = (f"Each arrow adds one slot into another; {working} threads add at the steps, "
               f"the rest wait at the barrier.")
    return _picture(kernel.draw_reduction, data, _title(run, launch), caption, run.source)


# --- the machine: streams on engines, one SM's resources, bytes moved ---------------------------------

QUEUES = 8       # the driver's hardware queues (CUDA_DEVICE_MAX_CONNECTIONS' default): streams share them
ENGINES = {"h2d": "copy engines: to GPU", "kernel": "SMs", "d2h": "copy engines: to host", "d2d": "SMs"}


def timeline(*timelines, titles: tuple = (), share_time: bool | None = None) -> Picture:
    """Work over time, one panel per timeline (one above the other, one time axis): the host's
    submissions, each stream and the hardware queue it feeds, then the copy engines and the SMs
    that ran the work. Takes a recorded or measured timeline (`TimelineData`, or its dict, as in
    data/reference/h200/lab07.json) or a simulator trace (`Timeline().trace`: no clock there, so
    each op takes one step, placed as early as the CUDA ordering rules allow). The panels share
    one time axis while their lengths are within SHARED_AXIS_RATIO (`share_time` decides)."""
    if not timelines:
        raise ValueError("timeline needs at least one timeline (TimelineData, its dict, or a Trace)")
    panels = [_panel(item, titles[i] if i < len(titles) else None) for i, item in enumerate(timelines)]
    units = {panel.pop("unit") for panel in panels}
    if len(units) > 1:
        raise ValueError("a timed timeline and an untimed trace cannot share a time axis: draw them apart")
    end = max(p["end"] for p in panels)
    for panel in panels:
        panel["least_width"] = end / 400          # the shortest span still shows as a sliver
    ends = [p["end"] for p in panels]
    share = share_time if share_time is not None else max(ends) <= SHARED_AXIS_RATIO * min(ends)
    data = {"panels": panels, "unit": units.pop(), "share_time": bool(share)}
    sources = list(dict.fromkeys(p.pop("source") for p in panels))
    kinds = {span["kind"] for p in panels for span in p["spans"]}
    caption = ("Copies run on the copy engines beside the kernels on the SMs: look where work waits."
               if {"h2d", "d2h"} & kinds else
               "Each black tick is one submission by the host: look at the gaps the SMs wait through.")
    return _picture(machine.draw_timeline, data, "Work on streams, queues and engines", caption, "; ".join(sources))


def _panel(item, title: str | None) -> dict:
    if hasattr(item, "dependencies"):              # a Trace: the order the rules allow, no clock
        ops = item.timed()
        deps = item.dependencies()
        step: dict = {}
        spans = []
        for op in ops:
            before = [step[other.index] for other in ops if other.index in step and deps[op.index] >> other.index & 1]
            step[op.index] = max(before, default=0) + 1
            spans.append({"row": op.row, "kind": op.kind, "label": op.label, "start": step[op.index] - 1,
                          "end": step[op.index], "submit": None})
        rows, source, unit = item.rows(), canvas.TRACED + " (no clock: one step per op)", "steps"
        title = title or "each op as early as the CUDA ordering rules let it start"
    else:
        record = item.as_dict() if hasattr(item, "as_dict") else item
        start = min(s["start_ms"] for s in record["spans"])
        spans = [{"row": s["row"], "kind": s["kind"], "label": s["label"], "start": s["start_ms"] - start,
                  "end": s["end_ms"] - start,
                  "submit": None if s.get("submit_ms") is None else max(0.0, s["submit_ms"] - start)}
                 for s in record["spans"]]
        rows, source, unit = list(record["rows"]), record.get("source", "recorded"), "ms"
        title = title or record.get("title")
    queues = {row: f"{row} -> queue {i % QUEUES + 1}" for i, row in enumerate(rows)}
    engines = list(dict.fromkeys(ENGINES.get(k, "SMs") for k in ("h2d", "kernel", "d2h")
                                 if any(span["kind"] == k for span in spans)))
    for span in spans:
        span["places"] = [(queues[span["row"]], 0, 1)]
    for engine in engines:                     # spans at once on one engine share its row
        on = sorted((s for s in spans if ENGINES.get(s["kind"], "SMs") == engine), key=lambda s: s["start"])
        levels: list = []
        for span in on:
            level = next((i for i, free in enumerate(levels) if free <= span["start"]), len(levels))
            levels[level:level + 1] = [span["end"]]
            span["level"] = level
        for span in on:
            span["places"].append((engine, span.pop("level"), max(1, len(levels))))
    host = ["host"] if any(span["submit"] is not None for span in spans) else []
    lanes = [*host, *queues.values(), *engines]
    end = max(s["end"] for s in spans)
    return {"title": f"{title or source}: {end:.3g} {unit}", "source": source, "unit": unit, "lanes": lanes, "spans": spans,
            "dividers": [len(host), len(host) + len(queues)][not host:], "end": end,
            "queues": {row: int(q.rsplit(" ", 1)[1]) for row, q in queues.items()}}


def replay_timelines(n: int | None = None, record: dict | None = None, shown: int = 8) -> tuple[dict, dict]:
    """Lab 08's eager and replayed chains as two timelines (dicts `timeline` takes), built from the
    recorded medians of data/reference/h200/lab08.json (idle_gaps): `shown` kernels of the row for
    `n` elements (default: the shortest kernel still wider than a tenth of the eager pace), each
    kernel_ms long, one every eager_ms / kernels (eager) or graph_ms / kernels (replayed)."""
    record = record or (reference.load("08") or {}).get("records", {}).get("idle_gaps")
    if not record:
        raise ValueError("no recorded idle_gaps in data/reference/h200/lab08.json")
    kernels, rows = record["kernels"], record["rows"]
    if n is None:
        row = next((r for r in rows if r["kernel_ms"] >= 0.1 * r["eager_ms"] / kernels), rows[-1])
    else:
        row = next((r for r in rows if r["n"] == n), None)
        if row is None:
            raise ValueError(f"no recorded row for n={n}: the rows have n = {', '.join(str(r['n']) for r in rows)}")
    gpu = record.get("provenance", {}).get("gpu", "a GPU")

    def chain(total_ms: float, label: str, one_submit: bool) -> dict:
        pace = total_ms / kernels
        spans = [{"label": f"kernel {i}", "row": "stream", "kind": "kernel", "start_ms": i * pace,
                  "end_ms": i * pace + row["kernel_ms"], "submit_ms": 0.0 if one_submit and i == 0 else
                  (None if one_submit else i * pace)} for i in range(shown)]
        return {"source": f"recorded on {gpu}: the medians of data/reference/h200/lab08.json",
                "rows": ["stream"], "spans": spans, "title": label}
    return (chain(row["eager_ms"], f"eager: {shown} of {kernels} launches, n = {row['n']}", False),
            chain(row["graph_ms"], f"replayed graph: the same {shown} kernels", True))


def sm_fill(result, cc=None, block_size: int | None = None, registers_per_thread: int | None = None,
            static_shared: int = 0, dynamic_shared: int = 0) -> Picture:
    """One SM's warp slots, registers, shared memory and block slots, filled by the resident blocks
    of an occupancy result, the limiter outlined. `result`: kernellab.occupancy's Occupancy, or a
    lab's own (active_blocks, limiters) with the launch it was asked about (cc, block_size, ...)."""
    own = hasattr(result, "registers_per_block")
    cc = result.cc if own else cc
    if cc is None or (not own and (block_size is None or registers_per_thread is None)):
        raise ValueError("sm_fill needs kernellab.occupancy's result, or the lab's result with cc, "
                         "block_size and registers_per_thread")
    arch = occupancy.architecture(cc)
    block_size = result.block_size if own else block_size
    warps = occupancy.warps_per_block(arch, block_size)
    registers = result.registers_per_block if own else occupancy.registers_per_warp(arch, registers_per_thread) * warps
    shared = result.shared_per_block if own else occupancy.shared_allocation(arch, static_shared + dynamic_shared)
    shared_total = result.carveout_bytes if own and result.carveout_bytes else arch.shared_per_sm
    blocks = result.active_blocks
    resources = [("warp slots", "warps", warps, arch.max_warps_per_sm, "warps"),
                 ("registers", "registers", registers, arch.registers_per_sm, "registers"),
                 ("shared memory", "shared_memory", shared, shared_total, "bytes"),
                 ("block slots", "blocks", 1, arch.max_blocks_per_sm, "blocks")]
    data = {"cc": tuple(arch.cc), "block_size": block_size, "active_blocks": blocks,
            "limiters": tuple(result.limiters), "occupancy": blocks * warps / arch.max_warps_per_sm,
            "resources": [{"name": name, "limit": limit, "per_block": per_block, "total": total,
                           "used": blocks * per_block, "limiter": limit in result.limiters,
                           "label": f"{blocks * per_block:,} / {total:,} {unit}"}
                          for name, limit, per_block, total, unit in resources]}
    data["headline"] = (f"{blocks} blocks of {block_size} threads: {blocks * warps} of "
                        f"{arch.max_warps_per_sm} warps ({data['occupancy']:.0%})")
    names = " and ".join(r["name"] for r in data["resources"] if r["limiter"]) or "nothing"
    caption = f"The {names} run out first: one more block would not fit, whatever room the others have."
    return _picture(machine.draw_sm_fill, data, f"One SM of {arch.label}", caption,
                    "worked out by kernellab.occupancy (the driver's rules); nothing measured")


def bytes_moved(*ledgers) -> Picture:
    """Memory below, the chip above: one arrow per array and direction (read up, written down),
    as thick as its bytes, per ledger (e.g. unfused, then fused: Lab 02's)."""
    if not ledgers:
        raise ValueError("bytes_moved needs ledgers (e.g. lab.unfused_chain_ledger(n), lab.fused_chain_ledger(n))")
    drawn = []
    for ledger in ledgers:
        temporaries = ledger.temporaries()
        arrows = [{"array": name, "direction": direction, "bytes": amount, "temporary": name in temporaries}
                  for name, moved in ledger.by_array().items()
                  for direction, amount in (("read", moved.bytes_read), ("written", moved.bytes_written)) if amount]
        drawn.append({"name": ledger.name or f"ledger {len(drawn) + 1}", "total": ledger.total_bytes, "arrows": arrows})
    data = {"ledgers": drawn}
    if len(ledgers) == 2 and ledgers[1].total_bytes:
        data["ratio"] = ledgers[0].ratio(ledgers[1])
        caption = (f"{drawn[1]['name']} moves {data['ratio']:.3g}x fewer bytes than {drawn[0]['name']}: "
                   f"the intermediates never leave the chip.")
    else:
        caption = "Every arrow is bytes crossing between memory and the chip: fewer, thinner arrows are faster."
    return _picture(machine.draw_bytes_moved, data, "Bytes between memory and the chip", caption,
                    plots.LEDGER_SOURCE)


CHILD = "import sys; from kernellab.course import pictures; pictures.traced_for_parent(*sys.argv[1:3])"


def trace_in_child(lab: str, function: str, args: tuple, kwargs: dict, chosen: str | None = None) -> KernelRun:
    """`trace` in a child process in simulator mode (what a GPU session does) on target `chosen`
    (default: the current one): the arguments go over as host arrays, the KernelRun comes back."""
    def host(value):
        return value.copy_to_host() if hasattr(value, "copy_to_host") else value
    with tempfile.TemporaryDirectory() as folder:
        asked, answer = os.path.join(folder, "call.pickle"), os.path.join(folder, "run.pickle")
        with open(asked, "wb") as file:
            pickle.dump((lab, function, tuple(map(host, args)),
                         {k: host(v) for k, v in kwargs.items()}, chosen or target.current()), file)
        env = {**os.environ, "KERNELLAB_DEVICE": "sim"}
        done = subprocess.run([sys.executable, "-c", CHILD, asked, answer],
                              env=env, capture_output=True, text=True, cwd=str(target.ROOT))
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"tracing {function} of lab {lab} in the simulator failed: {last}")
        with open(answer, "rb") as file:
            return pickle.load(file)


def traced_for_parent(asked: str, answer: str) -> None:
    """The child's side of `trace_in_child`: read the call, trace it, write the KernelRun."""
    with open(asked, "rb") as file:
        lab, function, args, kwargs, chosen = pickle.load(file)
    os.environ["KERNELLAB_TARGET"] = chosen
    run = trace(lab, function, *args, **kwargs)
    with open(answer, "wb") as file:
        pickle.dump(run, file)
