"""kernellab's settings, each resolved in one place: the command-line option, then the
environment variable, then the default.

| setting     | option                          | variable           | default                     |
|-------------|---------------------------------|--------------------|-----------------------------|
| target      | `--target` (pytest, tour, bench) | KERNELLAB_TARGET   | labs; tour and bench: solutions where they exist |
| device      | none: read before numba.cuda    | KERNELLAB_DEVICE   | auto (kernellab.gpu.device) |
| seed        | `--seed`                        | KERNELLAB_SEED     | fresh (grading.plugin.new_seed) |
| labs folder | `grade --root`                  | KERNELLAB_LABS_DIR | the course's labs/          |
| grading     | none: the grader's children     | KERNELLAB_GRADING  | off                         |
| stress      | `--no-stress`                   | none               | on                          |

A command resolves its settings here once and passes them down. Code that is not handed a
setting (a lab loading its module through `target.load`) gets what the running command chose
(`using`), else the environment, else the default. kernellab never writes its own environment:
`child_env` is the one place that writes settings, into the environment of a child process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path
from typing import Mapping

from kernellab.gpu import device as gpu_device

TARGETS = ("labs", "solutions")


@dataclasses.dataclass(frozen=True)
class Setting:
    name: str                     # as `using` and `child_env` take it
    variable: str
    choices: tuple[str, ...] = ()

    def resolve(self, option=None, default=None, environ: Mapping | None = None) -> str | None:
        """The option if given, else the running command's choice (`using`), else the variable
        (in `environ` if given, which no choice overrides), else `default`."""
        if option is not None:
            return self.check(option, f"--{self.name}")
        if self.name in _chosen and environ is None:
            return _chosen[self.name]
        value = self.check((os.environ if environ is None else environ).get(self.variable),
                           self.variable)
        return default if value is None else value

    def check(self, value, where: str) -> str | None:
        """The value, trimmed (None if empty); outside `choices`, a one-line error naming `where`
        it came from."""
        value = str(value if value is not None else "").strip()
        if not value:
            return None
        if self.choices:
            value = value.lower()
            if value not in self.choices:
                raise ValueError(f"{where} must be one of {'|'.join(self.choices)}, not {value!r}")
        return value


TARGET = Setting("target", "KERNELLAB_TARGET", TARGETS)
DEVICE = Setting("device", "KERNELLAB_DEVICE", gpu_device.MODES)  # this process: read at import
SEED = Setting("seed", "KERNELLAB_SEED")
LABS_DIR = Setting("labs_dir", "KERNELLAB_LABS_DIR")
GRADING = Setting("grading", "KERNELLAB_GRADING")
SETTINGS = {s.name: s for s in (TARGET, DEVICE, SEED, LABS_DIR, GRADING)}

_chosen: dict[str, str] = {}


def target(option: str | None = None, default: str = "labs") -> str:
    """Which implementation runs: the student's labs/ or the instructor's solutions/."""
    return TARGET.resolve(option, default)


def device(environ: Mapping | None = None) -> str:
    """The device mode asked for (auto|gpu|sim), here or in a child's environment `environ`."""
    return DEVICE.resolve(default="auto", environ=environ)


def seed(option: int | None = None) -> int | None:
    """The seed to replay, or None for a fresh one."""
    value = SEED.resolve(option)
    try:
        return None if value is None else int(value)
    except ValueError:
        raise ValueError(f"KERNELLAB_SEED must be an integer, not {value!r}") from None


def labs_dir(option: Path | str | None = None) -> Path | None:
    """The folder whose lab files stand in for labs/ (a submission being graded), or None."""
    value = LABS_DIR.resolve(option)
    return None if value is None else Path(value)


def grading() -> bool:
    """True in the grader's child processes (a submission's code runs there)."""
    return GRADING.resolve() is not None


@contextlib.contextmanager
def using(**options):
    """Inside the block, settings not handed down resolve to these values (a command's resolved
    options, e.g. `using(target="solutions")`); None leaves a setting to the environment."""
    unknown = set(options) - set(SETTINGS)
    if unknown:
        raise ValueError(f"no setting named {', '.join(sorted(unknown))}")
    given = {name: SETTINGS[name].check(value, f"--{name}") for name, value in options.items()
             if value is not None}
    before = dict(_chosen)
    _chosen.update(given)
    try:
        yield
    finally:
        _chosen.clear()
        _chosen.update(before)


CGROUP_QUOTAS = (Path("/sys/fs/cgroup/cpu.max"),                                  # cgroup v2: "quota period"
                 (Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")))


def usable_cores(quotas=CGROUP_QUOTAS) -> int:
    """The cores this process may run on: its CPU affinity, capped by the container's CPU quota
    (cgroup v2 or v1). os.cpu_count() counts the host's cores, which in a container limited to two
    would start a worker per host core on those two."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    for quota in quotas:
        try:
            if isinstance(quota, Path):
                limit, period = quota.read_text().split()[:2]
            else:
                limit, period = (path.read_text().strip() for path in quota)
            if limit not in ("max", "-1") and int(period) > 0:
                cores = min(cores, max(1, -(-int(limit) // int(period))))
        except (OSError, ValueError):
            continue
    return max(1, cores)


def child_env(base: Mapping | None = None, **values) -> dict[str, str]:
    """The environment for a child process: `base` (default: this one's) with each given setting
    written to its variable (True writes 1, False removes it). Settings not given pass through,
    so the child resolves them as this process would; a `using` choice is not inherited: hand
    it down by name."""
    env = dict(os.environ if base is None else base)
    for name, value in values.items():
        setting = SETTINGS.get(name)
        if setting is None:
            raise ValueError(f"no setting named {name}")
        if value is False:
            env.pop(setting.variable, None)
            continue
        written = "1" if value is True else setting.check(value, setting.variable)
        if written is not None:
            env[setting.variable] = written
    return env
