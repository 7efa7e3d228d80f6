"""The Kafka-free core: merge order, joins, test-then-train bookkeeping and exact snapshots.

A stand-in model (``stub_model.StubModel``) keeps these tests independent of the learning library;
the end-to-end tests use the real trees.
"""

from __future__ import annotations

import math
import zlib

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.worker.stub_model import StubModel
from worker.core.merge import FEATURES, LABELS, Merger
from worker.core.partition_state import STATE_FORMAT, PartitionState, StateConfig
from worker.core.values import Record

REGISTRY = {"StubModel": StubModel}


def config(labels: str | None = "labels", **kw: object) -> StateConfig:
    return StateConfig("classification", labels, features_topic="features", **kw)  # type: ignore[arg-type]


def feature(offset: int, rid: str | None, ts: float, y: object = None, x: object = None) -> Record:
    doc: dict[str, object] = {"x": x if x is not None else {"a": float(offset % 5)}, "ts": ts}
    if rid is not None:
        doc["id"] = rid
    if y is not None:
        doc["y"] = y
    return Record(offset, ts, rid.encode() if rid else None, orjson.dumps(doc))


def label(offset: int, rid: str, ts: float, y: object) -> Record:
    return Record(offset, ts, rid.encode(), orjson.dumps({"id": rid, "y": y, "ts": ts}))


def run_all(state: PartitionState, feats: list[Record], labels: list[Record]) -> list:
    merger = Merger()
    merger.push(FEATURES, state.decode(FEATURES, feats))
    merger.push(LABELS, state.decode(LABELS, labels))
    return state.process(merger.pop_ready(labels_done=True, features_done=True), now=1.0)


def test_a_delayed_label_scores_the_prediction_made_when_the_features_arrived() -> None:
    state = PartitionState(0, StubModel(), config())
    feats = [feature(0, "a", 0.0), feature(1, "b", 1.0), feature(2, "c", 3.0)]
    labels = [label(0, "a", 2.0, "yes"), label(1, "b", 2.5, "no"), label(2, "c", 4.0, "yes")]
    result = run_all(state, feats, labels)
    preds = [orjson.loads(p.value) for p in result.predictions]
    # a and b were predicted with an empty model; c after learning a (yes) and b (no): a tie -> first class
    assert [(p["id"], p["prediction"], p["model_version"]) for p in preds] == [
        ("a", None, 0),
        ("b", None, 0),
        ("c", "yes", 2),
    ]
    assert preds[2]["proba"] == {"yes": 0.5, "no": 0.5}
    assert state.prequential.n == 3 and state.prequential.error == pytest.approx(2 / 3)
    assert state.trained == 3 and state.next_offsets == [3, 3] and not state.join.features


def test_the_brier_score_and_log_loss_are_those_of_the_published_probabilities() -> None:
    """Both for a label that comes with its features and for one joined later from the buffer."""
    state = PartitionState(0, StubModel(), config())
    feats = [feature(0, "a", 0.0), feature(1, "b", 1.0), feature(2, "c", 3.0), feature(3, "d", 5.0)]
    labels = [label(0, "a", 2.0, "yes"), label(1, "b", 2.5, "no"), label(2, "c", 4.0, "yes")]
    result = run_all(state, feats, labels)
    published = [orjson.loads(p.value) for p in result.predictions]
    assert published[2]["proba"] == {"yes": 0.5, "no": 0.5}
    # a and b were predicted before any class was known: probability 0 for the true class, Brier 1 and
    # log loss -log(1e-15) (clipped); c at 0.5/0.5: Brier (0.5 - 1)^2 + 0.5^2 = 0.5, log loss log(2)
    assert state.prequential.brier == 2.5 / 3 and state.prequential.recent_brier == 2.5 / 3
    assert state.prequential.log_loss == pytest.approx((2 * -math.log(1e-15) + math.log(2)) / 3)
    more = run_all(state, [], [label(3, "d", 6.0, "no")])  # joined: scored against its stored proba
    assert not more.predictions and state.prequential.n == 4
    d_proba = published[3]["proba"]  # d was predicted after learning a, b and c
    d_brier = (d_proba["yes"] - 0) ** 2 + (d_proba["no"] - 1) ** 2
    assert state.prequential.brier == pytest.approx((2.5 + d_brier) / 4)


