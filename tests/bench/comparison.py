"""The side-by-side comparison: every selected model on every selected stream, on the same records.

Each stream is materialised once; then each of our variants (``tests/bench/ours.py``) and each peer
that handles the stream's task (``tests/bench/peers.py``) runs on it, and its predictions are scored
(``tests/bench/metrics.py``). Models are selected by name with shell-style patterns (``ours*``,
``river-*``, ``moa-sgbt``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass

from tests.bench import ours, peers
from tests.bench.metrics import WINDOW, Scores, score
from tests.bench.streams import Drift, StreamSpec, materialise

OURS = "ours"  # the kind of our variants' results


@dataclass(frozen=True)
class ModelResult:
    """One model's scores on one stream; for our variants also the one-record loop on a prefix."""

    name: str
    kind: str  # OURS, or a peer kind (peers.SGT, TREE, ENSEMBLE, BASELINE)
    scores: Scores
    loop_n: int = 0
    loop_rate: float | None = None  # ours, one record at a time: records/s on the first loop_n records
    loop_identical: bool | None = None  # ours: the loop published exactly the batched predictions


@dataclass(frozen=True)
class StreamResult:
    """Every model's result on one stream."""

    spec: StreamSpec
    n: int
    drifts: tuple[Drift, ...]
    models: tuple[ModelResult, ...]
    skipped: tuple[
        str, ...
    ]  # peers selected but without a result here: "name: why" (CapyMOA missing, an error)

    def of_kind(self, *kinds: str) -> list[ModelResult]:
        return [m for m in self.models if m.kind in kinds]

    def named(self, name: str) -> ModelResult | None:
        return next((m for m in self.models if m.name == name), None)


@dataclass(frozen=True)
class Selection:
    """The models of a run."""

    variants: tuple[ours.Variant, ...]
    peers: tuple[peers.Peer, ...]


def model_names() -> list[str]:
    return [v.name for v in ours.VARIANTS] + list(dict.fromkeys(p.name for p in peers.peers()))


def select(patterns: list[str] | None, skip: list[str] | None = None) -> Selection:
    """The variants and peers whose names match any of ``patterns`` (all when None) and none of ``skip``."""

    def matches(name: str, chosen: list[str]) -> bool:
        return any(fnmatch.fnmatchcase(name, p) for p in chosen)

    def chosen(name: str) -> bool:
        return (patterns is None or matches(name, patterns)) and not matches(name, skip or [])

    unmatched = [
        p for p in [*(patterns or []), *(skip or [])] if not any(matches(n, [p]) for n in model_names())
    ]
    if unmatched:
        raise ValueError(f"no model matches {unmatched}; the models are {model_names()}")
    return Selection(
        tuple(v for v in ours.VARIANTS if chosen(v.name)), tuple(p for p in peers.peers() if chosen(p.name))
    )


def compare(
    specs: list[StreamSpec],
    selection: Selection,
    limit: int | None,
    log: Callable[[str], None],
    window: int = WINDOW,
    done: Callable[[list[StreamResult]], None] = lambda results: None,
    loop: int = ours.LOOP_PREFIX,
) -> list[StreamResult]:
    """Run the selection on each stream (at most ``limit`` records each); ``window``: drift recovery;
    ``loop``: the records our variants also learn one at a time (their loop speed and loop ≡ batch).

    ``done`` is called with the results so far after each stream (a long run can save them as it goes).

    Each variant first runs untimed on a small synthetic stream of each task it meets (``ours.warm``):
    the compiled kernels' loading and the lazy imports, paid once per process, are not timed; every
    cost a model pays on each stream is.
    """
    has_capymoa = any(p.needs_capymoa for p in selection.peers) and peers.capymoa_available()
    results = []
    warmed: set[tuple[str, str]] = set()  # (variant, task) run once untimed in this process (ours.warm)
    for spec in specs:
        stream = materialise(spec, limit)
        log(f"{spec.name}: {stream.n:,} records")
        models: list[ModelResult] = []
        for variant in selection.variants:
            if (variant.name, spec.task) not in warmed:
                ours.warm(variant, spec)
                warmed.add((variant.name, spec.task))
            run = ours.run(variant, stream, loop)
            models.append(
                ModelResult(
                    variant.name,
                    OURS,
                    score(stream, run.batched, window),
                    run.loop.n,
                    run.loop.n / run.loop.seconds if run.loop.seconds > 0 else None,
                    run.loop_identical,
                )
            )
            log(f"  {variant.name}: {models[-1].scores.seconds:.1f} s, {models[-1].scores.headline:.3f}")
        task = peers.task_of(stream)
        skipped = []
        for peer in (p for p in selection.peers if p.task == task):
            if peer.needs_capymoa and not has_capymoa:
                skipped.append(f"{peer.name}: CapyMOA not available")
                continue
            try:
                predictions = peer.run(stream)
            except Exception as e:  # a peer's own failure (MOA's SGBT on one feature) ends only its run
                skipped.append(f"{peer.name}: failed, {type(e).__name__}: {str(e).splitlines()[0][:200]}")
                log(f"  {skipped[-1]}")
                continue
            models.append(ModelResult(peer.name, peer.kind, score(stream, predictions, window)))
            log(f"  {peer.name}: {models[-1].scores.seconds:.1f} s, {models[-1].scores.headline:.3f}")
        results.append(StreamResult(spec, stream.n, stream.drifts, tuple(models), tuple(skipped)))
        done(results)
    return results
