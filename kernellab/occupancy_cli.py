"""`kernellab occupancy`: one configuration, or a lab kernel whose resources are compiled for.

    kernellab occupancy --cc 9.0 --block-size 256 --registers 32 [--static-shared B]
                        [--dynamic-shared B] [--carveout P] [--json]
    kernellab occupancy labs/lab06_occupancy.py:KERNEL [--block-size 256] [--signature SIG]
"""

from __future__ import annotations

import dataclasses
import json

from kernellab import occupancy
from kernellab.gpu import device

DEFAULT_BLOCK_SIZES = (32, 64, 128, 256, 512, 1024)


def main(args) -> int:
    cc = occupancy.parse_cc(args.cc) if args.cc else tuple(device.facts().cc)
    found = None
    if args.kernel:
        from kernellab.kernels import jit, resources
        kernel = jit.resolve_kernel(args.kernel)
        found = resources.kernel_resources(kernel, args.signature, cc=cc)
        registers, static = found.registers_per_thread, found.static_shared_bytes
    else:
        if args.registers is None:
            raise ValueError("give --registers (and --block-size), or a kernel as FILE.py:KERNEL")
        registers, static = args.registers, args.static_shared or 0
    block_sizes = [args.block_size] if args.block_size is not None else list(DEFAULT_BLOCK_SIZES)
    results = [occupancy.occupancy(cc, b, registers, static, args.dynamic_shared, carveout=args.carveout)
               for b in block_sizes]
    if args.json:
        print(json.dumps({
            "cc": f"{cc[0]}.{cc[1]}",
            "resources": None if found is None else
            {k: v for k, v in dataclasses.asdict(found).items() if k != "log"},
            "results": [{"block_size": r.block_size, "active_blocks": r.active_blocks,
                         "active_warps": r.active_warps, "max_warps": r.max_warps,
                         "occupancy": r.occupancy, "limiters": list(r.limiters)} for r in results],
        }, indent=2))
        return 0
    arch = occupancy.architecture(cc)
    if found is not None:
        print(f"{args.kernel}: {registers} registers/thread, {static} B static shared, "
              f"{found.local_bytes} B stack, spills {found.spill_stores_bytes} B "
              f"[{found.source}]")
    print(f"{arch.label}: {registers} registers/thread, {static} B static + "
          f"{args.dynamic_shared} B dynamic shared, carveout {args.carveout}")
    print(f"{'block':>6} {'blocks/SM':>10} {'warps/SM':>9} {'occupancy':>10}  limited by")
    for r in results:
        print(f"{r.block_size:>6} {r.active_blocks:>10} {r.active_warps:>5}/{r.max_warps:<3} "
              f"{r.occupancy:>10.0%}  {', '.join(r.limiters)}")
    return 0
