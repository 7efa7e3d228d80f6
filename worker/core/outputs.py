"""Size bounds of what the worker produces, so that no output exceeds what the producer (and broker)
accept: ``max_message_bytes`` (the producer's ``message.max.bytes``, see :mod:`worker.kafka.clients`).

* A dead letter is its source record byte for byte when that fits; otherwise a prefix of the value
  (and of the key, when the key alone would take more than a quarter of the room), with headers
  giving the original sizes, the SHA-256 of the original value and ``truncated: true``. The source
  topic, partition, offset and reason headers are there in both cases, so the record can always be
  found again in its topic.
* A prediction carries at most ``proba_top_k`` classes whose labels have at most ``max_label_bytes``
  UTF-8 bytes: :func:`prediction_bound` is the most such a document can take besides its ``id``;
  the opt-in ``interval`` and ``explain`` fields add at most :func:`annotation_bound`.

>>> key, value, headers = fit_dead_letter(b"k", b"x" * 100_000, [("reason", b"oversized")], 65536)
>>> len(value) + len(key) + sum(len(n) + len(v) for n, v in headers) <= 65536 - FRAMING_BYTES
True
>>> dict(headers)["original_bytes"], dict(headers)["truncated"]
(b'100000', b'true')
"""

from __future__ import annotations

import hashlib

# Room kept free in every message for the record's framing in the batch (length varints, attributes,
# timestamp and offset deltas, header counts): librdkafka counts at most a few dozen bytes per record.
FRAMING_BYTES = 256
# The JSON of a prediction without its id, label and proba: field names, braces, and the partition,
# offset, model_version (integers of at most 20 characters) and ts (a float of at most 24).
_PREDICTION_FIXED_BYTES = 160
_FLOAT_JSON_BYTES = 24  # the longest float orjson writes, e.g. -1.2345678901234567e-308
_ESCAPED_BYTE = 6  # a control byte in a JSON string is written as \\u00XX
# The most the headers of an excerpt add (names, two sizes of at most 20 digits, two hex digests).
_EXCERPT_HEADERS_BYTES = 256


def label_json_bound(max_label_bytes: int) -> int:
    """The most bytes a label of at most ``max_label_bytes`` UTF-8 bytes takes as a JSON string.

    An integer label takes at most 20 characters, fewer than any string bound allowed.
    """
    return _ESCAPED_BYTE * max_label_bytes + 2


def prediction_bound(top_k: int, max_label_bytes: int) -> int:
    """The most bytes of a prediction document besides its id: the predicted label, ``top_k`` entries
    of ``proba`` (label, colon, probability, comma) and the fixed fields."""
    label = label_json_bound(max_label_bytes)
    return _PREDICTION_FIXED_BYTES + label + top_k * (label + 1 + _FLOAT_JSON_BYTES + 1)


# '"interval":[' ',' '],' and two floats
_INTERVAL_BYTES = 16 + 2 * _FLOAT_JSON_BYTES
# '"explain":{"class":' ',"base":' ',"top":{' '}},' and the base
_EXPLAIN_FIXED_BYTES = 40 + _FLOAT_JSON_BYTES


def annotation_bound(interval: bool, explain_top_k: int, max_label_bytes: int) -> int:
    """The most bytes a prediction's ``interval`` and ``explain`` fields add (worker.core.annotate): the
    interval's two numbers; the class, the base and ``explain_top_k`` features whose names are cut to
    ``max_label_bytes`` bytes, each with its contribution."""
    size = _INTERVAL_BYTES if interval else 0
    if explain_top_k:
        name = label_json_bound(max_label_bytes)
        size += _EXPLAIN_FIXED_BYTES + name + explain_top_k * (name + 1 + _FLOAT_JSON_BYTES + 1)
    return size


def fit_dead_letter(
    key: bytes | None, value: bytes, headers: list[tuple[str, bytes]], max_message_bytes: int
) -> tuple[bytes | None, bytes, list[tuple[str, bytes]]]:
    """The dead letter's key, value and headers, cut to fit ``max_message_bytes`` if they do not."""
    room = max_message_bytes - FRAMING_BYTES - sum(len(n) + len(v) for n, v in headers)
    key_len = len(key) if key is not None else 0
    if key_len + len(value) <= room:
        return key, value, headers
    room -= _EXCERPT_HEADERS_BYTES
    extra = [
        ("truncated", b"true"),
        ("original_bytes", str(len(value)).encode()),
        ("original_sha256", hashlib.sha256(value).hexdigest().encode()),
    ]
    if key is not None and key_len > room // 4:
        extra += [
            ("original_key_bytes", str(key_len).encode()),
            ("original_key_sha256", hashlib.sha256(key).hexdigest().encode()),
        ]
        key = key[: room // 4]
    return key, value[: room - (len(key) if key is not None else 0)], headers + extra
