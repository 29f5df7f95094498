"""The README's figures are generated from the recorded reference data (kernellab.course.readme)."""

import pytest

from kernellab.course import readme


def test_the_readme_labs_table_is_what_the_reference_data_give():
    text = readme.README.read_text()
    assert readme.rendered(text) == text, ("README.md's labs table is stale: run "
                                           "python -m kernellab.course.readme --write")


def test_a_readme_without_the_markers_is_one_clear_line(capsys, monkeypatch, tmp_path):
    bare = tmp_path / "README.md"
    bare.write_text("# a README with no generated table\n")
    monkeypatch.setattr(readme, "README", bare)
    assert readme.main(["--check"]) == 1
    assert capsys.readouterr().err.count("\n") == 1
    with pytest.raises(readme.Stale, match="markers"):
        readme.rendered(bare.read_text())


def test_a_stale_table_is_found_and_rewritten(monkeypatch, tmp_path):
    monkeypatch.setattr(readme, "table", lambda: "| a new figure |")    # the data's part is the test above
    stale = tmp_path / "README.md"
    stale.write_text(f"before\n{readme.BEGIN}\n| an old figure |\n{readme.END}\nafter\n")
    monkeypatch.setattr(readme, "README", stale)
    assert readme.main(["--check"]) == 1
    assert readme.main(["--write"]) == 0
    assert readme.main(["--check"]) == 0
    assert stale.read_text().startswith("before\n") and stale.read_text().endswith("\nafter\n")
