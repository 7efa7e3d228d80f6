"""proba="calibrated" mixes a naive Bayes into the calibrated softmax while the trees are young.

- what it publishes: until the calibration's first step, exactly the probabilities of ``proba="mixed"``;
  after the naive Bayes retires, exactly those of the calibrated softmax alone (the trees and the
  calibration learn the same with it or without it);
- when it retires: after the learned record that puts its weight at its floor (the log-loss difference
  at its bound), or after `YOUNG_BAYES.records` learned records, whichever comes first; a retired
  model saves no naive Bayes state;
- exactness with a retirement inside the stream, driven by either condition: any batching and any
  method give the loop's bytes and probabilities, and a model saved anywhere (before, at or after the
  retirement) continues identically;
- a model saved without the naive Bayes state (retired, or by the release before it) restores as
  retired and goes on byte for byte as one.
The tests of the other modes (test_smoothing.py, test_bayes.py) run ``proba="calibrated"`` with the
default retirement, which falls inside their streams too.
"""

from __future__ import annotations

import itertools
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sgt
from sgt import SGTClassifier
from sgt.bayes import LOG_RATIO_BOUND, Retirement
from sgt.calibration import STEP
from tests.sgt.sgt_testkit import as_dicts, multiclass_stream
from tests.sgt.test_serialization import _pack, _unpack
from tests.sgt.test_smoothing import PROPERTY, N, _cuts, _small, _stream, run_rows

#: retirements inside `_stream`: by the weight's floor (about record 370) and by the record count
BY_RATIO = Retirement(LOG_RATIO_BOUND, 10**9)
BY_RECORDS = Retirement(LOG_RATIO_BOUND, 200)


def _without_bayes(model: SGTClassifier) -> SGTClassifier:
    """`model` with its naive Bayes retired before it learned anything."""
    model._bayes = None
    return model


def _loop_records(model: SGTClassifier, records: list, labels: list) -> tuple[list[dict], list[int]]:
    """The loop's probabilities, and the records learned when the naive Bayes was last present."""
    out, young = [], []
    for x, y in zip(records, labels, strict=True):
        out.append(model.predict_proba_one(x))
        if y is not None:
            model.learn_one(x, y)
        if model._bayes is not None:
            young.append(model.n_seen)
    return out, young


# -- what it publishes ----------------------------------------------------------------------------


def test_until_the_first_step_the_default_publishes_the_mixed_probabilities() -> None:
    X, y = multiclass_stream(STEP + 40, seed=3)
    records, labels = as_dicts(X), y.tolist()
    mixed, calibrated = SGTClassifier(proba="mixed"), SGTClassifier(proba="calibrated")
    tree, alone = SGTClassifier(proba="tree"), _without_bayes(SGTClassifier(proba="calibrated"))
    first = STEP + 1  # predicted before the first step (the first record knows no class)
    young = [m.predict_learn_many(records[:first], labels[:first]) for m in (mixed, calibrated, tree, alone)]
    assert np.array_equal(young[0], young[1])  # the calibration is the identity before its first step
    assert np.array_equal(young[2], young[3])  # so is it without the naive Bayes: the trees' softmax
    assert not np.array_equal(young[1], young[3])
    later = [m.predict_learn_many(records[first:], labels[first:]) for m in (mixed, calibrated)]
    assert not np.array_equal(later[0], later[1])
    assert calibrated._bayes is not None  # still young


@pytest.mark.parametrize("retirement", [BY_RATIO, BY_RECORDS], ids=["ratio", "records"])
def test_once_retired_it_publishes_the_calibrated_softmax_alone(retirement: Retirement) -> None:
    records, labels = _stream()
    with mock.patch("sgt.classifier.YOUNG_BAYES", retirement):
        model, alone = _small("calibrated"), _without_bayes(_small("calibrated"))
    ours = model.predict_learn_many(records, labels)
    theirs = alone.predict_learn_many(records, labels)
    learned = np.cumsum([label is not None for label in labels])
    retired = int(np.searchsorted(learned, _retired_at(records, labels, retirement)))  # its row
    assert 0 < retired < N - 1 and model._bayes is None
    assert np.array_equal(ours[retired + 1 :], theirs[retired + 1 :])
    assert not np.array_equal(ours[: retired + 1], theirs[: retired + 1])
    header = _unpack(model.to_bytes())[1]
    assert "bayes" not in header["extra"] and "calibration" in header["extra"]
    assert model.to_bytes() == alone.to_bytes()  # the trees and the calibration learned the same


