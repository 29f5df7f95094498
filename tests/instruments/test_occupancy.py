"""kernellab.occupancy against NVIDIA's cuda_occupancy.h, and against what an H200 reported.

The differential test compiles tests/instruments/occupancy_harness/harness.cpp around the header and asks it
the same questions as the Python calculator. The header ships in the nvidia-cuda-runtime wheel
that numba-cuda[cu13] installs (site-packages/nvidia/cu13/include), so it runs in CI as well as
on machines with a CUDA toolkit; it is skipped, saying why, only without g++ or the header.
"""

from __future__ import annotations

import glob
import os
import random
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from kernellab import occupancy as occ
from kernellab.occupancy import KiB

HARNESS = Path(__file__).parent / "occupancy_harness" / "harness.cpp"
CONFIGS_PER_ARCH = 4000
POTENTIAL_PER_ARCH = 60
LIMIT_BITS = {"warps": 1, "registers": 2, "shared_memory": 4, "blocks": 8}


# --- finding and building the header harness -----------------------------------------------------

def find_occupancy_header() -> Path | None:
    """cuda_occupancy.h from this environment's NVIDIA wheels first (what CI has), then a toolkit."""
    roots = [Path(p) for p in site.getsitepackages() + [site.getusersitepackages()]]
    roots += [Path(p) for p in sys.path if p.endswith("site-packages")]
    for root in dict.fromkeys(roots):
        for pattern in ("nvidia/**/include/cuda_occupancy.h", "**/include/cuda_occupancy.h"):
            hits = sorted(glob.glob(str(root / pattern), recursive=True))
            if hits:
                return Path(hits[-1])
    toolkits = [os.environ.get(name) for name in ("CUDA_HOME", "CUDA_PATH")]
    toolkits += sorted(glob.glob("/usr/local/cuda*"), reverse=True)
    for toolkit in filter(None, toolkits):
        header = Path(toolkit) / "include" / "cuda_occupancy.h"
        if header.is_file():
            return header
    return None


@pytest.fixture(scope="module")
def header_harness(tmp_path_factory):
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no C++ compiler (g++) to build the cuda_occupancy.h harness")
    header = find_occupancy_header()
    if header is None:
        pytest.skip("cuda_occupancy.h not found in site-packages (nvidia-cuda-runtime wheel), "
                    "$CUDA_HOME or /usr/local/cuda*")
    exe = tmp_path_factory.mktemp("occupancy_harness") / "harness"
    build = subprocess.run([compiler, "-O2", "-std=c++11", f"-I{header.parent}", str(HARNESS),
                            "-o", str(exe)], capture_output=True, text=True)
    assert build.returncode == 0, f"harness build failed against {header}:\n{build.stderr}"

    def ask(lines: list[str]) -> list[list[int]]:
        run = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        answers = run.stdout.splitlines()
        assert len(answers) == len(lines)
        bad = [(q, a) for q, a in zip(lines, answers) if a.startswith("error")]
        assert not bad, f"the header rejected queries: {bad[:5]}"
        return [[int(v) for v in a.split()] for a in answers]

    return ask


# --- configurations --------------------------------------------------------------------------------

def configurations(arch: occ.Architecture, rng: random.Random, count: int):
    """Edge cases, then random ones: (block, regs, static, dynamic, max_dynamic or None, carveout)."""
    optin = arch.shared_per_block_optin
    blocks = (1, 31, 32, 33, 64, 96, 127, 128, 256, 512, 768, 1023, 1024)
    carveouts = (-1, 0, 10, 25, 50, 100)
    regs = (0, 1, 8, 16, 20, 24, 32, 40, 48, 64, 72, 96, 128, 168, 255)
    out = []
    for block in blocks:
        for reg in regs:
            out.append((block, reg, 0, 0, None, -1))
    for static in (0, 1, 127, 128, 129, 1024, 48 * KiB - 1, 48 * KiB):
        for dyn in (0, 1, 48 * KiB - static, 48 * KiB - static + 1):
            for carveout in carveouts:
                out.append((256, 32, static, dyn, None, carveout))
        for dyn in (0, optin - static, optin - static + 1, optin + 1):
            out.append((128, 32, static, dyn, optin - static, -1))
    while len(out) < count:
        static = rng.choice((0, 0, rng.randrange(0, 48 * KiB + 1), rng.randrange(0, 4 * KiB)))
        raised = rng.random() < 0.5
        max_dyn = rng.randrange(0, optin - static + 1) if raised else None
        limit = optin - static if raised else 48 * KiB - static
        dyn = rng.choice((0, rng.randrange(0, limit + 2), limit, limit + 1, rng.randrange(0, optin + 2)))
        if raised and rng.random() < 0.3:
            max_dyn, dyn = optin - static, rng.randrange(0, optin - static + 2)
        out.append((rng.choice((rng.randrange(1, 1025), rng.choice(blocks))), rng.randrange(0, 256),
                    static, dyn, max_dyn, rng.choice(carveouts)))
    return out


