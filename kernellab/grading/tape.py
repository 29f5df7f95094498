"""Record and replay: the verdict is decided where student code cannot reach.

A graded test runs twice.

- **Recorded**, in the child that imports the student's lab (`--kl-tape DIR`): the `lab` fixture is
  a `Live` proxy. Every operation the test makes on the lab (an attribute, a call, a kernel's
  `[grid, block]`, an iteration, a `with`) goes through to the student's code and is written to the
  test's tape as data: the arguments' digests, the result, any exception with the student's line,
  and every array the test can see that changed (the arrays it allocated, the ones it passed in,
  the ones the lab returned). The instruments that watch student code run (`meter`,
  `record_launches`, `Timeline`, `capture`, `kernel_resources`: import them from here) are
  recorded the same way. The child's own pass or fail is never read.
- **Replayed**, in the judge (`--kl-replay DIR`): a pytest of the instructor's own tests that never
  imports the student's file. The `lab` fixture is a `Ghost` that answers each operation from the
  tape, writes the recorded arrays back, and raises the recorded exceptions; the references are the
  course's own. The test's assertions run here, on data, and their outcome is the score.

A student patch in the child (pytest, the plugin, numpy, a check) can change only what the child
records; the judge runs the pristine checks on it, so an operation that does not match the tape
(`Diverged`), a tape that ends early (`Incomplete`) or one that does not parse fails the test.
The tape is JSON lines; arrays travel as raw bytes of a numeric dtype, never pickled.
Outside the grader (plain pytest, the notebooks) nothing is recorded: the proxies are not used
and the instruments are the plain ones.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import hashlib
import importlib
import json
import traceback
from pathlib import Path

import numpy as np

from kernellab.course import target
from kernellab.gpu import checks, graphs, hooks, launches, timeline, traffic
from kernellab.kernels import resources

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
        if isinstance(value, (Live, Ghost)):
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
        return {"opaque": name}

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


# ---- the recording side ----------------------------------------------------------------------

class Recording(_Side):
    """One test's tape, written as it goes (a child killed mid-test leaves what it had)."""

    def __init__(self, path: Path):
        super().__init__()
        self.file = open(path, "w", buffering=1)
        self.refresh: dict[int, object] = {}   # handle id of a context -> what its __enter__ gave

    def write(self, event: dict):
        self.file.write(json.dumps(event) + "\n")

    def close(self):
        self.file.close()

    def handle(self, obj) -> "Live":
        key = id(obj)
        if key not in self.handle_of:
            self.handle_of[key] = len(self.handles)
            self.handles.append(obj)
            try:
                shown = repr(obj)[:300]
            except Exception:
                shown = f"<{type(obj).__name__}>"
            self.write({"new": self.handle_of[key], "repr": shown, "type": type(obj).__name__})
        return Live(self, obj, self.handle_of[key])

    def encode_result(self, value, lenient: bool = False):
        """A result as data where it is data, else a handle for the judge to go on asking
        (`lenient`: else {"opaque": its type}, which the judge reads as None)."""
        if isinstance(value, Live):
            return {"h": value._kl_id}
        if value is None or isinstance(value, (bool, int, float, str, complex)):
            return self._scalar(value)
        if isinstance(value, np.generic) and value.dtype.kind in NUMERIC_KINDS:
            return {"np": value.dtype.str, "v": base64.b64encode(value.tobytes()).decode()}
        if _is_array(value):
            if id(value) in self.array_of:
                return {"r": self.array_of[id(value)]}    # its writes travel in the snapshot
            index = self.register(value)
            host = _host(value)
            self.seen[index] = _digest(host)
            kind = "dev" if _is_device_array(value) else "nd"
            return {kind: _array_bytes(host), "r": index}
        if _is_namedtuple(value) and _is_instrument_class(type(value)) and (lenient or _is_data(tuple(value))):
            return {"obj": _qualified(type(value)), "state": {}, "items": None,
                    "elements": [self.encode_result(v, lenient) for v in value]}
        if _is_namedtuple(value) and (lenient or _is_data(tuple(value))):
            return {"nt": type(value).__name__, "fields": list(type(value)._fields),
                    "t": [self.encode_result(v, lenient) for v in value]}
        if type(value) in (list, tuple):
            return {type(value).__name__[:5]: [self.encode_result(v, lenient) for v in value]}
        if type(value) is dict:
            return {"d": [[self.encode_result(k, lenient), self.encode_result(v, lenient)]
                          for k, v in value.items()]}
        if isinstance(value, type) and _trusted(_qualified(value)):
            return {"type": _qualified(value)}
        if _is_instrument(value) and (lenient or _is_data(value)):
            return {"obj": _qualified(type(value)),
                    "state": {name: self.encode_result(field, lenient)
                              for name, field in vars(value).items()},
                    "items": ([[self.encode_result(k, lenient), self.encode_result(v, lenient)]
                               for k, v in value.items()] if isinstance(value, dict) else None),
                    "elements": ([self.encode_result(v, lenient) for v in value]
                                 if isinstance(value, (list, tuple)) else None)}
        if lenient:
            return {"opaque": _qualified(type(value))}
        return {"h": self.handle(value)._kl_id}

    def operation(self, target_id: int, op: str, call, args=(), kwargs=None):
        """Run `call()` on the student's side and write what it did."""
        kwargs = kwargs or {}
        event = {"op": op, "on": target_id, "args": [self.encode_argument(a) for a in args],
                 "kwargs": {k: self.encode_argument(v) for k, v in kwargs.items()}}
        self.depth += 1
        try:
            result = call()
        except BaseException as exc:
            self.depth -= 1
            event["raise"] = raised(exc)
            event["writes"] = self.snapshot()
            self.write(event)
            raise
        self.depth -= 1
        if op == "__enter__":
            encoded = self.encode_result(result)
            if "obj" in encoded:
                self.refresh[target_id] = result
        elif op == "__exit__" and target_id in self.refresh:
            encoded = self.encode_result(result)
            event["refreshed"] = self.encode_result(self.refresh.pop(target_id), lenient=True)
        else:
            encoded = self.encode_result(result)
        event["result"] = encoded
        if op in ("__call__", "__enter__", "__exit__", "__iter__", "__setitem__", "__setattr__"):
            event["writes"] = self.snapshot()
        self.write(event)
        return result


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
    if isinstance(value, Live):
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


