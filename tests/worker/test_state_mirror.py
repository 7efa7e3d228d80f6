"""Which copy of a partition's state is newer: the rule, on real states of one history.

The state topic's own behaviour is proven against the broker (``test_state_topic_e2e.py``) and the
worker's use of it end to end (``test_state_topic_proofs.py``); here, without Kafka, the rule that
picks between the checkpoint file and the topic's copy.
"""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.worker.stub_model import StubModel
from worker.core.merge import FEATURES, LABELS, Merger
from worker.core.partition_state import PartitionState, StateConfig, state_header
from worker.core.values import Record
from worker.state_topic.mirror import newer, records_seen

REGISTRY = {"StubModel": StubModel}
CONFIG = StateConfig("classification", "labels", features_topic="features")


def _feature(offset: int) -> Record:
    doc = {"id": f"r{offset}", "x": {"a": float(offset % 7)}, "ts": float(offset)}
    return Record(offset, float(offset), f"r{offset}".encode(), orjson.dumps(doc))


def _label(offset: int) -> Record:
    doc = {"id": f"r{offset}", "y": "yes" if offset % 3 else "no", "ts": offset + 0.5}
    return Record(offset, offset + 0.5, f"r{offset}".encode(), orjson.dumps(doc))


def _process(state: PartitionState, first: int, count: int) -> None:
    """Records ``first .. first + count - 1`` of both topics, as the worker merges them."""
    merger = Merger()
    offsets = range(first, first + count)
    merger.push(FEATURES, state.decode(FEATURES, [_feature(o) for o in offsets]))
    merger.push(LABELS, state.decode(LABELS, [_label(o) for o in offsets]))
    state.process(merger.pop_ready(labels_done=True, features_done=True), now=1.0)


def _seen(blob: bytes) -> int:
    return sum(state_header(blob)["consumed"])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 20), min_size=2, max_size=6), st.data())
def test_of_two_checkpoints_of_one_history_the_later_one_is_newer(
    runs: list[int], data: st.DataObject
) -> None:
    state = PartitionState(0, StubModel(), CONFIG)
    snapshots, done = [], 0
    for count in runs:
        _process(state, done, count)
        done += count
        snapshots.append(state.to_bytes())
    i = data.draw(st.integers(0, len(snapshots) - 2))
    j = data.draw(st.integers(i + 1, len(snapshots) - 1))
    early, late = snapshots[i], snapshots[j]
    assert newer(file_seen=_seen(early), topic_seen=_seen(late)) == "topic"
    assert newer(file_seen=_seen(late), topic_seen=_seen(early)) == "file"
    assert newer(file_seen=_seen(late), topic_seen=_seen(late)) == "file"  # a tie: the same point
    assert newer(file_seen=_seen(late), topic_seen=None) == "file"


def test_records_seen_orders_states_whose_offsets_went_back() -> None:
    """After a topic was re-created the worker reads it again from offset 0 (next offsets go back);
    the records seen keep growing, so the later state still wins."""
    state = PartitionState(0, StubModel(), CONFIG)
    _process(state, 0, 30)
    before = PartitionState.from_bytes(state.to_bytes(), CONFIG, REGISTRY)
    state.next_offsets = [0, 0]  # what PartitionRuntime.check_ends does on a re-created topic
    _process(state, 0, 10)
    assert state.next_offsets < before.next_offsets
    assert records_seen(state) > records_seen(before)
    assert newer(file_seen=records_seen(before), topic_seen=records_seen(state)) == "topic"
    assert newer(file_seen=records_seen(state), topic_seen=records_seen(before)) == "file"


def test_a_fresh_state_is_never_newer_than_any_copy() -> None:
    fresh = PartitionState(0, StubModel(), CONFIG)
    assert records_seen(fresh) == 0
    assert newer(file_seen=records_seen(fresh), topic_seen=0) == "file"
    assert newer(file_seen=records_seen(fresh), topic_seen=1) == "topic"
