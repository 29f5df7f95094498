"""Pristine tests: the grader verifies the graded tests (tests/labs/) against checksums recorded by the instructor.

    python -m kernellab.grading.integrity --write     # after changing tests/ (CI fails until you do)
    python -m kernellab.grading.integrity --verify    # exit 1 if tests/labs differs (a student repository's workflow runs it)

A submission graded through `kernellab grade --root`, `--batch` or the Gradescope bundle is
always graded with the instructor's tests/, never the student's; the checksums make a local
`kernellab grade` say so when tests/ was edited.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from kernellab.course import target

TESTS = target.ROOT / "tests" / "labs"   # the graded tests; kernellab's own tests (tests/instruments) are not graded
SHOWN = "tests/labs"
MANIFEST = TESTS / "CHECKSUMS.sha256"


def tracked_files(tests: Path = TESTS) -> list[Path]:
    return sorted(p for p in tests.rglob("*") if p.is_file() and p != MANIFEST
                  and "__pycache__" not in p.parts and p.suffix in (".py", ".cpp", ".json"))


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def current(tests: Path = TESTS) -> dict[str, str]:
    return {str(p.relative_to(tests)): digest(p) for p in tracked_files(tests)}


def recorded(manifest: Path = MANIFEST) -> dict[str, str]:
    if not manifest.exists():
        return {}
    pairs = (line.split(maxsplit=1) for line in manifest.read_text().splitlines() if line.strip())
    return {name.strip(): checksum for checksum, name in pairs}


def changes(tests: Path = TESTS, manifest: Path = MANIFEST) -> list[str]:
    """What differs from the recorded checksums, one line each; empty when pristine."""
    now, then = current(tests), recorded(manifest)
    if not then:
        return [f"no checksum manifest at {manifest}: the graded tests cannot be verified"]
    out = [f"changed: {SHOWN}/{name}" for name in sorted(now) if name in then and now[name] != then[name]]
    out += [f"added: {SHOWN}/{name}" for name in sorted(set(now) - set(then))]
    out += [f"missing: {SHOWN}/{name}" for name in sorted(set(then) - set(now))]
    return out


def write(tests: Path = TESTS, manifest: Path = MANIFEST) -> None:
    manifest.write_text("".join(f"{checksum}  {name}\n" for name, checksum in current(tests).items()))


def main(argv: list[str]) -> int:
    """`--write` records the checksums; `--verify` exits 1, naming each file, when the graded
    tests differ from them (a student repository's workflow runs it before grading); no option lists
    what differs."""
    if argv == ["--write"]:
        write()
        print(f"wrote {MANIFEST}")
        return 0
    if argv not in ([], ["--verify"]):
        print("usage: python -m kernellab.grading.integrity [--write | --verify]", file=sys.stderr)
        return 2
    found = changes()
    print("\n".join(found) or f"{SHOWN}/ is pristine")
    if argv == ["--verify"] and found:
        print("the graded tests differ from their checksums: this cannot be an official grade",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
