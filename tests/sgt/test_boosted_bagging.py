"""The boosted ensembles' bagging weights divided by the rate (mean 1; sgt.boosted.bagging's ``mean_one``,
opt-in by `_Core._mean_one_bagging`), so that at a higher rate each member learns from almost every
record. The weights are a pure function of the seed, the record and the member, the same with the
compiled kernels and without; such a model keeps batch == loop == restore byte for byte and saves the
choice; a model saved before (the draws themselves) restores as the model it was."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from sgt import AdaptiveSGTClassifier, BoostedClassifier, BoostedRegressor, kernels
from sgt.boosted.bagging import Bagging
from sgt.boosted.ensemble import MEAN_ONE
from tests.sgt.sgt_testkit import NO_SIDE_MODELS, looped_and_restored, mixed_records
from tests.sgt.test_serialization import _pack, _unpack

ROWS = 1200
RAW_RATE_3 = {"grace_period": 40, "warm_up": 100, "bins": 16, "seed": 7, "poisson_rate": 3.0}


def _curve(n: int, seed: int = 20261129) -> tuple[np.ndarray, np.ndarray]:
    """Two noisy classes split by a curve in [0, 1)^3."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, 3))
    score = X[:, 0] + 0.5 * np.sin(6 * X[:, 1]) - 0.5 + rng.normal(0, 0.1, n)
    return X, (score > 0).astype(int)


class MeanOne(BoostedClassifier):
    """The classifier with its bagging weights divided by the rate (what tests/bench/ours.py measures)."""

    _mean_one_bagging = True


@pytest.mark.parametrize("kernels_on", [True, False], ids=["kernels", "SGT_KERNELS=0"])
def test_mean_one_weights_are_the_draws_divided_by_the_rate(kernels_on: bool, monkeypatch) -> None:
    monkeypatch.setattr(kernels, "ENABLED", kernels_on and kernels.ENABLED)
    learn = np.ones(40_000, dtype=bool)
    learn[::7] = False  # rows not learned weigh 0 either way
    for rate in (1.0, 3.0, 6.0):
        raw = Bagging(rate, seed=11).weights(learn, members=3, first=5)
        divided = Bagging(rate, seed=11, mean_one=True).weights(learn, members=3, first=5)
        assert np.array_equal(divided, raw / rate)
        assert not divided[:, ~learn].any()
        kept = divided[:, learn]
        assert abs(kept.mean() - 1.0) < 0.02 and abs(kept.var() - 1.0 / rate) < 0.03
        assert abs((kept == 0).mean() - np.exp(-rate)) < 0.01
    assert np.array_equal(
        Bagging(1.0, seed=3, mean_one=True).weights(learn, 2, 0), Bagging(1.0, seed=3).weights(learn, 2, 0)
    )


def test_a_member_leaves_few_records_out_at_rate_3() -> None:
    """With the draws themselves a member left out 37% of the records at rate 1 (which a short stream
    cannot spare), or weighed them by 3 on average at rate 3 (the leaves' regularisation a third)."""
    for model in (MeanOne(poisson_rate=3.0), MeanOne(poisson_rate=6.0)):
        weights = model._weights(np.ones(20_000, dtype=bool))
        assert (weights == 0).mean() < 0.06
        assert abs(weights.mean() - 1.0) < 0.02
    default = BoostedClassifier()._weights(np.ones(20_000, dtype=bool))
    assert abs((default == 0).mean() - np.exp(-1.0)) < 0.01  # (the default: Poisson(1))


def test_the_choice_is_saved_and_restored_and_the_default_saves_the_format_before() -> None:
    X, y = _curve(300)
    model = MeanOne(grace_period=40, warm_up=100, poisson_rate=3.0)
    model.learn_many(X, y)
    assert model._bagging.mean_one and f'"bagging":"{MEAN_ONE}"'.encode() in model.to_bytes()
    restored = BoostedClassifier.from_bytes(model.to_bytes())  # (the save, not the class, says so)
    assert restored._bagging.mean_one and restored.to_bytes() == model.to_bytes()
    model.learn_many(X[:100], y[:100])
    restored.learn_many(X[:100], y[:100])
    assert restored.to_bytes() == model.to_bytes()
    for other in (BoostedClassifier(), BoostedRegressor(), AdaptiveSGTClassifier()):
        other.learn_many(X, y.astype(float) if isinstance(other, BoostedRegressor) else y)
        assert not other._bagging.mean_one and b'"bagging"' not in other.to_bytes()


