"""`Recovery`: how a partition's records are processed after a failure, until it is behind it.

Two failures make a partition process records differently for a while, and both are decided by the
merge order alone, so the result is the one an uninterrupted run would give:

* **Poison records.** When the model raises, the partition rewinds to its last checkpoint and
  replays one record per model call up to where the failed run ended (``careful_until``); the record
  whose call fails alone is marked (``poison``) and dead-lettered (``model_error``) from then on.
* **Committed outputs.** With exactly_once the group's committed offsets may be ahead of the
  checkpoint (the transaction committed, then the process died before the file was durable): the
  records below them (``replay_until``) are processed again, learning as before, without producing
  their outputs, which are committed already.

>>> from worker.core.values import Record
>>> def entry(ts, rank, offset):  # an entry whose record does not matter here
...     return MergeEntry(ts, rank, offset, Record(offset, ts, None, None), Invalid("bad_x"))
>>> recovery = Recovery(replay_until=[5, 3])
>>> recovery.committed([entry(0.0, 0, 4), entry(0.1, 1, 2), entry(0.2, 0, 5)]), recovery.replay_until
(2, None)
"""

from __future__ import annotations

from worker.core.values import Invalid, MergeEntry


class Recovery:
    """One partition's way back after a failure (see the module docstring). The partition runtime
    asks it how to process each batch and tells it what failed."""

    __slots__ = ("careful_until", "poison", "replay_until")

    def __init__(self, replay_until: list[int] | None = None) -> None:
        self.poison: set[tuple[int, int]] = set()  # (rank, offset) of records the model fails on
        self.careful_until: list[int] | None = None  # next offsets up to which records go one per call
        self.replay_until = replay_until  # next offsets below which the outputs are committed already

    def inherit(self, earlier: Recovery) -> None:
        """The partition was rewound: the records the model failed on, and how far records go one per
        call, carry over from before the rewind (what is committed is known anew)."""
        self.poison, self.careful_until = earlier.poison, earlier.careful_until

    def defuse(self, entries: list[MergeEntry]) -> list[MergeEntry]:
        """The entries, those the model failed on alone marked invalid (``model_error``)."""
        if not self.poison:
            return entries
        return [defuse(entry, self.poison) for entry in entries]

    def committed(self, entries: list[MergeEntry]) -> int:
        """How many leading entries' outputs are committed already (processed without producing);
        once a batch goes beyond them, none is any more."""
        if self.replay_until is None:
            return 0
        done = committed_prefix(entries, self.replay_until)
        if done < len(entries):  # the merge order is the committed one: the rest are all new
            self.replay_until = None
        return done

    @property
    def one_at_a_time(self) -> bool:
        """Whether records go one per model call (after a model failure, up to where it failed)."""
        return self.careful_until is not None

    def caught_up(self, next_offsets: list[int]) -> bool:
        """Whether the partition is past the failed run; from then on records go in runs again."""
        if self.careful_until is None:
            return True
        if all(n >= end for n, end in zip(next_offsets, self.careful_until, strict=True)):
            self.careful_until = None
            return True
        return False

    def model_failed(self, entries: list[MergeEntry], next_offsets: list[int]) -> None:
        """The model raised on ``entries`` (a run ending before ``next_offsets``): the partition rewinds
        and goes one record per call up to there; a record that failed alone is poison."""
        if len(entries) == 1:
            self.poison.add((entries[0].rank, entries[0].offset))
        failed_end = list(next_offsets)
        self.careful_until = [
            max(a, b) for a, b in zip(failed_end, self.careful_until or failed_end, strict=True)
        ]


def committed_prefix(entries: list[MergeEntry], committed: list[int]) -> int:
    """How many leading entries come from records below the ``committed`` next offsets (per rank).

    Those records' outputs were committed before a crash; they are processed again only to bring the
    model where it was. The merge order is deterministic, so those records come first.

    >>> from worker.core.values import Record
    >>> def entry(ts, rank, offset):  # an entry whose record does not matter here
    ...     return MergeEntry(ts, rank, offset, Record(offset, ts, None, None), Invalid("bad_x"))
    >>> committed_prefix([entry(0.0, 0, 4), entry(0.1, 1, 2), entry(0.2, 0, 5)], [5, 3])
    2
    """
    done = 0
    for entry in entries:
        if entry.offset >= committed[entry.rank]:
            break
        done += 1
    return done


def defuse(entry: MergeEntry, poison: set[tuple[int, int]]) -> MergeEntry:
    """The entry, or the same record marked invalid (``model_error``) if the model failed on it."""
    if (entry.rank, entry.offset) in poison:
        return entry._replace(decoded=Invalid("model_error"))
    return entry
