"""Settings: precedence flags > environment > TOML file > defaults, and errors that name the setting."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from worker.cli import build_parser
from worker.config import (
    SETTINGS,
    ConfigError,
    load_settings,
    read_toml,
    settings_from_args,
    unknown_variables,
)

REQUIRED = {
    "--bootstrap-servers": ("SGT_BOOTSTRAP_SERVERS", "localhost:9092"),
    "--group-id": ("SGT_GROUP_ID", "sgt-worker"),
    "--features-topic": ("SGT_FEATURES_TOPIC", "features"),
    "--labels-topic": ("SGT_LABELS_TOPIC", None),
    "--predictions-topic": ("SGT_PREDICTIONS_TOPIC", "predictions"),
    "--dead-letter-topic": ("SGT_DEAD_LETTER_TOPIC", "dead-letters"),
    "--task": ("SGT_TASK", "classification"),
    "--checkpoint-dir": ("SGT_CHECKPOINT_DIR", "./checkpoints"),
    "--metrics-port": ("SGT_METRICS_PORT", 8000),
}


def test_the_design_settings_exist_with_their_flags_env_and_defaults() -> None:
    by_flag = {s.flag: s for s in SETTINGS}
    for flag, (env, default) in REQUIRED.items():
        assert (by_flag[flag].env, by_flag[flag].default) == (env, default)
    defaults = load_settings({}, env={})
    assert defaults.labels_topic is None and defaults.metrics_port == 8000 and defaults.features == ()


def test_every_setting_has_a_unique_flag_env_and_help() -> None:
    assert len({s.flag for s in SETTINGS}) == len({s.env for s in SETTINGS}) == len(SETTINGS)
    assert all(s.env.startswith("SGT_") and s.help for s in SETTINGS)


def _args(tmp_path: Path, argv: list[str], toml: str | None) -> object:
    if toml is not None:
        (tmp_path / "w.toml").write_text(toml)
        argv = [*argv, "--config", str(tmp_path / "w.toml")]
    return build_parser().parse_args(["run", *argv])


def test_precedence_flag_over_env_over_file_over_default(tmp_path: Path) -> None:
    toml = 'group_id = "file"\ntask = "regression"\nbins = 16\nfeatures_topic = "file-features"\n'
    env = {"SGT_GROUP_ID": "env", "SGT_TASK": "classification"}
    s = settings_from_args(_args(tmp_path, ["--group-id", "flag"], toml), env=env)
    assert (s.group_id, s.task, s.bins, s.features_topic, s.predictions_topic) == (
        "flag",
        "classification",
        16,
        "file-features",
        "predictions",
    )


def test_a_worker_table_and_sgt_config_env_are_read(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[worker]\nlabels_topic = "labels"\nfeatures = ["age:numeric", "plan:nominal"]\n')
    s = settings_from_args(build_parser().parse_args(["run"]), env={"SGT_CONFIG": str(path)})
    assert s.labels_topic == "labels"
    assert s.features == (("age", "numeric"), ("plan", "nominal"))


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ({"flags": {"task": "clustering"}}, "setting task (--task / SGT_TASK) from flag --task"),
        ({"env": {"SGT_METRICS_PORT": "http"}}, "setting metrics_port (--metrics-port / SGT_METRICS_PORT)"),
        ({"file": {"grace_period": 0}}, "grace_period"),
        ({"flags": {"delta": "1"}}, "expected none or a number > 0 and < 1"),
        ({"flags": {"bins": "5000"}}, "expected an integer >= 2 and <= 4096"),
        ({"flags": {"warm_up": "0"}}, "warm_up"),
        ({"flags": {"max_depth": "-1"}}, "none or an integer >= 0"),
        ({"flags": {"features": "a:text"}}, "NAME:numeric|nominal"),
        ({"flags": {"checkpoint_seconds": "nan"}}, "checkpoint_seconds"),
        ({"env": {"SGT_LAMBDA": "-1"}}, "lambda_"),
        ({"flags": {"max_message_bytes": "1000"}}, "max_message_bytes (--max-message-bytes"),
        ({"flags": {"max_message_bytes": "1000"}}, "an integer >= 65536 and <= 1000000000"),
        ({"flags": {"proba_top_k": "0"}}, "setting proba_top_k (--proba-top-k / SGT_PROBA_TOP_K)"),
        ({"flags": {"max_label_bytes": "0"}}, "setting max_label_bytes"),
        ({"env": {"SGT_MAX_CLASSES": "1"}}, "setting max_classes (--max-classes / SGT_MAX_CLASSES)"),
        ({"flags": {"max_classes": "x"}}, "an integer >= 2"),
        (
            {"flags": {"processing_guarantee": "exactly-once"}},
            "setting processing_guarantee (--processing-guarantee / SGT_PROCESSING_GUARANTEE) from flag "
            "--processing-guarantee: got 'exactly-once', expected one of at_least_once, exactly_once",
        ),
        ({"env": {"SGT_PROCESSING_GUARANTEE": "none"}}, "expected one of at_least_once, exactly_once"),
        (
            {"flags": {"processing_guarantee": "exactly_once", "checkpoint_seconds": "301"}},
            "setting checkpoint_seconds (--checkpoint-seconds / SGT_CHECKPOINT_SECONDS): 301 with "
            "processing_guarantee exactly_once; allowed are values up to 300",
        ),
    ],
)
def test_bad_values_name_the_setting_and_what_is_allowed(source: dict, message: str) -> None:
    with pytest.raises(
        ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("|", r"\|")
    ):
        load_settings(source.get("flags"), source.get("env", {}), source.get("file"))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            {"labels_topic": "features"},
            "setting labels_topic (--labels-topic / SGT_LABELS_TOPIC): 'features' is also the features_topic",
        ),
        ({"predictions_topic": "features"}, "'features' is also the features_topic"),
        ({"dead_letter_topic": "features"}, "'features' is also the features_topic"),
        ({"labels_topic": "l", "predictions_topic": "l"}, "'l' is also the labels_topic"),
        ({"dead_letter_topic": "predictions"}, "'predictions' is also the predictions_topic"),
    ],
)
def test_an_output_topic_may_not_be_an_input_or_another_output(flags: dict, message: str) -> None:
    """A dead-letter topic that is also the features topic would dead-letter its own letters forever."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(flags, env={})
    with pytest.raises(ConfigError, match="must be different topics"):
        load_settings({}, env={}).replace(**flags)