def test_labels_before_their_features_wait_and_then_train_at_once() -> None:
    state = PartitionState(0, StubModel(), config())
    result = run_all(state, [feature(0, "a", 5.0)], [label(0, "a", 1.0, 1)])
    assert state.trained == 1 and len(result.predictions) == 1 and not state.join.labels


def test_bad_records_duplicates_and_unknown_ids_are_dead_lettered_with_headers() -> None:
    state = PartitionState(0, StubModel(), config(join_max_age=10.0))
    feats = [
        feature(0, "a", 0.0),
        feature(1, "a", 1.0),  # duplicate of a pending id
        feature(2, None, 1.5),  # no id and no label: can never be joined
        Record(3, 2.0, b"k", b"\xff"),
        feature(4, "z", 30.0, y=1),
    ]
    labels = [label(0, "ghost", 0.5, 1), label(1, "ghost", 0.7, 1), Record(2, 0.8, None, b'{"id": "q"}')]
    result = run_all(state, feats, labels)
    reasons = sorted((topic, reason) for _, topic, reason in result.dead_letters)
    assert reasons == [
        ("features", "duplicate_id"),
        ("features", "invalid_utf8"),
        ("features", "missing_id"),
        ("labels", "duplicate_id"),
        ("labels", "missing_y"),
        ("labels", "unknown_id"),  # 'ghost' expired once event time passed 0.5 + 10
    ]
    out, _, _ = next(d for d in result.dead_letters if d[2] == "invalid_utf8")
    assert out.value == b"\xff" and out.key == b"k"
    assert dict(out.headers) == {
        "reason": b"invalid_utf8",
        "source_topic": b"features",
        "source_partition": b"0",
        "source_offset": b"3",
    }
    assert result.expired == {("features", "age"): 1, ("labels", "age"): 1}


def test_the_join_buffer_is_bounded_in_size() -> None:
    state = PartitionState(0, StubModel(), config(join_max_pending=2))
    result = run_all(state, [feature(i, f"id{i}", float(i)) for i in range(5)], [])
    assert list(state.join.features) == ["id3", "id4"] and result.expired == {("features", "size"): 3}


def test_schema_inference_and_array_length_are_enforced() -> None:
    state = PartitionState(0, StubModel(), config(labels=None))
    feats = [
        feature(0, None, 0, y=1, x=[1.0, 2.0]),
        feature(1, None, 1, y=1, x=[1.0]),
        feature(2, None, 2, y=1, x={"x0": "text"}),
        feature(3, None, 3, y=1, x={"x0": 3.0, "new": "ok"}),
    ]
    result = run_all(state, feats, [])
    assert [reason for _, _, reason in result.dead_letters] == ["wrong_feature_count", "bad_x"]
    assert state.schema.types == {"x0": "numeric", "x1": "numeric", "new": "nominal"}


def test_declared_features_reject_unknown_names_and_wrong_types() -> None:
    state = PartitionState(0, StubModel(), config(labels=None, features=(("a", "numeric"), ("b", "nominal"))))
    feats = [
        feature(0, None, 0, y=1, x=[1.0, "u"]),
        feature(1, None, 1, y=1, x={"c": 1.0}),
        feature(2, None, 2, y=1, x={"b": 2.0}),
        feature(3, None, 3, y=1, x=[1.0, "u", 3.0]),
    ]
    result = run_all(state, feats, [])
    assert [r for _, _, r in result.dead_letters] == ["unknown_feature", "bad_x", "wrong_feature_count"]


def _stream(n: int, seed: int) -> tuple[list[Record], list[Record]]:
    import random

    rng = random.Random(seed)
    feats, labels, t = [], [], 0.0
    for i in range(n):
        t += rng.random()
        if rng.random() < 0.1:
            feats.append(Record(i, t, None, b"not json"))
        elif rng.random() < 0.3:
            feats.append(feature(i, f"s{i}", t, y=rng.choice(["a", "b", "c"])))
        else:
            feats.append(feature(i, f"s{i}", t))
            if rng.random() < 0.9:
                labels.append((t + rng.random() * 5, f"s{i}", rng.choice(["a", "b"])))
    labels.sort()
    return feats, [label(j, rid, ts, y) for j, (ts, rid, y) in enumerate(labels)]


