"""``python -m tests.compile_kernels``: fill numba's cache with sgt's kernels before the tests start.

numba compiles a kernel on its first call with each new set of argument types, about 35 s of CPU in
all for the models below, and caches it on disk (sgt.kernels.compiling). `make test` starts four test
processes at once: on an empty cache (a fresh clone, as in CI) each of them compiled every kernel
itself, four times the CPU on as few as two cores. `make test` runs this module beside mypy instead,
so the test processes (and the worker processes the end-to-end tests start) read the kernels from the
cache. Measured on 2 cores: four processes learning these models took 78 s on an empty cache, and
46 s with this module's compile first.

The kernels load with the argument types of their calls, so small models of each shape the tests
run learn a few hundred synthetic records here, in batches and one at a time: the worker's own
(`preload`), and the library's defaults, whose boosted ensembles keep a Mondrian forest, a bagged
forest and a fine tree beside their members, on two and three classes. A kernel the tests call with
other types (about a tenth of them) still compiles where they call it: this saves time and decides nothing.
"""

from __future__ import annotations

import numpy as np

from sgt import BoostedClassifier, BoostedRegressor, SGTClassifier, SGTRegressor, kernels
from worker.core.sgt_models import preload

RECORDS = 3000  # enough for every kind of leaf event: splits, the depth bound, grown grids
ONE_AT_A_TIME = 300


def main() -> None:
    preload()
    if not kernels.ENABLED:  # (numba not installed, or SGT_KERNELS=0: nothing to compile)
        return
    rng = np.random.default_rng(0)
    X = rng.normal(size=(RECORDS, 4))
    wide = np.column_stack([X, X[:, :1]])
    two = (X[:, 0] > 0).astype(int).tolist()
    three = np.digitize(X[:, 0] + X[:, 1], [-0.5, 0.5]).tolist()
    value = (2 * X[:, 0] + np.sin(3 * X[:, 1])).tolist()
    records = [{f"x{j}": float(v) for j, v in enumerate(row)} for row in X[:ONE_AT_A_TIME]]
    for model_type, y in (
        (SGTClassifier, two),
        (SGTClassifier, three),
        (SGTRegressor, value),
        (BoostedClassifier, two),
        (BoostedClassifier, three),
        (BoostedRegressor, value),
    ):
        half = RECORDS // 2
        model = model_type()
        model.predict_learn_many(X[:half], y[:half])
        # a restored model's arrays may be read-only (other kernel types), and rows come in any
        # layout: a Fortran-ordered matrix, a slice of a wider one
        restored = model_type.from_bytes(model.to_bytes())
        restored.predict_learn_many(np.asfortranarray(X[half:]), y[half:])
        model.predict_learn_many(wide[half:, :4], y[half:])
        one = model_type()
        for x, target in zip(records, y, strict=False):
            one.learn_one(x, target)


if __name__ == "__main__":
    main()