@pytest.mark.parametrize("cc", sorted(occ.ARCHITECTURES), ids=lambda cc: f"sm_{cc[0]}{cc[1]}")
def test_matches_cuda_occupancy_header(header_harness, cc):
    """Every configuration: same active blocks, per-limit counts, limiters and allocation."""
    arch = occ.ARCHITECTURES[cc]
    configs = configurations(arch, random.Random(hash(cc) & 0xFFFF), CONFIGS_PER_ARCH)
    lines = []
    for block, regs, static, dyn, max_dyn, carveout in configs:
        sent_max = arch.shared_per_block - static if max_dyn is None else max_dyn
        lines.append(f"occ {cc[0]} {cc[1]} {block} {regs} {static} {dyn} {sent_max} {carveout}")
    answers = header_harness(lines)
    mismatches = []
    for config, answer in zip(configs, answers):
        got = occ.occupancy(cc, *config)
        limits = got.blocks_by_limit
        bits = sum(LIMIT_BITS[name] for name in got.limiters)
        mine = [got.active_blocks, bits, limits["warps"], limits["registers"],
                limits["shared_memory"], limits["blocks"], got.shared_per_block]
        answer[1] &= 0xF  # barrier and virtual-resource bits: limits this module does not model
        if mine != answer:
            mismatches.append((config, mine, answer))
    assert not mismatches, (f"{len(mismatches)} of {len(configs)} differ from the header, e.g. "
                            f"(config, python, header): {mismatches[:3]}")


@pytest.mark.parametrize("cc", sorted(occ.ARCHITECTURES), ids=lambda cc: f"sm_{cc[0]}{cc[1]}")
def test_max_potential_block_size_matches_header(header_harness, cc):
    arch = occ.ARCHITECTURES[cc]
    rng = random.Random(1000 + cc[0] * 10 + cc[1])
    configs = [(rng.randrange(0, 256), rng.choice((0, rng.randrange(0, 48 * KiB))),
                rng.choice((0, rng.randrange(0, 20 * KiB))), rng.choice((-1, 0, 25, 50, 100)),
                rng.choice((0, 0, rng.randrange(1, 1100))))
               for _ in range(POTENTIAL_PER_ARCH)]
    configs = [(r, s, min(d, 48 * KiB - s), c, lim) for r, s, d, c, lim in configs]
    lines = [f"pot {cc[0]} {cc[1]} {r} {s} {d} {48 * KiB - s} {c} {lim}" for r, s, d, c, lim in configs]
    for (regs, static, dyn, carveout, limit), answer in zip(configs, header_harness(lines)):
        got = occ.max_potential_block_size(cc, regs, static, dyn, limit, carveout=carveout)
        assert list(got) == answer, (cc, regs, static, dyn, carveout, limit)


# --- plain unit tests ------------------------------------------------------------------------------

def test_h200_measured_row():
    """shared/NOTES.md: the H200 driver said 32, 32, 16, 8, 4, 2 for a 20-register kernel."""
    blocks = [occ.occupancy((9, 0), b, 20).active_blocks for b in (32, 64, 128, 256, 512, 1024)]
    assert blocks == [32, 32, 16, 8, 4, 2]


