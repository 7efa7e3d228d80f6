"""proba="calibrated" mixes a naive Bayes into the calibrated softmax while the trees are young.

- what it publishes: until the calibration's first step, exactly the probabilities of ``proba="mixed"``;
  after the naive Bayes retires, exactly those of the calibrated softmax alone (the trees and the
  calibration learn the same with it or without it);
- when it retires (`YOUNG_BAYES`, a `Tournament`): after the learned record that puts the trees' log
  loss over every learned record `lead` nats below its own, or, from `records` learned records on,
  the first that leaves the trees' at most its own, never before `least` records; while it leads it
  stays (it failed before the tournament: retired at 5,000 records at the latest); a retired model
  saves no naive Bayes state;
- the rule before the tournament (`Retirement`), which a young model saved then keeps: after the
  learned record that puts its weight at its floor (the bounded difference at its bound), or after
  `records` learned records, whichever comes first;
- exactness with a retirement inside the stream, driven by either condition: any batching and any
  method give the loop's bytes and probabilities, and a model saved anywhere (before, at or after the
  retirement) continues identically;
- a model saved without the naive Bayes state (retired, or by the release before it) restores as
  retired and goes on byte for byte as one; a young model saved before the tournament (no "lead" in
  its naive Bayes state) restores with the bounded rule and goes on byte for byte as it would have.
The tests of the other modes (test_smoothing.py, test_bayes.py) run ``proba="calibrated"`` with the
default retirement, which falls inside their streams too.
"""

from __future__ import annotations

import functools
import itertools
from unittest import mock

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import sgt
from sgt import SGTClassifier
from sgt.bayes import LOG_RATIO_BOUND
from sgt.calibration import STEP
from sgt.classifier import YOUNG_BAYES, YOUNG_BAYES_BOUNDED
from sgt.retirement import Retirement, Tournament
from tests.sgt.sgt_testkit import as_dicts, multiclass_stream
from tests.sgt.test_serialization import _pack, _unpack
from tests.sgt.test_smoothing import PROPERTY, N, _cuts, _small, _stream, run_rows

#: retirements inside `_stream`: by the weight's floor (about record 370) and by the record count
BY_RATIO = Retirement(LOG_RATIO_BOUND, 10**9)
BY_RECORDS = Retirement(LOG_RATIO_BOUND, 200)
#: and by the tournament: by the trees' lead (about record 390), and from record 200 on by the first
#: record at which the trees lead at all (about record 360: the naive Bayes leads until then)
BY_LEAD = Tournament(LOG_RATIO_BOUND, 10**9)
BY_COUNT_AND_LEAD = Tournament(10**9, 200)
RULES = [BY_RATIO, BY_RECORDS, BY_LEAD, BY_COUNT_AND_LEAD]
RULE_IDS = ["ratio", "records", "lead", "count-and-lead"]


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


@pytest.mark.parametrize("retirement", RULES, ids=RULE_IDS)
def test_once_retired_it_publishes_the_calibrated_softmax_alone(retirement: Retirement | Tournament) -> None:
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


def _retired_at(records: list, labels: list, retirement: Retirement | Tournament) -> int:
    """The learned records of the loop when its naive Bayes retires."""
    with mock.patch("sgt.classifier.YOUNG_BAYES", retirement):
        _, young = _loop_records(_small("calibrated"), records, labels)
    return young[-1] + 1


# -- when it retires ------------------------------------------------------------------------------


def test_the_rule_before_the_tournament_retires_it_at_the_record_that_puts_its_weight_at_its_floor() -> None:
    records, labels = _stream()
    with mock.patch("sgt.classifier.YOUNG_BAYES", YOUNG_BAYES_BOUNDED):
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


def test_the_tournament_retires_it_at_the_record_that_puts_the_trees_lead_at_its_margin() -> None:
    records, labels = _stream()
    model = _small("calibrated")
    assert model._retirement == YOUNG_BAYES == Tournament(LOG_RATIO_BOUND, 5000, least=200)
    leads = []
    for x, y in zip(records, labels, strict=True):
        if y is None:
            continue
        model.learn_one(x, y)
        if model._bayes is None:
            break
        assert model._bayes.lead is not None
        leads.append(model._bayes.lead)
    assert model._bayes is None and len(leads) < N // 2  # the trees beat it early on this stream
    assert max(leads) < LOG_RATIO_BOUND and min(leads) < -LOG_RATIO_BOUND  # it led first, by more than that


