"""Lab 09's measurements of coalescing: the simulator's sector model and each access pattern of
the lab run through it, validated against the lab's float64 reference.

`lab09_roofline` declares them (its docstring says what they count, and where a GPU's profile
rows measure the same figure instead).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools

import numpy as np

from kernellab.gpu import checks, device, traffic

from experiments.lab09_constants import SIM_SHAPE


# --- 1. the sector model (simulator) -------------------------------------------------------------

@dataclasses.dataclass
class Sectors:
    """Warp-wide requests to one array and the 32-byte sectors they touched."""

    name: str
    load_requests: int = 0
    load_sectors: int = 0
    store_requests: int = 0
    store_sectors: int = 0

    @property
    def per_load(self) -> float:
        return self.load_sectors / self.load_requests if self.load_requests else 0.0

    @property
    def per_store(self) -> float:
        return self.store_sectors / self.store_requests if self.store_requests else 0.0


@contextlib.contextmanager
def sector_meter(**named_arrays):
    """Count, per named array, the warp-wide requests and the 32-byte sectors they touch: the
    traffic meter's warp model (`kernellab.gpu.traffic`, which groups lanes by instruction site
    and occurrence), summed over each array's load sites and store sites. This is what Nsight
    Compute's sectors-per-request measures on a GPU; the simulator has no caches, so DRAM bytes
    are not modelled."""
    if not device.is_simulator():
        raise RuntimeError("the sector model runs in Numba's simulator; on a GPU read the profile "
                           "rows (`kernellab profile 09`: l1tex sectors per request)")
    counts = {name: Sectors(name) for name in named_arrays}
    with traffic.meter(trace=("global",), **named_arrays) as count:
        yield counts
    for site in count.coalescing:
        if site.array in counts:
            entry, kind = counts[site.array], site.site.kind
            setattr(entry, f"{kind}_requests", getattr(entry, f"{kind}_requests") + site.requests)
            setattr(entry, f"{kind}_sectors", getattr(entry, f"{kind}_sectors") + site.sectors)


def access_patterns(lab, seed: int = 0) -> list[dict]:
    """Each pattern of lab.VARIANTS at SIM_SHAPE into a poisoned output, validated against the
    lab's float64 reference; in the simulator with its sectors per request for the loads of its
    input and the stores of its output (None on a GPU, where the profile rows measure them)."""
    cuda = device.cuda()
    rng = np.random.default_rng(seed)
    x = checks.nonzero(rng, SIM_SHAPE)
    scale = checks.nonzero(rng, SIM_SHAPE[0])
    d_x, d_flat, d_scale = cuda.to_device(x), cuda.to_device(x.ravel()), cuda.to_device(scale)
    # pattern: (its input, how to call it, the expected output)
    calls = {
        "scale_rows_strided": (d_x, lambda out: lab.scale_rows_strided(d_x, d_scale, out=out),
                               lab.scale_rows_reference(x, scale)),
        "scale_rows": (d_x, lambda out: lab.scale_rows(d_x, d_scale, out=out), lab.scale_rows_reference(x, scale)),
        "copy4_consecutive": (d_flat, lambda out: lab.copy4_consecutive(d_flat, out=out),
                              lab.copy_reference(x.ravel())),
        "transpose_naive": (d_x, lambda out: lab.transpose_naive(d_x, out=out), lab.transpose_reference(x)),
        "transpose": (d_x, lambda out: lab.transpose(d_x, out=out), lab.transpose_reference(x)),
        "scale_rows_wide": (d_x, lambda out: lab.scale_rows_wide(d_x, d_scale, out=out),
                            lab.scale_rows_reference(x, scale)),
        "transpose_wide": (d_x, lambda out: lab.transpose_wide(d_x, out=out), lab.transpose_reference(x)),
    }
    counted = device.is_simulator()
    rows = []
    for name, (_launcher, why) in lab.VARIANTS.items():
        source, call, expected = calls[name]
        out = checks.poisoned(expected.shape)
        with sector_meter(x=source, out=out) if counted else contextlib.nullcontext() as sectors:
            call(out)
        checks.assert_matches(out, expected, rtol=1e-6, what=f"lab 09 {name}")
        rows.append({"pattern": name, "why": why,
                     "x_sectors_per_load": sectors["x"].per_load if counted else None,
                     "out_sectors_per_store": sectors["out"].per_store if counted else None,
                     "x_load_requests": sectors["x"].load_requests if counted else None})
    return rows


@functools.lru_cache(maxsize=4)
def _patterns(lab, seed: int) -> tuple[dict, ...]:
    """access_patterns once per lab module and seed: validate and the tour's key line share it."""
    return tuple(access_patterns(lab, seed))


def pattern_table(rows) -> str:
    lines = [f"{'pattern':<20} {'load requests':>13} {'sectors/load':>13} {'sectors/store':>14}  why"]
    lines += [f"{r['pattern']:<20} {r['x_load_requests']:>13} {r['x_sectors_per_load']:>13.2f} "
              f"{r['out_sectors_per_store']:>14.2f}  {r['why']}" for r in rows]
    return "\n".join(lines)
