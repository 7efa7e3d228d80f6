"""The load generator: token-bucket pacing, record formats, file sources, and real production to a broker."""

from __future__ import annotations

import argparse
import doctest
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from confluent_kafka.admin import AdminClient
from hypothesis import given
from hypothesis import strategies as st

import worker.devtools.produce as produce_module
from tests.kafka_util import read_all
from worker.devtools.produce import (
    InputFileError,
    Row,
    TokenBucket,
    add_arguments,
    feature_record,
    label_record,
    produce_stream,
    read_rows,
    run,
)
from worker.devtools.streams import SEA, Subscriptions

EPS = 1e-6
DEFAULT_BURST = 10  # 10 ms worth of records at 1,000 records/s


def test_docstring_examples_pass() -> None:
    result = doctest.testmod(produce_module)
    assert result.attempted >= 6
    assert result.failed == 0


# ------------------------------------------------------------------------------------ token bucket


@given(
    rate=st.floats(1.0, 100_000.0),
    burst=st.integers(1, 500),
    steps=st.lists(st.tuples(st.floats(0.0, 0.05), st.integers(0, 2000)), min_size=1, max_size=60),
)
def test_bucket_never_grants_more_than_rate_allows(
    rate: float, burst: int, steps: list[tuple[float, int]]
) -> None:
    bucket = TokenBucket(rate, burst, now=0.0)
    now = 0.0
    granted = 0
    for gap, wanted in steps:
        now += gap
        got = bucket.take(wanted, now)
        assert 0 <= got <= wanted
        granted += got
        assert granted <= burst + rate * now + EPS


@given(
    rate=st.floats(1.0, 10_000.0),
    burst=st.integers(1, 100),
    fractions=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=60),
)
def test_bucket_grants_the_full_rate_when_asked_often_enough(
    rate: float, burst: int, fractions: list[float]
) -> None:
    bucket = TokenBucket(rate, burst, now=0.0)
    now = 0.0
    granted = bucket.take(10**9, now)
    for fraction in fractions:
        now += fraction * (burst - 1) / rate  # under one token is left, so the bucket never overflows
        granted += bucket.take(10**9, now)
    assert granted >= burst + rate * now - 1 - EPS


def test_bucket_wait_time_is_exactly_until_the_next_token() -> None:
    bucket = TokenBucket(rate=50.0, burst=2, now=10.0)
    assert bucket.take(5, 10.0) == 2
    assert bucket.wait_time(10.0) == pytest.approx(0.02)
    assert bucket.take(1, 10.019) == 0
    assert bucket.take(1, 10.0201) == 1
    assert bucket.wait_time(10.03) == pytest.approx(0.01)  # 0.005 left at 10.0201, +0.495 since
    with pytest.raises(ValueError):
        TokenBucket(rate=0.0, burst=1, now=0.0)


# ------------------------------------------------------------------------------------------- records


@given(
    x=st.dictionaries(
        st.text(min_size=1, max_size=5),
        st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5)),
        max_size=5,
    ),
    y=st.one_of(st.none(), st.integers(-5, 5), st.floats(allow_nan=False, allow_infinity=False)),
)
def test_feature_record_round_trips(x: dict[str, float | str], y: int | float | None) -> None:
    doc = orjson.loads(feature_record("s-000042", x, y, 12.5))
    expected = {"id": "s-000042", "x": x, "ts": 12.5} | ({} if y is None else {"y": y})
    assert doc == expected
    assert orjson.loads(label_record("s-000042", 1)) == {"id": "s-000042", "y": 1}


def test_csv_rows_parse_numbers_text_and_empty_cells(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("age,plan,usage,label\n41,pro,3.5,1\n,free,-2e3,\n7,basic,nan,yes\n", encoding="utf-8")
    rows = list(read_rows(path, "label"))
    assert rows[0] == ({"age": 41, "plan": "pro", "usage": 3.5}, 1)
    assert rows[1] == ({"age": None, "plan": "free", "usage": -2000.0}, None)
    assert rows[2][1] == "yes" and rows[2][0]["usage"] != rows[2][0]["usage"]  # nan stays a float NaN
    assert next(read_rows(path, "missing")) == ({"age": 41, "plan": "pro", "usage": 3.5, "label": 1}, None)


def test_json_lines_rows_and_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1, "b": "x", "y": 0}\n\n{"a": 2.5, "y": 1}\n')
    assert list(read_rows(path, "y")) == [({"a": 1, "b": "x"}, 0), ({"a": 2.5}, 1)]
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"a": 1}\n[1, 2]\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        list(read_rows(bad, "y"))


