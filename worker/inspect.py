"""`sgt-worker inspect`: JSON summaries of checkpoint files, read without any broker.

A file gives one summary; a directory gives the summary of the newest valid checkpoint of every
partition found there. ``model_sha256`` is the SHA-256 of the model's ``to_bytes()``, so two
checkpoints hold the same model exactly when it matches.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from sgt.evaluation import Prequential
from sgt.export import to_text
from worker import checkpoint
from worker.model import model_types
from worker.state import split_state


def summarize(payload: bytes, path: Path, tree: bool = False) -> dict[str, Any]:
    """The summary of one verified checkpoint payload."""
    header, model_blob = split_state(payload)
    model_type = model_types().get(header.get("model_type", ""))
    if model_type is None:
        raise checkpoint.CheckpointError(f"unknown model type {header.get('model_type')!r}")
    model = model_type.from_bytes(model_blob)
    metrics = Prequential.from_dict(header["prequential"])
    summary: dict[str, Any] = {
        "path": str(path),
        "partition": header["partition"],
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
    }
    if tree:
        summary["tree_text"] = to_text(model)
    return summary


def _json_float(value: float) -> float | None:
    return None if value != value else value  # NaN is not JSON


def inspect_path(path: str | Path, tree: bool = False) -> dict[str, Any] | list[dict[str, Any]]:
    """Summary of a checkpoint file, or list of summaries for a checkpoint directory."""
    path = Path(path)
    if path.is_dir():
        out = []
        for partition in checkpoint.partitions_in(path):
            loaded = checkpoint.read_newest(path, partition)
            if loaded is not None:
                out.append(summarize(loaded.payload, loaded.path, tree))
        return out
    return summarize(checkpoint.read_file(path), path, tree)
