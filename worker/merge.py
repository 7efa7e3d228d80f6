"""Deterministic merge of a partition's two topics, whatever batches the records arrive in.

Records of each topic are queued in offset order. The next record processed is the smaller head of
the two queues by ``(event time, topic rank, offset)``; features rank before labels, so a label with
the same time as its features is processed after them. A head is only taken when the other queue has a
head to compare with, or the other topic is known to be read to its end (or is not consumed at all).
That is the merge step of a merge sort over the two complete sequences: which record goes next never
depends on how much of either topic has been fetched, so a replay from the same offsets takes the same
order. (A topic being "at its end" is the one input that depends on timing; with all input already
written, as in a replay, it only happens at the true end.)

>>> m = Merger()
>>> m.push(FEATURES, [(1.0, FEATURES, 0, "f0"), (3.0, FEATURES, 1, "f1")])
>>> m.pop_ready(labels_done=False, features_done=False)
[]
>>> m.push(LABELS, [(2.0, LABELS, 0, "l0")])
>>> [e[3] for e in m.pop_ready(labels_done=True, features_done=False)]
['f0', 'l0', 'f1']
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

FEATURES = 0
LABELS = 1

#: (event time, topic rank, offset, payload)
Entry = tuple[float, int, int, Any]


class Merger:
    """Queues of fetched but not yet processed records of one partition, one per topic."""

    def __init__(self) -> None:
        self.queues: tuple[deque[Entry], deque[Entry]] = (deque(), deque())

    def push(self, rank: int, entries: Iterable[Entry]) -> None:
        """Queue entries of the topic of that rank, in offset order."""
        self.queues[rank].extend(entries)

    def pending(self, rank: int) -> int:
        return len(self.queues[rank])

    def clear(self) -> None:
        for queue in self.queues:
            queue.clear()

    def pop_ready(self, labels_done: bool, features_done: bool) -> list[Entry]:
        """Remove and return, in merge order, every record whose turn is certain.

        ``labels_done`` / ``features_done``: that topic has no more records to come for now (read to
        its end, or not consumed).
        """
        feats, labels = self.queues
        out: list[Entry] = []
        while feats and labels:
            out.append(feats.popleft() if feats[0] <= labels[0] else labels.popleft())
        if feats and labels_done:
            out.extend(feats)
            feats.clear()
        if labels and features_done:
            out.extend(labels)
            labels.clear()
        return out