@pytest.mark.parametrize(
    ("name", "content", "error"),
    [
        ("extra.csv", b"a,y\n1,0\n2,1,5\n", r"extra.csv:3: 3 fields, the header has 2"),
        ("short.csv", b"a,b,y\n1,2,0\n\n3\n", r"short.csv:4: 1 fields, the header has 3"),
        ("latin1.csv", b"a,y\n1,0\ncaf\xe9,1\n", r"latin1.csv:3: not UTF-8 text"),
        ("broken.jsonl", b'{"a": 1}\n{"a": \n', r"broken.jsonl:2: not JSON"),
        ("latin1.jsonl", b'{"a": 1}\n{"a": "caf\xe9"}\n', r"latin1.jsonl:2: not UTF-8 text"),
    ],
)
def test_a_row_that_cannot_be_read_is_named_after_the_rows_before_it(
    tmp_path: Path, name: str, content: bytes, error: str
) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    rows = read_rows(path, "y")
    assert next(rows)[0]["a"] == 1
    with pytest.raises(InputFileError, match=error):
        list(rows)


def test_csv_rows_drop_a_byte_order_mark_and_keep_quoted_newlines(tmp_path: Path) -> None:
    path = tmp_path / "excel.csv"
    path.write_bytes(b'\xef\xbb\xbfage,note,y\r\n41,"two\r\nlines",1\r\n')
    assert list(read_rows(path, "y")) == [({"age": 41, "note": "two\r\nlines"}, 1)]


def test_cli_refuses_a_file_it_cannot_read_before_connecting(tmp_path: Path, capsys: Any) -> None:
    missing = tmp_path / "nope.csv"
    assert run(parser().parse_args(["--bootstrap-servers", "127.0.0.1:9", "--file", str(missing)])) == 2
    assert f"cannot read --file {missing}" in capsys.readouterr().err


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--label-delay", "1"], "--label-delay needs --labels-topic"),
        (["--label-delay", "-1", "--labels-topic", "l"], "--label-delay must be >= 0 seconds, got -1"),
        (["--rate", "-1"], "--rate must be >= 0 records per second (0: as fast as possible), got -1"),
        (["--rate", "nan"], "--rate must be >= 0"),
        (["--count", "-3"], "--count must be >= 0, got -3"),
        (["--duration", "0"], "--duration must be > 0 seconds, got 0"),
        (["--partitions", "0"], "--partitions must be >= 1, got 0"),
    ],
)
def test_cli_names_a_bad_option_before_connecting(argv: list[str], message: str, capsys: Any) -> None:
    assert run(parser().parse_args(["--bootstrap-servers", "127.0.0.1:9", *argv])) == 2
    assert f"produce: {message}" in capsys.readouterr().err


def test_cli_rejects_inconsistent_options() -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--count", "1", "--duration", "1"])
    with pytest.raises(SystemExit):
        parser().parse_args(["--stream", "nope"])


# -------------------------------------------------------------------------------- against a broker

Topics = Callable[..., dict[str, str]]


def decoded(messages: list) -> list[dict]:
    return [orjson.loads(m.value()) for m in messages]


@pytest.mark.kafka
def test_inline_labels_as_fast_as_possible(kafka_bootstrap: str, topic_factory: Topics) -> None:
    topic = topic_factory(4, "features")["features"]
    stream = SEA(seed=5)
    before = time.time()
    result = produce_stream(kafka_bootstrap, topic, None, stream, count=3000, rate=None)
    after = time.time()
    assert (result.features, result.labels, result.failed) == (3000, 0, 0)
    messages = read_all(kafka_bootstrap, topic, 4, expect=3000)
    assert len(messages) == 3000
    docs = {doc["id"]: doc for doc in decoded(messages)}
    expected = stream.take(3000)
    for i in (0, 1, 1500, 2999):
        doc = docs[f"s-{i:06d}"]
        assert (doc["x"], doc["y"]) == expected[i]
        assert before <= doc["ts"] <= after
    assert all(m.key().decode() == orjson.loads(m.value())["id"] for m in messages)
    assert len({m.partition() for m in messages}) == 4


