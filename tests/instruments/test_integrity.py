"""tests/ matches the checksums the grader verifies (after changing tests/, run
`python -m kernellab.grading.integrity --write`)."""

from kernellab.grading import integrity


def test_checksum_manifest_is_current():
    assert integrity.changes() == [], "run: python -m kernellab.grading.integrity --write"


def test_an_edited_test_is_reported(tmp_path):
    (tmp_path / "test_lab00_x.py").write_text("def test(): pass\n")
    manifest = tmp_path / "CHECKSUMS.sha256"
    integrity.write(tmp_path, manifest)
    assert integrity.changes(tmp_path, manifest) == []
    (tmp_path / "test_lab00_x.py").write_text("def test(): assert True\n")
    assert integrity.changes(tmp_path, manifest) == ["changed: tests/labs/test_lab00_x.py"]
