"""Every record in data/reference/ says where it came from: GPU, driver, CUDA, the Python, numba,
numba-cuda and numpy versions, the date, the commit and the command (`reference.PROVENANCE_FIELDS`,
`reference.VERSION_FIELDS`). A field that could not be recovered says "unknown (not recorded)"."""

import json

import pytest

from kernellab.course import reference

FILES = sorted(reference.DATA.glob("*/lab*.json"))


def records(stored: dict):
    """(where, record) for each record of a lab file: its records, each repeat's, its profile."""
    for name, record in (stored.get("records") or {}).items():
        yield f"records.{name}", record
    for number, repeat in enumerate(stored.get("repeats") or [], start=1):
        for name, record in repeat.items():
            yield f"repeats[{number}].{name}", record
    if "profile" in stored:
        yield "profile", stored["profile"]


def missing_fields(provenance) -> list[str]:
    if not isinstance(provenance, dict):
        return ["provenance"]
    versions = provenance.get("versions") or {}
    return ([f for f in reference.PROVENANCE_FIELDS if not str(provenance.get(f, "")).strip()]
            + [f"versions.{f}" for f in reference.VERSION_FIELDS if not str(versions.get(f, "")).strip()])


def test_data_holds_the_records_and_their_figures_only():
    """No run logs, scripts or other files: what a run taught moves into a record or docs/measuring.md."""
    assert [f.name for f in FILES] == [f"lab{n:02d}.json" for n in range(10)]
    kept = {*FILES, *reference.DATA.glob("*/figures/lab*.png")}
    assert sorted(map(str, {p for p in reference.DATA.parent.rglob("*") if p.is_file()} - kept)) == []


@pytest.mark.parametrize("file", FILES, ids=lambda f: f"{f.parent.name}/{f.name}")
def test_every_record_names_its_provenance(file):
    stored = json.loads(file.read_text())
    lacking = {where: missing for where, record in records(stored)
               if (missing := missing_fields(record.get("provenance")))}
    assert lacking == {}


def test_a_new_record_names_its_commit(monkeypatch):
    monkeypatch.setenv("KERNELLAB_COMMIT", "abc1234 (the tree sent)")
    reference.commit.cache_clear()
    try:
        assert reference.provenance()["commit"] == "abc1234 (the tree sent)"
    finally:
        reference.commit.cache_clear()
    assert {"gpu", "date", "commit", "command"} <= set(reference.provenance())
