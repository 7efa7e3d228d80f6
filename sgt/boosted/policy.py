"""The drift response of the boosted ensembles as one frozen value: `DriftPolicy`, and `Youth`.

The ensemble's answer to drift (sgt.boosted.response) has variants: whether a fresh ensemble must
first predict better than the main one, whether new ensembles replay the recent records, how often
an alarm is answered, young parameters. Each model class takes one `DriftPolicy` and passes it to
the ensemble it builds (as River's adaptive random forest gives each member its detector objects),
so a variant is one value rather than a set of class attributes. Why the defaults are what they are:
docs/decisions.md, "Boosted ensembles".
"""

from __future__ import annotations

import dataclasses

__all__ = [
    "ADAPTIVE_CLASSIFIER_POLICY",
    "ADAPTIVE_REGRESSOR_POLICY",
    "ALARM_PERIOD",
    "BACKGROUND_LIFE",
    "BINARY_DELTA",
    "BINARY_MEMBERS",
    "CLASSIFIER_POLICY",
    "DRIFT_MIN_RECORDS",
    "DRIFT_PERIOD",
    "MAX_SPAN",
    "MULTICLASS_DELTA",
    "MULTICLASS_LINEAR_START",
    "MULTICLASS_MEMBERS",
    "MULTICLASS_TREES",
    "QUIET_SHARE",
    "REGRESSOR_POLICY",
    "RELAX",
    "REPLAY",
    "REPLAY_WARNED",
    "WARNING_SHARE",
    "DriftPolicy",
    "Youth",
]

#: the classifier's members' split confidence while a leaf finds no split (Params.relax_growth, relax_cap,
#: relax_impurity): delta times 10 per grace period of records the leaf gathered without a split or
#: value update, at most 0.5, in leaves whose predictions are uncertain (a Gini impurity of 0.47 or more;
#: two classes: probabilities within about 0.38 to 0.62). See docs/decisions.md, "The boosted ensemble"
RELAX = (10.0, 0.5, 0.47)
#: records learned between the points where detected drifts are answered
DRIFT_PERIOD = 250
#: records learned between the points where the classifier answers a drift alarm that no warning came
#: before (its fresh ensemble replaces the main one at once; see docs/decisions.md)
ALARM_PERIOD = DRIFT_PERIOD // 2
#: the recent learned records the classifier keeps for such a fresh ensemble to learn first (sgt.recent)
REPLAY = 2 * DRIFT_PERIOD
#: at most how many of those records since the warning test's estimated change a background ensemble that
#: a warning starts learns first (the most recent: see docs/decisions.md)
REPLAY_WARNED = DRIFT_PERIOD // 2
#: a drift test's excess, as a share of its threshold, up to which a batch is run through without stopping
#: at the points where drifts are answered (see `_Boosting._quiet`; speed only: 0.25 and 0.75 measured the
#: same on the worker benchmark's stream)
QUIET_SHARE = 0.5
#: the longest span run at once while quiet (speed only: see `_Boosting._span_end`)
MAX_SPAN = 2 * DRIFT_PERIOD
#: records a detector needs before it can raise an alarm
DRIFT_MIN_RECORDS = 250
#: the warning test's threshold, as a share of the drift test's
WARNING_SHARE = 0.5
#: records a background ensemble may learn without a drift confirming the warning that started it
BACKGROUND_LIFE = 2500
#: the classifier's split confidence when `delta` is None: while fewer than three classes are known ...
BINARY_DELTA = 1e-3
#: ... and from the third class on (see BoostedClassifier)
MULTICLASS_DELTA = 0.03
#: the classifier's members when `n_members` is None: while fewer than three classes are known ...
BINARY_MEMBERS = 6
#: ... and from the third class on (the members added then learn from the next record)
MULTICLASS_MEMBERS = 10
#: the classifier's members from the third class on: one tree per class but one ("per-class"), or one
#: multi-output tree (sgt.multioutput) with a value per class ("multi-output"; a softmax over every
#: class) or per class but the first ("multi-output-reference"; its score 0, as the committees')
MULTICLASS_TREES = ("per-class", "multi-output", "multi-output-reference")
#: records the classifier learns before its members' linear leaves step their linear terms when
#: `linear_start` is None, from the third class on (see BoostedClassifier); with fewer classes: 0
MULTICLASS_LINEAR_START = 100