def test_exactly_once_makes_the_producer_transactional() -> None:
    from worker.kafka.clients import producer_config, transactional_id

    at_least_once = load_settings({}, env={})
    assert at_least_once.processing_guarantee == "at_least_once"
    assert "transactional.id" not in producer_config(at_least_once)
    derived = load_settings({"processing_guarantee": "exactly_once", "group_id": "g"}, env={})
    assert transactional_id(derived) == f"g-{socket.gethostname()}"
    s = load_settings(
        {"checkpoint_seconds": "100"},
        env={"SGT_PROCESSING_GUARANTEE": "exactly_once", "SGT_TRANSACTIONAL_ID": "worker-7"},
    )
    conf = producer_config(s)
    assert conf["transactional.id"] == "worker-7" and conf["transaction.timeout.ms"] == 300_000
    assert conf["enable.idempotence"] is True and conf["acks"] == "all"
    with pytest.raises(ConfigError, match=r"kafka_options.*transaction\.timeout\.ms"):
        load_settings({"kafka_options": "transaction.timeout.ms=1000"}, env={})


def test_unknown_keys_and_bad_toml_are_rejected(tmp_path: Path) -> None:
    path = tmp_path / "x.toml"
    path.write_text("grup_id = 'typo'\n")
    with pytest.raises(ConfigError, match="unknown setting"):
        read_toml(path)
    path.write_text("group_id = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        read_toml(path)


def test_help_explains_every_setting_and_bad_values_exit_2() -> None:
    exe = [sys.executable, "-m", "worker"]
    out = subprocess.run([*exe, "run", "--help"], capture_output=True, text=True, check=True).stdout
    for s in SETTINGS:
        assert s.flag in out and s.env in out
    bad = subprocess.run([*exe, "run", "--task", "clustering"], capture_output=True, text=True)
    assert bad.returncode == 2 and "setting task" in bad.stderr and "classification, regression" in bad.stderr


def test_the_worst_prediction_must_fit_half_a_message() -> None:
    load_settings({"proba_top_k": "10", "max_label_bytes": "256", "max_message_bytes": "65536"}, env={})
    with pytest.raises(
        ConfigError, match=r"proba_top_k .*max_label_bytes .*at most half of max_message_bytes"
    ):
        load_settings({"proba_top_k": "1000", "max_label_bytes": "1024"}, env={})


def test_the_producer_message_bound_is_the_setting_and_cannot_be_overridden() -> None:
    from worker.kafka.clients import producer_config

    assert (
        producer_config(load_settings({"max_message_bytes": "200000"}, env={}))["message.max.bytes"] == 200000
    )
    with pytest.raises(ConfigError, match=r"kafka_options.*message\.max\.bytes"):
        load_settings({"kafka_options": "message.max.bytes=20000000"}, env={})


def test_kafka_options_reach_both_clients_but_cannot_override_the_guarantees() -> None:
    from worker.kafka.clients import consumer_config, producer_config

    s = load_settings({"kafka_options": "security.protocol=SASL_SSL, sasl.password=hunter2"}, env={})
    assert consumer_config(s)["security.protocol"] == producer_config(s)["security.protocol"] == "SASL_SSL"
    assert consumer_config(s)["enable.auto.commit"] is False and producer_config(s)["acks"] == "all"
    file_table = load_settings({}, env={}, file_values={"kafka_options": {"client.rack": "a"}})
    assert file_table.kafka_options == (("client.rack", "a"),)
    with pytest.raises(ConfigError, match=r"kafka_options.*not acks"):
        load_settings({"kafka_options": "acks=1"}, env={})
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        load_settings({"kafka_options": "nonsense"}, env={})
    from worker.config import redacted

    assert redacted(s.kafka_options) == {"security.protocol": "SASL_SSL", "sasl.password": "***"}


@pytest.mark.parametrize(
    "extreme",
    [
        {"delta": "1e-300", "grace_period": "1", "lambda_": "0", "gamma": "0", "bins": "2", "warm_up": "1"},
        {"delta": "0.999", "bins": "4096", "max_depth": "0", "task": "regression"},
        {"max_categories": "1"},
        {"max_categories": "65533", "task": "regression"},
        {"linear_lambda": "1e-300", "leaf_model": "linear"},
        {"linear_lambda": "1e-300", "leaf_model": "linear", "task": "regression"},
    ],
)
def test_every_accepted_hyperparameter_builds_a_model(extreme: dict) -> None:
    from worker.core.sgt_models import new_model

    settings = load_settings(extreme, env={})
    model = new_model(settings)
    model.learn_one({"a": 1.0, "c": "x"}, 1)
    assert model.max_categories == settings.max_categories


@pytest.mark.parametrize("task", ["classification", "regression"])
def test_a_linear_lambda_the_library_refuses_is_refused_by_name(task: str) -> None:
    """linear_lambda = 0 passed the settings and then failed in the library, at the first assignment."""
    with pytest.raises(ConfigError, match=r"setting linear_lambda .*expected none or a number > 0"):
        load_settings({"linear_lambda": "0", "task": task}, env={})


def test_n_members_the_library_refuses_is_refused_by_name() -> None:
    """n_members = 100000 passed the settings and then failed in the library, at the first assignment."""
    assert new_model_of({"model": "boosted", "n_members": "1000"}).n_members == 1000
    with pytest.raises(ConfigError, match=r"setting n_members .*none or an integer >= 1 and <= 1000"):
        load_settings({"model": "boosted", "n_members": "1001"}, env={})


def new_model_of(flags: dict) -> Any:
    from worker.core.sgt_models import new_model

    return new_model(load_settings(flags, env={}))


def test_models_bound_their_categories_by_default() -> None:
    """Unlike the library's, the worker's default bounds every nominal feature's codes: its records
    come from producers it does not control."""
    from worker.core.sgt_models import new_model

    assert new_model(load_settings({}, env={})).max_categories == 256


def test_a_busy_metrics_port_is_reported_by_name() -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        args = ["run", "--metrics-host", "127.0.0.1", "--metrics-port", str(port)]
        out = subprocess.run([sys.executable, "-m", "worker", *args], capture_output=True, text=True)
    assert out.returncode == 2 and "setting metrics_port" in out.stderr and str(port) in out.stderr


def test_model_defaults_are_the_librarys() -> None:
    from sgt import SGTClassifier, SGTRegressor

    defaults = load_settings({}, env={})
    for cls in (SGTClassifier, SGTRegressor):
        params = cls().get_params()
        for name in (
            "grace_period",
            "bins",
            "warm_up",
            "max_depth",
            "grace_start",
        ):
            assert getattr(defaults, name) == params[name], (cls.__name__, name)
    assert SGTClassifier().get_params()["proba"] == defaults.proba
    assert SGTClassifier().get_params()["linear_gate"] == defaults.linear_gate
    assert defaults.delta is None  # each model class's own default (the boosted ones' differ)
    assert defaults.leaf_model is None  # each model class's own default
    assert defaults.lambda_ is None  # each model class's own default (the boosted classifier's differs)
    assert defaults.gamma is None  # (the boosted classifier's differs)
    assert defaults.linear_lambda is None and defaults.poisson_rate is None  # (the boosted regressor's)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, {"leaf_model": "linear", "proba": "calibrated", "grace_start": 10, "linear_gate": 1.5}),
        ({"proba": "tree"}, {"proba": "tree"}),
        ({"linear_gate": "none"}, {"linear_gate": None}),
        ({"linear_gate": "2"}, {"linear_gate": 2.0}),
        ({"model": "boosted"}, {"multiclass_trees": "multi-output"}),
        ({"model": "boosted", "multiclass_trees": "per-class"}, {"multiclass_trees": "per-class"}),
        (
            {"model": "sgt", "leaf_model": "constant", "proba": "hgs", "grace_start": "50"},
            {"leaf_model": "constant", "proba": "hgs", "grace_start": 50},
        ),
        ({"model": "sgt"}, {"leaf_model": "linear", "proba": "calibrated", "linear_gate": 1.5}),
        ({"drift_threshold": "20"}, {"drift_threshold": 20.0}),  # the default classifier answers drift
        ({}, {"drift_threshold": 50.0}),
        ({"model": "boosted"}, {"leaf_model": "linear", "grace_start": 10}),
        (
            {"model": "boosted", "task": "regression"},
            {"leaf_model": "linear", "linear_lambda": 0.1, "poisson_rate": None},
        ),
        ({"model": "boosted"}, {"linear_lambda": 0.01, "poisson_rate": 1.0}),
        ({"model": "boosted", "task": "regression", "poisson_rate": "1"}, {"poisson_rate": 1.0}),
        ({"linear_lambda": "0.05"}, {"linear_lambda": 0.05}),
        ({"model": "boosted", "leaf_model": "constant"}, {"leaf_model": "constant"}),
        ({}, {"lambda_": 0.1}),
        ({"task": "regression"}, {"lambda_": 0.1}),
        (
            {"model": "boosted"},
            {
                "lambda_": 0.5,
                "learning_rate": 0.3,
                "drift_threshold": 35.0,
                "drift_delta": 0.005,
                "gamma": 0.02,
            },
        ),
        (
            {"model": "boosted", "task": "regression"},
            {"lambda_": 0.1, "learning_rate": 0.5, "drift_threshold": 50.0, "gamma": 0.1},
        ),
        ({}, {"gamma": 0.1}),
        ({}, {"delta": 1e-3}),
        ({"model": "boosted"}, {"delta": None}),  # by the number of classes
        ({"model": "boosted", "task": "regression"}, {"delta": 0.01}),
        ({"model": "boosted", "delta": "0.05"}, {"delta": 0.05}),
        ({"model": "boosted", "gamma": "0.3"}, {"gamma": 0.3}),
        ({"model": "boosted", "lambda_": "0.2"}, {"lambda_": 0.2}),
        ({"lambda_": "none"}, {"lambda_": 0.1}),
    ],
)
def test_the_model_settings_reach_the_model(settings: dict, expected: dict) -> None:
    from worker.core.sgt_models import new_model

    params = new_model(load_settings(settings, env={})).get_params()
    assert {k: params[k] for k in expected} == expected


