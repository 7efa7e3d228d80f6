"""The retry schedule of a partition's checkpoint after failed attempts: a capped exponential backoff.

A checkpoint that fails at once (a broker refusing every state record, a full disk) leaves its
partition due again. Without a pause the loop would try again on its next turn: the checkpoint file
rewritten and an error logged about 20 times a second for as long as the outage lasts. Instead, after
the n-th failure in a row the partition's next attempt waits ``FIRST_RETRY_S * 2 ** (n - 1)`` seconds,
capped at ``MAX_RETRY_S``; a checkpoint that succeeds ends the streak.

Why these constants (fixed, not settings): the first retry comes soon (0.5 s), so a one-off failure
costs almost nothing; doubling reaches the cap after four failures; the cap (5 s) bounds how long a
partition waits once the outage is over, well below the default ``checkpoint_seconds`` (30 s), so the
checkpoint and the offset commit catch up promptly, while a long outage costs one attempt per 5 s per
partition instead of twenty a second. Nothing here depends on the deployment, so nobody needs to tune it.
Revoke and shutdown do not wait for it (:meth:`worker.checkpoints.protocol.Checkpointer.checkpoint_now`
attempts at once): a stop must not wait out a pause whose only purpose is to spare the disk and the log.

The log: the first failure of a streak is logged, then at most one line per ``LOG_EVERY_S`` carrying the
number of failures in a row (``sgt_checkpoint_failures_total`` counts every one of them).

>>> backoff = Backoff()
>>> [backoff.failed(now=0.0).delay for _ in range(6)]
[0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
>>> backoff.ready(4.9), backoff.ready(5.0)
(False, True)
>>> backoff.succeeded(), backoff.failed(now=10.0).delay
(6, 0.5)
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_RETRY_S = 0.5  # the pause after the first failure of a streak
MAX_RETRY_S = 5.0  # the longest pause: how late a partition may be once an outage is over
LOG_EVERY_S = 60.0  # during a streak, at most one log line this often


@dataclass(frozen=True)
class Failure:
    """One failed attempt, as the backoff counts it: the failures in a row so far, the pause before the
    next attempt, and whether to log it."""

    failures: int
    delay: float
    log: bool


@dataclass
class Backoff:
    """The retry schedule of one partition's checkpoints; times are ``time.monotonic()`` seconds."""

    failures: int = 0  # failed attempts in a row
    retry_at: float = float("-inf")  # no new attempt starts before this time
    logged_at: float = float("-inf")  # when a failure of this streak was last logged

    def ready(self, now: float) -> bool:
        """Whether a new attempt may start at ``now``."""
        return now >= self.retry_at

    def failed(self, now: float) -> Failure:
        """Count a failed attempt finished at ``now``; the next one waits for the returned delay."""
        self.failures += 1
        delay = min(FIRST_RETRY_S * 2.0 ** min(self.failures - 1, 32), MAX_RETRY_S)
        self.retry_at = now + delay
        log = self.failures == 1 or now - self.logged_at >= LOG_EVERY_S
        if log:
            self.logged_at = now
        return Failure(self.failures, delay, log)

    def succeeded(self) -> int:
        """A checkpoint succeeded: the streak ends. Returns how many failures it had."""
        failures, self.failures = self.failures, 0
        self.retry_at = self.logged_at = float("-inf")
        return failures
