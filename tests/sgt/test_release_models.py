"""Models saved by an earlier release restore as the same model and go on learning.

The files in tests/fixtures/release-*/ were written by that release (tests/fixtures/make_release_fixtures.py),
with what it predicted for fixed probe records. A user's saved models must survive an upgrade: a restored
model keeps the hyperparameters it was created with, so it predicts exactly what it predicted before:
the same classes, and numbers within a few ulps of those of the machine that wrote the fixture (see
tests/floats.py); its saved bytes, before and after it learns on, round-trip exactly.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pytest

from sgt import SGTClassifier, SGTRegressor
from tests.floats import assert_within_ulps

ROOT = Path(__file__).parents[2]
RELEASES = sorted((ROOT / "tests" / "fixtures").glob("release-*"))
TYPES = {"classifier": SGTClassifier, "regressor": SGTRegressor}


def _probes_and_stream() -> tuple[list, list, list, list]:
    from tests.fixtures.make_release_fixtures import SEED, probes, stream

    rows, classes, target = stream(SEED + 3, 600)
    return probes(), rows, classes, target


@pytest.mark.parametrize("release", RELEASES, ids=lambda p: p.name)
@pytest.mark.parametrize("name", sorted(TYPES))
def test_a_saved_model_predicts_as_it_did_and_goes_on_learning(release: Path, name: str) -> None:
    check_release_model(release, name)


# numpy's AVX-512 loops disabled (and OpenBLAS held to its AVX2 kernels): on a machine with AVX-512 the
# fixture is then read as a machine without it reads it; elsewhere this repeats the test above
OTHER_CPU = {"NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR", "OPENBLAS_CORETYPE": "Haswell"}


@pytest.mark.parametrize("release", RELEASES, ids=lambda p: p.name)
def test_the_fixtures_hold_with_another_cpus_numpy_loops(release: Path) -> None:
    code = (
        "from pathlib import Path\n"
        "from tests.sgt.test_release_models import TYPES, check_release_model\n"
        f"for name in sorted(TYPES): check_release_model(Path({str(release)!r}), name)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**os.environ, **OTHER_CPU},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def check_release_model(release: Path, name: str) -> None:
    """The saved model ``name`` of ``release`` restores, predicts the fixture's figures and learns on."""
    expected = orjson.loads((release / "expected.json").read_bytes())[name]
    model = TYPES[name].from_bytes((release / f"{name}.sgt").read_bytes())
    probes, rows, classes, target = _probes_and_stream()
    assert model.n_seen == expected["n_seen"] and model.n_nodes == expected["n_nodes"]
    if name == "classifier":
        assert np.asarray(model.predict_many(probes)).tolist() == expected["predictions"]
        assert_within_ulps(model.predict_proba_many(probes), expected["proba"])
    else:
        assert_within_ulps(model.predict_many(probes), expected["predictions"])
    model.learn_many(rows, classes if name == "classifier" else target)
    assert model.n_seen == expected["n_seen"] + len(rows)
    again = TYPES[name].from_bytes(model.to_bytes())
    assert again.to_bytes() == model.to_bytes()