@pytest.mark.parametrize(
    ("name", "value", "allowed"),
    [
        ("leaf_model", "cubic", "none or one of linear, constant"),
        ("proba", "smooth", "one of calibrated, mixed, blend, hgs, tree"),
        ("linear_gate", "0", "none or a number > 0"),
        ("multiclass_trees", "shared", "one of per-class, multi-output, multi-output-reference"),
    ],
)
def test_bad_model_settings_name_the_allowed_values(name: str, value: str, allowed: str) -> None:
    with pytest.raises(ConfigError, match=allowed):
        load_settings({name: value}, env={})


def test_the_state_topic_is_the_groups_own_by_default_and_can_be_named_or_turned_off(tmp_path: Path) -> None:
    assert load_settings({"group_id": "fraud"}, env={}).state_topic_name == "fraud-state"
    assert load_settings({}, env={"SGT_STATE_TOPIC": "none"}).state_topic_name is None
    assert load_settings({"state_topic": "states.v1"}, env={}).state_topic_name == "states.v1"
    path = tmp_path / "c.toml"
    path.write_text('state_topic = "from-file"\nstate_topic_replication_factor = 3\n')
    s = settings_from_args(build_parser().parse_args(["run", "--config", str(path)]), env={})
    assert (s.state_topic_name, s.state_topic_replication_factor) == ("from-file", 3)
    assert s.state_topic_min_insync_replicas is None
    assert load_settings({}, env={}).state_topic_replication_factor == -1  # the broker's default


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        ({"state_topic": "bad name"}, "setting state_topic (--state-topic / SGT_STATE_TOPIC) from flag"),
        ({"state_topic": "x" * 250}, "auto, none, or a Kafka topic name"),
        ({"group_id": "team/a"}, "auto names it 'team/a-state' after group_id, which is not a valid topic"),
        ({"state_topic": "features"}, "'features' is also the features_topic; the state topic must be"),
        ({"group_id": "x", "predictions_topic": "x-state"}, "'x-state' is also the predictions_topic"),
        ({"state_topic_replication_factor": "0"}, "-1 (the broker's default.replication.factor) or an"),
        ({"state_topic_min_insync_replicas": "0"}, "setting state_topic_min_insync_replicas"),
    ],
)
def test_bad_state_topic_settings_are_refused_clearly(flags: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_settings(flags, env={})


def test_the_model_memory_budget_reaches_the_model_and_bad_values_are_refused_by_name() -> None:
    """model_max_bytes: 32 MiB by default, none for unbounded, from a flag, an SGT_* variable or TOML;
    a value below 64 KiB, or not a whole number, names the setting and what it accepts."""
    from worker.config import MODEL_MAX_BYTES

    assert MODEL_MAX_BYTES == 32 * 1024 * 1024
    assert new_model_of({}).max_bytes == MODEL_MAX_BYTES
    assert new_model_of({"model": "boosted"}).max_bytes == MODEL_MAX_BYTES
    assert new_model_of({"model_max_bytes": "none", "task": "regression"}).max_bytes is None
    assert new_model_of({"model_max_bytes": "65536"}).max_bytes == 65536
    assert load_settings({}, env={"SGT_MODEL_MAX_BYTES": "1048576"}).model_max_bytes == 1048576
    assert load_settings({}, env={}, file_values={"model_max_bytes": 2097152}).model_max_bytes == 2097152
    for bad in ("65535", "0", "-1", "32MiB", "1e6", "true"):
        with pytest.raises(ConfigError, match=r"setting model_max_bytes .*none or an integer >= 65536"):
            load_settings({"model_max_bytes": bad}, env={})


@pytest.mark.parametrize(("heartbeat", "session"), [(20000, 6000), (6000, 6000)])
def test_a_heartbeat_not_below_the_session_timeout_is_refused(heartbeat: int, session: int) -> None:
    """Kafka requires heartbeat.interval.ms < session.timeout.ms; librdkafka accepts any pair, and the
    group then expires the member between two heartbeats: its partitions are lost for good."""
    flags = {"heartbeat_interval_ms": heartbeat, "session_timeout_ms": session}
    with pytest.raises(ConfigError) as caught:
        load_settings(flags, env={})
    message = str(caught.value)
    assert "setting heartbeat_interval_ms (--heartbeat-interval-ms / SGT_HEARTBEAT_INTERVAL_MS)" in message
    assert f"below session_timeout_ms ({session})" in message and "at most a third" in message


def test_a_heartbeat_below_the_session_timeout_is_accepted() -> None:
    settings = load_settings({"heartbeat_interval_ms": 2000, "session_timeout_ms": 6000}, env={})
    assert (settings.heartbeat_interval_ms, settings.session_timeout_ms) == (2000, 6000)


def test_unknown_sgt_variables_are_named_with_the_closest_known_one() -> None:
    """A misspelt variable is otherwise ignored without a word (an unknown TOML key exits 2); it is a
    warning, not an error, since other tools may use the SGT_ prefix too."""
    env = {
        "SGT_CHECKPIONT_DIR": "/tmp/x",
        "SGT_GROUP_ID": "g",
        "SGT_KERNELS": "0",  # the library's own switch
        "SGT_CONFIG": "w.toml",
        "SGT_SOMETHING_ELSE": "1",
        "PATH": "/bin",
    }
    assert unknown_variables(env) == [
        ("SGT_CHECKPIONT_DIR", "SGT_CHECKPOINT_DIR"),
        ("SGT_SOMETHING_ELSE", None),
    ]


def test_max_classes_is_capped_where_one_record_alone_would_take_the_model_call_s_budget() -> None:
    """Past 10,000 classes one record costs the single tree's committee about 0.2 s or more (a tree a
    class, about 20 us each), so no cut of a run keeps checkpoints and signals on time."""
    assert load_settings({"max_classes": 10000}, env={}).max_classes == 10000
    with pytest.raises(ConfigError) as caught:
        load_settings({"max_classes": 20000}, env={})
    message = str(caught.value)
    assert "setting max_classes (--max-classes / SGT_MAX_CLASSES)" in message
    assert "expected an integer >= 2 and <= 10000" in message


def test_the_fetch_settings_suit_a_real_broker_and_reach_every_consumer() -> None:
    from worker.kafka.clients import consumer_config
    from worker.state_topic.admin import reader_config
    from worker.state_topic.mirror import mirror_config

    defaults = load_settings({}, env={})
    # librdkafka's own defaults: a real broker answers a fetch as soon as it holds fetch.min.bytes
    assert (defaults.fetch_wait_max_ms, defaults.fetch_min_bytes) == (500, 1)
    assert consumer_config(defaults)["fetch.min.bytes"] == 1
    s = load_settings({"fetch_min_bytes": "4096"}, env={"SGT_FETCH_WAIT_MAX_MS": "200"})
    assert (consumer_config(s)["fetch.wait.max.ms"], consumer_config(s)["fetch.min.bytes"]) == (200, 4096)
    # the state-topic reader fetches with the same settings, not a fixed wait of its own
    reader = reader_config(mirror_config(s))
    assert (reader["fetch.wait.max.ms"], reader["fetch.min.bytes"]) == (200, 4096)
    # kafka_options set them for both consumers alike
    s = load_settings({"kafka_options": "fetch.wait.max.ms=77"}, env={})
    assert (
        consumer_config(s)["fetch.wait.max.ms"]
        == reader_config(mirror_config(s))["fetch.wait.max.ms"]
        == "77"
    )
    for bad in ("0", "100000001", "x"):
        with pytest.raises(ConfigError, match=r"fetch_min_bytes \(--fetch-min-bytes / SGT_FETCH_MIN_BYTES\)"):
            load_settings({"fetch_min_bytes": bad}, env={})
