"""The benchmark streams: River's synthetic generators with fixed seeds, materialised once as arrays.

Every model in a benchmark sees exactly the same records in the same order. River's models take the
records as dicts; ours takes the same values as a 2-D float array (features in River's key order).

Agrawal "function 7" in the issue's table is River's ``classification_function=6``: River numbers
Agrawal's ten functions from 0 and MOA (``-f``) from 1. Measured here, River's SGT reaches 85.5% on
``classification_function=6`` (the table's 85.5%) and 98% on 7. SEA uses 10% label noise, MOA's default
(River's default is none): River's SGT then gives the table's 82.6%. The hyperplane rotates
(``mag_change=0.001``; the issue calls it a rotating hyperplane): River's HoeffdingTree then gives the
table's 88.6% (89.7% without rotation) and River's SGT the table's 69.4%. RandomRBF with seeds 42 gives
River's one-vs-rest SGT the table's 39.0%.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

SEED = 42


@dataclass(frozen=True)
class Reference:
    """The issue's reference figures for one stream (accuracy in %, or MAE)."""

    river_sgt: float
    moa_sgt: float
    best_hoeffding: float
    best_hoeffding_name: str


@dataclass(frozen=True)
class StreamSpec:
    """A named benchmark stream: how to build it, its task, its length and the reference figures."""

    name: str
    task: str  # "binary", "multiclass" or "regression"
    n: int
    make: Callable[[], Any]
    reference: Reference

    @property
    def is_regression(self) -> bool:
        return self.task == "regression"


@dataclass(frozen=True)
class Stream:
    """A materialised stream: River-style dicts and labels, and the same values as a float array."""

    spec: StreamSpec
    dicts: list[dict]
    y: list[Any]
    X: np.ndarray
    feature_names: list[str]


def _specs() -> list[StreamSpec]:
    from river.datasets import synth

    return [
        StreamSpec(
            "hyperplane-10",
            "binary",
            50_000,
            lambda: synth.Hyperplane(seed=SEED, n_features=10, mag_change=0.001),
            Reference(69.4, 77.4, 88.6, "River HoeffdingTree"),
        ),
        StreamSpec(
            "agrawal-f7",
            "binary",
            50_000,
            lambda: synth.Agrawal(classification_function=6, seed=SEED),
            Reference(85.5, 91.8, 96.9, "MOA EFDT"),
        ),
        StreamSpec(
            "rbf-5",
            "multiclass",
            20_000,
            lambda: synth.RandomRBF(seed_model=SEED, seed_sample=SEED, n_classes=5),
            Reference(39.0, 61.0, 72.2, "MOA EFDT"),
        ),
        StreamSpec(
            "sea",
            "binary",
            50_000,
            lambda: synth.SEA(seed=SEED, noise=0.1),
            Reference(82.6, 84.6, 88.3, "MOA EFDT"),
        ),
        StreamSpec(
            "friedman-1",
            "regression",
            50_000,
            lambda: synth.Friedman(seed=SEED),
            Reference(2.25, 2.47, 1.67, "River HoeffdingTreeRegressor"),
        ),
    ]


def specs(names: list[str] | None = None) -> list[StreamSpec]:
    """The benchmark streams, all or those named (in the order given)."""
    table = {s.name: s for s in _specs()}
    if names is None:
        return list(table.values())
    unknown = [n for n in names if n not in table]
    if unknown:
        raise ValueError(f"unknown streams {unknown}; choose from {list(table)}")
    return [table[n] for n in names]


def materialise(spec: StreamSpec, n: int | None = None) -> Stream:
    """Draw the first ``n`` records (default ``spec.n``) of the stream."""
    pairs = list(itertools.islice(spec.make(), spec.n if n is None else n))
    dicts = [x for x, _ in pairs]
    names = list(dicts[0])
    X = np.array([[float(x[k]) for k in names] for x in dicts])
    y: list[Any] = [
        float(t) if spec.is_regression else (int(t) if isinstance(t, bool) else t) for _, t in pairs
    ]
    return Stream(spec, dicts, y, X, [str(k) for k in names])