def raised(exc: BaseException) -> dict:
    """An exception as data: its classes (most derived first), its message, the student's line."""
    where = None
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if target.LAB_FILE.match(Path(frame.filename).name) and "kernellab" not in Path(frame.filename).parts:
            where = f"{Path(frame.filename).name}:{frame.lineno}"
            break
    return {"types": [_qualified(k) for k in type(exc).__mro__ if issubclass(k, BaseException)],
            "message": str(exc)[:4000], "where": where}


def _unwrap(value):
    if isinstance(value, Live):
        return value._kl_obj
    if type(value) in (list, tuple):
        return type(value)(_unwrap(v) for v in value)
    if type(value) is dict:
        return {k: _unwrap(v) for k, v in value.items()}
    return value


class Live:
    """The student's object, seen by a recorded test: every operation goes through and is taped."""

    __slots__ = ("_kl_tape", "_kl_obj", "_kl_id")

    def __init__(self, tape: Recording, obj, handle_id: int):
        object.__setattr__(self, "_kl_tape", tape)
        object.__setattr__(self, "_kl_obj", obj)
        object.__setattr__(self, "_kl_id", handle_id)

    def _kl_do(self, op, call, *args, **kwargs):
        return _wrap_nested(self._kl_tape, self._kl_tape.operation(self._kl_id, op, call, args, kwargs))

    def __getattr__(self, name):
        obj = self._kl_obj
        if self._kl_id == 0 and is_reference(name):
            return getattr(obj, name)        # the judge calls the course's own reference
        return self._kl_do("getattr", lambda: getattr(obj, name), name)

    def __setattr__(self, name, value):
        self._kl_do("__setattr__", lambda: setattr(self._kl_obj, name, _unwrap(value)), name, value)

    def __call__(self, *args, **kwargs):
        return self._kl_do("__call__", lambda: self._kl_obj(*_unwrap(args), **_unwrap(kwargs)),
                           *args, **kwargs)

    def __getitem__(self, key):
        return self._kl_do("__getitem__", lambda: self._kl_obj[_unwrap(key)], key)

    def __setitem__(self, key, value):
        self._kl_do("__setitem__", lambda: self._kl_obj.__setitem__(_unwrap(key), _unwrap(value)),
                    key, value)

    def __iter__(self):
        return iter(self._kl_do("__iter__", lambda: list(self._kl_obj)))

    def __len__(self):
        return self._kl_do("__len__", lambda: len(self._kl_obj))

    def __bool__(self):
        return self._kl_do("__bool__", lambda: bool(self._kl_obj))

    def __contains__(self, item):
        return self._kl_do("__contains__", lambda: _unwrap(item) in self._kl_obj, item)

    def __eq__(self, other):
        return self._kl_do("__eq__", lambda: self._kl_obj == _unwrap(other), other)

    def __ne__(self, other):
        return self._kl_do("__ne__", lambda: self._kl_obj != _unwrap(other), other)

    def __lt__(self, other):
        return self._kl_do("__lt__", lambda: self._kl_obj < _unwrap(other), other)

    def __le__(self, other):
        return self._kl_do("__le__", lambda: self._kl_obj <= _unwrap(other), other)

    def __gt__(self, other):
        return self._kl_do("__gt__", lambda: self._kl_obj > _unwrap(other), other)

    def __ge__(self, other):
        return self._kl_do("__ge__", lambda: self._kl_obj >= _unwrap(other), other)

    def __hash__(self):
        return hash(("kernellab-handle", self._kl_id))

    def __enter__(self):
        return self._kl_do("__enter__", lambda: self._kl_obj.__enter__())

    def __exit__(self, *exc):
        kind = exc[0].__name__ if exc[0] else None
        return self._kl_do("__exit__", lambda: self._kl_obj.__exit__(*exc), kind)

    def __instancecheck__(self, instance):
        return self._kl_do("__instancecheck__", lambda: isinstance(_unwrap(instance), self._kl_obj),
                           instance)

    def __repr__(self):
        return repr(self._kl_obj)

    def __str__(self):
        return str(self._kl_obj)

    def __format__(self, spec):
        return format(self._kl_obj, spec)