def _retired_at(records: list, labels: list, retirement: Retirement) -> int:
    """The learned records of the loop when its naive Bayes retires."""
    with mock.patch("sgt.classifier.YOUNG_BAYES", retirement):
        _, young = _loop_records(_small("calibrated"), records, labels)
    return young[-1] + 1


# -- when it retires ------------------------------------------------------------------------------


def test_it_retires_at_the_record_that_puts_its_weight_at_its_floor() -> None:
    records, labels = _stream()
    model = _small("calibrated")
    ratios, n_seen = [], []
    for x, y in zip(records, labels, strict=True):
        if y is None:
            continue
        model.learn_one(x, y)
        if model._bayes is None:
            break
        ratios.append(model._bayes.log_ratio)
        n_seen.append(model.n_seen)
    assert model._bayes is None and n_seen[-1] < N // 2  # the trees beat it early on this stream
    assert max(ratios) < LOG_RATIO_BOUND  # never at the bound while present


def test_it_retires_after_the_set_number_of_records_at_the_latest() -> None:
    records, labels = _stream()
    with mock.patch("sgt.classifier.YOUNG_BAYES", BY_RECORDS):
        model = _small("calibrated")
        _, young = _loop_records(model, records, labels)
    assert young[-1] == BY_RECORDS.records - 1
    assert Retirement(3.0, 100).retires(3.0, 1) and Retirement(3.0, 100).retires(0.0, 100)
    assert not Retirement(3.0, 100).retires(2.9, 99)


# -- exactness with a retirement inside the stream -------------------------------------------------


@pytest.mark.parametrize("retirement", [BY_RATIO, BY_RECORDS], ids=["ratio", "records"])
@PROPERTY
@given(
    cuts=_cuts(N),
    methods=st.lists(st.sampled_from(["predict_learn_many", "learn_many", "loop", "save"]), min_size=11),
)
def test_any_batching_and_saves_give_the_loops_bytes_and_probabilities(
    retirement: Retirement, cuts: list[int], methods: list
) -> None:
    records, labels = _stream()
    with mock.patch("sgt.classifier.YOUNG_BAYES", retirement):
        expected, _ = _loop_records(_small("calibrated"), records, labels)
        blob = _small("calibrated")
        blob.learn_many(records, labels)
        model = _small("calibrated")
        for (a, b), method in zip(itertools.pairwise([0, *cuts, N]), methods, strict=False):
            if method == "save":  # restored, then a few rows one by one and the rest as a batch
                model = SGTClassifier.from_bytes(model.to_bytes())
                method = "predict_learn_many"
                for i in range(a, min(b, a + 3)):
                    assert model.predict_proba_one(records[i]) == expected[i]
                    if labels[i] is not None:
                        model.learn_one(records[i], labels[i])
                a = min(b, a + 3)
            run_rows(model, records, labels, expected, range(a, b), method)
    assert model.to_bytes() == blob.to_bytes()


# -- saved without the naive Bayes -----------------------------------------------------------------


def test_a_blob_without_the_naive_bayes_restores_retired_and_goes_on_as_a_retired_model() -> None:
    """A young model's blob with the naive Bayes left out (as the release before it wrote calibrated
    models) restores with the calibration and no naive Bayes, byte for byte as one retired."""
    records, labels = _stream()
    young, alone = _small("calibrated"), _without_bayes(_small("calibrated"))
    for m in (young, alone):
        m.learn_many(records[:300], labels[:300])
    assert young._bayes is not None
    version, header, payloads = _unpack(young.to_bytes())
    del header["extra"]["bayes"]
    kept = [(e, p) for e, p in zip(header["arrays"], payloads, strict=True) if not e[0].startswith("extra.")]
    header["arrays"] = [e for e, _ in kept]
    old = sgt.load(_pack(version, header, [p for _, p in kept]))
    assert old.proba == "calibrated" and old._bayes is None
    assert old.to_bytes() == alone.to_bytes()
    for m in (old, alone):
        m.learn_many(records[300:], labels[300:])
    assert old.to_bytes() == alone.to_bytes()