def test_limiters_name_every_binding_limit():
    small = occ.occupancy("9.0", 32, 20)                  # 32 one-warp blocks: the block cap
    assert small.limiters == ("blocks",) and small.occupancy == 0.5
    full = occ.occupancy("9.0", 1024, 32)                 # 2 blocks fill 64 warps and 64 K registers
    assert full.limiters == ("warps", "registers") and full.occupancy == 1.0
    regs = occ.occupancy("9.0", 256, 128)                 # 128 regs: 4 KiB per warp -> 16 warps
    assert regs.limiters == ("registers",) and regs.active_blocks == 2
    smem = occ.occupancy("9.0", 128, 16, static_shared=48 * KiB)   # 48 K + 1 K reserved
    assert smem.limiters == ("shared_memory",) and smem.active_blocks == 4
    assert smem.shared_per_block == 49 * KiB and smem.carveout_bytes == 228 * KiB


def test_register_rules():
    arch = occ.architecture("sm_90")
    # 4 sub-partitions: 72 regs -> 2304 per warp -> 7 warps per sub-partition -> 28, not 64K/2304 = 28.4
    assert occ.blocks_limited_by_registers(arch, 32, 72) == 28
    # 40 regs -> 1280 per warp: 12 per sub-partition = 48 warps, where 65536 // 1280 would say 51
    assert occ.blocks_limited_by_registers(arch, 32, 40) == 48
    # a partial warp is a whole warp
    assert occ.blocks_limited_by_registers(arch, 33, 64) == occ.blocks_limited_by_registers(arch, 64, 64)
    assert occ.blocks_limited_by_warps(arch, 33) == occ.blocks_limited_by_warps(arch, 64) == 32
    assert occ.blocks_limited_by_registers(arch, 1024, 0) == occ.UNLIMITED
    assert occ.blocks_limited_by_registers(arch, 1024, 65) == 0   # more than 64 K registers in a block


def test_shared_memory_rules():
    h200, v100 = occ.architecture((9, 0)), occ.architecture((7, 0))
    assert occ.shared_allocation(h200, 0) == KiB              # the reservation alone
    assert occ.shared_allocation(h200, 1) == KiB + 128        # reservation before rounding
    assert occ.shared_allocation(v100, 1) == 256
    assert occ.blocks_limited_by_shared_memory(v100, 0) == occ.UNLIMITED
    # carveout 10 % of 228 K = 22.8 K rounds up to 32 K; 25 % = 57 K -> 64 K
    assert occ.shared_per_sm(h200, 10) == 32 * KiB and occ.shared_per_sm(h200, 25) == 64 * KiB
    assert occ.blocks_limited_by_shared_memory(h200, 7 * KiB, carveout=10) == 4
    # a block that does not fit the preferred carveout bumps it to the next size that holds it
    assert occ.shared_per_sm(h200, 0, 40 * KiB) == 64 * KiB
    assert occ.blocks_limited_by_shared_memory(h200, 39 * KiB, carveout=0) == 1
    assert occ.shared_per_sm("7.5", 0) == 32 * KiB            # Turing's smallest carveout


def test_dynamic_shared_beyond_the_max_dynamic_attribute_gives_zero():
    assert occ.occupancy("9.0", 128, 32, dynamic_shared=48 * KiB).active_blocks == 4
    over = occ.occupancy("9.0", 128, 32, dynamic_shared=48 * KiB + 1)
    assert over.active_blocks == 0 and over.limiters == ("shared_memory",)
    raised = occ.occupancy("9.0", 128, 32, dynamic_shared=100 * KiB, max_dynamic_shared=227 * KiB)
    assert raised.active_blocks == 2
    static = occ.occupancy("9.0", 128, 32, static_shared=1024, dynamic_shared=47 * KiB + 1)
    assert static.active_blocks == 0                      # the default attribute is 48 K - static