def _wrap_nested(tape: Recording, value):
    """A result the test receives: its student objects as Live proxies (so later operations on
    them are taped too), its data as it is."""
    if type(value) in (list, tuple):
        return type(value)(_wrap_nested(tape, v) for v in value)
    if type(value) is dict:
        return {_wrap_nested(tape, k): _wrap_nested(tape, v) for k, v in value.items()}
    if id(value) in tape.handle_of:
        return Live(tape, value, tape.handle_of[id(value)])
    return value


# ---- the replaying side (the judge) ----------------------------------------------------------

class Replay(_Side):
    """One test's tape, read back by the judge."""

    def __init__(self, path: Path | None, why_missing: str):
        super().__init__()
        self.events: list[dict] = []
        self.position = 0
        self.why_missing = why_missing
        if path is not None and path.exists():
            if path.stat().st_size > MAX_TAPE_BYTES:
                raise Incomplete(f"the recorded run wrote {path.stat().st_size} bytes, past "
                                 f"{MAX_TAPE_BYTES}: not read")
            for line in path.read_text().splitlines():
                try:
                    self.events.append(json.loads(line))
                except json.JSONDecodeError:
                    break          # a line cut short by a kill: the tape ends here
        self.ghosts: dict[int, Ghost] = {}
        self.refresh: dict[int, object] = {}

    def next(self, kind: str) -> dict:
        while self.position < len(self.events) and "new" in self.events[self.position]:
            event = self.events[self.position]
            self.position += 1
            ghost = Ghost(self, int(event["new"]), str(event.get("repr", "")))
            self.ghosts[ghost._kl_id] = ghost
        if self.position >= len(self.events):
            raise Incomplete(self.why_missing)
        event = self.events[self.position]
        self.position += 1
        return event

    def ghost(self, handle_id: int) -> "Ghost":
        if handle_id not in self.ghosts:
            raise Diverged(f"the recorded run never made object #{handle_id}")
        return self.ghosts[handle_id]

    def operation(self, target_id: int, op: str, args=(), kwargs=None):
        kwargs = kwargs or {}
        wanted = {"op": op, "on": target_id, "args": [self.encode_argument(a) for a in args],
                  "kwargs": {k: self.encode_argument(v) for k, v in kwargs.items()}}
        event = self.next(op)
        got = {key: event.get(key) for key in wanted}
        if got != wanted:
            raise Diverged(f"the check asked for {_describe(wanted)}, but the recorded run did "
                           f"{_describe(got)} here")
        self.write_back(event.get("writes", []))
        if "raise" in event:
            raise replayed_exception(event["raise"])
        if "refreshed" in event and target_id in self.refresh:
            _refresh(self.refresh.pop(target_id), event["refreshed"], self)
        result = _decode(event.get("result"), self)
        if op == "__enter__" and isinstance(event.get("result"), dict) and "obj" in event["result"]:
            self.refresh[target_id] = result
        return result

    def write_back(self, writes: list):
        for index, fields in writes:
            if not 0 <= int(index) < len(self.arrays):
                raise Diverged(f"the recorded run wrote array #{index}, which this check never saw")
            array, data = self.arrays[int(index)], _array_from(fields)
            if _is_device_array(array):
                array.copy_to_device(data.reshape(array.shape).astype(array.dtype, copy=False))
            elif array.flags.writeable:
                np.copyto(array, data.reshape(array.shape), casting="unsafe")
            self.seen[int(index)] = _digest(_host(array))


