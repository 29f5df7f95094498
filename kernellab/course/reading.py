"""What a student reads in an executed notebook, counted against the course's reading budget.

    python -m kernellab.course.reading NOTEBOOK.ipynb ...     # a row each; exit 1 over budget

A student reads the markdown cells and what the code cells print: stream text, and each result or
display's text (its HTML's visible text where it has HTML, its plain text otherwise). Counted:
- words: tokens with a letter in them; numbers ("25.3", "2^26", "4,096", "2.78x", "64KB") are not
  words, and neither is text inside <details>...</details> (a hint or a claim's detail, opened on
  demand; its <summary> is shown, so it counts) nor a link's target;
- long sentences: sentences of more than LONG_SENTENCE words, split at a full stop, question or
  exclamation mark, a line of printed output, a markdown paragraph, list item, heading or table row;
- pictures: every image shown (a plot, an image in the markdown).
The budget: at most MAX_WORDS words and no long sentence. Count an EXECUTED copy (the notebooks
module's --output-dir writes one); an unexecuted notebook counts its markdown alone.

The notebooks module (kernellab.course.notebooks --execute) fails a notebook over budget when its
lab is in ENFORCED.
"""

from __future__ import annotations

import argparse
import dataclasses
import html
import json
import re
import sys
from pathlib import Path

MAX_WORDS = 1500
LONG_SENTENCE = 40       # words; a sentence with more is long

# The labs whose notebooks have been rewritten to the budget (issue 52): `notebooks --execute`
# fails them over it. Add a lab here once its notebook fits.
ENFORCED = {"00", "01", "02", "03", "04", "05", "06", "07", "08", "09"}

DETAILS = re.compile(r"<details\b.*?</details\s*>", re.S | re.I)
SUMMARY = re.compile(r"<summary\b[^>]*>(.*?)</summary\s*>", re.S | re.I)   # shown while closed
TAG = re.compile(r"<[^>]+>")
IMAGE_MARKDOWN = re.compile(r"!\[[^\]]*\]\([^)]*\)")
IMAGE_TAG = re.compile(r"<img\b", re.I)
LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")          # [words](target): the words are read
NUMBER = re.compile(r"[-+~≈<>=]*\d[\d.,^:/×*+-]*[a-zA-Zµ%]{0,2}")   # a number, with a unit letter or two
LETTER = re.compile(r"[^\W\d_]")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
BLOCK_START = re.compile(r"\s*(?:[-*+]\s|\d+[.)]\s|#|\||>)")   # a list item, heading, table row, quote
IMAGE_OUTPUTS = ("image/png", "image/jpeg", "image/svg+xml", "image/gif")


@dataclasses.dataclass
class Reading:
    """What one notebook gives a student to read."""

    name: str
    words: int
    long_sentences: list[str]        # each over LONG_SENTENCE words
    longest: int                     # words in its longest sentence
    pictures: int

    def over_budget(self) -> list[str]:
        """What breaks the budget, in words; empty when it fits."""
        found = []
        if self.words > MAX_WORDS:
            found.append(f"{self.words:,} words (at most {MAX_WORDS:,})")
        if self.long_sentences:
            found.append(f"{len(self.long_sentences)} sentence(s) over {LONG_SENTENCE} words")
        return found

    def row(self) -> str:
        verdict = "; ".join(self.over_budget()) or "within budget"
        return (f"{self.name:<32} {self.words:>6,} words  {len(self.long_sentences):>3} long  "
                f"longest {self.longest:>3}  {self.pictures:>2} pictures  {verdict}")


def is_word(token: str) -> bool:
    """A token a student reads as a word: it has a letter, and it is not a number with a unit."""
    token = token.strip("()[]{}\"'`*_,;:.!?")
    return bool(LETTER.search(token)) and not NUMBER.fullmatch(token)


def word_count(text: str) -> int:
    return sum(is_word(token) for token in text.split())