@pytest.mark.kafka
def test_separate_delayed_labels_are_co_partitioned(kafka_bootstrap: str, topic_factory: Topics) -> None:
    topics = topic_factory(3, "features", "labels")
    stream = Subscriptions(seed=2)
    result = produce_stream(
        kafka_bootstrap, topics["features"], topics["labels"], stream, count=400, rate=2000, label_delay=0.3
    )
    assert (result.features, result.labels, result.failed) == (400, 400, 0)
    features = read_all(kafka_bootstrap, topics["features"], 3, expect=400)
    labels = read_all(kafka_bootstrap, topics["labels"], 3, expect=400)
    by_id = {orjson.loads(m.value())["id"]: m for m in features}
    expected = stream.take(400)
    for label in labels:
        doc = orjson.loads(label.value())
        feature = by_id[doc["id"]]
        assert set(doc) == {"id", "y"}
        assert doc["y"] == expected[int(doc["id"][2:])][1]
        assert "y" not in orjson.loads(feature.value())
        assert label.partition() == feature.partition()
        assert label.timestamp()[1] - feature.timestamp()[1] >= 300 - 5  # broker clock, ms


def assert_paced(stamps: list[float], before: float, rate: float, burst: int) -> None:
    """The feature records' ``ts`` stamps keep to the token bucket's schedule, measured from its start.

    The bucket starts full when `produce_stream` is called, so record ``k`` (from 0) is the
    ``k + 1``-th token and cannot be granted before ``(k + 1 - burst) / rate`` seconds from then; its
    stamp is taken after the grant. ``before`` is `time.time()` read just before the call, at or before
    the bucket's start, so the bound is exact however late the first records are stamped: a first row
    that is slow to produce (the stream's first chunk, a busy machine) delays the first stamp, not the
    schedule, and measuring from the first stamp would shorten every span by that delay. ``EPS`` covers
    only the float resolution of the wall-clock stamps (about 0.24 microseconds today). A busy machine
    can only make records later, so the upper bound is loose.
    """
    early = [k for k in range(burst, len(stamps)) if stamps[k] - before < (k + 1 - burst) / rate - EPS]
    assert not early, (
        f"record {early[0]} stamped {stamps[early[0]] - before:.6f} s after the start, "
        f"due no sooner than {(early[0] + 1 - burst) / rate:.6f} s"
    )
    assert stamps[-1] - before < (len(stamps) - burst) / rate + 2.5


def slow_first_row(rows: Iterator[Row], delay: float) -> Iterator[Row]:
    """``rows``, the first of them ``delay`` seconds late (as a cold stream's first chunk is)."""
    time.sleep(delay)
    yield from rows


@pytest.mark.kafka
def test_rate_is_respected(kafka_bootstrap: str, topic_factory: Topics) -> None:
    topic = topic_factory(1, "features")["features"]
    before = time.time()
    result = produce_stream(kafka_bootstrap, topic, None, SEA(), count=600, rate=1000.0)
    assert result.features == 600
    # the bucket starts with a 10-record burst: the last record is due at (600 - 10) / 1000 s; a busy
    # machine can only make it later, so upper bounds are loose and lower bounds exact
    assert 0.59 <= result.seconds < 3.0
    stamps = sorted(doc["ts"] for doc in decoded(read_all(kafka_bootstrap, topic, 1, expect=600)))
    assert_paced(stamps, before, rate=1000.0, burst=DEFAULT_BURST)


@pytest.mark.kafka
def test_pacing_runs_from_the_bucket_start_when_the_first_row_is_late(
    kafka_bootstrap: str, topic_factory: Topics
) -> None:
    topic = topic_factory(1, "features")["features"]
    before = time.time()
    rows = slow_first_row(SEA().iterate(), delay=0.02)
    result = produce_stream(kafka_bootstrap, topic, None, rows, count=600, rate=1000.0)
    assert result.features == 600
    stamps = sorted(doc["ts"] for doc in decoded(read_all(kafka_bootstrap, topic, 1, expect=600)))
    assert stamps[0] - before >= 0.02
    assert_paced(stamps, before, rate=1000.0, burst=DEFAULT_BURST)


@pytest.mark.kafka
def test_duration_and_start_id(kafka_bootstrap: str, topic_factory: Topics) -> None:
    topic = topic_factory(2, "features")["features"]
    stream = SEA(seed=9)
    result = produce_stream(
        kafka_bootstrap,
        topic,
        None,
        stream,
        count=None,
        rate=1000.0,
        duration=0.5,
        start_id=100,
        id_prefix="r-",
    )
    assert 250 <= result.features <= DEFAULT_BURST + 1000.0 * result.seconds + 1
    docs = {doc["id"]: doc for doc in decoded(read_all(kafka_bootstrap, topic, 2, expect=result.features))}
    assert len(docs) == result.features
    assert docs["r-000100"]["x"] == stream.take(1, start=100)[0][0]
    assert f"r-{100 + result.features - 1:06d}" in docs