def _describe(event: dict) -> str:
    if event.get("op") is None:
        return "nothing more"
    return f"{event['op']} on object #{event['on']} with {len(event.get('args') or [])} argument(s)"


def _decode(encoded, replay: Replay | None):
    """A taped value back as the judge sees it (handles as Ghosts)."""
    if not isinstance(encoded, dict):
        raise Diverged(f"an unreadable value on the tape: {str(encoded)[:80]}")
    if "v" in encoded and len(encoded) == 1:
        value = encoded["v"]
        if value is not None and not isinstance(value, (bool, str)):
            raise Diverged("an unreadable scalar on the tape")
        return value
    if "i" in encoded:
        return int(encoded["i"])
    if "f" in encoded:
        return float.fromhex(encoded["f"])
    if "c" in encoded:
        return complex(float.fromhex(encoded["c"][0]), float.fromhex(encoded["c"][1]))
    if "np" in encoded:
        dtype = np.dtype(encoded["np"])
        if dtype.kind not in NUMERIC_KINDS:
            raise Diverged(f"a recorded scalar of dtype {dtype} is not data")
        return np.frombuffer(base64.b64decode(encoded["v"]), dtype=dtype)[0]
    if "nd" in encoded or "dev" in encoded:
        from kernellab.gpu import device
        array = (device.cuda().to_device(_array_from(encoded["dev"])) if "dev" in encoded
                 else _array_from(encoded["nd"]))
        index = replay.register(array)
        if index != encoded["r"]:
            raise Diverged("the recorded run returned a new array where this check saw another")
        replay.seen[index] = _digest(_host(array))
        return array
    if "r" in encoded:
        index = int(encoded["r"])
        if not 0 <= index < len(replay.arrays):
            raise Diverged(f"the recorded run returned array #{index}, which this check never saw")
        return replay.arrays[index]
    if "h" in encoded:
        return replay.ghost(int(encoded["h"]))
    if "opaque" in encoded:
        return None             # a student object inside an instrument's record: not for the checks
    if "nt" in encoded:
        kind = _namedtuple(str(encoded["nt"]), [str(f) for f in encoded["fields"]])
        return kind(*(_decode(v, replay) for v in encoded["t"]))
    for key, kind in (("list", list), ("tuple", tuple)):
        if key in encoded:
            return kind(_decode(v, replay) for v in encoded[key])
    if "d" in encoded:
        return {_decode(k, replay): _decode(v, replay) for k, v in encoded["d"]}
    if "type" in encoded:
        return _trusted_object(encoded["type"])
    if "obj" in encoded:
        kind = _trusted_object(encoded["obj"])
        if not str(encoded["obj"]).startswith("kernellab."):
            raise Diverged(f"the recorded run returned a {encoded['obj']}, not kernellab's")
        if issubclass(kind, tuple):
            value = tuple.__new__(kind, [_decode(v, replay) for v in encoded["elements"] or ()])
        else:
            value = kind.__new__(kind)
        _refresh(value, encoded, replay)
        return value
    raise Diverged(f"an unreadable value on the tape: {sorted(encoded)[:4]}")