def test_the_tournament_keeps_it_past_the_record_count_while_it_leads() -> None:
    """Ten Gaussian classes of falling priors in eight dimensions (the robustness suite's skewed-10):
    the naive Bayes is the better expert on the whole, and stays beyond `YOUNG_BAYES.records` (the rule
    before the tournament retired it there at the latest)."""
    rng = np.random.default_rng(5)
    n = YOUNG_BAYES.records + 300
    prior = 0.6 ** np.arange(10)
    y = rng.choice(10, n, p=prior / prior.sum())
    X = rng.normal(0.0, 1.5, (10, 8))[y] + rng.normal(0.0, 1.0, (n, 8))
    model = SGTClassifier()
    model.learn_many(X, y)
    assert model._bayes is not None
    assert model._bayes.lead is not None and model._bayes.lead < -LOG_RATIO_BOUND


def test_the_tournament_retires_by_the_lead_or_from_the_record_count_on_by_any_lead() -> None:
    rule = Tournament(3.0, 100)
    assert rule.retires(-9.0, 1, 3.0) and rule.retires(9.0, 100, 0.0) and rule.retires(-9.0, 200, 0.5)
    assert not rule.retires(9.0, 99, 2.9) and not rule.retires(9.0, 5000, -0.1)  # the bounded one is ignored
    with pytest.raises(ValueError, match="cumulative log-loss difference"):
        rule.retires(0.0, 1, None)
    patient = Tournament(3.0, 100, least=50)
    assert not patient.retires(9.0, 49, 30.0) and patient.retires(9.0, 50, 3.0)


# -- exactness with a retirement inside the stream -------------------------------------------------


@pytest.mark.parametrize("retirement", RULES, ids=RULE_IDS)
@PROPERTY
@given(
    cuts=_cuts(N),
    methods=st.lists(st.sampled_from(["predict_learn_many", "learn_many", "loop", "save"]), min_size=11),
)
def test_any_batching_and_saves_give_the_loops_bytes_and_probabilities(
    retirement: Retirement | Tournament, cuts: list[int], methods: list
) -> None:
    records, labels = _stream()
    expected, blob = _looped_under(retirement)
    with mock.patch("sgt.classifier.YOUNG_BAYES", retirement):
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
    assert model.to_bytes() == blob


@functools.cache
def _looped_under(retirement: Retirement | Tournament) -> tuple[list[dict], bytes]:
    """The one-record loop's probabilities and its saved bytes under a retirement rule, once per
    process (each batching the property test draws is compared with them)."""
    records, labels = _stream()
    with mock.patch("sgt.classifier.YOUNG_BAYES", retirement):
        model = _small("calibrated")
        expected, _ = _loop_records(model, records, labels)
    return expected, bytes(model.to_bytes())


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


def _before_the_tournament() -> SGTClassifier:
    """A young calibrated model as the release before the tournament made it: no cumulative lead kept,
    retired by the bounded rule."""
    with mock.patch("sgt.classifier.YOUNG_BAYES", YOUNG_BAYES_BOUNDED):
        model = _small("calibrated")
    assert model._bayes is not None
    model._bayes.lead = None
    return model


def test_a_young_model_saved_before_the_tournament_goes_on_with_the_bounded_rule() -> None:
    records, labels = _stream()
    old, new = _before_the_tournament(), _small("calibrated")
    expected, young = _loop_records(_before_the_tournament(), records, labels)
    for m in (old, new):
        m.learn_many(records[:200], labels[:200])
    header = _unpack(old.to_bytes())[1]
    assert "lead" not in header["extra"]["bayes"] and "lead" in _unpack(new.to_bytes())[1]["extra"]["bayes"]
    restored = sgt.load(old.to_bytes())
    assert restored._retirement == YOUNG_BAYES_BOUNDED and restored._bayes is not None
    assert restored._bayes.lead is None
    assert restored.to_bytes() == old.to_bytes()
    for i in range(200, 203):  # the loop's probabilities, then the rest as a batch
        assert restored.predict_proba_one(records[i]) == expected[i]
        if labels[i] is not None:
            restored.learn_one(records[i], labels[i])
    old.learn_many(records[200:203], labels[200:203])
    for m in (restored, old):
        m.learn_many(records[203:], labels[203:])
    assert restored.to_bytes() == old.to_bytes() and restored._bayes is None
    assert young[-1] + 1 == _retired_at(records, labels, YOUNG_BAYES_BOUNDED)  # the bounded rule's record
    assert sgt.load(new.to_bytes())._retirement == YOUNG_BAYES


@pytest.mark.parametrize("lead", [float("nan"), float("inf"), "1.0", True])
def test_a_saved_lead_that_is_not_a_finite_number_is_refused(lead: object) -> None:
    records, labels = _stream()
    model = _small("calibrated")
    model.learn_many(records[:100], labels[:100])
    version, header, payloads = _unpack(model.to_bytes())
    header["extra"]["bayes"]["lead"] = lead
    with pytest.raises(ValueError, match="cumulative log-loss difference"):
        sgt.load(_pack(version, header, payloads))
