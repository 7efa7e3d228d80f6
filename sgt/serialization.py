"""sgt's safe binary format: a versioned, checksummed envelope for a JSON header and named arrays.

This module knows the envelope only; every model class writes and reads its own state into it
(``BaseSGT.to_bytes`` and ``from_bytes``, the tree in ``sgt.tree``, the feature space in
``sgt.features``), and ``sgt.registry`` maps the model type a blob names to its class. Nothing is
pickled and nothing read is executed.

Layout of a blob::

    magic    8 bytes   b"SGTMODEL"
    version  2 bytes   unsigned, little-endian (FORMAT_VERSION)
    length   4 bytes   unsigned, little-endian: bytes of the JSON header
    header   JSON      the model's state (type, parameters, counters ...) and the name, dtype and
                       shape of every array that follows, in order (the header's "arrays" table)
    arrays   raw little-endian array data, back to back
    digest   32 bytes  SHA-256 of everything above

The JSON is written with sorted keys and compact separators, so equal states give equal bytes.
Reading checks the magic, the digest, the version, then every array's dtype against a whitelist and
its size against the data, before a model sees any of it; any mismatch raises SerializationError.
Formats 1 and 2 are still read (the model classes say what changed in each).

>>> import numpy as np
>>> blob = encode({"model": "Example", "count": 3}, [("weights", np.arange(3.0))])
>>> saved = decode(blob)
>>> saved.header["count"], saved.arrays["weights"].tolist(), saved.version
(3, [0.0, 1.0, 2.0], 3)
>>> decode(blob[:-1])
Traceback (most recent call last):
...
sgt.serialization.SerializationError: checksum mismatch: the data is corrupted or truncated
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import struct
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "NamedArray",
    "Saved",
    "SerializationError",
    "decode",
    "encode",
    "expect_shape",
    "reading",
]

MAGIC = b"SGTMODEL"
FORMAT_VERSION = 3
READABLE = (1, 2, 3)
_PREFIX = struct.Struct("<8sHI")
_DIGEST = 32
_DTYPES = {"<f8", "<i4", "<i8", "<u2"}

#: one array of a blob: its name in the header's table and its values
NamedArray = tuple[str, np.ndarray]


class SerializationError(ValueError):
    """The bytes are not a model this version can read: foreign, truncated, corrupted or too new."""


class Saved(NamedTuple):
    """A decoded blob: its JSON header, its arrays by name (copies, writable) and its format version."""

    header: dict[str, Any]
    arrays: dict[str, np.ndarray]
    version: int


def encode(header: dict[str, Any], arrays: Sequence[NamedArray]) -> bytes:
    """The blob of a JSON-safe `header` and `arrays` (written in the order given, little-endian).

    The header's "arrays" entry is set here: it is the table of the arrays that follow.
    """
    little = [(name, np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<"))) for name, a in arrays]
    table = [[name, a.dtype.str, list(a.shape)] for name, a in little]
    text = json.dumps({**header, "arrays": table}, sort_keys=True, separators=(",", ":"), allow_nan=False)
    raw = text.encode()
    body = _PREFIX.pack(MAGIC, FORMAT_VERSION, len(raw)) + raw + b"".join(a.tobytes() for _, a in little)
    return body + hashlib.sha256(body).digest()


def decode(blob: bytes) -> Saved:
    """The header and arrays of `encode` output (any readable version); SerializationError if not one."""
    if not isinstance(blob, (bytes, bytearray, memoryview)):
        raise SerializationError(f"expected bytes, got {type(blob).__name__}")
    blob = bytes(blob)
    if len(blob) < _PREFIX.size + _DIGEST or not blob.startswith(MAGIC):
        raise SerializationError("not an sgt model (bad magic bytes)")
    if hashlib.sha256(blob[:-_DIGEST]).digest() != blob[-_DIGEST:]:
        raise SerializationError("checksum mismatch: the data is corrupted or truncated")
    _, version, length = _PREFIX.unpack_from(blob)
    if version not in READABLE:
        raise SerializationError(
            f"unsupported format version {version} (this library reads {', '.join(map(str, READABLE))})"
        )
    start = _PREFIX.size
    try:
        header = json.loads(blob[start : start + length])
    except ValueError as error:
        raise SerializationError(f"unreadable header: {error}") from None
    if not isinstance(header, dict) or not isinstance(header.get("arrays"), list):
        raise SerializationError("unreadable header: no array table")
    offset = start + length
    end = len(blob) - _DIGEST
    arrays: dict[str, np.ndarray] = {}
    for entry in header["arrays"]:
        name, dtype, shape = _array_entry(entry)
        size = math.prod(shape) * np.dtype(dtype).itemsize  # Python ints: no overflow
        if offset + size > end:
            raise SerializationError(f"array {name!r} runs past the end of the data")
        values = np.frombuffer(blob, dtype=dtype, count=size // np.dtype(dtype).itemsize, offset=offset)
        arrays[name] = values.reshape(shape).copy()
        offset += size
    if offset != end:
        raise SerializationError("unexpected bytes after the last array")
    return Saved(header, arrays, version)


def _array_entry(entry: Any) -> tuple[str, str, tuple[int, ...]]:
    if not (isinstance(entry, list) and len(entry) == 3):
        raise SerializationError("malformed array table")
    name, dtype, shape = entry
    if not isinstance(name, str) or dtype not in _DTYPES:
        raise SerializationError(f"array {name!r}: dtype {dtype!r} is not allowed")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise SerializationError(f"array {name!r}: bad shape {shape!r}")
    return name, dtype, tuple(shape)


def expect_shape(name: str, values: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`values` if it has `shape`; else SerializationError naming the array."""
    if values.shape != shape:
        raise SerializationError(f"{name} has shape {values.shape}, expected {shape}")
    return values


@contextlib.contextmanager
def reading() -> Iterator[None]:
    """Turn what a model's restore code raises on a missing or ill-typed entry into SerializationError.

    A blob that passed `decode` can still hold a state that does not fit together (its checksum
    only proves it is what was written); restoring inside this context reports that uniformly.
    """
    try:
        yield
    except SerializationError:
        raise
    except (KeyError, IndexError, TypeError, ValueError) as error:
        raise SerializationError(f"inconsistent model data: {error}") from None
