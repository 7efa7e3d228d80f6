"""`Snapshot`: a partition's state as bytes at one moment, with the offsets and outputs it covers.

The type the partition runtime and the checkpoint protocol share; it imports neither, so neither
depends on the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Snapshot:
    """A partition's state as bytes, writable once the outputs of its first ``runs`` runs are delivered."""

    blob: bytes
    next_offsets: tuple[int, int]
    runs: int  # the partition's runs of outputs produced when it was taken
    records: int  # records it covers beyond the previous checkpoint
    seconds: float  # time spent taking it
