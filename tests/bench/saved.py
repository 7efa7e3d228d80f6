"""A comparison's results as a JSON file, so that runs split by model or stream can be rendered as one.

On a loaded machine the slow peers (River's SGT, MOA through Java) can run in one process and our
variants in another; each run saves its results (``--save``) and ``--merge`` renders them together::

    python -m tests.bench --models 'river-*,moa-*,majority,mean' --save peers.json
    python -m tests.bench --models 'ours*' --save ours.json
    python -m tests.bench --merge peers.json,ours.json --output report.md

Merging joins each stream's models (ours first, then the peers, each in file order; a model already
present for that stream is replaced by the later file's); the streams keep the order of their first
appearance. Streams are saved by name and looked up again in ``tests/bench/streams.py``; their
lengths must agree across files (the same ``--records`` cap).
Only plain JSON is read back: names, numbers and lists.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any, NamedTuple

from tests.bench import streams
from tests.bench.comparison import OURS, ModelResult, StreamResult
from tests.bench.metrics import Recovery, Scores
from tests.bench.streams import Drift

FORMAT = 1


class Run(NamedTuple):
    """A comparison's results and the drift recovery window they were scored with."""

    window: int
    results: list[StreamResult]


def _recovery(d: dict[str, Any]) -> Recovery:
    return Recovery(Drift(**d["drift"]), float(d["before"]), d["records"])


def _model(d: dict[str, Any]) -> ModelResult:
    s = dict(d["scores"])
    s["recoveries"] = tuple(_recovery(r) for r in s["recoveries"])
    return ModelResult(d["name"], d["kind"], Scores(**s), d["loop_n"], d["loop_rate"], d["loop_identical"])


def _stream(d: dict[str, Any]) -> StreamResult:
    (spec,) = streams.specs([d["stream"]])
    return StreamResult(
        spec,
        int(d["n"]),
        tuple(Drift(**x) for x in d["drifts"]),
        tuple(_model(m) for m in d["models"]),
        tuple(d["skipped"]),
    )


def dumps(run: Run) -> str:
    """The run as JSON text (NaN for figures that do not apply, as Python's json module writes it)."""
    return json.dumps(
        {
            "format": FORMAT,
            "window": run.window,
            "streams": [
                {
                    "stream": r.spec.name,
                    "n": r.n,
                    "drifts": [asdict(d) for d in r.drifts],
                    "models": [asdict(m) for m in r.models],
                    "skipped": list(r.skipped),
                }
                for r in run.results
            ],
        },
        indent=1,
    )


def loads(text: str) -> Run:
    data = json.loads(text)
    if data.get("format") != FORMAT:
        raise ValueError(f"saved results: format {data.get('format')!r}, expected {FORMAT}")
    return Run(int(data["window"]), [_stream(d) for d in data["streams"]])


def merge(runs: list[Run]) -> Run:
    """Each stream's models from every run, in run order; a later run's model replaces a same-named one."""
    windows = {run.window for run in runs}
    if len(windows) > 1:
        raise ValueError(f"saved results: drift recovery windows {sorted(windows)} differ")
    merged: dict[str, StreamResult] = {}
    for run in runs:
        for r in run.results:
            old = merged.get(r.spec.name)
            if old is None:
                merged[r.spec.name] = r
                continue
            if old.n != r.n:
                raise ValueError(f"{r.spec.name}: {old.n:,} records in one run, {r.n:,} in another")
            names = {m.name for m in r.models}
            models = (*(m for m in old.models if m.name not in names), *r.models)
            models = (*(m for m in models if m.kind == OURS), *(m for m in models if m.kind != OURS))
            ran = {m.name for m in models}
            skipped = tuple(s for s in (*old.skipped, *r.skipped) if s.split(":")[0] not in ran)
            merged[r.spec.name] = StreamResult(
                old.spec, old.n, old.drifts, models, tuple(dict.fromkeys(skipped))
            )
    return Run(runs[0].window, list(merged.values()))
