"""Worker settings: one registry, four sources, one precedence.

Every setting is declared once in :data:`SETTINGS` (name, flag, environment variable, default, help,
parser). A value comes from the first source that has it: command-line flag, then ``SGT_*``
environment variable, then the TOML file given with ``--config`` (keys are the setting names, either at
the top level or under a ``[worker]`` table), then the default. A bad value is rejected with a
:class:`ConfigError` naming the setting and what it accepts.

>>> s = load_settings({"task": "regression"}, env={"SGT_GROUP_ID": "g1"})
>>> (s.task, s.group_id, s.features_topic)
('regression', 'g1', 'features')
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import math
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sgt.boosted import MULTICLASS_TREES
from sgt.classifier import PROBA_MODES
from sgt.features import MAX_CATEGORIES
from worker.core.join import JOIN_MAX_BYTES
from worker.core.merge import MERGE_MAX_BYTES
from worker.core.outputs import annotation_bound, prediction_bound
from worker.core.records import MAX_TS_AHEAD
from worker.core.schema import MAX_FEATURES

GUARANTEES = ("at_least_once", "exactly_once")
"""The values of ``processing_guarantee`` (Kafka Streams' names; see docs/reliability.md)."""

MODEL_MAX_BYTES = 32 * 1024 * 1024
"""Default ``model_max_bytes``: 32 MiB a partition, room for what the models take on long runs while
bounding a worker's partitions (a dozen in a few hundred MB). On a drifting SEA stream the default
single tree took 24 MB after 10 million records, still growing by about 1.3 MB a million, and the
boosted ensemble at most 6.2 MB (BENCHMARKS.md section 12): the budget binds only on longer or wider
streams, where it costs little accuracy (2 MiB cost the single tree 0.33 points)."""

MODEL_MIN_BYTES = 65536
"""Smallest ``model_max_bytes``: below it a model's roots alone could exceed the budget."""

MAX_TRANSACTION_SECONDS = 300.0
"""Longest ``checkpoint_seconds`` with exactly_once: the transaction timeout is three times it."""


class ConfigError(ValueError):
    """A setting has a value it does not accept; the message names the setting and what is allowed."""


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a non-empty string")
    return value.strip()


def _optional_text(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
        return None
    return _text(value)


def _optional_choice(*allowed: str) -> Callable[[Any], str | None]:
    choice = _choice(*allowed)

    def parse(value: Any) -> str | None:
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
            return None
        try:
            return choice(value)
        except ValueError:
            raise ValueError("none or one of " + ", ".join(allowed)) from None

    return parse


def _choice(*allowed: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip().lower()
        if text not in allowed:
            raise ValueError("one of " + ", ".join(allowed))
        return text

    return parse


def _integer_range(low: int, high: int | None) -> str:
    """How an integer setting's allowed values are named in error messages."""
    return f"an integer >= {low}" + (f" and <= {high}" if high is not None else "")


def _int(low: int, high: int | None = None) -> Callable[[Any], int]:
    what = _integer_range(low, high)

    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError(what)
        try:
            number = int(str(value).strip()) if not isinstance(value, int) else value
        except ValueError:
            raise ValueError(what) from None
        if number < low or (high is not None and number > high):
            raise ValueError(what)
        return number

    return parse


def _float(
    low: float, high: float | None = None, open_low: bool = False, open_high: bool = False
) -> Callable[[Any], float]:
    what = f"a number {'>' if open_low else '>='} {low:g}"
    if high is not None:
        what += f" and {'<' if open_high else '<='} {high:g}"

    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError(what)
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(what) from None
        too_low = number <= low if open_low else number < low
        too_high = high is not None and (number >= high if open_high else number > high)
        if not math.isfinite(number) or too_low or too_high:
            raise ValueError(what)
        return number

    return parse


def _optional_float(
    low: float, high: float | None = None, open_low: bool = False, open_high: bool = False
) -> Callable[[Any], float | None]:
    number = _float(low, high, open_low=open_low, open_high=open_high)

    def parse(value: Any) -> float | None:
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
            return None
        try:
            return number(value)
        except ValueError as e:
            raise ValueError(f"none or {e}") from None

    return parse


def _optional_int(low: int, high: int | None = None) -> Callable[[Any], int | None]:
    whole = _int(low, high)

    def parse(value: Any) -> int | None:
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
            return None
        try:
            return whole(value)
        except ValueError:
            raise ValueError(f"none or {_integer_range(low, high)}") from None

    return parse


_TOPIC_NAME = re.compile(r"^[A-Za-z0-9._-]{1,249}$")  # Kafka's rule for topic names
STATE_TOPIC_AUTO = "auto"


def _state_topic(value: Any) -> str | None:
    """``auto`` (the group's own ``<group_id>-state``), ``none`` (off) or a topic name."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none")):
        return None
    text = _text(value)
    if text.lower() == STATE_TOPIC_AUTO:
        return STATE_TOPIC_AUTO
    if not _TOPIC_NAME.match(text) or text in (".", ".."):
        raise ValueError(
            "auto, none, or a Kafka topic name (1 to 249 characters among letters, digits, '.', '_', '-')"
        )
    return text


def _replication_factor(value: Any) -> int:
    whole = _int(-1)
    try:
        number = whole(value)
    except ValueError:
        number = 0
    if number == 0:
        raise ValueError("-1 (the broker's default.replication.factor) or an integer >= 1")
    return number


FEATURE_TYPES = ("numeric", "nominal")


def parse_feature_spec(value: Any) -> tuple[tuple[str, str], ...]:
    """Parse ``"age:numeric,plan:nominal,usage"`` (type defaults to numeric) or a TOML list of such items."""
    what = "a comma-separated list of NAME or NAME:numeric|nominal, each name once"
    if value is None or value == "" or value == ():
        return ()
    if isinstance(value, tuple):
        return value
    items = value if isinstance(value, list) else str(value).split(",")
    spec: list[tuple[str, str]] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(what)
        name, _, kind = item.strip().partition(":")
        kind = kind.strip().lower() or "numeric"
        if not name.strip() or kind not in FEATURE_TYPES:
            raise ValueError(what)
        spec.append((name.strip(), kind))
    if len({name for name, _ in spec}) != len(spec):
        raise ValueError(what)
    return tuple(spec)


# Client properties that the worker's guarantees depend on: not overridable through kafka_options.
PROTECTED_CLIENT_KEYS = frozenset(
    {
        "bootstrap.servers",
        "group.id",
        "enable.auto.commit",
        "enable.auto.offset.store",
        "partition.assignment.strategy",
        "group.protocol",
        "isolation.level",
        "enable.idempotence",
        "acks",
        "transactional.id",  # the transactional_id setting (exactly_once)
        "transaction.timeout.ms",  # three times checkpoint_seconds (exactly_once)
        "message.max.bytes",  # the max_message_bytes setting, which every output is built to fit
    }
)


def parse_client_options(value: Any) -> tuple[tuple[str, str], ...]:
    """Parse ``"security.protocol=SASL_SSL,sasl.mechanism=PLAIN"`` or a TOML table into (key, value) pairs."""
    what = (
        "comma-separated librdkafka properties KEY=VALUE (not "
        + ", ".join(sorted(PROTECTED_CLIENT_KEYS))
        + ")"
    )
    if value is None or value == "" or value == ():
        return ()
    if isinstance(value, tuple):
        return value
    if isinstance(value, dict):
        items = [(str(k), str(v)) for k, v in value.items()]
    else:
        items = []
        for item in str(value).split(","):
            key, sep, val = item.partition("=")
            if not sep or not key.strip():
                raise ValueError(what)
            items.append((key.strip(), val.strip()))
    if any(key in PROTECTED_CLIENT_KEYS for key, _ in items):
        raise ValueError(what)
    return tuple(items)


def redacted(options: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Client options for logs, with passwords and secrets masked."""
    secret = ("password", "secret", "token", "key")
    return {k: "***" if any(word in k for word in secret) else v for k, v in options}


@dataclass(frozen=True)
class Setting:
    """One worker setting: where it can come from and how its value is checked."""

    name: str
    default: Any
    help: str
    parse: Callable[[Any], Any] = field(repr=False)

    @property
    def flag(self) -> str:
        return "--" + self.name.rstrip("_").replace("_", "-")

    @property
    def env(self) -> str:
        return "SGT_" + self.name.rstrip("_").upper()


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "bootstrap_servers", "localhost:9092", "Kafka bootstrap servers, host:port[,host:port...].", _text
    ),
    Setting("group_id", "sgt-worker", "Consumer group shared by all workers of one deployment.", _text),
    Setting(
        "features_topic", "features", "Topic of feature records (JSON objects with x, optional y).", _text
    ),
    Setting(
        "labels_topic",
        None,
        "Topic of label records {id, y}, co-partitioned with the features topic; none = inline labels only.",
        _optional_text,
    ),
    Setting("predictions_topic", "predictions", "Topic the predictions are written to.", _text),
    Setting(
        "dead_letter_topic",
        "dead-letters",
        "Topic unusable records are copied to, byte for byte (a prefix when larger than max_message_bytes).",
        _text,
    ),
    Setting(
        "task",
        "classification",
        "Learning task: classification or regression.",
        _choice("classification", "regression"),
    ),
    Setting("checkpoint_dir", "./checkpoints", "Directory of the per-partition checkpoint files.", _text),
    Setting(
        "state_topic",
        STATE_TOPIC_AUTO,
        "Compacted topic every checkpoint is also written to, so a worker with an empty checkpoint_dir "
        "continues any partition: auto = <group_id>-state, none = off (the directory alone).",
        _state_topic,
    ),
    Setting(
        "state_topic_replication_factor",
        -1,
        "Replication factor of the state topic when the worker creates it (-1 = the broker's default).",
        _replication_factor,
    ),
    Setting(
        "state_topic_min_insync_replicas",
        None,
        "min.insync.replicas of the state topic when the worker creates it (none = the broker's default).",
        _optional_int(1),
    ),
    Setting(
        "metrics_port",
        8000,
        "Port of the HTTP server for /metrics, /healthz and /readyz (0 = none).",
        _int(0, 65535),
    ),
    Setting("metrics_host", "0.0.0.0", "Address the metrics HTTP server binds to.", _text),
    Setting(
        "checkpoint_records", 100000, "Checkpoint a partition after this many processed records.", _int(1)
    ),
    Setting(
        "checkpoint_seconds",
        30.0,
        "Checkpoint a changed partition at least this often (seconds).",
        _float(0.0, open_low=True),
    ),
    Setting(
        "unhealthy_after_checkpoint_failures",
        10,
        "/healthz and /readyz answer 503 once a partition's checkpoint has failed this many times in a "
        "row (retries back off from 0.5 s to 5 s: 10 failures take about 30 s), until one succeeds.",
        _int(1, 1000000),
    ),
    Setting(
        "processing_guarantee",
        "at_least_once",
        "at_least_once: outputs may repeat after a crash (those of the records since the last checkpoint); "
        "exactly_once: outputs, input offsets and checkpoints commit in Kafka transactions, so a "
        "read_committed consumer sees each output once.",
        _choice(*GUARANTEES),
    ),
    Setting(
        "transactional_id",
        None,
        "exactly_once: the output producer's transactional.id, unique per worker process and stable across "
        "its restarts; none = {group_id}-{host name}.",
        _optional_text,
    ),
    Setting(
        "join_max_pending", 100000, "Most entries waiting on each side of a partition's join buffer.", _int(1)
    ),
    Setting(
        "join_max_bytes",
        JOIN_MAX_BYTES,
        "Most bytes held on each side of a partition's join buffer (an entry counts its record's bytes, "
        "256 more and 56 per feature value); past it the oldest entries leave, as past join_max_pending.",
        _int(1),
    ),
    Setting(
        "merge_max_bytes",
        MERGE_MAX_BYTES,
        "Most bytes of fetched records of one topic partition waiting for the other topic's records "
        "(for the event-time merge); past it fetching that topic partition pauses until half are used.",
        _int(1),
    ),
    Setting(
        "join_max_age_seconds",
        3600.0,
        "Drop join-buffer entries older than this, in event time (seconds).",
        _float(0.0, open_low=True),
    ),
    Setting(
        "max_ts_ahead_seconds",
        MAX_TS_AHEAD,
        "A record whose ts lies more than this many seconds after its Kafka timestamp is dead-lettered "
        "as future_ts (it would move the event clock and expire the join buffer).",
        _float(0.0),
    ),
    Setting("max_record_bytes", 1048576, "Records larger than this are dead-lettered as oversized.", _int(1)),
    Setting(
        "max_message_bytes",
        1000000,
        "Largest message the worker produces (the producer's message.max.bytes); keep it at most the "
        "broker's and output topics' max.message.bytes. A dead letter larger than this is cut to a prefix.",
        _int(65536, 1000000000),
    ),
    Setting(
        "proba_top_k",
        10,
        "Classes a prediction's proba lists: the most probable ones (classification).",
        _int(1, 10000),
    ),
    Setting(
        "interval_coverage",
        None,
        "Regression: coverage in (0, 1) of the interval [low, high] each prediction carries, tracked "
        "online from the prequential residuals; none = no interval.",
        _optional_float(0.0, 1.0, open_low=True, open_high=True),
    ),
    Setting(
        "explain",
        0,
        "Features each prediction's explain lists: the k largest contributions to its score; 0 = off "
        "(explaining learns a run one record at a time, which is slower).",
        _int(0, 100),
    ),
    Setting(
        "max_label_bytes",
        256,
        "Longest class label (UTF-8 bytes); a longer one is dead-lettered as label_too_long.",
        _int(1, 65536),
    ),
    Setting(
        "max_classes",
        100,
        "Most classes a partition's model learns; a label that would add another is dead-lettered "
        "as too_many_classes.",
        _int(2, 10000),
    ),
    Setting(
        "max_features",
        MAX_FEATURES,
        "Most feature names a partition infers (no features declared); a record that would add "
        "another is dead-lettered as unknown_feature.",
        _int(1),
    ),
    Setting(
        "features",
        (),
        "Declared features, NAME[:numeric|nominal],... in array order; empty = inferred from the data.",
        parse_feature_spec,
    ),
    Setting(
        "delta",
        None,
        "SGT: significance level of the split test; none = the model's default (0.001; boosted: 0.03"
        " from a third class on, 0.01 for regression).",
        _optional_float(0.0, 1.0, open_low=True, open_high=True),
    ),
    Setting("grace_period", 100, "SGT: instances a leaf sees between split attempts.", _int(1)),
    Setting(
        "lambda_",
        None,
        "SGT: L2 regularisation of leaf values; none = the model's default (0.5 for boosted "
        "classification, else 0.1).",
        _optional_float(0.0),
    ),
    Setting(
        "gamma",
        None,
        "SGT: penalty per new leaf; none = the model's default (0.02 for boosted classification, else 0.1).",
        _optional_float(0.0),
    ),
    Setting("bins", 64, "SGT: bins per numeric feature.", _int(2, 4096)),
    Setting("max_depth", None, "SGT: deepest a tree may grow; none = unlimited.", _optional_int(0)),
    Setting(
        "max_categories",
        256,
        "SGT: categories of a nominal feature with codes of their own; later ones share one "
        "(bounds memory when a feature has ever-new values, such as an id).",
        _int(1, MAX_CATEGORIES - 1),  # the library's bound (codes are uint16)
    ),
    Setting(
        "model_max_bytes",
        MODEL_MAX_BYTES,
        "Memory budget of a partition's model, in bytes (what sgt_model_bytes reports): at it, the "
        "least promising leaves stop gathering split statistics (they still predict and learn their "
        "values); an ensemble's background members count against it. none = unbounded. Applies to "
        "the models the worker starts; a restored partition keeps its own.",
        _optional_int(MODEL_MIN_BYTES),
    ),
    Setting(
        "warm_up",
        1000,
        "SGT: finite values of a numeric feature for which its bin grid may still grow (never blocks "
        "learning; later values outside the grid fall in its end bins).",
        _int(1),
    ),
    Setting(
        "grace_start",
        10,
        "SGT: records of a new leaf's first block, times 2^depth; each attempt that keeps the leaf "
        "doubles it, up to grace_period.",
        _int(1),
    ),
    Setting(
        "leaf_model",
        None,
        "SGT: what a leaf predicts: linear (its value plus a linear term in the numeric features) or "
        "constant; none = the model's default (for sgt regression each leaf serves its linear term or "
        "its constant, whichever predicted better; else linear).",
        _optional_choice("linear", "constant"),
    ),
    Setting(
        "linear_lambda",
        None,
        "SGT: L2 regularisation of the linear leaves' weights (> 0); none = the model's default (0.1 "
        "boosted regression, else 0.01).",
        _optional_float(0.0, open_low=True),
    ),
    Setting(
        "proba",
        "calibrated",
        "SGT classification (model sgt): how probabilities are made: calibrated (the trees' softmax "
        "with a temperature and per-class biases fitted online on its log loss, mixed with a Gaussian "
        "naive Bayes while the trees are young), tree (the trees' "
        "softmax), mixed (the softmax mixed with a Gaussian naive Bayes by their log losses), blend "
        "(the softmax and the hierarchically smoothed class counts of the record's path) or hgs (the "
        "counts alone).",
        _choice(*PROBA_MODES),
    ),
    Setting(
        "linear_gate",
        1.5,
        "SGT classification (model sgt): a linear leaf's term is dropped when the leaf's new block, "
        "which it was not fitted on, has a lower loss without it with a t statistic above this (> 0); "
        "none keeps every term.",
        _optional_float(0.0, open_low=True),
    ),
    Setting(
        "multiclass_trees",
        "multi-output",
        "Boosted classification from a third class on: multi-output (each member one tree with a value "
        "per class), multi-output-reference (a value per class but the first) or per-class (each member "
        "one tree per class but the first).",
        _choice(*MULTICLASS_TREES),
    ),
    Setting(
        "model",
        "sgt",
        "Model of each partition: sgt (one tree, a committee for more than two classes) or boosted "
        "(a boosted ensemble of trees that answers concept drift).",
        _choice("sgt", "boosted"),
    ),
    Setting(
        "n_members",
        None,
        "Boosted: boosting stages; none = the library's default (classification 6, 10 from a third class;"
        " regression 5).",
        _optional_int(1, 1000),  # the library's bound
    ),
    Setting(
        "learning_rate",
        None,
        "Boosted: shrinkage of each member; none = the library's default (0.3 classification, 0.5 "
        "regression).",
        _optional_float(0.0, 1.0, open_low=True),
    ),
    Setting(
        "poisson_rate",
        None,
        "Boosted: online bagging rate; none = the library's default (1 classification, no bagging "
        "regression).",
        _optional_float(0.0, 100.0, open_low=True),
    ),
    Setting(
        "drift_threshold",
        None,
        "Boosted: Page-Hinkley drift alarm level; none = the library's default (35 classification, 50 "
        "regression).",
        _optional_float(0.0, open_low=True),
    ),
    Setting("metrics_window", 1000, "Records in the 'recent' prequential error window.", _int(1)),
    Setting("batch_size", 2000, "Most records taken from the consumer per poll.", _int(1, 1000000)),
    Setting("poll_timeout_seconds", 0.01, "Longest wait of one poll for records (seconds).", _float(0.0)),
    Setting(
        "fetch_wait_max_ms",
        500,
        "Consumer fetch.wait.max.ms: longest time the broker holds a fetch while it has less than "
        "fetch_min_bytes for it (librdkafka's default; a real Kafka broker answers as soon as it has "
        "them, so a record does not wait for it).",
        _int(0, 300000),
    ),
    Setting(
        "fetch_min_bytes",
        1,
        "Consumer fetch.min.bytes: bytes a broker gathers before it answers a fetch, waiting up to "
        "fetch_wait_max_ms (1 = answer as soon as there is a record).",
        _int(1, 100000000),
    ),
    Setting("linger_ms", 5, "Producer linger.ms: how long predictions wait to be batched.", _int(0, 300000)),
    Setting("session_timeout_ms", 10000, "Consumer group session timeout (ms).", _int(1000, 3600000)),
    Setting("heartbeat_interval_ms", 2000, "Consumer group heartbeat interval (ms).", _int(100, 3600000)),
    Setting(
        "shutdown_timeout_seconds",
        30.0,
        "Longest graceful shutdown (final checkpoint, flush, commit, leave) before the process exits anyway.",
        _float(0.0, open_low=True),
    ),
    Setting(
        "kafka_options",
        (),
        "Extra librdkafka properties for both clients, KEY=VALUE,... (e.g. security.protocol=SASL_SSL).",
        parse_client_options,
    ),
    Setting("log_level", "info", "Log level.", _choice("debug", "info", "warning", "error")),
)

_BY_NAME = {s.name: s for s in SETTINGS}


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
    model: str
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

    @property
    def state_topic_name(self) -> str | None:
        """The state topic in use (``auto`` resolved to ``<group_id>-state``), or None when off."""
        if self.state_topic == STATE_TOPIC_AUTO:
            return f"{self.group_id}-state"
        return self.state_topic

    def replace(self, **changes: Any) -> WorkerSettings:
        """A copy with some settings changed (values are validated like any other source)."""
        return dataclasses.replace(
            self, **{k: _check(_BY_NAME[k], v, "override") for k, v in changes.items()}
        )


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
    if state is not None and not _TOPIC_NAME.match(state):
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


#: ``SGT_*`` variables that are not settings but are read all the same: the settings file, and the
#: library's switch of its compiled kernels (``sgt.kernels``).
OTHER_VARIABLES = frozenset({"SGT_CONFIG", "SGT_KERNELS"})


def unknown_variables(env: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """The ``SGT_*`` variables of ``env`` that nothing reads, each with the closest known name (None
    when none is close), sorted by name.

    A misspelt variable would be ignored without a word (an unknown TOML key is refused); the worker
    warns about these rather than refusing them, since other tools may use the prefix too.
    """
    known = {s.env for s in SETTINGS} | OTHER_VARIABLES
    return [
        (name, next(iter(difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)), None))
        for name in sorted(env)
        if name.startswith("SGT_") and name not in known
    ]


def describe(name: str) -> str:
    """How error messages name a setting: ``setting NAME (--flag / SGT_ENV)``."""
    setting = _BY_NAME[name]
    return f"setting {setting.name} ({setting.flag} / {setting.env})"


def _check(setting: Setting, value: Any, source: str) -> Any:
    try:
        return setting.parse(value)
    except ValueError as exc:
        raise ConfigError(f"{describe(setting.name)} from {source}: got {value!r}, expected {exc}") from None


def read_toml(path: str | Path) -> dict[str, Any]:
    """The settings table of a TOML file: its ``[worker]`` table if present, else the top level."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise ConfigError(f"setting config (--config / SGT_CONFIG): cannot read {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"setting config (--config / SGT_CONFIG): {path} is not valid TOML: {exc}"
        ) from None
    table = data.get("worker", data)
    if not isinstance(table, dict):
        raise ConfigError(f"setting config: [worker] in {path} must be a table")
    unknown = sorted(set(table) - set(_BY_NAME) - {"worker"})
    if unknown:
        raise ConfigError(f"setting config: unknown setting(s) {', '.join(unknown)} in {path}")
    return dict(table)


def load_settings(
    flags: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    file_values: Mapping[str, Any] | None = None,
) -> WorkerSettings:
    """Resolve every setting: ``flags`` (non-None) > ``env`` (``SGT_*``) > ``file_values`` > default."""
    flags = flags or {}
    env = os.environ if env is None else env
    file_values = file_values or {}
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        if flags.get(setting.name) is not None:
            values[setting.name] = _check(setting, flags[setting.name], f"flag {setting.flag}")
        elif setting.env in env:
            values[setting.name] = _check(setting, env[setting.env], f"environment {setting.env}")
        elif setting.name in file_values:
            values[setting.name] = _check(setting, file_values[setting.name], "config file")
        else:
            values[setting.name] = _check(setting, setting.default, "default")
    return WorkerSettings(**values)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--config`` and one flag per setting; every flag defaults to None so precedence stays ours."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="TOML file of settings (env SGT_CONFIG); flags > env > file.",
    )
    for setting in SETTINGS:
        default = "none" if setting.default in (None, ()) else setting.default
        parser.add_argument(
            setting.flag,
            dest=setting.name,
            default=None,
            metavar=setting.name.rstrip("_").upper(),
            help=f"{setting.help} [env {setting.env}; default {default}]",
        )


def settings_from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> WorkerSettings:
    """Settings from parsed flags, the environment and the TOML file named by --config or SGT_CONFIG."""
    env = os.environ if env is None else env
    config_path = getattr(args, "config", None) or env.get("SGT_CONFIG")
    file_values = read_toml(config_path) if config_path else {}
    flags = {s.name: getattr(args, s.name, None) for s in SETTINGS}
    return load_settings(flags, env, file_values)
