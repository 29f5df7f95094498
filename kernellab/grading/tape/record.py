"""The recording side: in the grader's child, the student's objects behind `Live` proxies, every
operation on them written to the test's tape."""

from __future__ import annotations

import base64
import json
import traceback
from pathlib import Path

import numpy as np

from kernellab.course import target
from kernellab.grading.tape.values import (COMPARISONS, NUMERIC_KINDS, Handle, _Side, _array_bytes, _digest, _host,
                                           _is_array, _is_data, _is_device_array, _is_instrument,
                                           _is_instrument_class, _is_namedtuple, _qualified, _trusted,
                                           is_reference)


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
        if isinstance(value, Handle):
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


class Live(Handle):
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


def _comparison(op: str, compare):
    def taped(self, other):
        return self._kl_do(op, lambda: compare(self._kl_obj, _unwrap(other)), other)
    taped.__name__ = op
    return taped


for _op, _compare in COMPARISONS.items():
    setattr(Live, _op, _comparison(_op, _compare))


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
