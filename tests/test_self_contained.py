"""Nothing in the repository points at a document outside it.

A reader has the repository and nothing else: a docstring, comment or page that cites notes, a design
file or a ticket they cannot open explains nothing. Each such reference is replaced by the reason
itself or by a link inside the repository, and this test keeps them from coming back.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Written so that this file does not match itself.
OUTSIDE_REFERENCES = re.compile(
    "|".join(
        [
            r"\.\./" + "shared",  # the integrator's shared folder beside the repository
            r"/work/" + "shared",
            "DESIGN" + r"\.md",  # the shared design file
            "reference" + " notes",  # notes on other implementations, outside the repository
            r"\bthe " + r"issue\b",  # a ticket of the tracker
            r"\bissue" + r" #?\d+",
        ]
    ),
    re.IGNORECASE,
)

# Directories that are not the project's text: version control, environments, caches, build output.
SKIPPED_DIRS = {
    ".git",
    ".venv",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    "build",
    "dist",
}


def _text_files() -> list[Path]:
    files = []
    for path in sorted(REPO.rglob("*")):
        relative = path.relative_to(REPO)
        if not path.is_file():
            continue
        if any(part in SKIPPED_DIRS or part.endswith(".egg-info") for part in relative.parts):
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue  # binary: model blobs, checkpoints
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        files.append(path)
    return files


def test_the_scan_sees_the_code_and_the_docs() -> None:
    names = {p.relative_to(REPO).as_posix() for p in _text_files()}
    assert {"README.md", "sgt/base.py", "worker/kafka/loop.py", "docs/architecture.md", ".ci/run"} <= names


def test_no_reference_to_a_document_outside_the_repository() -> None:
    found = []
    for path in _text_files():
        if path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = OUTSIDE_REFERENCES.search(line)
            if match:
                found.append(f"{path.relative_to(REPO)}:{number}: {match.group(0)!r} in {line.strip()!r}")
    assert not found, (
        "references to documents a reader of the repository cannot open; give the reason itself or a "
        "link inside the repository:\n" + "\n".join(found)
    )


def test_the_pattern_catches_each_kind_of_reference() -> None:
    for text in (
        "see " + "../" + "shared/DESIGN.md",
        "as " + "DESIGN" + ".md says",
        "the " + "reference notes, section 9.2",
        "The " + "issue's example",
        "decided for " + "issue 2",
    ):
        assert OUTSIDE_REFERENCES.search(text), text
    assert not OUTSIDE_REFERENCES.search("issues a warning; the tissue")
