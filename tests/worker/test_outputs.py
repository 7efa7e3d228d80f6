"""Size bounds of the worker's outputs: dead letters cut to fit a message, predictions bounded by the
top-k classes and the label length, whatever the input."""

from __future__ import annotations

import hashlib

import numpy as np
import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from worker.core.outputs import FRAMING_BYTES, fit_dead_letter, prediction_bound
from worker.core.partition_state import PartitionState, StateConfig
from worker.core.values import Record

HEADERS = [
    ("reason", b"oversized"),
    ("source_topic", b"t" * 249),  # the longest topic name Kafka allows
    ("source_partition", b"2147483647"),
    ("source_offset", b"9223372036854775807"),
]


def _size(key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> int:
    return (len(key) if key else 0) + len(value) + sum(len(n) + len(v) for n, v in headers)


@settings(max_examples=200, deadline=None)
@given(
    key=st.none() | st.binary(max_size=300_000),
    value_size=st.integers(0, 400_000),
    limit=st.integers(65536, 300_000),
)
def test_a_dead_letter_always_fits_and_keeps_a_prefix_and_its_source(
    key: bytes | None, value_size: int, limit: int
) -> None:
    value = bytes(range(256)) * (value_size // 256) + b"v" * (value_size % 256)
    new_key, new_value, headers = fit_dead_letter(key, value, list(HEADERS), limit)
    assert _size(new_key, new_value, headers) <= limit - FRAMING_BYTES
    assert headers[: len(HEADERS)] == HEADERS  # reason and source are always there
    assert value.startswith(new_value) and (key is None or key.startswith(new_key or b""))
    extra = dict(headers[len(HEADERS) :])
    if new_value == value and new_key == key:
        assert not extra  # a record that fits is copied byte for byte
    else:
        assert extra["truncated"] == b"true"
        assert extra["original_bytes"] == str(len(value)).encode()
        assert extra["original_sha256"] == hashlib.sha256(value).hexdigest().encode()
        assert len(new_value) >= limit // 2  # the excerpt uses most of the room
        if new_key != key:
            assert extra["original_key_bytes"] == str(len(key or b"")).encode()


def test_a_ten_megabyte_record_becomes_an_excerpt_under_the_default_limit() -> None:
    value = b"{" + b"a" * 10_000_000
    key, excerpt, headers = fit_dead_letter(b"k", value, list(HEADERS), 1_000_000)
    assert _size(key, excerpt, headers) <= 1_000_000 - FRAMING_BYTES and len(excerpt) > 990_000
    assert key == b"k" and dict(headers)["original_bytes"] == b"10000001"


class _ManyClasses:
    """A model that learns every label as a class and predicts all known classes equally likely."""

    def __init__(self) -> None:
        self.classes_: list[object] = []

    def predict_learn_many(self, X: list, y: list) -> np.ndarray:
        rows = []
        for label in y:
            rows.append(len(self.classes_))
            if label is not None and label not in self.classes_:
                self.classes_.append(label)
        out = np.zeros((len(y), len(self.classes_)))
        for i, n in enumerate(rows):
            out[i, :n] = 1.0 / n if n else 0.0
        return out


def test_the_worst_case_prediction_fits_its_bound() -> None:
    """Labels of the longest length made of control characters (6 bytes each in JSON), the most
    classes in proba, the longest numbers: the document stays within prediction_bound + id."""
    top_k, max_label = 10, 256
    config = StateConfig("classification", None, proba_top_k=top_k, max_label_bytes=max_label, max_classes=50)
    state = PartitionState(2**31 - 1, _ManyClasses(), config)
    state.trained = 2**63 - 1  # the longest model_version
    labels = [chr(1 + i % 30) * (max_label - 1) + chr(65 + i) for i in range(40)]
    rid = "r" * 100
    records = [
        Record(2**63 - 100 + i, -1.2345678901234567e-308, None, orjson.dumps({"id": rid, "x": [1.0], "y": y}))
        for i, y in enumerate(labels)
    ]
    out = state.process(state.decode(0, records), now=-1.2345678901234567e-308)
    assert not out.dead_letters
    docs = [orjson.loads(p.value) for p in out.predictions]
    assert max(len(d["proba"]) for d in docs) == top_k
    bound = prediction_bound(top_k, max_label) + len(orjson.dumps(rid))
    assert max(len(p.value) for p in out.predictions) <= bound
    assert bound < 1_000_000 // 2  # the default settings leave half of a message for id and key