def _text(source) -> str:
    return "".join(source) if isinstance(source, list) else (source or "")


def closed(text: str) -> str:
    """`text` with each <details> element closed: its <summary> alone is shown."""
    return DETAILS.sub(lambda m: "\n" + " ".join(SUMMARY.findall(m.group(0))) + "\n", text)


def visible_markdown(text: str) -> str:
    """Markdown as read: <details> closed, without images, link targets and HTML tags."""
    text = closed(text)
    text = IMAGE_MARKDOWN.sub(" ", text)
    text = LINK.sub(r"\1", text)
    return html.unescape(TAG.sub(" ", text))


def markdown_blocks(text: str) -> list[str]:
    """A markdown text's paragraphs, list items, headings, table rows and code lines, each one
    block (a paragraph's wrapped lines joined)."""
    blocks, paragraph, fenced = [], [], False
    for line in text.splitlines():
        if line.strip().startswith("```"):
            fenced = not fenced
            line = ""
        if fenced or not line.strip() or BLOCK_START.match(line):
            blocks.append(" ".join(paragraph))
            paragraph = []
            blocks.append(line)
        else:
            paragraph.append(line)
    blocks.append(" ".join(paragraph))
    return [block for block in blocks if block.strip()]


def sentences(blocks: list[str]) -> list[str]:
    return [s.strip() for block in blocks for s in SENTENCE_END.split(block) if s.strip()]


def output_text(output: dict) -> tuple[list[str], int]:
    """(the blocks of text an output shows, the pictures it shows)."""
    kind = output.get("output_type")
    if kind == "stream":
        return _text(output.get("text")).splitlines(), 0
    if kind not in ("execute_result", "display_data"):
        return [], 0                                        # an error fails the run anyway
    data = output.get("data", {})
    if any(key in data for key in IMAGE_OUTPUTS):
        return [], 1
    if "text/html" in data:
        return visible_markdown(_text(data["text/html"])).splitlines(), 0
    if "text/markdown" in data:
        return markdown_blocks(visible_markdown(_text(data["text/markdown"]))), 0
    return _text(data.get("text/plain")).splitlines(), 0


def read(notebook: dict, name: str = "notebook") -> Reading:
    """Count what `notebook` (its JSON, or an nbformat node) gives a student to read."""
    blocks, pictures = [], 0
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "markdown":
            source = _text(cell.get("source"))
            pictures += len(IMAGE_MARKDOWN.findall(closed(source)))
            pictures += len(IMAGE_TAG.findall(closed(source)))
            blocks += markdown_blocks(visible_markdown(source))
        elif cell.get("cell_type") == "code":
            for output in cell.get("outputs", []):
                shown, images = output_text(output)
                blocks += shown
                pictures += images
    counted = [(s, word_count(s)) for s in sentences(blocks)]
    return Reading(name=name, words=sum(word_count(b) for b in blocks),
                   long_sentences=[s for s, n in counted if n > LONG_SENTENCE],
                   longest=max((n for _, n in counted), default=0), pictures=pictures)


def read_file(path: Path) -> Reading:
    return read(json.loads(Path(path).read_text()), Path(path).name)


def enforced(path: Path) -> bool:
    """Is this notebook's lab held to the budget by `notebooks --execute`?"""
    return Path(path).name[:2] in ENFORCED


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernellab.course.reading",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path, help="executed notebooks (.ipynb)")
    args = parser.parse_args(argv)
    over = False
    for path in args.notebooks:
        try:
            reading = read_file(path)
        except (OSError, ValueError) as exc:
            print(f"{path}: not a readable notebook ({exc})", file=sys.stderr)
            return 2
        print(reading.row())
        for sentence in reading.long_sentences:
            print(f"    long ({word_count(sentence)} words): {sentence[:160]}{'...' if len(sentence) > 160 else ''}")
        over = over or bool(reading.over_budget())
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