def test_a_forged_bagging_word_is_refused() -> None:
    X, y = _curve(200)
    model = MeanOne(grace_period=40, warm_up=100)
    model.learn_many(X, y)
    version, header, payloads = _unpack(bytes(model.to_bytes()))
    assert header["extra"]["bagging"] == MEAN_ONE
    header["extra"]["bagging"] = "mean-two"
    with pytest.raises(ValueError, match="bagging must be 'mean-one' or absent"):
        BoostedClassifier.from_bytes(_pack(version, header, payloads))


def test_a_save_without_the_word_restores_with_the_raw_draws() -> None:
    """A model saved with the draws themselves (every save before the variant, and today's default) at a
    rate other than 1, where the two weightings differ: restored, it learns the
    rest of the stream exactly as the model that was never saved (with the divided draws it would not)."""
    X, y = _curve(ROWS)
    half = slice(0, ROWS // 2), slice(ROWS // 2, ROWS)
    model = BoostedClassifier(**RAW_RATE_3)
    model.learn_many(X[half[0]], y[half[0]])
    saved = bytes(model.to_bytes())
    assert b"mean-one" not in saved
    model.learn_many(X[half[1]], y[half[1]])
    restored = BoostedClassifier.from_bytes(saved)
    assert restored.poisson_rate == 3.0 and not restored._bagging.mean_one
    restored.learn_many(X[half[1]], y[half[1]])
    assert restored.to_bytes() == model.to_bytes()
    divided = MeanOne(**RAW_RATE_3)
    divided.learn_many(X, y)
    assert divided.to_bytes() != model.to_bytes()


def _records(n: int) -> tuple[list[dict[str, Any]], list[Any]]:
    """Mixed dict records with a third class from row 500 (members are added there)."""
    records, labels = mixed_records(n, seed=29)
    return records, [("third" if i >= 500 and i % 5 == 0 else y) for i, y in enumerate(labels)]


@pytest.mark.parametrize("kernels_on", [True, False], ids=["kernels", "SGT_KERNELS=0"])
@pytest.mark.parametrize("rate", [1.0, 3.0, 6.0], ids=["rate-1", "rate-3", "rate-6"])
def test_batches_equal_the_loop_and_a_restore_byte_for_byte(
    rate: float, kernels_on: bool, monkeypatch
) -> None:
    monkeypatch.setattr(kernels, "ENABLED", kernels_on and kernels.ENABLED)
    # (the members alone, NO_SIDE_MODELS: their bagging weights are the subject)
    params: dict[str, Any] = {
        "grace_period": 30,
        "warm_up": 60,
        "seed": 4,
        "poisson_rate": rate,
        **NO_SIDE_MODELS,
    }
    X, y = _records(1000)

    looped = looped_and_restored(MeanOne(**params), X, y, at=len(X) // 2, load=BoostedClassifier.from_bytes)
    saved, proba = looped.saved, looped.predictions
    assert (looped.restored, looped.restored_predictions) == (saved, proba)
    for cuts in ([len(X)], [1, 120, 121, 499, 501, 800]):
        model = MeanOne(**params)
        parts = [model.predict_learn_many(X[a:b], y[a:b]) for a, b in itertools.pairwise([0, *cuts, len(X)])]
        assert bytes(model.to_bytes()) == saved
        rows = [row for part in parts for row in part.tolist()]
        classes = model.classes_
        assert [[p.get(c, 0.0) for c in classes] for p in proba] == [
            row + [0.0] * (len(classes) - len(row)) for row in rows
        ]
    if rate == 1.0:  # the same model as with the draws themselves, but for the saved word
        plain = BoostedClassifier(**params)
        plain.learn_many(X, y)
        _, header, payloads = _unpack(saved)
        assert header["extra"].pop("bagging") == MEAN_ONE
        header["model"] = "BoostedClassifier"  # (the saved class's name)
        assert _unpack(bytes(plain.to_bytes()))[1:] == (header, payloads)
