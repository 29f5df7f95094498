"""The tape's values: how the recording and the replaying side encode what passes between a
graded test and the student's code, the same way on both sides (so the arguments' digests agree)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import operator
from pathlib import Path

import numpy as np

from kernellab.gpu import hooks

MAX_TAPE_BYTES = 256 * 2**20           # a tape past this is not read (a flood is not a result)
TRUSTED_MODULES = ("kernellab.", "numba.", "numpy", "builtins", "collections", "_pytest.")
ALLOCATORS = ("to_device", "device_array", "device_array_like", "pinned_array", "pinned_array_like")
NUMERIC_KINDS = "biufc"


class Diverged(AssertionError):
    """The check made an operation the recorded run did not make here."""


class Incomplete(AssertionError):
    """The recorded run ended before the check did: its process was killed or died, or it hung."""


class StudentRaised(Exception):
    """An exception of the student's own class, or one that would end the judge, replayed as data."""


def tape_path(folder: Path, nodeid: str) -> Path:
    return Path(folder) / f"{hashlib.sha256(nodeid.encode()).hexdigest()[:32]}.jsonl"


def is_reference(name: str) -> bool:
    """The lab's given float64 NumPy references: the judge calls the course's own, never a tape."""
    return "reference" in name and not name.startswith("_")


def _qualified(kind: type) -> str:
    return f"{kind.__module__}:{kind.__qualname__}"


def _trusted(name: str) -> bool:
    return name.split(":")[0] == "builtins" or name.startswith(TRUSTED_MODULES)


def _array_bytes(host: np.ndarray) -> dict:
    host = np.ascontiguousarray(host)
    return {"dtype": host.dtype.str, "shape": list(host.shape),
            "v": base64.b64encode(host.tobytes()).decode()}


def _array_from(fields: dict) -> np.ndarray:
    dtype = np.dtype(fields["dtype"])
    if dtype.kind not in NUMERIC_KINDS or dtype.hasobject:
        raise ValueError(f"a recorded array of dtype {dtype} is not data")
    shape = tuple(int(n) for n in fields["shape"])
    return np.frombuffer(base64.b64decode(fields["v"]), dtype=dtype).reshape(shape).copy()


def _is_device_array(value) -> bool:
    return hasattr(value, "copy_to_host") and hasattr(value, "dtype") and hasattr(value, "shape")


def _host(value) -> np.ndarray:
    """An array's contents, read without a call a Timeline or a launch recorder would see."""
    if not _is_device_array(value):
        return np.asarray(value)
    simulated = getattr(value, "_ary", None)
    if simulated is not None:
        return np.array(simulated)
    if value.is_c_contiguous() and value.size:
        from numba.cuda.cudadrv import driver
        host = np.empty(value.shape, dtype=value.dtype)
        driver.device_to_host(host, value, value.nbytes)
        return host
    return value.copy_to_host()


def _digest(host: np.ndarray) -> str:
    host = np.ascontiguousarray(host)
    return hashlib.sha256(host.dtype.str.encode() + str(host.shape).encode() + host.tobytes()).hexdigest()[:24]


def _is_namedtuple(value) -> bool:
    return isinstance(value, tuple) and type(value) is not tuple and hasattr(type(value), "_fields")


_NAMEDTUPLES: dict = {}


def _namedtuple(name: str, fields: list[str]):
    import collections
    key = (name, tuple(fields))
    if key not in _NAMEDTUPLES:
        _NAMEDTUPLES[key] = collections.namedtuple(name, fields)
    return _NAMEDTUPLES[key]


class Handle:
    """A student object as a graded test holds it: `Live` in the child, `Ghost` in the judge."""

    __slots__ = ()


# The comparisons a test may make with a student object, each taped as one operation.
COMPARISONS = {"__eq__": operator.eq, "__ne__": operator.ne, "__lt__": operator.lt,
               "__le__": operator.le, "__gt__": operator.gt, "__ge__": operator.ge,
               "__contains__": operator.contains}


