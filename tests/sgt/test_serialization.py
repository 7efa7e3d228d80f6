"""The binary model format: exact round trips, and clear errors for truncated, corrupted or foreign data.

A restored model must behave bit for bit like the original from then on (same predictions, same bytes
after learning the same records), whatever state it was saved in: fresh, in the middle of the range
warm-up, with pending statistics, nominal features and missing values, a committee, a custom loss,
with no features at all.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import pickle
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sgt
from sgt import MILClassifier, SerializationError, SGTClassifier, SGTRegressor, losses
from tests.sgt.sgt_testkit import (
    as_dicts,
    mixed_records,
    multiclass_stream,
    step_regression_stream,
    threshold_stream,
)

SMALL = {"grace_period": 50, "warm_up": 100}


@functools.cache
def _states() -> dict[str, tuple[object, list, list]]:
    """Models in various states, each with the records it will learn after the round trip."""
    X, y = threshold_stream(2000, seed=60)
    Xm, ym = multiclass_stream(2000, seed=61)
    Xr, yr = step_regression_stream(2000, seed=62)
    records, labels = mixed_records(2000, seed=63)
    states = {}

    fresh = SGTClassifier(**SMALL)
    states["fresh"] = (fresh, as_dicts(X), [bool(v) for v in y])

    warming = SGTClassifier(**SMALL)
    warming.learn_many(X[:60], y[:60])  # range warm-up half way
    states["warming-up"] = (warming, as_dicts(X[60:]), [bool(v) for v in y[60:]])

    pending = SGTClassifier(**SMALL)
    pending.learn_many(X[:1025], y[:1025])  # statistics pending between attempts
    states["pending"] = (pending, as_dicts(X[1025:]), [bool(v) for v in y[1025:]])

    committee = SGTClassifier(**SMALL)
    committee.learn_many(Xm[:1000], [f"c{v}" for v in ym[:1000]])
    states["committee"] = (committee, as_dicts(Xm[1000:]), [f"c{v}" for v in ym[1000:]])

    mixed = SGTClassifier(nominal=["colour"], **SMALL)
    mixed.learn_many(records[:1000], labels[:1000])
    states["mixed"] = (mixed, records[1000:], labels[1000:])

    regressor = SGTRegressor(max_depth=3, **SMALL)
    regressor.learn_many(Xr[:1000], yr[:1000])
    states["regressor"] = (regressor, as_dicts(Xr[1000:]), [float(v) for v in yr[1000:]])

    # a regressor has its tree from the start: one leaf whose blocks have no feature columns yet
    states["fresh-regressor"] = (SGTRegressor(**SMALL), as_dicts(Xr), [float(v) for v in yr])

    featureless = SGTRegressor(**SMALL)
    featureless.learn_many([{}] * 30, [float(v) for v in yr[:30]])  # pending instances, no columns
    states["featureless"] = (featureless, as_dicts(Xr[30:]), [float(v) for v in yr[30:]])

    poisson = SGTRegressor(loss=losses.Poisson(), **SMALL)
    poisson.learn_many(Xr[:1000], np.round(np.abs(yr[:1000])))
    states["poisson"] = (poisson, as_dicts(Xr[1000:]), [float(v) for v in np.round(np.abs(yr[1000:]))])
    return states


STATE_NAMES = [
    "fresh",
    "warming-up",
    "pending",
    "committee",
    "mixed",
    "regressor",
    "fresh-regressor",
    "featureless",
    "poisson",
]


def test_the_states_are_the_named_ones() -> None:
    assert list(_states()) == STATE_NAMES


def _outputs(model: object, records: list) -> list:
    if isinstance(model, SGTClassifier):
        return [model.predict_proba_one(x) for x in records]
    return [model.predict_one(x) for x in records]


@pytest.mark.parametrize("name", STATE_NAMES)
def test_round_trip_is_exact_and_behaves_identically_afterwards(name: str) -> None:
    model, records, targets = _states()[name]
    model = sgt.load(model.to_bytes())  # a private copy: the states are shared between tests
    blob = model.to_bytes()
    restored = type(model).from_bytes(blob)
    assert type(restored) is type(model)
    assert restored.to_bytes() == blob
    assert restored.to_dict() == model.to_dict()
    for attr in ("n_nodes", "n_leaves", "depth", "n_splits", "n_updates", "n_seen", "version", "nbytes"):
        assert getattr(restored, attr) == getattr(model, attr), attr
    for a, b in ((model, records), (restored, records)):
        a.learn_many(b[:500], targets[:500])
        for x, y in zip(b[500:900], targets[500:900], strict=True):
            a.learn_one(x, y)
    assert restored.to_bytes() == model.to_bytes()
    assert _outputs(restored, records[900:1000]) == _outputs(model, records[900:1000])


def test_mil_round_trip() -> None:
    rng = np.random.default_rng(64)
    bags = [as_dicts(rng.uniform(0.0, 1.0, (3, 2))) for _ in range(300)]
    labels = [int(any(x["x0"] > 0.7 for x in bag)) for bag in bags]
    model = MILClassifier(**SMALL)
    for bag, label in zip(bags[:200], labels[:200], strict=True):
        model.learn_one(bag, label)
    restored = MILClassifier.from_bytes(model.to_bytes())
    for m in (model, restored):
        for bag, label in zip(bags[200:], labels[200:], strict=True):
            m.learn_one(bag, label)
    assert restored.to_bytes() == model.to_bytes()
    assert [restored.predict_proba_one(b) for b in bags[:20]] == [
        model.predict_proba_one(b) for b in bags[:20]
    ]


def test_load_returns_the_right_type() -> None:
    for model, _, _ in _states().values():
        assert type(sgt.load(model.to_bytes())) is type(model)


def test_from_bytes_of_another_model_type_is_an_error() -> None:
    classifier_blob = _states()["pending"][0].to_bytes()
    regressor_blob = _states()["regressor"][0].to_bytes()
    with pytest.raises(SerializationError):
        SGTRegressor.from_bytes(classifier_blob)
    with pytest.raises(SerializationError):
        SGTClassifier.from_bytes(regressor_blob)
    with pytest.raises(SerializationError):
        MILClassifier.from_bytes(classifier_blob)


def test_serialization_error_is_a_value_error() -> None:
    assert issubclass(SerializationError, ValueError)


def test_the_format_is_not_pickle() -> None:
    blob = _states()["mixed"][0].to_bytes()
    assert isinstance(blob, bytes)
    assert not blob.startswith(b"\x80")  # every pickle protocol >= 2 starts with PROTO
    with pytest.raises(SerializationError):
        sgt.load(pickle.dumps(_states()["mixed"][0].to_dict()))


@pytest.mark.parametrize(
    "data",
    [b"", b"\x00", b"SGT", b"hello world", b"\x00" * 4096, json.dumps({"model": "SGTClassifier"}).encode()],
    ids=["empty", "one-byte", "short-magic", "text", "zeros", "json"],
)
def test_foreign_data_is_a_clear_error(data: bytes) -> None:
    with pytest.raises(SerializationError) as info:
        sgt.load(data)
    assert len(str(info.value)) > 10
    with pytest.raises(SerializationError):
        SGTClassifier.from_bytes(data)


def test_non_bytes_input_is_rejected() -> None:
    with pytest.raises((SerializationError, TypeError)):
        sgt.load("not bytes")  # type: ignore[arg-type]


def test_bytearray_and_memoryview_are_accepted() -> None:
    blob = _states()["pending"][0].to_bytes()
    assert sgt.load(bytearray(blob)).to_bytes() == blob
    assert sgt.load(memoryview(blob)).to_bytes() == blob


@pytest.mark.parametrize("name", ["fresh", "pending", "mixed", "regressor"])
def test_every_truncation_is_detected(name: str) -> None:
    blob = _states()[name][0].to_bytes()
    cuts = sorted(
        {*range(0, min(len(blob), 64)), *range(64, len(blob), max(1, len(blob) // 200)), len(blob) - 1}
    )
    for cut in cuts:
        with pytest.raises(SerializationError):
            sgt.load(blob[:cut])


def test_trailing_garbage_is_detected() -> None:
    blob = _states()["pending"][0].to_bytes()
    with pytest.raises(SerializationError):
        sgt.load(blob + b"\x00")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_flipped_byte_is_detected(data: st.DataObject) -> None:
    blob = bytearray(_states()[data.draw(st.sampled_from(["pending", "mixed", "committee"]))][0].to_bytes())
    position = data.draw(st.integers(0, len(blob) - 1))
    blob[position] ^= data.draw(st.integers(1, 255))
    with pytest.raises(SerializationError):
        sgt.load(bytes(blob))


def test_the_blob_is_deterministic() -> None:
    X, y = threshold_stream(1500, seed=65)
    a, b = SGTClassifier(**SMALL), SGTClassifier(**SMALL)
    a.learn_many(X, y)
    b.learn_many(X, y)
    assert a.to_bytes() == b.to_bytes()
    assert sgt.load(a.to_bytes()).to_bytes() == a.to_bytes()


class _ScaledSquaredError(losses.Loss):
    """A user's loss: (F - y)^2 (twice the built-in), unknown to the format's registry."""

    name = "test_scaled_squared_error"

    def gradient_hessian(self, y: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return 2.0 * (raw - y), np.full_like(raw, 2.0)


def test_a_custom_loss_must_be_supplied_to_load() -> None:
    X, y = step_regression_stream(1500, seed=67)
    model = SGTRegressor(loss=_ScaledSquaredError(), **SMALL)
    model.learn_many(X[:700], y[:700])
    blob = model.to_bytes()
    with pytest.raises(SerializationError, match="test_scaled_squared_error"):
        sgt.load(blob)
    with pytest.raises(SerializationError):
        SGTRegressor.from_bytes(blob, loss=losses.Poisson())
    restored = SGTRegressor.from_bytes(blob, loss=_ScaledSquaredError())
    assert restored.to_bytes() == blob
    for m in (model, restored):
        m.learn_many(X[700:], y[700:])
    assert restored.to_bytes() == model.to_bytes()
    assert model.n_splits >= 1


# -- forged blobs: well-formed and correctly checksummed, but describing an impossible model ---------------
# The checksum catches accidents, not intent: a blob from an untrusted place can carry a valid digest.
# Loading such data must still fail cleanly (SerializationError), never hang or crash later.

_PREFIX = struct.Struct("<8sHI")


def _unpack(blob: bytes) -> tuple[int, dict, list[bytes]]:
    """Version, JSON header and raw array payloads of a blob, per the documented layout."""
    _, version, length = _PREFIX.unpack_from(blob)
    header = json.loads(blob[_PREFIX.size : _PREFIX.size + length])
    offset, payloads = _PREFIX.size + length, []
    for _, dtype, shape in header["arrays"]:
        size = int(np.prod(shape)) * np.dtype(dtype).itemsize
        payloads.append(blob[offset : offset + size])
        offset += size
    return version, header, payloads


def _pack(version: int, header: dict, payloads: list[bytes]) -> bytes:
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    body = _PREFIX.pack(b"SGTMODEL", version, len(text)) + text + b"".join(payloads)
    return body + hashlib.sha256(body).digest()


def _forge(blob: bytes, array: str, edit: Any) -> bytes:
    """Re-sign `blob` after `edit(values)` changed one array in place."""
    version, header, payloads = _unpack(blob)
    names = [name for name, _, _ in header["arrays"]]
    k = names.index(array)
    _, dtype, shape = header["arrays"][k]
    values = np.frombuffer(payloads[k], dtype=dtype).reshape(shape).copy()
    edit(values)
    payloads[k] = values.tobytes()
    return _pack(version, header, payloads)


def _split_model() -> SGTClassifier:
    model = sgt.load(_states()["pending"][0].to_bytes())
    assert model.n_splits >= 1
    return model


def test_re_signing_an_unchanged_blob_round_trips() -> None:
    blob = _split_model().to_bytes()
    assert _pack(*_unpack(blob)) == blob


def test_a_newer_format_version_is_refused_by_name() -> None:
    version, header, payloads = _unpack(_split_model().to_bytes())
    with pytest.raises(SerializationError, match="version"):
        sgt.load(_pack(version + 1, header, payloads))


@pytest.mark.timeout(3)
def test_a_forged_cycle_in_the_tree_is_refused() -> None:
    blob = _forge(_split_model().to_bytes(), "t0.left", lambda left: left.__setitem__(0, 0))
    with pytest.raises(SerializationError):
        sgt.load(blob).predict_one({"x0": 0.1, "x1": 1.0})


def test_a_forged_missing_child_out_of_range_is_refused() -> None:
    blob = _forge(_split_model().to_bytes(), "t0.missing", lambda missing: missing.__setitem__(0, 10_000))
    with pytest.raises(SerializationError):
        sgt.load(blob).predict_one({})


def test_a_forged_array_shape_that_overflows_is_refused() -> None:
    version, header, payloads = _unpack(_split_model().to_bytes())
    header["arrays"][0][2] = [2**40, 2**40]
    with pytest.raises(SerializationError):
        sgt.load(_pack(version, header, payloads))


def test_forged_pending_codes_of_another_shape_are_refused() -> None:
    """Same size, transposed shape: the data must not be read as if it were laid out as written."""
    version, header, payloads = _unpack(_split_model().to_bytes())
    entry = next(e for e in header["arrays"] if e[0] == "t0.pending_codes")
    assert entry[2][0] not in (0, entry[2][1])
    entry[2] = entry[2][::-1]
    with pytest.raises(SerializationError, match="pending codes have shape"):
        sgt.load(_pack(version, header, payloads))


@pytest.mark.parametrize(
    "edit",
    [
        lambda h: h.__setitem__("model", "os.system"),
        lambda h: h.__setitem__("n_seen", "many"),
        lambda h: h["params"].__setitem__("bins", 1),
        lambda h: h["space"]["vocab"].__setitem__(0, [[1, 2]]),
        lambda h: h["trees"].append(h["trees"][0]),
        lambda h: h.pop("trees"),
        lambda h: h["arrays"].pop(),
    ],
    ids=[
        "model-type",
        "counter-type",
        "bad-param",
        "unhashable-category",
        "extra-tree",
        "no-trees",
        "array-gone",
    ],
)
def test_a_forged_header_is_refused(edit: Any) -> None:
    version, header, payloads = _unpack(_split_model().to_bytes())
    edit(header)
    with pytest.raises(SerializationError):
        sgt.load(_pack(version, header, payloads))


_TRAIN_AND_HASH = """
import hashlib
from tests.sgt.sgt_testkit import mixed_records
from sgt import SGTClassifier
records, labels = mixed_records(1500, seed=66)
model = SGTClassifier(grace_period=50, warm_up=100)
model.learn_many(records, [("no", "yes", "maybe")[v + (i % 7 == 0)] for i, v in enumerate(labels)])
print(hashlib.sha256(model.to_bytes()).hexdigest(), model.n_splits)
"""


def test_the_bytes_do_not_depend_on_the_process_hash_seed() -> None:
    """Checkpoints must be byte-identical across processes: no set or str-hash order may leak in."""
    root = Path(__file__).resolve().parents[2]  # `python -c` imports from its working directory
    digests = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _TRAIN_AND_HASH],
            env=env,
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        digest, splits = done.stdout.split()
        assert int(splits) >= 1
        digests.add(digest)
    assert len(digests) == 1


def _format_1(model: SGTClassifier) -> bytes:
    """The model as format 1 wrote it: dense split statistics instead of index and rows."""
    _, header, payloads = _unpack(model.to_bytes())
    entries, out = [], []
    for (name, dtype, shape), payload in zip(header["arrays"], payloads, strict=True):
        if name.endswith(".stats_rows"):
            continue
        if name.endswith(".stats_index"):
            prefix = name[: -len(".stats_index")]
            tree = model._trees[int(prefix[1:])]
            dense = np.ascontiguousarray(np.stack(tree.stats), dtype="<f8")
            entries.append([f"{prefix}.stats", "<f8", list(dense.shape)])
            out.append(dense.tobytes())
            continue
        entries.append([name, dtype, shape])
        out.append(payload)
    header["arrays"] = entries
    return _pack(1, header, out)


def _model_with_statistics() -> SGTClassifier:
    """A model whose leaves hold merged split statistics: on pure noise a strict test never splits or
    updates a leaf, so nothing resets them."""
    rng = np.random.default_rng(3)
    X = rng.random((600, 3))
    model = SGTClassifier(delta=1e-12, grace_period=50, warm_up=50)
    model.learn_many(X, rng.integers(0, 2, 600).tolist())
    assert any(held.any() for held in model._trees[0].stats)
    return model


def test_format_1_with_dense_statistics_is_still_read() -> None:
    model = _model_with_statistics()
    assert sgt.load(_format_1(model)).to_bytes() == model.to_bytes()


def test_sparse_statistics_keep_negative_zero_bits() -> None:
    model = _model_with_statistics()
    tree = model._trees[0]
    tree.stats[0][0, 3] = -0.0  # an empty row but for its sign bit
    restored = sgt.load(model.to_bytes())
    assert np.signbit(restored._trees[0].stats[0][0, 3])
    assert restored.to_bytes() == model.to_bytes()


@pytest.mark.parametrize(
    "edit",
    [
        lambda index: index.__setitem__(0, -1),
        lambda index: index.__setitem__(-1, 10**9),
        lambda index: index.__setitem__(slice(None), index[::-1].copy()),
    ],
    ids=["negative", "past-the-end", "out-of-order"],
)
def test_a_forged_sparse_statistics_index_is_refused(edit: Any) -> None:
    blob = _forge(_model_with_statistics().to_bytes(), "t0.stats_index", edit)
    with pytest.raises(SerializationError, match="sparse statistics"):
        sgt.load(blob)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    stream=st.lists(
        st.tuples(
            st.integers(0, 3),  # which features the record has
            st.one_of(st.none(), st.floats(-1e3, 1e3), st.sampled_from([math.nan, math.inf, 1e300])),
            st.one_of(st.none(), st.sampled_from(["p", "q", "r"])),
            st.sampled_from(["a", "b", "c", None]),  # class (None: predicted only)
            st.floats(-5.0, 5.0),  # regression target
        ),
        max_size=120,
    ),
    cut=st.integers(0, 120),
    regression=st.booleans(),
    max_categories=st.sampled_from([None, 1, 2]),
)
def test_a_round_trip_at_any_point_continues_identically(
    stream: list, cut: int, regression: bool, max_categories: int | None
) -> None:
    """Fresh, featureless, warming up, mid-block, after new categories or classes: wherever the model is
    saved, the restored copy has the same bytes and learns and predicts the rest identically."""
    shapes = (
        lambda a, c: {},
        lambda a, c: {"num": a},
        lambda a, c: {"cat": c},
        lambda a, c: {"num": a, "cat": c},
    )
    records = [shapes[k](a, c) for k, a, c, _, _ in stream]
    if regression:
        model: Any = SGTRegressor(grace_period=5, warm_up=10, nominal=["cat"], max_categories=max_categories)
        targets = [t for *_, t in stream]
    else:
        model = SGTClassifier(
            grace_period=5, warm_up=10, nominal=["cat"], delta=0.05, max_categories=max_categories
        )
        targets = [label for *_, label, _ in stream]
    cut = min(cut, len(records))
    model.learn_many(records[:cut], targets[:cut])
    blob = model.to_bytes()
    restored = type(model).from_bytes(blob)
    assert restored.to_bytes() == blob
    if records[cut:]:
        ours, theirs = (m.predict_learn_many(records[cut:], targets[cut:]) for m in (model, restored))
        assert np.array_equal(ours, theirs, equal_nan=True)
    assert restored.to_bytes() == model.to_bytes()


def test_the_registry_names_every_model_class_and_from_bytes_takes_a_subclass() -> None:
    """One registry of model classes (the worker restores through it); a class reads its subclasses."""
    assert dict(sgt.MODEL_TYPES) == {
        cls.__name__: cls
        for cls in (
            SGTClassifier,
            SGTRegressor,
            MILClassifier,
            sgt.BoostedClassifier,
            sgt.BoostedRegressor,
            sgt.AdaptiveSGTClassifier,
            sgt.AdaptiveSGTRegressor,
        )
    }
    boosted = sgt.BoostedClassifier(n_members=2, grace_period=20, warm_up=20)
    X, y = threshold_stream(200, seed=3)
    boosted.learn_many(as_dicts(X), y.astype(int).tolist())
    blob = boosted.to_bytes()
    restored = SGTClassifier.from_bytes(blob)  # a BoostedClassifier is an SGTClassifier
    assert type(restored) is sgt.BoostedClassifier and restored.to_bytes() == blob
    with pytest.raises(SerializationError, match="the data holds a BoostedClassifier, not a SGTRegressor"):
        SGTRegressor.from_bytes(blob)
