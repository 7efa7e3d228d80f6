"""A small Dockerfile reader, enough for structural checks without a Docker engine.

It handles what the Dockerfile reference defines for the instructions we use: comments, line
continuations (with comment lines inside them), ``ARG`` defaults before ``FROM``, stages, the JSON
(exec) form and ``ENV`` in both the ``KEY=VALUE`` and the legacy ``KEY VALUE`` form.

>>> stages = parse_dockerfile('''
... ARG V=3.11
... FROM python:${V}-slim AS build
... RUN echo a \\\\
...     # a comment inside a continuation
...     && echo b
... FROM python:${V}-slim
... ENV A=1 B="two words"
... CMD ["run"]
... ''')
>>> [(s.name, s.base) for s in stages]
[('build', 'python:3.11-slim'), (None, 'python:3.11-slim')]
>>> stages[0].first("RUN").arguments
'echo a && echo b'
>>> stages[1].env()
{'A': '1', 'B': 'two words'}
>>> stages[1].first("CMD").exec_form()
['run']
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

_VARIABLE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}|\$(\w+)")


@dataclass(frozen=True)
class Instruction:
    """One instruction: upper-case keyword, its arguments (continuations joined) and its first line."""

    keyword: str
    arguments: str
    line: int

    def exec_form(self) -> list[str] | None:
        """The arguments as a list when written in JSON (exec) form, else None (shell form)."""
        text = self.arguments.strip()
        if not text.startswith("["):
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return None
        return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None

    def options(self) -> tuple[dict[str, str], str]:
        """Leading ``--name=value`` options and the rest, e.g. for HEALTHCHECK and COPY."""
        rest = self.arguments.strip()
        found: dict[str, str] = {}
        while rest.startswith("--"):
            option, _, rest = rest.partition(" ")
            name, _, value = option[2:].partition("=")
            found[name] = value
            rest = rest.lstrip()
        return found, rest


@dataclass(frozen=True)
class Stage:
    """A build stage: its base image (ARG defaults substituted), its name and its instructions."""

    base: str
    name: str | None
    instructions: tuple[Instruction, ...]

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def first(self, keyword: str) -> Instruction:
        matches = self.all(keyword)
        if not matches:
            raise LookupError(f"no {keyword} in stage {self.name or self.base}")
        return matches[0]

    def last(self, keyword: str) -> Instruction:
        matches = self.all(keyword)
        if not matches:
            raise LookupError(f"no {keyword} in stage {self.name or self.base}")
        return matches[-1]

    def env(self) -> dict[str, str]:
        """Every ENV of the stage, later assignments winning; values unquoted, ``$VAR`` left as written."""
        values: dict[str, str] = {}
        for instruction in self.all("ENV"):
            words = shlex.split(instruction.arguments)
            if words and "=" not in words[0]:
                values[words[0]] = " ".join(words[1:])
                continue
            for word in words:
                key, _, value = word.partition("=")
                values[key] = value
        return values


def logical_lines(text: str) -> list[tuple[int, str]]:
    """``(first line number, text)`` of every instruction, comments dropped, continuations joined."""
    out: list[tuple[int, str]] = []
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not parts):
            continue
        if not parts:
            start = number
        if stripped.endswith("\\"):
            parts.append(stripped[:-1].strip())
            continue
        parts.append(stripped)
        out.append((start, " ".join(p for p in parts if p)))
        parts = []
    if parts:
        out.append((start, " ".join(p for p in parts if p)))
    return out


def substitute(text: str, variables: dict[str, str]) -> str:
    """Replace ``$NAME``, ``${NAME}`` and ``${NAME:-default}`` with known values (or the default)."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(3)
        if name in variables:
            return variables[name]
        return match.group(2) if match.group(2) is not None else match.group(0)

    return _VARIABLE.sub(replace, text)


def parse_dockerfile(text: str) -> list[Stage]:
    """The stages of a Dockerfile, in order; the last one is the image that gets run."""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    current: list[Instruction] = []
    header: tuple[str, str | None] | None = None
    for number, line in logical_lines(text):
        keyword, _, arguments = line.partition(" ")
        instruction = Instruction(keyword.upper(), arguments.strip(), number)
        if instruction.keyword == "FROM":
            if header is not None:
                stages.append(Stage(header[0], header[1], tuple(current)))
            words = substitute(instruction.arguments, global_args).split()
            words = [w for w in words if not w.startswith("--platform")]
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            header, current = (words[0], name), []
        elif header is None and instruction.keyword == "ARG":
            key, _, value = instruction.arguments.partition("=")
            global_args[key.strip()] = value.strip()
        elif header is not None:
            current.append(instruction)
    if header is not None:
        stages.append(Stage(header[0], header[1], tuple(current)))
    return stages
