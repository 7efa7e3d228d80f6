"""A checkpoint written by an earlier release restores: same offsets, join buffer and model.

The file in tests/fixtures/release-*/ was written by that release's worker core
(tests/fixtures/make_release_fixtures.py); a user's partitions must survive the upgrade of the worker.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import orjson
import pytest

from worker.checkpoints.restore import load_state
from worker.config import load_settings

RELEASES = sorted((Path(__file__).parents[1] / "fixtures").glob("release-*"))


@pytest.mark.parametrize("release", RELEASES, ids=lambda p: p.name)
def test_a_checkpoint_of_an_earlier_release_restores_exactly(release: Path, tmp_path: Path) -> None:
    from tests.fixtures.make_release_fixtures import probes

    expected = orjson.loads((release / "expected.json").read_bytes())["checkpoint"]
    shutil.copy(release / "partition-0003.ckpt", tmp_path / "partition-0003.ckpt")
    settings = load_settings(
        {
            "checkpoint_dir": str(tmp_path),
            "features_topic": "features",
            "labels_topic": "labels",
            "task": "classification",
        }
    )
    state = load_state(settings, 3)
    assert state.next_offsets == expected["next_offsets"]
    assert (state.trained, state.predicted) == (expected["trained"], expected["predicted"])
    assert [len(state.join.features), len(state.join.labels)] == expected["pending"]
    assert state.prequential.n == expected["prequential_n"]
    # the same model: exactly the predictions it made then (its bytes are in the current format)
    assert np.asarray(state.model.predict_many(probes())).tolist() == expected["predictions"]