def _replay_in_batches(feats: list[Record], labels: list[Record], cuts: list[int], snapshot_at: int) -> bytes:
    """Feed both topics in arbitrary fetch batches, snapshot and restore mid-way; return final bytes."""
    cfg = config(join_max_pending=50, join_max_age=20.0)
    state = PartitionState(0, StubModel(), cfg)
    merger = Merger()
    fi = li = 0
    for step, cut in enumerate(cuts):
        take_f, take_l = cut % 7, cut // 7
        chunk_f, chunk_l = feats[fi : fi + take_f], labels[li : li + take_l]
        fi, li = fi + len(chunk_f), li + len(chunk_l)
        merger.push(FEATURES, state.decode(FEATURES, chunk_f))
        merger.push(LABELS, state.decode(LABELS, chunk_l))
        state.process(merger.pop_ready(labels_done=li == len(labels), features_done=fi == len(feats)), 0.0)
        if step == snapshot_at:  # a restart: restore and re-read from the state's offsets
            state = PartitionState.from_bytes(state.to_bytes(), cfg, REGISTRY)
            merger.clear()
            fi, li = state.next_offsets
    merger.push(FEATURES, state.decode(FEATURES, feats[fi:]))
    merger.push(LABELS, state.decode(LABELS, labels[li:]))
    state.process(merger.pop_ready(labels_done=True, features_done=True), 0.0)
    assert state.next_offsets == [len(feats), len(labels)]
    return state.to_bytes()


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 5),
    cuts=st.lists(st.integers(0, 48), min_size=1, max_size=60),
    snapshot_at=st.integers(0, 60),
)
def test_the_final_state_does_not_depend_on_batching_or_restarts(
    seed: int, cuts: list[int], snapshot_at: int
) -> None:
    feats, labels = _stream(150, seed)
    reference = PartitionState(0, StubModel(), config(join_max_pending=50, join_max_age=20.0))
    run_all(reference, feats, labels)
    assert _replay_in_batches(feats, labels, cuts, snapshot_at) == reference.to_bytes()


def test_snapshot_round_trip_is_exact_and_checks_the_configuration() -> None:
    feats, labels = _stream(300, 1)
    state = PartitionState(2, StubModel(), config())
    run_all(state, feats, labels[:50])
    blob = state.to_bytes()
    again = PartitionState.from_bytes(blob, config(), REGISTRY)
    assert again.to_bytes() == blob and again.partition == 2
    assert again.prequential.to_dict() == state.prequential.to_dict()
    with pytest.raises(ValueError, match="labels_topic"):
        PartitionState.from_bytes(blob, config(labels="other"), REGISTRY)
    with pytest.raises(ValueError, match="unknown model type"):
        PartitionState.from_bytes(blob, config(), {})
    header = orjson.dumps({"format": STATE_FORMAT, "task": "classification"})
    with pytest.raises(ValueError, match="malformed state: KeyError"):
        PartitionState.from_bytes(
            len(header).to_bytes(4, "big") + header + zlib.compress(b""), config(), REGISTRY
        )
    with pytest.raises(ValueError, match="not valid zlib data"):
        PartitionState.from_bytes(blob[:-1], config(), REGISTRY)


@pytest.mark.parametrize("labels", [["a", "a", "b", "a"], ["a", "b", "b", "c", "b", "c"]])
def test_proba_names_each_class_with_its_own_probability(labels: list[str]) -> None:
    """Two classes take a faster path than three; both must pair names and probabilities in order."""
    state = PartitionState(0, StubModel(), config(None))
    feats = [feature(i, f"r{i}", float(i), y=y) for i, y in enumerate(labels)]
    result = run_all(state, [*feats, feature(len(labels), "last", 99.0)], [])
    # the stub predicts the class frequencies of everything it learned before
    expected = {c: labels.count(c) / len(labels) for c in dict.fromkeys(labels)}
    assert orjson.loads(result.predictions[-1].value)["proba"] == pytest.approx(expected)


def test_regression_predictions_have_no_proba() -> None:
    cfg = StateConfig("regression", None)
    state = PartitionState(1, StubModel("regression"), cfg)
    result = run_all(state, [feature(0, "a", 0.0, y=2.0), feature(1, "b", 1.0, y=4.0)], [])
    docs = [orjson.loads(p.value) for p in result.predictions]
    assert [d["prediction"] for d in docs] == [0.0, 2.0] and "proba" not in docs[0]
    assert state.prequential.mae == pytest.approx(2.0)