def test_max_potential_block_size():
    assert occ.max_potential_block_size("9.0", 32) == (2, 1024)
    assert occ.max_potential_block_size("9.0", 32, sm_count=132) == (264, 1024)
    # limit 100: 100 threads is 4 warps (16 blocks, 1600 threads); 64 fills the SM (32 x 64 = 2048)
    assert occ.max_potential_block_size("9.0", 32, block_size_limit=100) == (32, 64)
    # dynamic shared memory as a function of the block size: 4 bytes per thread
    per_thread = occ.max_potential_block_size("8.6", 32, dynamic_shared=lambda b: 4 * b)
    assert per_thread.block_size * per_thread.min_grid_size == 1536
    assert occ.max_potential_block_size("9.0", 32, dynamic_shared=48 * KiB + 1) == (0, 0)
    with pytest.raises(ValueError, match="dynamic_shared"):
        occ.max_potential_block_size("9.0", 32, dynamic_shared=lambda b: -1)


@pytest.mark.parametrize("spelling", [(9, 0), [9, 0], "9.0", "sm_90", "sm_90a", "compute_90", "90",
                                      " SM_90 "])
def test_cc_spellings(spelling):
    assert occ.parse_cc(spelling) == (9, 0)
    assert occ.architecture(spelling) is occ.ARCHITECTURES[(9, 0)]


def test_two_digit_majors():
    assert occ.parse_cc("sm_100") == (10, 0) and occ.parse_cc("120") == (12, 0)
    assert occ.parse_cc("12.0") == (12, 0) and occ.parse_cc((10, 0, "a")) == (10, 0)


@pytest.mark.parametrize("kwargs, field", [
    (dict(cc=(6, 1)), "cc 6.1"),
    (dict(cc="hopper"), "cc must"),
    (dict(block_size=0), "block_size"),
    (dict(block_size=1025), "block_size"),
    (dict(block_size=32.0), "block_size"),
    (dict(block_size=True), "block_size"),
    (dict(registers_per_thread=-1), "registers_per_thread"),
    (dict(registers_per_thread=256), "registers_per_thread"),
    (dict(static_shared=-1), "static_shared"),
    (dict(static_shared=48 * KiB + 1), "static_shared"),
    (dict(dynamic_shared=-5), "dynamic_shared"),
    (dict(dynamic_shared="0"), "dynamic_shared"),
    (dict(max_dynamic_shared=227 * KiB + 1), "max_dynamic_shared"),
    (dict(max_dynamic_shared=-1), "max_dynamic_shared"),
    (dict(carveout=-2), "carveout"),
    (dict(carveout=101), "carveout"),
    (dict(carveout=0.5), "carveout"),
])
def test_invalid_input_names_the_field(kwargs, field):
    args = dict(cc=(9, 0), block_size=128, registers_per_thread=32)
    args.update(kwargs)
    with pytest.raises(ValueError, match=field):
        occ.occupancy(**args)


def test_numpy_integers_are_integers():
    np = pytest.importorskip("numpy")
    assert occ.occupancy((9, 0), np.int64(256), np.int32(20)).active_blocks == 8


def test_architecture_table_matches_notes():
    """The shared/NOTES.md table, row by row: threads/SM, blocks/SM, shared/SM, opt-in, reserved."""
    notes = {
        (7, 0): (2048, 32, 96, 96, 0), (7, 5): (1024, 16, 64, 64, 0), (8, 0): (2048, 32, 164, 163, 1),
        (8, 6): (1536, 16, 100, 99, 1), (8, 7): (1536, 16, 164, 163, 1), (8, 9): (1536, 24, 100, 99, 1),
        (9, 0): (2048, 32, 228, 227, 1), (10, 0): (2048, 32, 228, 227, 1), (12, 0): (1536, 24, 100, 99, 1),
    }
    assert set(notes) == set(occ.ARCHITECTURES)
    for cc, (threads, blocks, smem, optin, reserved) in notes.items():
        arch = occ.ARCHITECTURES[cc]
        assert (arch.max_threads_per_sm, arch.max_blocks_per_sm) == (threads, blocks)
        assert (arch.shared_per_sm, arch.shared_per_block_optin) == (smem * KiB, optin * KiB)
        assert arch.reserved_shared_per_block == reserved * KiB
        assert arch.carveouts[-1] == arch.shared_per_sm and arch.max_warps_per_sm == threads // 32
