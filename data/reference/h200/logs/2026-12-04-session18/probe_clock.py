"""Session 18, call E: what reading the host clock costs on the lent host (the compiled recorder reads
it once per op noted, twice per op with inferred starts), beside a call that does nothing, and which
clock source the kernel uses (a source without a vDSO read makes each read a system call)."""
import pathlib
import time
import timeit

source = pathlib.Path("/sys/devices/system/clocksource/clocksource0")
for name in ("current_clocksource", "available_clocksource"):
    try:
        print(name, (source / name).read_text().strip())
    except OSError as error:
        print(name, "unreadable:", error)
number = 200_000
for label, fn in (("perf_counter", time.perf_counter), ("perf_counter_ns", time.perf_counter_ns),
                  ("monotonic", time.monotonic), ("noop (int)", int)):
    best = min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e9
    print(f"{label}: {best:.0f} ns per call (best of 7 x {number})")