def _inline_stream(n: int, seed: int) -> list[Record]:
    """Features with inline labels, unlabelled ones, bad records and out-of-order times."""
    import random

    rng = random.Random(seed)
    out = []
    for i in range(n):
        ts = i + rng.uniform(-3.0, 3.0)
        kind = rng.random()
        if kind < 0.05:
            out.append(Record(i, ts, None, b"\xff not json"))
        elif kind < 0.1:
            out.append(feature(i, f"s{i}", ts, y=1, x={"a": "text"}))  # a type clash once "a" is numeric
        elif kind < 0.3:
            out.append(feature(i, f"s{i}", ts, x={"a": rng.random(), "b": None}))
        else:
            x = {"a": rng.random(), "b": rng.choice([None, rng.random()]), f"c{i % 3}": rng.random()}
            out.append(feature(i, f"s{i}", ts, y=rng.choice(["a", "b", "c"]), x=x))
    return out


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 20), cuts=st.lists(st.integers(1, 40), min_size=1, max_size=12))
def test_the_inline_fast_path_decides_exactly_as_the_general_path(seed: int, cuts: list[int]) -> None:
    """Without a labels topic, runs take `_ingest_inline`; forced down the general path they must give
    the same predictions, dead letters, counters and state bytes."""
    feats = _inline_stream(120, seed)
    fast = PartitionState(0, StubModel(), config(None))
    general = PartitionState(0, StubModel(), config(None))
    general._ingest_inline = general._ingest_joined  # type: ignore[method-assign]
    start = 0
    for cut in [*cuts, len(feats)]:
        chunk, start = feats[start : start + cut], start + cut
        results = []
        for state in (fast, general):
            entries = state.decode(FEATURES, chunk)
            results.append(state.process(entries, now=2.0))
        assert results[0] == results[1]
        assert fast.to_bytes() == general.to_bytes()
    assert fast.next_offsets == [len(feats), 0] and fast.consumed == [len(feats), 0]


def test_an_inferred_schema_takes_at_most_max_features_names() -> None:
    """Records with ever-new keys are dead-lettered once the bound is reached; known names still pass,
    and a restored state keeps the bound (it comes from the configuration, not the snapshot)."""
    cfg = config(None, max_features=3)
    state = PartitionState(0, StubModel(), cfg)
    feats = [feature(i, f"r{i}", float(i), y=1, x={f"k{i}": 1.0}) for i in range(5)]
    result = state.process(state.decode(FEATURES, feats), now=1.0)
    assert [why for _, _, why in result.dead_letters] == ["unknown_feature", "unknown_feature"]
    assert len(result.predictions) == 3 and sorted(state.schema.types) == ["k0", "k1", "k2"]
    restored = PartitionState.from_bytes(state.to_bytes(), cfg, REGISTRY)
    more = [feature(5, "r5", 5.0, y=1, x={"k0": 2.0}), feature(6, "r6", 6.0, y=1, x={"k9": 2.0})]
    result = restored.process(restored.decode(FEATURES, more), now=1.0)
    assert len(result.predictions) == 1 and [why for _, _, why in result.dead_letters] == ["unknown_feature"]


# -- bounded predictions ------------------------------------------------------------------------------


def test_earlier_rows_of_a_run_do_not_name_classes_first_seen_later_in_it() -> None:
    state = PartitionState(0, StubModel(), config(None))
    feats = [feature(0, "a", 0.0, y="x"), feature(1, "b", 1.0, y="y"), feature(2, "c", 2.0, y="z")]
    result = run_all(state, feats, [])
    probas = [orjson.loads(p.value).get("proba") for p in result.predictions]
    assert [sorted(p) for p in probas] == [[], ["x"], ["x", "y"]]


def test_proba_lists_the_top_k_classes_in_class_order() -> None:
    state = PartitionState(0, StubModel(), config(None, proba_top_k=2))
    ys = ["a", "b", "b", "c", "c", "c", "d"]
    feats = [feature(i, f"r{i}", float(i), y=y) for i, y in enumerate(ys)]
    result = run_all(state, feats, [])
    last = orjson.loads(result.predictions[-1].value)
    assert last["proba"] == {"b": 2 / 6, "c": 3 / 6} and last["prediction"] == "c"
    assert all(len(orjson.loads(p.value)["proba"]) <= 2 for p in result.predictions)


