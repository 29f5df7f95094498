"""The replaying side: in the judge, the student's objects as `Ghost`s that the test's tape
answers for; it never imports the student's file."""

from __future__ import annotations

import base64
import importlib
import json
from pathlib import Path

import numpy as np

from kernellab.grading.tape.values import (COMPARISONS, MAX_TAPE_BYTES, NUMERIC_KINDS, Diverged, Handle, Incomplete,
                                           StudentRaised, _Side, _array_from, _digest, _host,
                                           _is_device_array, _namedtuple, _trusted, is_reference)


class Replay(_Side):
    """One test's tape, read back by the judge."""

    def __init__(self, path: Path | None, why_missing: str, given):
        """`given`: the course's own starter of the lab, whose references the judge calls."""
        super().__init__()
        self.given = given
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

    def ghost_root(self) -> "Ghost":
        """The lab module as the judge's test sees it: the tape's first object."""
        event = self.events[0] if self.events else None
        if not event or event.get("new") != 0:
            raise Incomplete(self.why_missing)
        self.position = 1
        ghost = Ghost(self, 0, str(event.get("repr", "")))
        self.ghosts[0] = ghost
        return ghost

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
    shown = json.dumps([event.get("args"), event.get("kwargs")])
    return f"{event['op']} on object #{event['on']} with {shown[:160]}"


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
        if name in ("_pytest.outcomes:Failed", "builtins:Failed"):    # pytest.fail's own class
            import pytest
            return pytest.fail.Exception(text, pytrace=False)
        if not _trusted(str(name)):
            continue
        try:
            kind = _trusted_object(name)
        except (Diverged, ImportError, AttributeError):
            continue
        if not isinstance(kind, type) or not issubclass(kind, BaseException):
            continue
        if not issubclass(kind, Exception):
            return StudentRaised(f"{name.split(':')[-1]}: {text}")
        try:
            return kind(text)
        except Exception:
            continue
    return StudentRaised(text)


class Ghost(Handle):
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
            return getattr(self._kl_tape.given, name)   # the course's own
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

    def __hash__(self):
        return hash(("kernellab-handle", self._kl_id))

    def __enter__(self):
        return self._kl_do("__enter__")

    def __exit__(self, *exc):
        if exc[0] is not None and issubclass(exc[0], (Diverged, Incomplete)):
            return False        # the judge's own finding inside the block: it stays the reason
        return self._kl_do("__exit__", exc[0].__name__ if exc[0] else None)

    def __instancecheck__(self, instance):
        return self._kl_do("__instancecheck__", instance)

    def __repr__(self):
        return self._kl_repr

    __str__ = __repr__

    def __format__(self, spec):
        return self._kl_repr


def _comparison(op: str):
    def answered(self, other):
        return self._kl_do(op, other)
    answered.__name__ = op
    return answered


for _op in COMPARISONS:
    setattr(Ghost, _op, _comparison(_op))
