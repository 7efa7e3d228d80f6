"""When the young naive Bayes beside calibrated trees retires, and the mixture that stops there.

``proba="calibrated"`` mixes the naive Bayes of sgt.bayes into the calibrated softmax while the trees
are young, and retires it for good by a `Tournament` on the experts' log losses over every learned
record (`NaiveBayes.lead`, the difference unbounded): once the trees' is a margin below its own, or from
a set number of records on once the trees' is at most its own, so that a long stream on which the trees
are the better expert pays for it only at its start: `NaiveBayes.mix_until` is `NaiveBayes.mix`
stopping at that record, and says where (`Mixed`). (A young naive Bayes saved before the tournament
keeps `Retirement`, the rule then: its weight at its floor, the bounded difference at its bound, or a
set number of records.)

Both rules are pure functions of what a learned record leaves (the differences and the records
learned), so the one-record path and a batch retire the naive Bayes after the same record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = ["Mixed", "Retirement", "Tournament"]


class Mixed(NamedTuple):
    """`NaiveBayes.mix_until`'s result: the probabilities, and the row after which the naive Bayes
    retired (None if it did not)."""

    proba: np.ndarray
    retired_at: int | None


@dataclass(frozen=True)
class Retirement:
    """When a young naive Bayes beside calibrated trees retires: once the trees' cumulative log loss
    is `ratio` nats below its own (its weight is then below exp(-ratio)), or once the model has learned
    `records` records, whichever comes first."""

    ratio: float
    records: int

    def retires(self, log_ratio: float, learned: int, lead: float | None = None) -> bool:
        """Whether it retires after a learned record that leaves the difference at `log_ratio` and the
        model with `learned` records learned (`lead`, the unbounded difference, takes no part)."""
        return log_ratio >= self.ratio or learned >= self.records


@dataclass(frozen=True)
class Tournament:
    """When a young naive Bayes beside calibrated trees retires, by the experts' log losses over every
    record learned (`NaiveBayes.lead`, unbounded): once the trees' is `lead` nats below its own, or, from
    `records` learned records on, once the trees' is at most its own; never before `least` records.

    `Retirement` judges by the bounded difference, which forgets how far an expert fell behind: on
    streams where the naive Bayes is the better expert on the whole (a noisy LED display, ten skewed
    Gaussian classes) that difference still touches its bound by chance early on, or the record count
    ends it, and the trees alone lose up to 4 points of accuracy. A naive Bayes that leads the
    tournament stays for as long as it leads. Its first records say little: over many features of two
    values a naive Bayes of a few records per class is overconfident (odds of 2^24 from one record of
    a class over 24 binary features), and on a noisy LED display the trees led it by up to 24 nats
    over the first 30 to 80 records before it overtook them for good by record 200 (`least`).
    """

    lead: float
    records: int
    least: int = 0

    def retires(self, log_ratio: float, learned: int, lead: float | None = None) -> bool:
        """Whether it retires after a learned record that leaves the cumulative difference at `lead` and
        the model with `learned` records learned (`log_ratio`, the bounded one, takes no part)."""
        if lead is None:
            raise ValueError("a tournament needs the naive Bayes' cumulative log-loss difference")
        if learned < self.least:
            return False
        return lead >= self.lead or (learned >= self.records and lead >= 0.0)
