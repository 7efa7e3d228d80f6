"""The most recent learned records of a model, as codes and targets, for a new ensemble to learn first.

A boosted ensemble that a drift detector starts (sgt.boosted) learns from the records after it
started; the records since the detected change were seen before it existed. `RecentRecords` keeps the
last `capacity` learned records exactly as the members learned them (feature codes and the target
column), so that the new ensemble can learn those since the change before the next record.

Codes are only valid on the grids they were made with: a grid that grows (sgt.features) drops every
record coded before it. Features registered later are missing (code 0) in older records, as a batch
codes them. What is kept depends only on the learned records and their order, never on batching.

>>> recent = RecentRecords(capacity=3)
>>> recent.remember(np.array([[1, 2], [3, 4]], dtype=np.uint16), np.array([0.0, 1.0]))
>>> recent.remember(np.array([[5, 6, 7], [8, 9, 1]], dtype=np.uint16), np.array([1.0, 0.0]))
>>> recent.last(2, width=4)[0].tolist(), recent.last(2, width=4)[1].tolist()
([[5, 6, 7, 0], [8, 9, 1, 0]], [1.0, 0.0])
>>> recent.last(5, width=3)[0].tolist()  # at most the capacity
[[3, 4, 0], [5, 6, 7], [8, 9, 1]]
>>> recent.remember(np.array([[2, 2, 2]], dtype=np.uint16), np.array([1.0]), regridded=0)
>>> len(recent)  # a grid grew at that record: the records coded before it are dropped
1
"""

from __future__ import annotations

import numpy as np

from sgt.features import CODE_DTYPE
from sgt.serialization import NamedArray, SerializationError

__all__ = ["RecentRecords"]


class RecentRecords:
    """The last `capacity` learned records: their codes [records, features] and targets [records]."""

    def __init__(self, capacity: int) -> None:
        self.capacity = int(capacity)
        self.codes = np.zeros((0, 0), dtype=CODE_DTYPE)
        self.targets = np.zeros(0)

    def __len__(self) -> int:
        return int(self.targets.size)

    def remember(self, codes: np.ndarray, targets: np.ndarray, regridded: int | None = None) -> None:
        """Append learned records in order; `regridded`: the row of `codes` from which on a grid had grown
        (the older records, and those before it, are coded on the old grid and dropped)."""
        if regridded is not None:
            self.codes, self.targets = self.codes[:0], self.targets[:0]
            codes, targets = codes[regridded:], targets[regridded:]
        width = max(self.codes.shape[1], codes.shape[1])
        joined = np.concatenate([_widened(self.codes, width), _widened(codes, width)])
        self.codes = joined[-self.capacity :] if self.capacity else joined[:0]
        self.targets = np.concatenate([self.targets, np.asarray(targets, dtype=np.float64)])[
            len(joined) - len(self.codes) :
        ]

    def last(self, k: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        """The last min(k, held) records' codes, `width` features wide (later features missing), and
        targets."""
        k = min(k, len(self))
        return _widened(self.codes[len(self) - k :], width), self.targets[len(self) - k :].copy()

    def arrays(self, prefix: str, width: int) -> list[NamedArray]:
        """The records as named arrays, `width` features wide (the model's feature count, so that equal
        histories save equal bytes)."""
        return [(f"{prefix}.codes", _widened(self.codes, width)), (f"{prefix}.targets", self.targets)]

    def restore(self, prefix: str, arrays: dict[str, np.ndarray], width: int) -> None:
        """Inverse of `arrays`."""
        codes, targets = arrays[f"{prefix}.codes"], arrays[f"{prefix}.targets"]
        if (
            codes.ndim != 2
            or codes.shape[1] != width
            or targets.shape != (codes.shape[0],)
            or codes.shape[0] > self.capacity
        ):
            raise SerializationError(f"{prefix}: recent records of shapes {codes.shape}, {targets.shape}")
        self.codes = codes.astype(CODE_DTYPE)
        self.targets = targets.astype(np.float64)


def _widened(codes: np.ndarray, width: int) -> np.ndarray:
    """`codes` with missing (0) columns added up to `width` features."""
    out = np.zeros((codes.shape[0], width), dtype=CODE_DTYPE)
    out[:, : codes.shape[1]] = codes
    return out