@pytest.mark.kafka
def test_stop_event_from_another_thread_drops_waiting_labels(
    kafka_bootstrap: str, topic_factory: Topics
) -> None:
    topics = topic_factory(2, "features", "labels")
    stop = threading.Event()
    outcome: list = []
    thread = threading.Thread(
        target=lambda: outcome.append(
            produce_stream(
                kafka_bootstrap,
                topics["features"],
                topics["labels"],
                SEA(),
                count=None,
                rate=500.0,
                label_delay=60.0,
                stop=stop,
            )
        )
    )
    thread.start()
    time.sleep(0.5)
    stop.set()
    thread.join(10)
    assert not thread.is_alive(), "producer did not stop"
    result = outcome[0]
    assert 50 <= result.features <= 5 + 500.0 * result.seconds + 1  # burst of 5 at 500 records/s
    assert result.labels == 0 and result.failed == 0
    assert len(read_all(kafka_bootstrap, topics["features"], 2, expect=result.features)) == result.features
    assert read_all(kafka_bootstrap, topics["labels"], 2, idle_s=0.5) == []


@pytest.mark.kafka
def test_cli_replays_a_file_and_creates_topics(
    kafka_bootstrap: str, tmp_path: Path, topic_factory: Topics
) -> None:
    name = topic_factory(1, "unused")["unused"].replace("unused", "from-file")  # fresh name, not created yet
    path = tmp_path / "rows.csv"
    path.write_text(
        "a,b,target\n" + "".join(f"{i},{'xy'[i % 2]},{i % 3}\n" for i in range(50)), encoding="utf-8"
    )
    args = parser().parse_args(
        [
            "--bootstrap-servers",
            kafka_bootstrap,
            "--features-topic",
            name,
            "--partitions",
            "3",
            "--file",
            str(path),
            "--target",
            "target",
            "--rate",
            "0",
        ]
    )
    assert run(args) == 0
    metadata = AdminClient({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10)
    assert len(metadata.topics[name].partitions) == 3
    docs = sorted(decoded(read_all(kafka_bootstrap, name, 3, expect=50)), key=lambda d: d["id"])
    assert len(docs) == 50
    assert docs[7]["id"] == "s-000007"
    assert (docs[7]["x"], docs[7]["y"]) == ({"a": 7, "b": "y"}, 1)


@pytest.mark.kafka
def test_a_bad_row_stops_the_file_after_delivering_the_rows_before_it(
    kafka_bootstrap: str, tmp_path: Path, topic_factory: Topics, capsys: Any
) -> None:
    topic = topic_factory(1, "features")["features"]
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"a": 1, "y": 0}\n{"a": 2, "y": 1}\nnot json\n{"a": 4, "y": 0}\n')
    args = ["--bootstrap-servers", kafka_bootstrap, "--features-topic", topic, "--file", str(path)]
    assert run(parser().parse_args([*args, "--target", "y", "--rate", "0"])) == 2
    assert f"stopped at a bad row: {path}:3: not JSON" in capsys.readouterr().err
    docs = decoded(read_all(kafka_bootstrap, topic, 1, idle_s=1.0, expect=3))
    assert [(d["x"], d["y"]) for d in docs] == [({"a": 1}, 0), ({"a": 2}, 1)]


@pytest.mark.kafka
def test_sgt_worker_produce_command(kafka_bootstrap: str, topic_factory: Topics) -> None:
    topics = topic_factory(2, "features", "labels")
    script = Path(sys.executable).parent / "sgt-worker"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "worker"]
    done = subprocess.run(
        [
            *command,
            "produce",
            "--bootstrap-servers",
            kafka_bootstrap,
            "--features-topic",
            topics["features"],
            "--labels-topic",
            topics["labels"],
            "--stream",
            "friedman",
            "--count",
            "120",
            "--rate",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "produced 120 features, 120 labels" in done.stderr
    labels = decoded(read_all(kafka_bootstrap, topics["labels"], 2, expect=120))
    assert sorted(doc["id"] for doc in labels) == [f"s-{i:06d}" for i in range(120)]
    assert all(isinstance(doc["y"], float) for doc in labels)
