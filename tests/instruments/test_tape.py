"""The tape the judge reads is written by the child, so it is hostile input: the judge decodes
data only, refuses what a test did not ask for, and fails a test whose tape stops short."""

import json

import numpy as np
import pytest

from kernellab.grading.tape import Diverged, Incomplete
from kernellab.grading.tape.replay import Replay, _decode, _trusted_object, replayed_exception
from kernellab.grading.tape.values import _array_bytes, _array_from


def tape(tmp_path, *events) -> Replay:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in ({"new": 0, "repr": "lab"}, *events)))
    return Replay(path, "the child was killed (the parent saw it)", given=None)


def test_arrays_travel_as_numbers_only():
    assert np.array_equal(_array_from(_array_bytes(np.arange(6, dtype=np.float32))), np.arange(6))
    with pytest.raises(ValueError, match="not data"):
        _array_from({"dtype": "|O", "shape": [1], "v": ""})


@pytest.mark.parametrize("name", ["os:system", "subprocess:run", "builtins", "kernellab.grading:<lambda>"])
def test_the_judge_imports_nothing_the_tape_names_outside_the_trusted_modules(name):
    with pytest.raises(Diverged):
        _trusted_object(name)


def test_a_tape_that_stops_short_fails_with_what_the_parent_saw(tmp_path):
    replay = tape(tmp_path)
    root = replay.ghost_root()
    with pytest.raises(Incomplete, match="the child was killed"):
        root.axpb


def test_an_operation_the_test_did_not_make_is_refused(tmp_path):
    replay = tape(tmp_path, {"op": "getattr", "on": 0, "args": [{"v": "blocks_for"}], "kwargs": {},
                             "result": {"i": "3"}})
    with pytest.raises(Diverged, match="getattr on object #0"):
        replay.ghost_root().axpb


def test_a_student_exception_replays_as_its_nearest_trusted_class():
    raised = replayed_exception({"types": ["labs.lab00:Mine", "builtins:ValueError"],
                                 "message": "n < 0", "where": "lab00_indexing.py:54"})
    assert type(raised) is ValueError and "lab00_indexing.py:54" in str(raised)
    ending = replayed_exception({"types": ["builtins:SystemExit", "builtins:BaseException"],
                                 "message": "0", "where": None})
    assert isinstance(ending, Exception)     # never one that would end the judge


def test_unreadable_values_are_refused():
    for encoded in ({"v": [1, 2]}, {"np": "|O", "v": ""}, "plain", {"zz": 1}):
        with pytest.raises((Diverged, ValueError, TypeError)):
            _decode(encoded, None)
