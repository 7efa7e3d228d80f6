"""The join buffer's bound in bytes, the merge queues' byte counts, and the state that uses them.

The bytes a side holds are counted exactly (a property test over any sequence of additions, joins and
expiries), never exceed the bound, and survive a save and restore, after which the same entries are
dropped as without it. Entries the byte bound drops are dead-lettered or counted, as for the count
bound.
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.worker.stub_model import StubModel
from worker.core.join import JoinBuffer
from worker.core.merge import FEATURES, LABELS, Merger
from worker.core.partition_state import PartitionState, StateConfig
from worker.core.values import ENTRY_OVERHEAD, VALUE_OVERHEAD, PendingFeature, PendingLabel, Record

_op = st.one_of(
    st.tuples(st.just("feature"), st.integers(0, 30), st.integers(0, 400)),
    st.tuples(st.just("label"), st.integers(0, 30), st.integers(0, 400)),
    st.tuples(st.just("pop_feature"), st.integers(0, 30), st.just(0)),
    st.tuples(st.just("pop_label"), st.integers(0, 30), st.just(0)),
    st.tuples(st.just("expire"), st.integers(0, 30), st.just(0)),
)


def _apply(buf: JoinBuffer, ops: list[tuple[str, int, int]], clock: list[float]) -> list[str]:
    """Apply ops (ids and sizes from the draws); return the ids that left the buffer, in order."""
    left: list[str] = []
    for kind, n, size in ops:
        rid = f"id{n}"
        clock[0] += 1.0
        if kind == "feature" and rid not in buf.features:
            entry = PendingFeature(rid, {"a": float(n)}, clock[0], n, "p", [("p", 1.0)], size=size)
            left += [e.id for e in buf.add_feature(entry)]
        elif kind == "label" and rid not in buf.labels:
            key = b"k" * (size % 7)
            left += [e.id for e in buf.add_label(PendingLabel(rid, 1, clock[0], b"x" * size, key, n))]
        elif kind == "pop_feature":
            buf.pop_feature(rid)
        elif kind == "pop_label":
            buf.pop_label(rid)
        elif kind == "expire":
            features, labels = buf.expire(clock[0] - n / 3)
            left += [e.id for e in features + labels]
        _check(buf)
    return left


def _check(buf: JoinBuffer) -> None:
    for side, counted in ((buf.features, buf.feature_bytes), (buf.labels, buf.label_bytes)):
        assert counted == sum(e.nbytes for e in side.values())
        assert counted <= buf.max_bytes and len(side) <= buf.max_pending


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_op, max_size=60),
    st.lists(_op, max_size=60),
    st.integers(1, 6),
    st.integers(ENTRY_OVERHEAD, 4 * ENTRY_OVERHEAD),
)
def test_bytes_are_counted_exactly_bounded_and_restored_with_the_same_drops(
    first: list[tuple[str, int, int]], then: list[tuple[str, int, int]], max_pending: int, max_bytes: int
) -> None:
    straight = JoinBuffer(max_pending, 5.0, max_bytes)
    clock = [0.0]
    _apply(straight, first, clock)
    saved = orjson.loads(orjson.dumps(straight.to_dict()))
    restored = JoinBuffer.from_dict(saved, max_pending, 5.0, max_bytes)
    assert (restored.feature_bytes, restored.label_bytes) == (straight.feature_bytes, straight.label_bytes)
    resumed_clock = list(clock)
    assert _apply(restored, then, resumed_clock) == _apply(straight, then, clock)
    assert restored.to_dict() == straight.to_dict()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=40), st.text(max_size=20).map(str.encode)), max_size=8))
def test_a_labels_record_is_saved_and_restored_byte_for_byte_whatever_its_bytes(raws: list[bytes]) -> None:
    buf = JoinBuffer(100, 60.0)
    for i, raw in enumerate(raws):
        buf.add_label(PendingLabel(f"l{i}", "a", float(i), raw, raw[:3] or None, i))
    saved = orjson.loads(orjson.dumps(buf.to_dict()))
    restored = JoinBuffer.from_dict(saved, 100, 60.0)
    assert [(e.raw, e.key) for e in restored.labels.values()] == [(e.raw, e.key) for e in buf.labels.values()]
    assert restored.label_bytes == buf.label_bytes


def test_a_label_saved_by_the_previous_release_in_base64_is_restored() -> None:
    old = {"features": [], "labels": [["r1", 1, 2.0, "eyJ5IjoxfQ==", "azE=", 9]]}
    [entry] = JoinBuffer.from_dict(old, 10, 60.0).labels.values()
    assert (entry.raw, entry.key, entry.offset) == (b'{"y":1}', b"k1", 9)


def test_the_oldest_entries_leave_when_a_side_holds_too_many_bytes() -> None:
    buf = JoinBuffer(max_pending=100, max_age=1e9, max_bytes=3 * (ENTRY_OVERHEAD + 1000))
    dropped = [buf.add_label(PendingLabel(f"l{i}", 1, float(i), b"x" * 1000, None, i)) for i in range(5)]
    assert [[e.id for e in d] for d in dropped] == [[], [], [], ["l0"], ["l1"]]
    assert list(buf.labels) == ["l2", "l3", "l4"] and buf.label_bytes == 3 * (ENTRY_OVERHEAD + 1000)
    # an entry larger than the bound on its own does not stay either
    assert [e.id for e in buf.add_label(PendingLabel("big", 1, 9.0, b"x" * 10**4, None, 9))] == [
        "l2",
        "l3",
        "l4",
        "big",
    ]
    assert buf.label_bytes == 0


def test_a_feature_saved_by_the_previous_release_is_charged_its_id_and_features_as_json() -> None:
    old = {"features": [["r1", {"a": 1.5, "b": "x"}, 10.0, 7, "p", [["p", 0.75]]]], "labels": []}
    buf = JoinBuffer.from_dict(old, 10, 60.0)
    entry = buf.features["r1"]
    assert entry.size == len(b'{"id":"r1","x":{"a":1.5,"b":"x"}}')
    assert buf.feature_bytes == entry.size + ENTRY_OVERHEAD + 2 * VALUE_OVERHEAD
    assert buf.to_dict()["features"] == [[*old["features"][0], entry.size]]


def _label(offset: int, size: int, ts: float) -> Record:
    doc = {"id": f"orphan{offset}", "y": "a", "ts": ts, "pad": "z" * size}
    return Record(offset, ts, f"k{offset}".encode(), orjson.dumps(doc))


def _feature(offset: int, size: int, ts: float) -> Record:
    doc = {"id": f"f{offset}", "x": {"a": float(offset)}, "ts": ts, "pad": "z" * size}
    return Record(offset, ts, None, orjson.dumps(doc))


def _process(state: PartitionState, rank: int, records: list[Record]) -> Any:
    merger = Merger()
    merger.push(rank, state.decode(rank, records))
    return state.process(merger.pop_ready(labels_done=True, features_done=True), now=0.0)


def test_labels_past_the_byte_bound_are_dead_lettered_byte_for_byte_oldest_first() -> None:
    """Before the byte bound, 20 labels of 100 KB all stayed (2 MB), under a count bound of 100,000."""
    config = StateConfig("classification", "labels", join_max_bytes=10**6)
    state = PartitionState(0, StubModel(), config)  # labels only: the model is never called
    labels = [_label(i, 100_000, 1.0 + i) for i in range(20)]
    result = _process(state, LABELS, labels)
    kept = len(state.join.labels)
    assert kept == 10**6 // (len(labels[0].value) + len(b"k00") + ENTRY_OVERHEAD)  # 9
    assert state.join.label_bytes <= 10**6
    assert [out.value for out, _, reason in result.dead_letters] == [r.value for r in labels[: 20 - kept]]
    assert {reason for _, _, reason in result.dead_letters} == {"unknown_id"}
    assert result.expired == {("labels", "size"): 20 - kept}


def test_features_past_the_byte_bound_are_predicted_and_counted() -> None:
    config = StateConfig("classification", "labels", join_max_bytes=10**6)
    state = PartitionState(0, StubModel(), config)
    result = _process(state, FEATURES, [_feature(i, 100_000, 1.0 + i) for i in range(20)])
    assert len(result.predictions) == 20
    kept = len(state.join.features)
    assert 0 < kept < 20 and state.join.feature_bytes <= 10**6
    assert result.expired == {("features", "size"): 20 - kept}
    assert list(state.join.features) == [f"f{i}" for i in range(20 - kept, 20)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1), st.lists(st.integers(0, 500), max_size=8)), max_size=20))
def test_the_merge_queues_count_the_bytes_they_hold(pushes: list[tuple[int, list[int]]]) -> None:
    merger = Merger()
    offsets = [0, 0]
    size_of: dict[tuple[int, int], int] = {}
    for i, (rank, sizes) in enumerate(pushes):
        entries = []
        for size in sizes:
            entries.append((float(offsets[rank] % 5), rank, offsets[rank], None))
            size_of[(rank, offsets[rank])] = size
            offsets[rank] += 1
        merger.push(rank, entries, sizes)
        if i % 3 == 2:
            merger.pop_ready(labels_done=i % 2 == 0, features_done=False)
        for r in (FEATURES, LABELS):
            assert merger.queued_bytes(r) == sum(size_of[(r, e[2])] for e in merger.queues[r])
    merger.clear()
    assert merger.queued_bytes(FEATURES) == merger.queued_bytes(LABELS) == 0