def _refresh(value, encoded: dict, replay: Replay):
    """Give a judge-side instrument object the fields the recorded run's had (at its `with`'s end)."""
    for name, field in (encoded.get("state") or {}).items():
        object.__setattr__(value, str(name), _decode(field, replay))
    if isinstance(value, dict) and encoded.get("items") is not None:
        dict.clear(value)
        dict.update(value, {_decode(k, replay): _decode(v, replay) for k, v in encoded["items"]})
    if isinstance(value, list) and encoded.get("elements") is not None:
        list.clear(value)
        list.extend(value, [_decode(v, replay) for v in encoded["elements"]])


def _trusted_object(name: str):
    """A class named on the tape, imported only from kernellab, numba, numpy or the builtins."""
    name = str(name)
    if not _trusted(name) or ":" not in name:
        raise Diverged(f"the tape names {name}, which the judge does not import")
    module, qualname = name.split(":", 1)
    value = importlib.import_module(module)
    for part in qualname.split("."):
        if part.startswith("<"):
            raise Diverged(f"the tape names {name}, which cannot be imported")
        value = getattr(value, part)
    return value


def replayed_exception(fields: dict) -> BaseException:
    """The recorded exception, raised in the judge: its own class where kernellab, numba, numpy
    or Python defines it (so `pytest.raises(ValueError)` still matches), else the nearest such
    base; never one that would end the judge (SystemExit, KeyboardInterrupt)."""
    message = str(fields.get("message", ""))
    where = fields.get("where")
    text = message + (f" (raised at {where})" if where else "")
    for name in fields.get("types", []):
        if not _trusted(str(name)):
            continue
        try:
            kind = _trusted_object(name)
        except (Diverged, ImportError, AttributeError):
            continue
        if not isinstance(kind, type) or not issubclass(kind, BaseException):
            continue
        if not issubclass(kind, Exception):
            if name.startswith("_pytest.outcomes:Failed"):
                import pytest
                return pytest.fail.Exception(text, pytrace=False)
            return StudentRaised(f"{name.split(':')[-1]}: {text}")
        try:
            return kind(text)
        except Exception:
            continue
    return StudentRaised(text)