@dataclasses.dataclass(frozen=True)
class Youth:
    """Parameters a young ensemble (the first, or one a warning or drift started) learns with, moving to
    the model's own as it ages: at age a (records it has learned, taken at the start of each
    `DRIFT_PERIOD`, so a fixed function of the record sequence) a parameter is its young value moved a
    share min(1, a / records) of the way to the model's (geometrically for `delta`). None: the model's.
    A model takes one in its drift policy:

    >>> import dataclasses
    >>> from sgt import BoostedClassifier
    >>> class EagerWhenYoung(BoostedClassifier):
    ...     _drift_policy = dataclasses.replace(
    ...         CLASSIFIER_POLICY, youth=Youth(records=2000, delta_factor=10.0, first=False)
    ...     )
    >>> model = EagerWhenYoung()
    >>> model.learn_many([[0.1], [0.9]], [0, 1])
    >>> model.n_seen
    2
    """

    records: int
    poisson_rate: float | None = None
    lambda_: float | None = None
    delta_factor: float | None = None  # the young split confidence, as a multiple of the model's
    grace_period: int | None = None
    grace_start: int | None = None
    first: bool = True  # whether the first ensemble is young too (else only those started later)


@dataclasses.dataclass(frozen=True)
class DriftPolicy:
    """How an ensemble answers the warnings and drifts its two Page-Hinkley tests raise.

    Parameters
    ----------
    fresh_must_win
        Whether a fresh ensemble started by a drift without a warning must first make fewer errors
        than the main one over a period to replace it (else it replaces the main one at once).
    race_after_warning
        Whether a background ensemble started by a warning also replaces the main one, before any
        drift alarm, at the first fixed point where it made fewer errors over the period before.
    warning_share
        The warning test's threshold, as a share of the drift test's.
    youth
        The parameters a young ensemble learns with (None: the model's from the start).
    replay
        The most recent learned records kept for an ensemble a warning or drift starts to learn first,
        those since the detector's estimated change (0: none kept; see sgt.recent).
    replay_share
        The share of the records since the estimated change that a new ensemble learns first (the
        most recent).
    replay_warned
        At most how many of them an ensemble that a warning starts learns (None: all).
    drift_period
        Records learned between the points where drifts are answered (a divisor of
        `background_life`).
    alarm_period
        Records learned between the points where a drift alarm that no warning came before is
        answered by a fresh ensemble at once (only without `fresh_must_win`).
    background_life
        Records a background ensemble may learn without a drift confirming its warning.

    >>> DriftPolicy(drift_period=0)
    Traceback (most recent call last):
    ...
    ValueError: drift_period must be an integer >= 1, got 0
    """

    fresh_must_win: bool = True
    race_after_warning: bool = False
    warning_share: float = WARNING_SHARE
    youth: Youth | None = None
    replay: int = 0
    replay_share: float = 1.0
    replay_warned: int | None = None
    drift_period: int = DRIFT_PERIOD
    alarm_period: int = DRIFT_PERIOD
    background_life: int = BACKGROUND_LIFE

    def __post_init__(self) -> None:
        for name in ("drift_period", "alarm_period", "background_life"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
        if not isinstance(self.replay, int) or self.replay < 0:
            raise ValueError(f"replay must be an integer >= 0, got {self.replay!r}")


#: the regressor's answer: a fresh ensemble replaces the main one once it predicts better, no replay
REGRESSOR_POLICY = DriftPolicy()
#: the classifier's: a fresh ensemble replaces the main one at once (answered every `ALARM_PERIOD`),
#: and every new ensemble first learns the recent records since the detected change
CLASSIFIER_POLICY = DriftPolicy(
    fresh_must_win=False, replay=REPLAY, replay_warned=REPLAY_WARNED, alarm_period=ALARM_PERIOD
)
#: the adaptive single tree's: a fresh tree must win first and there is no replay (both measured for
#: the ensemble only; for one tree replacing at once lost accuracy, see docs/decisions.md)
ADAPTIVE_CLASSIFIER_POLICY = DriftPolicy(replay_warned=REPLAY_WARNED)
ADAPTIVE_REGRESSOR_POLICY = REGRESSOR_POLICY
