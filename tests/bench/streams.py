"""The benchmark streams: named, seeded, materialised once as arrays so every model sees the same records.

Five groups, selectable by name on the command line:

* ``benchmark``: the five long stationary streams of River's synthetic generators (seed 42);
* ``short``: 500 to 5,300 records: River's bundled real data sets, read from files inside the River
  package (no network), and short prefixes of the synthetic streams;
* ``robust``: the robustness suite, streams no default was tuned on (``--streams robust``): the
  generated stress streams of ``tests/bench/stress.py``, classification (timestamp- and micro-scale
  features, irrelevant features, class imbalance, label noise, a noisy 10-class stream of binary
  features, 2-D nonlinear sets) and regression (the same scales, heavy-tailed noise, steps, gross
  outliers in the target or the features), each also cut short (600 to 2,000 records); a
  10,000-record Friedman #1; and every real data set River ships as a file inside its package (no
  download), those of ``short`` included;
* ``heldout``: River generators, or settings of them, that chose no default (``--streams heldout``),
  5,000 records each: a random tree's 3-class concept over numbers and integer-coded categories (and the
  same records with the categories as strings, which the models that take nominal features split as
  categories; MOA's array input cannot take them; and with the categories divided by 4, to span [0, 1]
  as the numbers do), two 2-D sine boundaries, the Mixed concept (two booleans, two numbers), Agrawal's
  function 4, a rotating 4-feature hyperplane with 10% noise, a regression over 2-D planes; then four
  classes of moving RBF centroids, STAGGER's third concept (three features of three values), Agrawal's
  function 2 with its numbers perturbed by 10%, a 20-feature hyperplane of which 10 rotate fast, the
  7-segment LED display with 10% noise, and the Mv regression (numbers and string categories keyed by
  integers: River's trees with linear leaves, its ensembles and MOA cannot take it); a check that the
  defaults hold on data they were not chosen on (once a choice is made on them, they are held back no
  more).
  Waveform and FriedmanDrift are not among them: a default was chosen on each;
* ``drift``: SEA and Agrawal concepts joined by River's ``ConceptDriftStream``, three drifts each, abrupt
  (over 1/400 of the stream) or gradual (over 1/10), centred at known positions (a quarter, half and
  three quarters of the stream). The benchmark
  streams ``sea`` and ``agrawal-f7`` are their stationary counterparts.

River's bundled data sets in the suite: Phishing, ImageSegments, Bananas and Shuttle (classification);
TrumpApproval, ChickWeights, SP500Stocks, AirlinePassengers and WaterFlow (regression; the last two
have one feature, a date, given to every model as POSIX seconds: a timestamp-scale feature). Left out:
SolarFlare (multi-output regression, nominal string features) and Yeast (multi-output binary); every
other set in ``river.datasets`` is download-only (``RemoteDataset``: Elec2, Insects, Keystroke,
CreditCard, Higgs, HTTP, SMTP, BETH, CriteoAds, MaliciousURL, TREC07, Bikes, Restaurants, Taxis,
MovieLens100K, WebTraffic, Music; SMSSpam is also text), and the benchmark runs without network.

River's models take the records as dicts; ours and MOA's take the same values as a 2-D float array
(features in River's key order), and ours the dicts where a feature is nominal (``Stream.inputs``).
Classification labels are also given as indices into ``classes``, the sorted set of labels of the
materialised records, which is the column order of every model's published probabilities in the
benchmark.

Agrawal "function 7" is River's ``classification_function=6``: River numbers Agrawal's ten functions
from 0 and MOA (``-f``) from 1. SEA uses 10% label noise, MOA's default (River's default is none). The
hyperplane rotates (``mag_change=0.001``). With these settings River's SGT reproduces the published
reference figures of each benchmark stream (``Reference``), which are printed labelled as references.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from tests.bench import stress

SEED = 42
GROUPS = ("benchmark", "short", "drift", "robust", "heldout")
SUITE = ("robust",)  # the group of a bundled real data set listed in another group too
DRIFT_LENGTH = 40_000  # three drifts, at 10,000, 20,000 and 30,000 records
# The width of a drift, the records over which the new concept replaces the old, as a fraction of the
# stream: 1/400 for an abrupt drift (100 records of 40,000: River's ConceptDriftStream overflows
# math.exp for narrower changes this far into a stream) and 1/10 for a gradual one (4,000 of 40,000).
ABRUPT_SHARE, GRADUAL_SHARE = 400, 10


@dataclass(frozen=True)
class Reference:
    """Published figures for one benchmark stream (accuracy in %, or MAE), not measured in this run."""

    river_sgt: float
    moa_sgt: float
    best_tree: float
    best_tree_name: str


@dataclass(frozen=True)
class Drift:
    """A concept change centred at record ``position`` over ``width`` records.

    River's ``ConceptDriftStream`` draws each record from the new concept with probability
    ``1 / (1 + exp(-4 (t - position) / width))``: 12% at ``start`` (``position - width / 2``), 50% at
    ``position``, 88% at ``end`` (``position + width / 2``).
    """

    position: int
    width: int

    @property
    def start(self) -> int:
        """First record of the change (12% of the records from the new concept)."""
        return self.position - self.width // 2

    @property
    def end(self) -> int:
        """First record after the change (88% of the records from the new concept, and rising)."""
        return self.position + (self.width + 1) // 2


@dataclass(frozen=True)
class StreamSpec:
    """A named stream: its group, task, length, how to build it and its known drifts."""

    name: str
    group: str  # one of GROUPS
    task: str  # "binary", "multiclass" or "regression"
    n: int
    make: Callable[[int], Iterable[tuple[dict, Any]]]  # the length -> River-style (x, y) pairs
    drifts_at: Callable[[int], tuple[Drift, ...]] = lambda n: ()
    reference: Reference | None = None
    also: tuple[str, ...] = ()  # further groups that select it (a bundled real data set: the suite)

    @property
    def is_regression(self) -> bool:
        return self.task == "regression"


@dataclass(frozen=True)
class Stream:
    """A materialised stream: River-style dicts and labels, the same values as arrays, and its drifts."""

    spec: StreamSpec
    dicts: list[dict]
    y: list[Any]
    X: np.ndarray | None  # the values as floats, in feature_names' order; None where a feature is nominal
    feature_names: list[str]
    classes: list[Any]  # sorted labels (classification); [] for regression
    target: np.ndarray  # class index into ``classes`` (int), or the regression target (float)
    drifts: tuple[Drift, ...]

    @property
    def n(self) -> int:
        return len(self.y)

    @property
    def inputs(self) -> np.ndarray | list[dict]:
        """What our models learn from: the float array, or the dicts where a feature is nominal (a
        string's category; River's trees take those as nominal too, and MOA's array input cannot)."""
        return self.dicts if self.X is None else self.X


# -- the generators ---------------------------------------------------------------------------------


def _synth() -> Any:
    from river.datasets import synth

    return synth


def _hyperplane(n: int) -> Iterable:
    return _synth().Hyperplane(seed=SEED, n_features=10, mag_change=0.001)


def _agrawal(n: int) -> Iterable:
    return _synth().Agrawal(classification_function=6, seed=SEED)


def _rbf(n: int) -> Iterable:
    return _synth().RandomRBF(seed_model=SEED, seed_sample=SEED, n_classes=5)


def _sea(n: int) -> Iterable:
    return _synth().SEA(seed=SEED, noise=0.1)


def _friedman(n: int) -> Iterable:
    return _synth().Friedman(seed=SEED)


def _held_out(name: str, **params: Any) -> Callable[[int], Iterable]:
    """A River generator of ``heldout``, seeded with ``SEED``."""
    return lambda n: getattr(_synth(), name)(seed=SEED, **params)


def _random_tree(n: int) -> Iterable:
    return _synth().RandomTree(
        seed_tree=SEED, seed_sample=SEED, n_classes=3, n_num_features=5, n_cat_features=3
    )


def _recoded_categories(
    make: Callable[[int], Iterable], recode: Callable[[Any], Any]
) -> Callable[[int], Iterable]:
    """The stream with each value of its integer-coded categories (features ``x_cat_*``) through `recode`:
    ``str`` gives them as strings, so that the models which take nominal features see categories, not
    numbers; dividing by 4 makes them span [0, 1] as the numeric features do, so that a model that
    splits on raw ranges (a Mondrian forest) splits on them no more often than on the others (4 is a
    power of two, so our grids give the same codes)."""

    def recoded(n: int) -> Iterable:
        for x, y in make(n):
            yield {k: recode(v) if k.startswith("x_cat") else v for k, v in x.items()}, y

    return recoded


def _bundled(name: str) -> Callable[[int], Iterable]:
    """One of the data sets River ships inside its package (read from a local file, never downloaded);
    a date or time feature is given as POSIX seconds (a float every model takes)."""

    def make(n: int) -> Iterable:
        from river import datasets

        for x, y in getattr(datasets, name)():
            yield {k: _posix(v) for k, v in x.items()}, y

    return make


def _posix(value: Any) -> Any:
    """A date or time as POSIX seconds (a naive one read as UTC, whatever the machine's time zone)."""
    if not isinstance(value, datetime):
        return value
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def drift_positions(n: int, gradual: bool) -> tuple[Drift, ...]:
    """Three drifts, centred at a quarter, a half and three quarters of ``n`` records."""
    width = max(1, n // (GRADUAL_SHARE if gradual else ABRUPT_SHARE))
    return tuple(Drift(n * k // 4, width) for k in (1, 2, 3))


def _drifting(concept: Callable[[int, int], Any], concepts: tuple[int, ...], gradual: bool) -> Callable:
    """Concepts joined by nested ``ConceptDriftStream``s so that the drifts fall at ``drift_positions``.

    An inner stream is drawn from only once the outer one has drifted to it, so each inner position is
    counted from the previous drift (exact in expectation: River's sigmoid is symmetric about the
    position, so the records the inner stream gives early and late balance).
    """

    def make(n: int) -> Iterable:
        synth = _synth()
        drifts = drift_positions(n, gradual)
        stream = concept(concepts[-1], SEED + len(concepts) - 1)
        for i in range(len(drifts) - 1, -1, -1):
            relative = drifts[i].position - (drifts[i - 1].position if i else 0)
            stream = synth.ConceptDriftStream(
                stream=concept(concepts[i], SEED + i),
                drift_stream=stream,
                position=relative,
                width=drifts[i].width,
                seed=SEED + 10 + i,
            )
        return stream

    return make


def _sea_concept(variant: int, seed: int) -> Any:
    return _synth().SEA(variant=variant, seed=seed, noise=0.1)


def _agrawal_concept(function: int, seed: int) -> Any:
    return _synth().Agrawal(classification_function=function, seed=seed)


SEA_CONCEPTS = (0, 1, 2, 3)  # SEA's four thresholds, in River's variant order
AGRAWAL_CONCEPTS = (0, 2, 4, 6)  # River's function indices (MOA's functions 1, 3, 5 and 7)


def _specs() -> list[StreamSpec]:
    def drifting(
        name: str, concept: Callable[[int, int], Any], concepts: tuple[int, ...], gradual: bool
    ) -> StreamSpec:
        make = _drifting(concept, concepts, gradual)
        return StreamSpec(name, "drift", "binary", DRIFT_LENGTH, make, lambda n: drift_positions(n, gradual))

    benchmark = [
        StreamSpec("hyperplane-10", "benchmark", "binary", 50_000, _hyperplane, reference=Reference(
            69.4, 77.4, 88.6, "River HoeffdingTree")),
        StreamSpec("agrawal-f7", "benchmark", "binary", 50_000, _agrawal, reference=Reference(
            85.5, 91.8, 96.9, "MOA EFDT")),
        StreamSpec("rbf-5", "benchmark", "multiclass", 20_000, _rbf, reference=Reference(
            39.0, 61.0, 72.2, "MOA EFDT")),
        StreamSpec("sea", "benchmark", "binary", 50_000, _sea, reference=Reference(
            82.6, 84.6, 88.3, "MOA EFDT")),
        StreamSpec("friedman-1", "benchmark", "regression", 50_000, _friedman, reference=Reference(
            2.25, 2.47, 1.67, "River HoeffdingTreeRegressor")),
    ]  # fmt: skip
    short = [
        StreamSpec("phishing", "short", "binary", 1_250, _bundled("Phishing"), also=SUITE),
        StreamSpec("image-segments", "short", "multiclass", 2_310, _bundled("ImageSegments"), also=SUITE),
        StreamSpec("bananas", "short", "binary", 5_300, _bundled("Bananas"), also=SUITE),
        StreamSpec("trump-approval", "short", "regression", 1_001, _bundled("TrumpApproval"), also=SUITE),
        StreamSpec("chick-weights", "short", "regression", 578, _bundled("ChickWeights"), also=SUITE),
        StreamSpec("hyperplane-10-2k", "short", "binary", 2_000, _hyperplane),
        StreamSpec("agrawal-f7-1k", "short", "binary", 1_000, _agrawal),
        StreamSpec("rbf-5-2k", "short", "multiclass", 2_000, _rbf),
        StreamSpec("sea-1k", "short", "binary", 1_000, _sea),
        StreamSpec("friedman-1-2k", "short", "regression", 2_000, _friedman),
    ]
    drift = [
        drifting("sea-abrupt", _sea_concept, SEA_CONCEPTS, gradual=False),
        drifting("sea-gradual", _sea_concept, SEA_CONCEPTS, gradual=True),
        drifting("agrawal-abrupt", _agrawal_concept, AGRAWAL_CONCEPTS, gradual=False),
        drifting("agrawal-gradual", _agrawal_concept, AGRAWAL_CONCEPTS, gradual=True),
    ]
    # the robustness suite: generated stress streams (tests/bench/stress.py), then River's bundled sets
    robust = [
        StreamSpec(name, "robust", task, n, make) for name, (make, n, task) in stress.CLASSIFICATION.items()
    ]
    robust += [
        StreamSpec(name, "robust", "regression", n, make) for name, (make, n) in stress.STREAMS.items()
    ]
    robust += [
        StreamSpec("friedman-1-10k", "robust", "regression", 10_000, _friedman),
        StreamSpec("shuttle", "robust", "binary", 49_097, _bundled("Shuttle")),
        StreamSpec("sp500-stocks", "robust", "regression", 1_257, _bundled("SP500Stocks")),
        StreamSpec("airline-passengers", "robust", "regression", 144, _bundled("AirlinePassengers")),
        StreamSpec("water-flow", "robust", "regression", 1_268, _bundled("WaterFlow")),
    ]
    named, scaled = _recoded_categories(_random_tree, str), _recoded_categories(_random_tree, lambda v: v / 4)
    heldout = [
        StreamSpec("random-tree", "heldout", "multiclass", 5_000, _random_tree),
        StreamSpec("random-tree-nominal", "heldout", "multiclass", 5_000, named),
        StreamSpec("random-tree-scaled", "heldout", "multiclass", 5_000, scaled),
        StreamSpec("sine-f0", "heldout", "binary", 5_000, _held_out("Sine", classification_function=0)),
        StreamSpec("sine-f2", "heldout", "binary", 5_000, _held_out("Sine", classification_function=2)),
        StreamSpec("mixed", "heldout", "binary", 5_000, _held_out("Mixed")),
        StreamSpec("agrawal-f4", "heldout", "binary", 5_000, _held_out("Agrawal", classification_function=3)),
        StreamSpec("hyperplane-4-noisy", "heldout", "binary", 5_000, _held_out(
            "Hyperplane", n_features=4, mag_change=0.001, noise_percentage=0.1)),
        StreamSpec("planes-2d", "heldout", "regression", 5_000, _held_out("Planes2D")),
        StreamSpec("rbf-drift", "heldout", "multiclass", 5_000, lambda n: _synth().RandomRBFDrift(
            seed_model=SEED, seed_sample=SEED, n_classes=4, change_speed=0.001)),
        StreamSpec("stagger", "heldout", "binary", 5_000, _held_out("STAGGER", classification_function=2)),
        StreamSpec("agrawal-f2-noisy", "heldout", "binary", 5_000, _held_out(
            "Agrawal", classification_function=1, perturbation=0.1)),
        StreamSpec("hyperplane-20-drift", "heldout", "binary", 5_000, _held_out(
            "Hyperplane", n_features=20, n_drift_features=10, mag_change=0.01)),
        StreamSpec("led-7", "heldout", "multiclass", 5_000, _held_out("LED", noise_percentage=0.1)),
        StreamSpec("mv", "heldout", "regression", 5_000, _held_out("Mv")),
    ]  # fmt: skip
    return benchmark + short + drift + robust + heldout


def specs(names: list[str] | None = None) -> list[StreamSpec]:
    """The streams, all or those named; a group name (``GROUPS``) selects every stream of that group."""
    table = {s.name: s for s in _specs()}
    if names is None:
        return list(table.values())
    chosen: list[StreamSpec] = []
    for name in names:
        if name in GROUPS:
            chosen += [s for s in table.values() if name in (s.group, *s.also) and s not in chosen]
        elif name in table:
            chosen += [table[name]] if table[name] not in chosen else []
        else:
            raise ValueError(f"unknown stream {name!r}; choose from {[*GROUPS, *table]}")
    return chosen


def materialise(spec: StreamSpec, n: int | None = None) -> Stream:
    """Draw the first ``n`` records (default ``spec.n``) of the stream; drifts scale with ``n``."""
    n = spec.n if n is None else min(n, spec.n)
    pairs = list(itertools.islice(spec.make(n), n))
    dicts = [x for x, _ in pairs]
    names = list(dicts[0])
    nominal = any(isinstance(v, str) for x in dicts for v in x.values())
    X = None if nominal else np.array([[float(x[k]) for k in names] for x in dicts])
    if spec.is_regression:
        y: list[Any] = [float(t) for _, t in pairs]
        classes: list[Any] = []
        target = np.array(y)
    else:
        y = [int(t) if isinstance(t, bool) else t for _, t in pairs]
        classes = sorted(set(y))
        index = {c: i for i, c in enumerate(classes)}
        target = np.array([index[t] for t in y], dtype=np.int64)
    drifts = tuple(d for d in spec.drifts_at(len(pairs)) if d.position < len(pairs))
    return Stream(spec, dicts, y, X, [str(k) for k in names], classes, target, drifts)