class Ghost:
    """The student's object as the judge sees it: each operation is answered by the tape."""

    __slots__ = ("_kl_tape", "_kl_id", "_kl_repr")

    def __init__(self, tape: Replay, handle_id: int, shown: str):
        object.__setattr__(self, "_kl_tape", tape)
        object.__setattr__(self, "_kl_id", handle_id)
        object.__setattr__(self, "_kl_repr", shown)

    def _kl_do(self, op, *args, **kwargs):
        return self._kl_tape.operation(self._kl_id, op, args, kwargs)

    def __getattr__(self, name):
        if self._kl_id == 0 and is_reference(name):
            return getattr(_given_module, name)   # the course's own
        return self._kl_do("getattr", name)

    def __setattr__(self, name, value):
        self._kl_do("__setattr__", name, value)

    def __call__(self, *args, **kwargs):
        return self._kl_do("__call__", *args, **kwargs)

    def __getitem__(self, key):
        return self._kl_do("__getitem__", key)

    def __setitem__(self, key, value):
        self._kl_do("__setitem__", key, value)

    def __iter__(self):
        return iter(self._kl_do("__iter__"))

    def __len__(self):
        return self._kl_do("__len__")

    def __bool__(self):
        return self._kl_do("__bool__")

    def __contains__(self, item):
        return self._kl_do("__contains__", item)

    def __eq__(self, other):
        return self._kl_do("__eq__", other)

    def __ne__(self, other):
        return self._kl_do("__ne__", other)

    def __lt__(self, other):
        return self._kl_do("__lt__", other)

    def __le__(self, other):
        return self._kl_do("__le__", other)

    def __gt__(self, other):
        return self._kl_do("__gt__", other)

    def __ge__(self, other):
        return self._kl_do("__ge__", other)

    def __hash__(self):
        return hash(("kernellab-handle", self._kl_id))

    def __enter__(self):
        return self._kl_do("__enter__")

    def __exit__(self, *exc):
        return self._kl_do("__exit__", exc[0].__name__ if exc[0] else None)

    def __instancecheck__(self, instance):
        return self._kl_do("__instancecheck__", instance)

    def __repr__(self):
        return self._kl_repr

    __str__ = __repr__

    def __format__(self, spec):
        return self._kl_repr


# ---- which side is on, per test --------------------------------------------------------------

_active: _Side | None = None
_given_module = None
_given_lab: str | None = None


@contextlib.contextmanager
def recording(lab_module, folder: Path, nodeid: str):
    """The `lab` fixture of a recorded test: a Live proxy over the student's module."""
    global _active
    tape = Recording(tape_path(folder, nodeid))
    root = tape.handle(lab_module)
    _active = tape
    try:
        with tape.allocations():
            yield root
    finally:
        _active = None
        tape.close()


@contextlib.contextmanager
def replaying(lab: str, folder: Path, nodeid: str):
    """The `lab` fixture of the judge: a Ghost answered by the test's tape."""
    global _active, _given_module, _given_lab
    reasons = Path(folder) / "reasons.json"
    why = "the recorded run ended here: its process was killed or died before the test finished"
    if reasons.exists():
        why = json.loads(reasons.read_text()).get(nodeid, why)
    if _given_lab != lab:
        _given_module, _given_lab = target.pristine_starter(lab), lab
    path = tape_path(folder, nodeid)
    tape = Replay(path if path.exists() else None, why)
    _active = tape
    try:
        with tape.allocations():
            yield tape.ghost_root()
    finally:
        _active = None


def _ghost_root(self: Replay) -> Ghost:
    event = self.events[0] if self.events else None
    if not event or event.get("new") != 0:
        raise Incomplete(self.why_missing)
    self.position = 1
    ghost = Ghost(self, 0, str(event.get("repr", "")))
    self.ghosts[0] = ghost
    return ghost


Replay.ghost_root = _ghost_root


def boundary(instrument):
    """An instrument that watches student code run, as a graded test must use it: plain outside the
    grader; in a recorded test it runs and is taped; in the judge the tape answers for it."""
    def observed(*args, **kwargs):
        tape = _active
        if tape is None:
            return instrument(*args, **kwargs)
        if isinstance(tape, Recording):
            proxy = Live(tape, instrument, -1)
            return proxy(*args, **kwargs)
        return tape.operation(-1, "__call__", args, kwargs)
    observed.__name__ = getattr(instrument, "__name__", "instrument")
    observed.__doc__ = instrument.__doc__
    observed.__wrapped__ = instrument
    return observed


# The instruments, as graded tests import them.
meter = boundary(traffic.meter)
record_launches = boundary(launches.record_launches)
Timeline = boundary(timeline.Timeline)
capture = boundary(graphs.capture)
kernel_resources = boundary(resources.kernel_resources)
replays_counted = boundary(graphs.replays_counted)
pinned_allocations = boundary(checks.pinned_allocations)
