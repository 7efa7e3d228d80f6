"""The state topic's errors: unusable, a state not written, fenced by a newer owner, the topic lost."""

from __future__ import annotations


class StateTopicError(RuntimeError):
    """The state topic cannot be used: wrong settings, unreachable, or a read that did not finish."""


class StateWriteError(StateTopicError):
    """A state was not durably written (some record was not acknowledged); nothing counts as written."""


class StateTopicFenced(StateTopicError):
    """A newer owner claimed the partition: this process lost it and must not write its state."""


class StateTopicLost(StateTopicError):
    """The state topic was deleted, or deleted and created again, since this process first used it.

    Every state it held is gone, so a worker with an empty disk would start its partitions afresh:
    the worker stops (as Kafka Streams does when a changelog topic goes missing), and the next start
    creates the topic again and fills it from the checkpoint files."""
