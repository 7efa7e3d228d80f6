"""`WorkerSettings`: the validated value of every setting, and the checks between settings (topics
that must differ, a prediction's worst-case size, the transaction's time, the group's timings, the
probabilities a model makes).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sgt.boosted.classifier import ENSEMBLE_PROBA_MODES as ADAPTIVE_PROBA
from worker.config.parsers import STATE_TOPIC_AUTO, TOPIC_NAME, ConfigError
from worker.config.table import BY_NAME, DEFAULT_MODEL, MAX_TRANSACTION_SECONDS, check, describe
from worker.core.outputs import annotation_bound, prediction_bound


@dataclass(frozen=True)
class WorkerSettings:
    """Validated values of every setting in :data:`SETTINGS` (attribute = setting name)."""

    bootstrap_servers: str
    group_id: str
    features_topic: str
    labels_topic: str | None
    predictions_topic: str
    dead_letter_topic: str
    task: str
    checkpoint_dir: str
    state_topic: str | None
    state_topic_replication_factor: int
    state_topic_min_insync_replicas: int | None
    metrics_port: int
    metrics_host: str
    checkpoint_records: int
    checkpoint_seconds: float
    unhealthy_after_checkpoint_failures: int
    processing_guarantee: str
    transactional_id: str | None
    join_max_pending: int
    join_max_bytes: int
    merge_max_bytes: int
    join_max_age_seconds: float
    max_ts_ahead_seconds: float
    max_record_bytes: int
    max_message_bytes: int
    proba_top_k: int
    interval_coverage: float | None
    explain: int
    max_label_bytes: int
    max_classes: int
    max_features: int
    features: tuple[tuple[str, str], ...]
    delta: float | None
    grace_period: int
    lambda_: float | None
    gamma: float | None
    bins: int
    warm_up: int
    grace_start: int
    leaf_model: str | None
    linear_lambda: float | None
    proba: str
    linear_gate: float | None
    multiclass_trees: str
    max_depth: int | None
    max_categories: int
    model_max_bytes: int | None
    model: str | None
    n_members: int | None
    learning_rate: float | None
    poisson_rate: float | None
    drift_threshold: float | None
    metrics_window: int
    batch_size: int
    poll_timeout_seconds: float
    fetch_wait_max_ms: int
    fetch_min_bytes: int
    linger_ms: int
    session_timeout_ms: int
    heartbeat_interval_ms: int
    shutdown_timeout_seconds: float
    kafka_options: tuple[tuple[str, str], ...]
    log_level: str

    def __post_init__(self) -> None:
        _check_topics(self)
        _check_prediction_bound(self)
        _check_guarantee(self)
        _check_group_timings(self)
        _check_proba(self)

    @property
    def partition_model(self) -> str:
        """The model of each partition: ``model``, or where it is none the task's (`DEFAULT_MODEL`)."""
        return DEFAULT_MODEL[self.task] if self.model is None else self.model

    @property
    def state_topic_name(self) -> str | None:
        """The state topic in use (``auto`` resolved to ``<group_id>-state``), or None when off."""
        if self.state_topic == STATE_TOPIC_AUTO:
            return f"{self.group_id}-state"
        return self.state_topic

    def replace(self, **changes: Any) -> WorkerSettings:
        """A copy with some settings changed (values are validated like any other source)."""
        return dataclasses.replace(self, **{k: check(BY_NAME[k], v, "override") for k, v in changes.items()})


_TOPIC_SETTINGS = ("features_topic", "labels_topic", "predictions_topic", "dead_letter_topic")


def _check_topics(settings: WorkerSettings) -> None:
    """The four topics must differ: an output that is also an input feeds the worker its own output
    (a dead letter read back is dead-lettered again, forever), and the join needs two topics."""
    seen: dict[str, str] = {}
    for name in _TOPIC_SETTINGS:
        topic = getattr(settings, name)
        if topic is None:
            continue
        if topic in seen:
            raise ConfigError(
                f"{describe(name)}: {topic!r} is also the {seen[topic]}; the features, labels, "
                "predictions and dead-letter topics must be different topics"
            )
        seen[topic] = name
    state = settings.state_topic_name
    if state is not None and not TOPIC_NAME.match(state):
        raise ConfigError(
            f"{describe('state_topic')}: auto names it {state!r} after group_id, which is not a valid "
            "topic name; give the state topic a name (letters, digits, '.', '_', '-') or none"
        )
    if state in seen:
        raise ConfigError(
            f"{describe('state_topic')}: {state!r} is also the {seen[state]}; the state topic must be a "
            "topic of its own"
        )


def _check_prediction_bound(settings: WorkerSettings) -> None:
    """The largest ``proba`` and label a prediction can carry must leave half of a message free (for
    the id and key, which the record brings)."""
    bound = prediction_bound(settings.proba_top_k, settings.max_label_bytes)
    bound += annotation_bound(
        settings.interval_coverage is not None, settings.explain, settings.max_label_bytes
    )
    if bound > settings.max_message_bytes // 2:
        raise ConfigError(
            f"{describe('proba_top_k')}, {describe('explain')} and {describe('max_label_bytes')}: a "
            "prediction could take "
            f"{bound} bytes; allowed are values whose worst case is at most half of max_message_bytes "
            f"({settings.max_message_bytes // 2})"
        )


def _check_guarantee(settings: WorkerSettings) -> None:
    """exactly_once keeps a transaction open for up to ``checkpoint_seconds``; its timeout (three times
    that, at least 60 s) must stay within what Kafka brokers allow by default (15 minutes)."""
    if (
        settings.processing_guarantee == "exactly_once"
        and settings.checkpoint_seconds > MAX_TRANSACTION_SECONDS
    ):
        raise ConfigError(
            f"{describe('checkpoint_seconds')}: {settings.checkpoint_seconds:g} with processing_guarantee "
            f"exactly_once; allowed are values up to {MAX_TRANSACTION_SECONDS:g} (a transaction stays open "
            "that long, and its timeout of three times that must stay within the broker's 15-minute maximum)"
        )


def _check_proba(settings: WorkerSettings) -> None:
    """The adaptive classifier makes its probabilities calibrated or as the trees' softmax alone (its
    class's `proba`), not by the single classifier's other modes."""
    model = settings.partition_model
    if settings.task == "classification" and model == "adaptive" and settings.proba not in ADAPTIVE_PROBA:
        raise ConfigError(
            f"{describe('proba')}: {settings.proba} with model {model}; allowed are "
            f"{', '.join(ADAPTIVE_PROBA)} (the other modes are model sgt's)"
        )


def _check_group_timings(settings: WorkerSettings) -> None:
    """The heartbeat must come more often than the session times out: Kafka requires
    ``heartbeat.interval.ms`` below ``session.timeout.ms``, but librdkafka accepts any pair, and with a
    heartbeat slower than the session the group expires the member between two heartbeats, so its
    partitions are lost a session timeout after each assignment, over and over."""
    heartbeat, session = settings.heartbeat_interval_ms, settings.session_timeout_ms
    if heartbeat >= session:
        raise ConfigError(
            f"{describe('heartbeat_interval_ms')}: {heartbeat} with session_timeout_ms {session}; allowed "
            f"are values below session_timeout_ms ({session}), and Kafka recommends at most a third of it "
            f"({session // 3}), so that a lost heartbeat or two do not end the session"
        )
