"""Models saved by an earlier release restore as the same model and go on learning.

The files in tests/fixtures/release-*/ were written by that release (tests/fixtures/make_release_fixtures.py),
with what it predicted for fixed probe records. A user's saved models must survive an upgrade: a restored
model keeps the hyperparameters it was created with, so it predicts exactly what it predicted before.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from sgt import SGTClassifier, SGTRegressor

RELEASES = sorted((Path(__file__).parents[1] / "fixtures").glob("release-*"))
TYPES = {"classifier": SGTClassifier, "regressor": SGTRegressor}


def _probes_and_stream() -> tuple[list, list, list, list]:
    from tests.fixtures.make_release_fixtures import SEED, probes, stream

    rows, classes, target = stream(SEED + 3, 600)
    return probes(), rows, classes, target


@pytest.mark.parametrize("release", RELEASES, ids=lambda p: p.name)
@pytest.mark.parametrize("name", sorted(TYPES))
def test_a_saved_model_predicts_as_it_did_and_goes_on_learning(release: Path, name: str) -> None:
    expected = orjson.loads((release / "expected.json").read_bytes())[name]
    model = TYPES[name].from_bytes((release / f"{name}.sgt").read_bytes())
    probes, rows, classes, target = _probes_and_stream()
    assert model.n_seen == expected["n_seen"] and model.n_nodes == expected["n_nodes"]
    assert np.asarray(model.predict_many(probes)).tolist() == expected["predictions"]
    if name == "classifier":
        assert np.array_equal(np.asarray(model.predict_proba_many(probes)), np.asarray(expected["proba"]))
    model.learn_many(rows, classes if name == "classifier" else target)
    assert model.n_seen == expected["n_seen"] + len(rows)
    again = TYPES[name].from_bytes(model.to_bytes())
    assert again.to_bytes() == model.to_bytes()
