"""Which files of the repository a ``docker build`` sends, by the rules of ``.dockerignore``.

Patterns are matched against slash-separated paths relative to the context root: ``*`` and ``?`` stay
inside one path element, ``**`` spans any number of them, a pattern that matches a directory
excludes everything under it, ``!`` re-includes, and the last matching pattern wins.

>>> rules = IgnoreRules.parse("*\\n!src/\\n**/*.pyc\\n")
>>> [rules.included(p) for p in ("README.md", "src/a.py", "src/a.pyc", "src/sub/b.py")]
[False, True, False, True]
"""

from __future__ import annotations

import re
from dataclasses import dataclass


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    # a match on a directory covers everything below it
    return re.compile("".join(out) + "(?:/.*)?")


@dataclass(frozen=True)
class IgnoreRules:
    """The ordered patterns of one ``.dockerignore`` file."""

    rules: tuple[tuple[bool, re.Pattern[str]], ...]

    @classmethod
    def parse(cls, text: str) -> IgnoreRules:
        rules = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            pattern = line[1:].strip() if negated else line
            pattern = pattern.strip("/") or "."
            rules.append((negated, _pattern_regex(pattern)))
        return cls(tuple(rules))

    def included(self, path: str) -> bool:
        """True if ``path`` (relative, slash-separated) is part of the build context."""
        keep = True
        for negated, regex in self.rules:
            if regex.fullmatch(path):
                keep = negated
        return keep