@pytest.mark.parametrize("labels_topic", [None, "labels"])
def test_a_label_that_would_add_a_class_past_max_classes_is_dead_lettered(labels_topic: str | None) -> None:
    state = PartitionState(0, StubModel(), config(labels_topic, max_classes=2))
    feats = [feature(i, f"r{i}", float(i), y=y) for i, y in enumerate(["a", "b", "c", "a", "d"])]
    result = run_all(state, feats, [])
    assert [(o.headers[0][1], reason) for o, _, reason in result.dead_letters] == [
        (b"too_many_classes", "too_many_classes")
    ] * 2
    assert [int(dict(o.headers)["source_offset"]) for o, _, _ in result.dead_letters] == [2, 4]
    assert state.model.classes_ == ["a", "b"] and len(result.predictions) == 3
    # a later run: the bound holds across calls (the model's classes count)
    more = run_all(state, [feature(5, "r5", 5.0, y="e"), feature(6, "r6", 6.0, y="b")], [])
    assert len(more.dead_letters) == 1 and state.model.classes_ == ["a", "b"]


def test_a_joined_label_past_max_classes_is_dead_lettered_and_its_features_still_predicted() -> None:
    state = PartitionState(0, StubModel(), config(max_classes=2))
    feats = [feature(0, "a", 0.0), feature(1, "b", 1.0), feature(2, "c", 2.0), feature(4, "d", 4.5)]
    labels = [
        label(0, "a", 0.5, "x"),
        label(1, "b", 1.5, "y"),
        label(2, "c", 2.5, "z"),
        label(3, "d", 4.0, "w"),
    ]
    result = run_all(state, feats, labels)
    assert [(topic, reason) for _, topic, reason in result.dead_letters] == [
        ("labels", "too_many_classes")
    ] * 2
    assert len(result.predictions) == 4 and state.model.classes_ == ["x", "y"]


def test_a_waiting_label_dead_lettered_past_max_classes_leaves_the_join_buffer_s_bytes() -> None:
    """Before, the label left the buffer but its bytes stayed counted: the buffer's byte bound then
    evicted labels early, and a restored buffer (which counts its entries again) disagreed."""
    state = PartitionState(0, StubModel(), config(max_classes=1))
    feats = [feature(0, "a", 0.0), feature(1, "b", 2.0)]
    labels = [label(0, "a", 0.5, "x"), label(1, "b", 1.0, "y")]  # b's label waits for its features
    result = run_all(state, feats, labels)
    assert [reason for _, _, reason in result.dead_letters] == ["too_many_classes"]
    assert not state.join.labels and state.join.label_bytes == 0


def test_a_label_past_max_label_bytes_is_dead_lettered_as_label_too_long() -> None:
    state = PartitionState(0, StubModel(), config(None, max_label_bytes=8))
    feats = [
        feature(0, "a", 0.0, y="é" * 4),
        feature(1, "b", 1.0, y="é" * 5),
        feature(2, "c", 2.0, y=12345678901),
    ]
    result = run_all(state, feats, [])
    assert [reason for _, _, reason in result.dead_letters] == ["label_too_long"]
    assert state.model.classes_ == ["é" * 4, 12345678901]


def test_a_prediction_too_large_for_a_message_dead_letters_its_record() -> None:
    state = PartitionState(0, StubModel(), config(None, max_message_bytes=65536))
    feats = [feature(0, "a" * 70_000, 0.0, y="x"), feature(1, "b", 1.0, y="y")]
    result = run_all(state, feats, [])
    assert [reason for _, _, reason in result.dead_letters] == ["prediction_too_large"]
    assert [orjson.loads(p.value)["id"] for p in result.predictions] == ["b"]
    assert all(len(o.value) + len(o.key or b"") < 65536 for o, _, _ in result.dead_letters)


YEAR_3000 = 32503680000.0  # 3000-01-01 in unix seconds


def _stamped(record: Record, kafka_ts: float) -> Record:
    """The record with another Kafka timestamp (its ``ts`` field unchanged)."""
    return Record(record.offset, kafka_ts, record.key, record.value)


