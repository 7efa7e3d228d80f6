"""`SETTINGS`: every worker setting declared once (name, flag, ``SGT_*`` variable, TOML key, default,
help and the parser of its values).

>>> describe("group_id")
'setting group_id (--group-id / SGT_GROUP_ID)'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sgt.boosted import MULTICLASS_TREES
from sgt.classifier import PROBA_MODES
from sgt.features import MAX_CATEGORIES
from worker.config.parsers import (
    STATE_TOPIC_AUTO,
    ConfigError,
    float_in,
    int_in,
    one_of,
    optional_float_in,
    optional_int_in,
    optional_one_of,
    optional_text_value,
    parse_client_options,
    parse_feature_spec,
    parse_state_topic,
    replication_factor,
    text_value,
)
from worker.core.join import JOIN_MAX_BYTES
from worker.core.merge import MERGE_MAX_BYTES
from worker.core.records import MAX_TS_AHEAD
from worker.core.schema import MAX_FEATURES

GUARANTEES = ("at_least_once", "exactly_once")
"""The values of ``processing_guarantee`` (Kafka Streams' names; see docs/reliability.md)."""

MODELS = ("sgt", "adaptive", "boosted")
"""The values of ``model``: the model of each partition (worker.core.sgt_models.new_model)."""

DEFAULT_MODEL = {"classification": "adaptive", "regression": "sgt"}
"""The model of each partition by task where ``model`` is none (`WorkerSettings.partition_model`): the
classifier that answers drift was as accurate as the plain one on stationary streams and far more so on
drifting ones; the regressor that does lost on stationary ones (docs/decisions.md, "The worker's model")."""

MODEL_MAX_BYTES = 32 * 1024 * 1024
"""Default ``model_max_bytes``: 32 MiB a partition, room for what the models take on long runs while
bounding a worker's partitions (a dozen in a few hundred MB). On a drifting SEA stream the default
single tree passed it after about 7 million records (43 MB after 10 million unbounded) and the
boosted ensemble took at most 21 MB (BENCHMARKS.md section 12): where the budget binds it costs
little accuracy (the single tree within it 86.98% against 86.87% unbounded, at 2 MiB 87.02%)."""

MODEL_MIN_BYTES = 65536
"""Smallest ``model_max_bytes``: below it a model's roots alone could exceed the budget."""

MAX_TRANSACTION_SECONDS = 300.0
"""Longest ``checkpoint_seconds`` with exactly_once: the transaction timeout is three times it."""


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
        "bootstrap_servers",
        "localhost:9092",
        "Kafka bootstrap servers, host:port[,host:port...].",
        text_value,
    ),
    Setting("group_id", "sgt-worker", "Consumer group shared by all workers of one deployment.", text_value),
    Setting(
        "features_topic",
        "features",
        "Topic of feature records (JSON objects with x, optional y).",
        text_value,
    ),
    Setting(
        "labels_topic",
        None,
        "Topic of label records {id, y}, co-partitioned with the features topic; none = inline labels only.",
        optional_text_value,
    ),
    Setting("predictions_topic", "predictions", "Topic the predictions are written to.", text_value),
    Setting(
        "dead_letter_topic",
        "dead-letters",
        "Topic unusable records are copied to, byte for byte (a prefix when larger than max_message_bytes).",
        text_value,
    ),
    Setting(
        "task",
        "classification",
        "Learning task: classification or regression.",
        one_of("classification", "regression"),
    ),
    Setting(
        "checkpoint_dir", "./checkpoints", "Directory of the per-partition checkpoint files.", text_value
    ),
    Setting(
        "state_topic",
        STATE_TOPIC_AUTO,
        "Compacted topic every checkpoint is also written to, so a worker with an empty checkpoint_dir "
        "continues any partition: auto = <group_id>-state, none = off (the directory alone).",
        parse_state_topic,
    ),
    Setting(
        "state_topic_replication_factor",
        -1,
        "Replication factor of the state topic when the worker creates it (-1 = the broker's default).",
        replication_factor,
    ),
    Setting(
        "state_topic_min_insync_replicas",
        None,
        "min.insync.replicas of the state topic when the worker creates it (none = the broker's default).",
        optional_int_in(1),
    ),
    Setting(
        "metrics_port",
        8000,
        "Port of the HTTP server for /metrics, /healthz and /readyz (0 = none).",
        int_in(0, 65535),
    ),
    Setting("metrics_host", "0.0.0.0", "Address the metrics HTTP server binds to.", text_value),
    Setting(
        "checkpoint_records", 100000, "Checkpoint a partition after this many processed records.", int_in(1)
    ),
    Setting(
        "checkpoint_seconds",
        30.0,
        "Checkpoint a changed partition at least this often (seconds).",
        float_in(0.0, open_low=True),
    ),
    Setting(
        "unhealthy_after_checkpoint_failures",
        10,
        "/healthz and /readyz answer 503 once a partition's checkpoint has failed this many times in a "
        "row (retries back off from 0.5 s to 5 s: 10 failures take about 30 s), until one succeeds.",
        int_in(1, 1000000),
    ),
    Setting(
        "processing_guarantee",
        "at_least_once",
        "at_least_once: outputs may repeat after a crash (those of the records since the last checkpoint); "
        "exactly_once: outputs, input offsets and checkpoints commit in Kafka transactions, so a "
        "read_committed consumer sees each output once.",
        one_of(*GUARANTEES),
    ),
    Setting(
        "transactional_id",
        None,
        "exactly_once: the output producer's transactional.id, unique per worker process and stable across "
        "its restarts; none = {group_id}-{host name}.",
        optional_text_value,
    ),
    Setting(
        "join_max_pending",
        100000,
        "Most entries waiting on each side of a partition's join buffer.",
        int_in(1),
    ),
    Setting(
        "join_max_bytes",
        JOIN_MAX_BYTES,
        "Most bytes held on each side of a partition's join buffer (an entry counts its record's bytes, "
        "256 more and 56 per feature value); past it the oldest entries leave, as past join_max_pending.",
        int_in(1),
    ),
    Setting(
        "merge_max_bytes",
        MERGE_MAX_BYTES,
        "Most bytes of fetched records of one topic partition waiting for the other topic's records "
        "(for the event-time merge); past it fetching that topic partition pauses until half are used.",
        int_in(1),
    ),
    Setting(
        "join_max_age_seconds",
        3600.0,
        "Drop join-buffer entries older than this, in event time (seconds).",
        float_in(0.0, open_low=True),
    ),
    Setting(
        "max_ts_ahead_seconds",
        MAX_TS_AHEAD,
        "A record whose ts lies more than this many seconds after its Kafka timestamp is dead-lettered "
        "as future_ts (it would move the event clock and expire the join buffer).",
        float_in(0.0),
    ),
    Setting(
        "max_record_bytes", 1048576, "Records larger than this are dead-lettered as oversized.", int_in(1)
    ),
    Setting(
        "max_message_bytes",
        1000000,
        "Largest message the worker produces (the producer's message.max.bytes); keep it at most the "
        "broker's and output topics' max.message.bytes. A dead letter larger than this is cut to a prefix.",
        int_in(65536, 1000000000),
    ),
    Setting(
        "proba_top_k",
        10,
        "Classes a prediction's proba lists: the most probable ones (classification).",
        int_in(1, 10000),
    ),
    Setting(
        "interval_coverage",
        None,
        "Regression: coverage in (0, 1) of the interval [low, high] each prediction carries, tracked "
        "online from the prequential residuals; none = no interval.",
        optional_float_in(0.0, 1.0, open_low=True, open_high=True),
    ),
    Setting(
        "explain",
        0,
        "Features each prediction's explain lists: the k largest contributions to its score; 0 = off "
        "(explaining learns a run one record at a time, which is slower).",
        int_in(0, 100),
    ),
    Setting(
        "max_label_bytes",
        256,
        "Longest class label (UTF-8 bytes); a longer one is dead-lettered as label_too_long.",
        int_in(1, 65536),
    ),
    Setting(
        "max_classes",
        100,
        "Most classes a partition's model learns; a label that would add another is dead-lettered "
        "as too_many_classes.",
        int_in(2, 10000),
    ),
    Setting(
        "max_features",
        MAX_FEATURES,
        "Most feature names a partition infers (no features declared); a record that would add "
        "another is dead-lettered as unknown_feature.",
        int_in(1),
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
        optional_float_in(0.0, 1.0, open_low=True, open_high=True),
    ),
    Setting("grace_period", 100, "SGT: instances a leaf sees between split attempts.", int_in(1)),
    Setting(
        "lambda_",
        None,
        "SGT: L2 regularisation of leaf values; none = the model's default (0.5 for boosted "
        "classification, else 0.1).",
        optional_float_in(0.0),
    ),
    Setting(
        "gamma",
        None,
        "SGT: penalty per new leaf; none = the model's default (0.02 for boosted classification, else 0.1).",
        optional_float_in(0.0),
    ),
    Setting("bins", 64, "SGT: bins per numeric feature.", int_in(2, 4096)),
    Setting("max_depth", None, "SGT: deepest a tree may grow; none = unlimited.", optional_int_in(0)),
    Setting(
        "max_categories",
        256,
        "SGT: categories of a nominal feature with codes of their own; later ones share one "
        "(bounds memory when a feature has ever-new values, such as an id).",
        int_in(1, MAX_CATEGORIES - 1),  # the library's bound (codes are uint16)
    ),
    Setting(
        "model_max_bytes",
        MODEL_MAX_BYTES,
        "Memory budget of a partition's model, in bytes (what sgt_model_bytes reports): at it, the "
        "least promising leaves stop gathering split statistics (they still predict and learn their "
        "values); an ensemble's background members count against it. A budget also turns off the "
        "single classifier's naive Bayes per leaf, whose memory it does not bound. none = unbounded. "
        "Applies to the models the worker starts; a restored partition keeps its own.",
        optional_int_in(MODEL_MIN_BYTES),
    ),
    Setting(
        "warm_up",
        1000,
        "SGT: finite values of a numeric feature for which its bin grid may still grow (never blocks "
        "learning; later values outside the grid fall in its end bins).",
        int_in(1),
    ),
    Setting(
        "grace_start",
        10,
        "SGT: records of a new leaf's first block, times 2^depth; each attempt that keeps the leaf "
        "doubles it, up to grace_period.",
        int_in(1),
    ),
    Setting(
        "leaf_model",
        None,
        "SGT: what a leaf predicts: linear (its value plus a linear term in the numeric features) or "
        "constant; none = the model's default (for sgt regression a tree of each leaf model, the one "
        "that predicted the latest records best serving; for adaptive regression a leaf's choice "
        "between the two; else linear).",
        optional_one_of("linear", "constant"),
    ),
    Setting(
        "linear_lambda",
        None,
        "SGT: L2 regularisation of the linear leaves' weights (> 0); none = the model's default (0.1 "
        "boosted regression, else 0.01).",
        optional_float_in(0.0, open_low=True),
    ),
    Setting(
        "proba",
        "calibrated",
        "SGT classification (models sgt and adaptive; adaptive: calibrated or tree): how probabilities "
        "are made: calibrated (the trees' softmax with a temperature and per-class biases fitted online "
        "on its log loss, mixed with a Gaussian naive Bayes while the trees are young), tree (the "
        "trees' softmax), mixed (the softmax mixed with a Gaussian naive Bayes by their log losses), blend "
        "(the softmax and the hierarchically smoothed class counts of the record's path) or hgs (the "
        "counts alone).",
        one_of(*PROBA_MODES),
    ),
    Setting(
        "linear_gate",
        1.5,
        "SGT classification (models sgt and adaptive): a linear leaf's term is dropped when the leaf's "
        "new block, which it was not fitted on, has a lower loss without it with a t statistic above "
        "this (> 0); none keeps every term.",
        optional_float_in(0.0, open_low=True),
    ),
    Setting(
        "multiclass_trees",
        "multi-output",
        "Boosted classification from a third class on: multi-output (each member one tree with a value "
        "per class), multi-output-reference (a value per class but the first) or per-class (each member "
        "one tree per class but the first).",
        one_of(*MULTICLASS_TREES),
    ),
    Setting(
        "model",
        None,
        "Model of each partition: sgt (one tree, a committee for more than two classes), adaptive (the "
        "same tree answering concept drift: a warning grows a background tree, a drift swaps it in) or "
        "boosted (a boosted ensemble of trees that answers concept drift); none = by task: adaptive for "
        "classification, sgt for regression.",
        optional_one_of(*MODELS),
    ),
    Setting(
        "n_members",
        None,
        "Boosted: boosting stages; none = the library's default (classification 6, 10 from a third class;"
        " regression 5).",
        optional_int_in(1, 1000),  # the library's bound
    ),
    Setting(
        "learning_rate",
        None,
        "Boosted: shrinkage of each member; none = the library's default (0.3 classification, 0.5 "
        "regression).",
        optional_float_in(0.0, 1.0, open_low=True),
    ),
    Setting(
        "poisson_rate",
        None,
        "Boosted: online bagging rate; none = the library's default (1 classification, no bagging "
        "regression).",
        optional_float_in(0.0, 100.0, open_low=True),
    ),
    Setting(
        "drift_threshold",
        None,
        "Boosted and adaptive: Page-Hinkley drift alarm level; none = the library's default (boosted: 35 "
        "classification, 50 regression; adaptive: 50).",
        optional_float_in(0.0, open_low=True),
    ),
    Setting("metrics_window", 1000, "Records in the 'recent' prequential error window.", int_in(1)),
    Setting("batch_size", 2000, "Most records taken from the consumer per poll.", int_in(1, 1000000)),
    Setting("poll_timeout_seconds", 0.01, "Longest wait of one poll for records (seconds).", float_in(0.0)),
    Setting(
        "fetch_wait_max_ms",
        500,
        "Consumer fetch.wait.max.ms: longest time the broker holds a fetch while it has less than "
        "fetch_min_bytes for it (librdkafka's default; a real Kafka broker answers as soon as it has "
        "them, so a record does not wait for it).",
        int_in(0, 300000),
    ),
    Setting(
        "fetch_min_bytes",
        1,
        "Consumer fetch.min.bytes: bytes a broker gathers before it answers a fetch, waiting up to "
        "fetch_wait_max_ms (1 = answer as soon as there is a record).",
        int_in(1, 100000000),
    ),
    Setting(
        "linger_ms", 5, "Producer linger.ms: how long predictions wait to be batched.", int_in(0, 300000)
    ),
    Setting("session_timeout_ms", 10000, "Consumer group session timeout (ms).", int_in(1000, 3600000)),
    Setting("heartbeat_interval_ms", 2000, "Consumer group heartbeat interval (ms).", int_in(100, 3600000)),
    Setting(
        "shutdown_timeout_seconds",
        30.0,
        "Longest graceful shutdown (final checkpoint, flush, commit, leave) before the process exits anyway.",
        float_in(0.0, open_low=True),
    ),
    Setting(
        "kafka_options",
        (),
        "Extra librdkafka properties for both clients, KEY=VALUE,... (e.g. security.protocol=SASL_SSL).",
        parse_client_options,
    ),
    Setting("log_level", "info", "Log level.", one_of("debug", "info", "warning", "error")),
)

BY_NAME = {s.name: s for s in SETTINGS}


def describe(name: str) -> str:
    """How error messages name a setting: ``setting NAME (--flag / SGT_ENV)``."""
    setting = BY_NAME[name]
    return f"setting {setting.name} ({setting.flag} / {setting.env})"


def check(setting: Setting, value: Any, source: str) -> Any:
    try:
        return setting.parse(value)
    except ValueError as exc:
        raise ConfigError(f"{describe(setting.name)} from {source}: got {value!r}, expected {exc}") from None
