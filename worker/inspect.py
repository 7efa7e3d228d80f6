"""`sgt-worker inspect`: JSON summaries of checkpoint files, read without any broker.

A file gives one summary; a directory gives the summary of the newest valid checkpoint of every
partition found there. ``model_sha256`` is the SHA-256 of the model's ``to_bytes()``, so two
checkpoints hold the same model exactly when it matches; ``owner`` names the deployment that wrote it
(null for a checkpoint of the previous release, written without one).

The exit status says whether the checkpoints can be restored: 1 when a file does not verify, when a
directory holds no checkpoint, or when one of its partitions has no valid checkpoint (its worker would
start it afresh). Every file skipped is named on stderr, with the reason.

With ``--state-topic TOPIC --bootstrap-servers HOST:PORT`` instead of a path, the newest valid state
of every partition of the state topic is summarised, as a worker would restore it (read without
claiming anything), with ``state_topic`` telling where it lies: partition, the writer's epoch, the
state's seq and its manifest's offset. States skipped (incomplete, corrupt, void) are named on stderr.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import orjson

from sgt.evaluation import Prequential
from sgt.registry import MODEL_TYPES
from worker.checkpoints import file_store
from worker.core.interval_score import IntervalScore
from worker.core.partition_state import split_state

_UNUSABLE = (ValueError, KeyError, TypeError, IndexError)  # a payload that verifies but does not parse


@dataclass
class DirectoryInspection:
    """The newest valid checkpoint of each partition of a directory, and the files that were not."""

    summaries: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # (file, why)
    without_checkpoint: list[int] = field(default_factory=list)  # partitions with no valid file


def summarize(
    payload: bytes, path: Path, tree: bool = False, owner: file_store.Owner | None = None
) -> dict[str, Any]:
    """The summary of one verified checkpoint payload."""
    header, model_blob = split_state(payload)
    model_type = MODEL_TYPES.get(header.get("model_type", ""))
    if model_type is None:
        raise file_store.CheckpointError(f"unknown model type {header.get('model_type')!r}")
    model = model_type.from_bytes(model_blob)
    metrics = Prequential.from_dict(header["prequential"])
    summary: dict[str, Any] = {
        "path": str(path),
        "partition": header["partition"],
        "owner": None if owner is None else dataclasses.asdict(owner),
        "task": header["task"],
        "features_topic": header["features_topic"],
        "labels_topic": header["labels_topic"],
        "next_offsets": {"features": header["next_offsets"][0], "labels": header["next_offsets"][1]},
        "records_seen": {"features": header["consumed"][0], "labels": header["consumed"][1]},
        "trained": header["trained"],
        "predicted": header["predicted"],
        "model_type": header["model_type"],
        "model_sha256": hashlib.sha256(model_blob).hexdigest(),
        "tree": {
            "nodes": model.n_nodes,
            "leaves": model.n_leaves,
            "depth": model.depth,
            "n_seen": model.n_seen,
        },
        "prequential": {
            "n": metrics.n,
            "error": _json_float(metrics.error),
            "recent_error": _json_float(metrics.recent_error),
        },
        "join_pending": {
            "features": len(header["join"]["features"]),
            "labels": len(header["join"]["labels"]),
        },
        # the model's importance per feature, most important first (sgt.explain)
        "feature_importances": dict(
            sorted(model.feature_importances().items(), key=lambda kv: (-kv[1], kv[0]))
        ),
    }
    if "intervals" in header:  # regression with interval_coverage: the published intervals' scores
        score = IntervalScore.from_dict(header["intervals"])
        summary["intervals"] = {
            "n": score.n,
            "coverage": _json_float(score.coverage),
            "width": _json_float(score.width),
            "recent_coverage": _json_float(score.recent_coverage),
            "recent_width": _json_float(score.recent_width),
        }
    if tree:
        summary["tree_text"] = model.to_text()  # an ensemble's own: its settings, then each member's trees
    return summary


def _json_float(value: float) -> float | None:
    return None if value != value else value  # NaN is not JSON


def inspect_file(path: str | Path, tree: bool = False) -> dict[str, Any]:
    """The summary of one checkpoint file; raises CheckpointError (or ValueError) if it is unusable."""
    owner, payload = file_store.read_owned(path)
    return summarize(payload, Path(path), tree, owner)


def inspect_directory(directory: str | Path, tree: bool = False) -> DirectoryInspection:
    """The newest checkpoint of every partition in the directory that verifies and parses."""
    found = DirectoryInspection()
    for partition in file_store.partitions_in(directory):
        for path in (
            file_store.checkpoint_path(directory, partition),
            file_store.previous_path(directory, partition),
        ):
            if not path.exists():
                continue
            try:
                found.summaries.append(inspect_file(path, tree))
                break
            except _UNUSABLE as exc:
                found.skipped.append((path, str(exc)))
        else:
            found.without_checkpoint.append(partition)
    return found


def inspect_topic(bootstrap_servers: str, topic: str, tree: bool = False) -> DirectoryInspection:
    """The newest valid state of every partition of a state topic (``skipped`` names partitions)."""
    from worker.state_topic.admin import StateTopicConfig
    from worker.state_topic.client import StateTopic

    found = DirectoryInspection()
    with StateTopic(StateTopicConfig(bootstrap_servers, topic, timeout_s=20.0)) as states:
        for partition in states.partitions():
            selection = states.read(partition)
            where = Path(f"{topic}[{partition}]")
            for skipped in selection.skipped:
                found.skipped.append((where, str(skipped)))
            newest = selection.newest
            if newest is None:
                found.without_checkpoint.append(partition)
                continue
            try:
                summary = summarize(newest.payload, where, tree)
            except _UNUSABLE as exc:
                found.skipped.append((where, str(exc)))
                found.without_checkpoint.append(partition)
                continue
            summary["state_topic"] = {
                "topic": topic,
                "partition": partition,
                "epoch": newest.epoch,
                "seq": newest.seq,
                "manifest_offset": newest.offset,
                "bytes": len(newest.payload),
            }
            found.summaries.append(summary)
    return found


def topic_command(
    bootstrap_servers: str, topic: str, tree: bool, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """``sgt-worker inspect --state-topic TOPIC --bootstrap-servers HOST:PORT [--tree]``."""
    from worker.state_topic.errors import StateTopicError

    out, err = out or sys.stdout, err or sys.stderr
    try:
        found = inspect_topic(bootstrap_servers, topic, tree)
    except StateTopicError as exc:
        print(f"sgt-worker inspect: {exc}", file=err)
        return 1
    for skipped, why in found.skipped:
        print(f"sgt-worker inspect: skipped a state in {skipped}: {why}", file=err)
    problems = [f"partition {p} has no valid state" for p in found.without_checkpoint]
    return _show(found.summaries, True, tree, problems, topic, out, err)


def command(path: str, tree: bool, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``sgt-worker inspect PATH [--tree]``: the summaries on ``out``, problems on ``err``; exit status."""
    out, err = out or sys.stdout, err or sys.stderr
    where = Path(path)
    if where.is_dir():
        try:
            found = inspect_directory(where, tree)
        except OSError as exc:
            print(f"sgt-worker inspect: {path}: {exc.strerror or exc}", file=err)
            return 1
        summaries: list[dict[str, Any]] = found.summaries
        for skipped, why in found.skipped:
            print(f"sgt-worker inspect: skipped {skipped}: {why}", file=err)
        problems = [f"partition {p} has no valid checkpoint" for p in found.without_checkpoint]
        if not summaries and not problems:
            problems = ["no checkpoint files found"]
    else:
        try:
            summaries = [inspect_file(where, tree)]
        except _UNUSABLE as exc:
            print(f"sgt-worker inspect: {path}: {exc}", file=err)
            return 1
        problems = []
    return _show(summaries, where.is_dir(), tree, problems, path, out, err)


def _show(
    summaries: list[dict[str, Any]],
    as_list: bool,
    tree: bool,
    problems: list[str],
    where: str,
    out: TextIO,
    err: TextIO,
) -> int:
    tree_texts = [(item["partition"], item.pop("tree_text")) for item in summaries] if tree else []
    shown: Any = summaries if as_list else summaries[0]
    out.write(orjson.dumps(shown, option=orjson.OPT_INDENT_2).decode() + "\n")
    for partition, text in tree_texts:
        err.write(f"# partition {partition}\n{text}\n")
    for problem in problems:
        print(f"sgt-worker inspect: {where}: {problem}", file=err)
    return 1 if problems else 0