@pytest.mark.parametrize("rank", [FEATURES, LABELS])
def test_a_record_whose_ts_is_far_ahead_of_its_kafka_timestamp_does_not_expire_the_join(rank: int) -> None:
    """One record stamped in the year 3000 (its Kafka timestamp is now) must not move the event clock:
    it would expire every pending feature and label at once, and the clock, saved with the checkpoint,
    would never let age-based expiry run again. It is dead-lettered as ``future_ts`` instead."""
    state = PartitionState(0, StubModel(), config(join_max_age=3600.0, max_ts_ahead=300.0))
    now = 1_763_770_000.0
    feats = [feature(i, f"f{i}", now + i) for i in range(5)]  # wait for their labels
    early = [label(i, f"l{i}", now + i, 1) for i in range(3)]  # wait for their features
    if rank == FEATURES:
        bad = _stamped(feature(5, "future", YEAR_3000), now + 5)
        first = run_all(state, [*feats, bad], early)
    else:
        bad = _stamped(label(3, "future", YEAR_3000, 1), now + 5)
        first = run_all(state, feats, [*early, bad])
    assert [(topic, reason) for _, topic, reason in first.dead_letters] == [
        ("features" if rank == FEATURES else "labels", "future_ts")
    ]
    assert first.expired == {} and state.event_time < now + 10
    offset = 6 if rank == FEATURES else 0
    later = run_all(
        state,
        [feature(offset + i, f"l{i}", now + 10 + i) for i in range(3)],
        [label(4 + i, f"f{i}", now + 20 + i, 0) for i in range(5)],
    )
    assert later.dead_letters == [] and later.expired == {}
    assert state.trained == 8 and not state.join.features and not state.join.labels


def test_the_ts_bound_depends_on_the_record_and_its_kafka_timestamp_alone() -> None:
    """Within the allowed skew a record keeps its ts; no Kafka timestamp (0.0): no bound to check."""
    state = PartitionState(0, StubModel(), config(max_ts_ahead=60.0))
    now = 1_763_770_000.0
    feats = [
        _stamped(feature(0, "a", now + 60.0), now),  # exactly at the bound: used
        _stamped(feature(1, "b", now + 60.5), now),  # past it
        _stamped(feature(2, "c", YEAR_3000), 0.0),  # the broker gave no timestamp
    ]
    result = run_all(state, feats, [])
    assert [(d.output.headers[3], d.reason) for d in result.dead_letters] == [
        (("source_offset", b"1"), "future_ts")
    ]
    assert [orjson.loads(p.value)["id"] for p in result.predictions] == ["a", "c"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 20), max_size=30),
    st.lists(st.integers(0, 20), max_size=30),
    st.lists(st.integers(1, 7), min_size=1, max_size=10),
    st.booleans(),
    st.booleans(),
)
def test_a_merge_taken_in_limited_pops_is_the_merge_taken_at_once(
    feats: list[int], labels: list[int], limits: list[int], labels_done: bool, features_done: bool
) -> None:
    """Popping at most n entries at a time (the bounded model call) takes the same entries in the same
    order as one pop, and leaves the rest queued as one pop does."""
    from worker.core.values import Invalid, MergeEntry

    def entries(times: list[int], rank: int) -> list[MergeEntry]:
        ordered = sorted(times)
        return [
            MergeEntry(float(t), rank, o, Record(o, float(t), None, None), Invalid("x"))
            for o, t in enumerate(ordered)
        ]

    whole, cut = Merger(), Merger()
    for m in (whole, cut):
        m.push(FEATURES, entries(feats, FEATURES), sizes=[1] * len(feats))
        m.push(LABELS, entries(labels, LABELS), sizes=[1] * len(labels))
    expected = whole.pop_ready(labels_done, features_done)
    taken: list[MergeEntry] = []
    for i in range(len(feats) + len(labels) + 1):
        part = cut.pop_ready(labels_done, features_done, limit=limits[i % len(limits)])
        assert len(part) <= limits[i % len(limits)]
        taken += part
    assert [(e.rank, e.offset) for e in taken] == [(e.rank, e.offset) for e in expected]
    for rank in (FEATURES, LABELS):
        assert cut.pending(rank) == whole.pending(rank) and cut.queued_bytes(rank) == whole.queued_bytes(rank)
