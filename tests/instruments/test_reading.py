"""What a student reads in a notebook (kernellab.course.reading), on a tiny synthetic notebook."""

import json

from kernellab.course import reading


def markdown(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text.splitlines(keepends=True)}


def code(*outputs):
    return {"cell_type": "code", "metadata": {}, "execution_count": 1, "source": "", "outputs": list(outputs)}


LONG = " ".join(["word"] * 41) + "."
NOTEBOOK = {"cells": [
    markdown("# Lab 99: the title\n\nYou will learn one thing.\nIt takes 2.78x less at n = 2^26.\n\n"
             "- a [copy ceiling](../docs/glossary.md#copy-ceiling) item\n"
             "<details><summary>Hint 99.1</summary>\nhidden words are not read here at all\n</details>\n"
             "![a picture](figure.png)"),
    code({"output_type": "stream", "name": "stdout", "text": "measured 25.3 us per launch\n4,096 1.5\n"},
         {"output_type": "display_data", "data": {"image/png": "iVBOR", "text/plain": "<Figure size 640x480>"}},
         {"output_type": "execute_result", "data": {"text/plain": "'result text'"}, "execution_count": 1}),
    code({"output_type": "display_data",
          "data": {"text/html": "<details><summary>[holds] headline</summary><pre>full sentence</pre></details>",
                   "text/plain": "[holds] headline"}}),
    markdown(LONG),
]}


def test_words_exclude_numbers_details_and_link_targets():
    read = reading.read(NOTEBOOK, "99_x.ipynb")
    # Lab, the, title | You will learn one thing | It takes less at n | a copy ceiling item |
    # Hint | measured us per launch | result text | holds headline | 41 x word
    assert read.words == 3 + 5 + 5 + 4 + 1 + 4 + 2 + 2 + 41
    assert read.pictures == 2                     # the plot and the markdown image
    assert read.longest == 41 and read.long_sentences == [LONG]


def test_a_sentence_ends_at_a_stop_a_paragraph_or_a_line_of_output():
    notebook = {"cells": [markdown(("one two three. " * 20) + "\n\n" + "four " * 30),
                          code({"output_type": "stream", "name": "stdout", "text": "five six\n" * 30})]}
    read = reading.read(notebook)
    assert read.long_sentences == [] and read.longest == 30


def test_the_budget_and_the_command(tmp_path, capsys):
    assert reading.read(NOTEBOOK).over_budget() == ["1 sentence(s) over 40 words"]
    wordy = {"cells": [markdown("Short words here.\n\n" * (reading.MAX_WORDS // 3 + 1))]}
    assert reading.read(wordy).over_budget()[0].startswith(f"{reading.MAX_WORDS + 3:,} words")
    fits = tmp_path / "fits.ipynb"
    fits.write_text(json.dumps({"cells": [markdown("Short words here.")]}))
    over = tmp_path / "over.ipynb"
    over.write_text(json.dumps(NOTEBOOK))
    assert reading.main([str(fits)]) == 0
    assert reading.main([str(fits), str(over)]) == 1
    printed = capsys.readouterr().out
    assert "within budget" in printed and "long (41 words)" in printed
    (tmp_path / "broken.ipynb").write_text("{not json")
    assert reading.main([str(tmp_path / "broken.ipynb")]) == 2
    assert "not a readable notebook" in capsys.readouterr().err
