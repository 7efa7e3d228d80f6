"""Every ``# type: ignore`` in the packages names the error it silences and says why.

mypy (``make typecheck``, part of ``make test``) rejects an ignore without an error code
(``ignore-without-code``) and one that silences nothing (``warn_unused_ignores``); the reason, a
comment after it, is checked here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# an ignore with its code(s), then a comment giving the reason
EXPLAINED = re.compile(r"# type: ignore\[[a-z-]+(, ?[a-z-]+)*\]  # \S")


def test_every_type_ignore_in_sgt_and_worker_is_explained() -> None:
    unexplained = [
        f"{path.relative_to(ROOT)}:{number}"
        for package in ("sgt", "worker")
        for path in sorted((ROOT / package).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "type: ignore" in line and not EXPLAINED.search(line)
    ]
    assert unexplained == []
