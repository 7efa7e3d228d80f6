"""proba="calibrated": the softmax with a temperature and per-class biases fitted online (sgt.calibration).

- the step against its formula, by hand, on both the one-record and the batch path (the binary fast
  path and the general one), and the parameters moving only every STEP learned records;
- what the calibration is for: an overconfident softmax after a concept change is cooled, and the log
  loss drops (its identity at first, and the naive Bayes a young model mixes in, are test_young_bayes.py's);
- saved states restore and are checked; a model saved without calibration state restores as "tree".
The batch == loop and save-anywhere guarantees are tested with the other modes (test_smoothing.py,
test_bayes.py).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import sgt
from sgt import SerializationError, SGTClassifier
from sgt.calibration import LEARNING_RATE, SCALE_BOUNDS, STEP, Calibrator
from tests.sgt.sgt_testkit import as_dicts, multiclass_stream, threshold_stream
from tests.sgt.test_smoothing import _small, _stream

# -- the step, by hand ----------------------------------------------------------------------------


def _softmax(logits: list[float]) -> list[float]:
    e = [math.exp(v) for v in [0.0, *logits]]
    return [v / sum(e) for v in e]


def _by_hand(records: list[tuple[list[float], int]]) -> tuple[float, list[float]]:
    """Scale and biases after one step on `records` (all of the same classes), from the formula."""
    scale, bias = 1.0, [0.0] * len(records[0][0])
    grad_scale, grad_bias = 0.0, [0.0] * len(bias)
    for raw, target in records:
        p = _softmax(raw)  # the identity: the parameters do not move before the step
        for k, z in enumerate(raw):
            g = p[k + 1] - (k + 1 == target)
            grad_scale += g * z
            grad_bias[k] += g
    return scale - LEARNING_RATE * grad_scale, [b - LEARNING_RATE * g for b, g in zip(bias, grad_bias)]


@pytest.mark.parametrize("classes", [2, 4])
def test_a_step_moves_the_parameters_by_the_summed_log_loss_gradient(classes: int) -> None:
    rng = np.random.default_rng(classes)
    records = [(rng.normal(0.0, 2.0, classes - 1).tolist(), int(rng.integers(classes))) for _ in range(STEP)]
    scale, bias = _by_hand(records)
    one, batch = Calibrator(), Calibrator()
    for raw, target in records[:-1]:
        one.learn_one(raw, target)
        assert (one.scale, one.bias) == (1.0, [0.0] * (classes - 1))  # no step before STEP records
    one.learn_one(*records[-1])
    raw = np.array([r for r, _ in records])
    targets = np.array([t for _, t in records])
    batch.run(raw, np.full(STEP, classes), targets, {}, classes)
    for c in (one, batch):
        assert c.scale == pytest.approx(scale, rel=1e-12)
        assert c.bias == pytest.approx(bias, rel=1e-12, abs=1e-15)
        assert c.pending == 0 and c.grad_scale == 0.0
    assert (one.scale, one.bias) == (batch.scale, batch.bias)  # the same bits
    expected = _softmax([scale * z + b for z, b in zip(records[0][0], bias, strict=True)])
    assert one.proba_one(records[0][0]) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("classes", [2, 4])
def test_a_batch_reports_each_learned_rows_probability_of_its_class_as_learned(classes: int) -> None:
    rng = np.random.default_rng(10 + classes)
    n = 3 * STEP + 7  # across steps
    raw = rng.normal(0.0, 2.0, (n, classes - 1))
    targets = rng.integers(classes, size=n)
    targets[rng.uniform(size=n) < 0.1] = -1  # only predicted
    loop, batch = Calibrator(), Calibrator()
    expected = np.ones(n)
    for i in range(n):
        p = loop.proba_one(raw[i].tolist())
        if targets[i] >= 0:
            expected[i] = p[targets[i]]
            loop.learn_one(raw[i].tolist(), int(targets[i]))
    chosen = np.ones(n)
    batch.run(raw, np.full(n, classes), targets, {}, classes, chosen)
    assert chosen.tolist() == expected.tolist()
    assert batch == loop


def test_the_scale_stays_within_its_bounds() -> None:
    c = Calibrator()
    for _ in range(20 * STEP):
        c.learn_one([1e6], 0)  # an absurdly confident, always wrong score: the scale falls to its floor
    assert c.scale == SCALE_BOUNDS[0]


def test_rows_only_predicted_and_rows_without_trees_learn_nothing() -> None:
    c = Calibrator()
    proba = c.run(
        np.array([[0.0], [0.0], [1.0], [2.0]]),
        np.array([0, 1, 2, 2]),
        np.array([0, 0, -1, -1]),
        {},
        2,
    )
    assert proba[:2].tolist() == [[0.0, 0.0], [1.0, 0.0]]  # no class yet, then certainty for the only one
    assert c.pending == 0 and c.bias == []
    c.learn_one([], 0)
    assert c.pending == 0


# -- what it is for -------------------------------------------------------------------------------


def _log_loss(proba: np.ndarray, y: np.ndarray) -> float:
    return float(-np.log(np.clip(proba[np.arange(len(y)), y], 1e-15, 1.0)).mean())


def test_an_overconfident_softmax_after_a_concept_change_is_cooled() -> None:
    X, y = threshold_stream(6000, seed=5)
    y = y.astype(int)
    y[3000:] = 1 - y[3000:]  # the concept flips
    scores, scales = {}, []
    for proba in ("tree", "calibrated"):
        model = SGTClassifier(proba=proba, warm_up=200, leaf_bayes=False)  # (the softmax's own probabilities)
        out = []
        for i in range(0, 6000, 500):
            out.append(model.predict_learn_many(X[i : i + 500], y[i : i + 500]))
            if proba == "calibrated":
                scales.append(model._calibrator.scale)
        column = np.array([model.classes_.index(v) for v in y.tolist()])
        proba_rows = np.concatenate(out)
        scores[proba] = (
            _log_loss(proba_rows[:3000], column[:3000]),
            _log_loss(proba_rows[3000:], column[3000:]),
        )
    assert scores["calibrated"][1] < 0.85 * scores["tree"][1]
    assert scores["calibrated"][0] < scores["tree"][0] * 1.02  # a learned concept: about the same
    assert min(scales[6:]) < 0.5 * scales[5]  # cooled after the change


def test_the_label_is_the_most_probable_calibrated_class() -> None:
    X, y = multiclass_stream(1500, seed=8)
    model = SGTClassifier()
    model.learn_many(as_dicts(X[:1000]), y[:1000].tolist())
    for x in as_dicts(X[1000:]):
        p = model.predict_proba_one(x)
        assert model.predict_one(x) == max(p, key=p.get)
    labels = model.predict_many(as_dicts(X[1000:]))
    assert labels.tolist() == [model.predict_one(x) for x in as_dicts(X[1000:])]


# -- saved states ---------------------------------------------------------------------------------


def test_the_state_round_trips_and_a_forged_one_is_refused() -> None:
    records, labels = _stream()
    model = _small("calibrated")
    model.learn_many(records[:500], labels[:500])
    state = model._calibrator.state()
    assert 0 < state["pending"] < STEP and len(state["bias"]) == 2  # three classes
    restored = sgt.load(model.to_bytes())
    assert restored.proba == "calibrated" and restored._calibrator == model._calibrator
    with pytest.raises(ValueError, match="does not fit 3 classes"):
        Calibrator.restore({**state, "bias": [0.0] * 3, "grad_bias": [0.0] * 3}, 3)
    with pytest.raises(ValueError, match="pending"):
        Calibrator.restore({**state, "pending": STEP}, 3)


def test_a_forged_calibration_state_is_refused_on_load() -> None:
    from tests.sgt.test_serialization import _pack, _unpack

    records, labels = _stream()
    model = _small("calibrated")
    model.learn_many(records[:400], labels[:400])
    version, header, payloads = _unpack(model.to_bytes())
    header["extra"]["calibration"]["bias"] = [0.0] * 5
    with pytest.raises((SerializationError, ValueError), match="calibration state"):
        sgt.load(_pack(version, header, payloads))