class _Side:
    """What the recording and the replaying side share: handles, the arrays the test can see, and
    the encoding of values (the same on both sides, so the arguments' digests agree)."""

    def __init__(self):
        self.handles: list = []          # handle id -> the object (Live's real one; the Ghost)
        self.handle_of: dict[int, int] = {}
        self.arrays: list = []           # the arrays the test can see, in the order it saw them
        self.array_of: dict[int, int] = {}
        self.seen: list[str | None] = []  # each array's digest when last written to the tape
        self.depth = 0                   # > 0 inside an operation: its allocations are not the test's

    # -- arrays -------------------------------------------------------------------------------
    def register(self, array) -> int:
        key = id(array)
        if key not in self.array_of:
            self.array_of[key] = len(self.arrays)
            self.arrays.append(array)
            self.seen.append(None)
        return self.array_of[key]

    @contextlib.contextmanager
    def allocations(self):
        """The test's own allocations (`cuda.to_device`, `checks.poisoned`, ...) join the arrays
        it can see; those made inside an operation are the operation's."""
        def note(proceed, *args, **kwargs):
            array = proceed()
            if self.depth == 0:
                self.register(array)
            return array
        with hooks.subscribe(**{name: note for name in ALLOCATORS}):
            yield

    # -- values -------------------------------------------------------------------------------
    def encode_argument(self, value):
        """A digest of an argument: arrays by content (and which of the test's arrays it is),
        handles by number, the test's own objects by type."""
        if isinstance(value, Handle):
            return {"h": value._kl_id}
        if value is None or isinstance(value, (bool, int, float, str, complex)):
            return self._scalar(value)
        if isinstance(value, np.generic):
            return {"np": value.dtype.str, "v": repr(value.item())}
        if isinstance(value, np.ndarray) or _is_device_array(value):
            index = self.register(value)
            return {"r": index, "sha": _digest(_host(value))}
        if isinstance(value, (list, tuple)):
            return {type(value).__name__[:5]: [self.encode_argument(v) for v in value]}
        if isinstance(value, dict):
            return {"d": [[self.encode_argument(k), self.encode_argument(v)] for k, v in value.items()]}
        if isinstance(value, type):
            return {"type": _qualified(value)}
        name = _qualified(type(value))
        if callable(value) and hasattr(value, "__qualname__") and _trusted(name):
            return {"fn": f"{getattr(value, '__module__', '')}:{value.__qualname__}"}
        # the test's own object (a stream, an event) by its kind alone: the judge runs in the
        # simulator, whose stream is numba.cuda.simulator.api.stream where the GPU's is Stream
        return {"opaque": type(value).__name__.lower()}

    @staticmethod
    def _scalar(value):
        if isinstance(value, float):
            return {"f": value.hex()}
        if isinstance(value, complex):
            return {"c": [value.real.hex(), value.imag.hex()]}
        if isinstance(value, int) and not isinstance(value, bool):
            return {"i": str(value)}
        return {"v": value}

    def snapshot(self) -> list:
        """The arrays the test can see that changed since the tape last said."""
        changed = []
        for index, array in enumerate(self.arrays):
            host = _host(array)
            digest = _digest(host)
            if digest != self.seen[index]:
                self.seen[index] = digest
                changed.append([index, _array_bytes(host)])
        return changed



def _is_array(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind in NUMERIC_KINDS or _is_device_array(value)


def _is_instrument_class(kind: type) -> bool:
    return kind.__module__.startswith("kernellab.")


def _is_instrument(value) -> bool:
    return _is_instrument_class(type(value)) and hasattr(value, "__dict__")


def _is_data(value, depth: int = 0) -> bool:
    """Whether `value` travels as data (no handle anywhere in it); asks, registers nothing."""
    if depth > 20:
        return False
    if value is None or isinstance(value, (bool, int, float, str, complex, type)) or _is_array(value):
        return True
    if isinstance(value, np.generic):
        return value.dtype.kind in NUMERIC_KINDS
    if isinstance(value, Handle):
        return False
    if type(value) in (list, tuple) or _is_namedtuple(value):
        return all(_is_data(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(_is_data(k, depth + 1) and _is_data(v, depth + 1) for k, v in value.items())
    if _is_instrument(value) and not hasattr(value, "__enter__"):   # a recorder acts: a handle
        return (all(_is_data(v, depth + 1) for v in vars(value).values())
                and (not isinstance(value, dict)
                     or all(_is_data(k, depth + 1) and _is_data(v, depth + 1) for k, v in value.items()))
                and (not isinstance(value, (list, tuple)) or all(_is_data(v, depth + 1) for v in value)))
    return False
