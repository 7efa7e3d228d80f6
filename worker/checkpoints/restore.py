"""Restoring a partition's state: its configuration from the settings, and the state itself from
its newest valid checkpoint file (or a fresh one when there is none).

A checkpoint names its model's class, which is restored through sgt's registry
(``sgt.registry.MODEL_TYPES``) or the caller's; nothing read is imported or evaluated.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sgt.registry import MODEL_TYPES
from worker.checkpoints.file_store import CheckpointStore, Owner
from worker.config import WorkerSettings
from worker.core.model_protocol import ModelClass, StreamModel
from worker.core.partition_state import PartitionState, StateConfig, split_state
from worker.core.sgt_models import new_model


def state_config(settings: WorkerSettings) -> StateConfig:
    """The partition state's configuration from the worker's settings."""
    return StateConfig(
        task=settings.task,
        labels_topic=settings.labels_topic,
        features_topic=settings.features_topic,
        features=settings.features,
        max_record_bytes=settings.max_record_bytes,
        join_max_pending=settings.join_max_pending,
        join_max_age=settings.join_max_age_seconds,
        join_max_bytes=settings.join_max_bytes,
        metrics_window=settings.metrics_window,
        max_features=settings.max_features,
        max_message_bytes=settings.max_message_bytes,
        proba_top_k=settings.proba_top_k,
        interval_coverage=settings.interval_coverage,
        explain=settings.explain,
        max_label_bytes=settings.max_label_bytes,
        max_classes=settings.max_classes,
        max_ts_ahead=settings.max_ts_ahead_seconds,
    )


def state_parser(
    settings: WorkerSettings, partition: int, registry: Mapping[str, ModelClass] | None = None
) -> Callable[[bytes], PartitionState]:
    """Parses a checkpoint payload of ``partition``; ValueError when it does not fit the settings."""
    config = state_config(settings)
    types: Mapping[str, ModelClass] = registry if registry is not None else MODEL_TYPES

    def parse(payload: bytes) -> PartitionState:
        state = PartitionState.from_bytes(payload, config, types)
        if state.partition != partition:
            raise ValueError(f"checkpoint holds partition {state.partition}, not {partition}")
        return state

    return parse


def load_state(
    settings: WorkerSettings,
    partition: int,
    on_bad: Callable[[Any, str], None] | None = None,
    model_factory: Callable[[], StreamModel] | None = None,
    registry: Mapping[str, ModelClass] | None = None,
    store: CheckpointStore | None = None,
) -> PartitionState:
    """The partition's state from its newest valid checkpoint, or a fresh one.

    ``model_factory`` / ``registry`` replace the sgt models (fresh model; class name -> class).
    ``store`` (default: the settings' directory and deployment) raises
    :class:`~worker.checkpoints.file_store.OwnerConflict` on another deployment's checkpoint.
    """
    config = state_config(settings)
    parse = state_parser(settings, partition, registry)

    def legacy_owner(payload: bytes) -> Owner:
        """A checkpoint of the release before owners names its topics and task, not its group."""
        header, _ = split_state(payload)
        named = [header.get(k) for k in ("features_topic", "labels_topic", "task")]
        if not isinstance(named[0], str) or not isinstance(named[2], str):
            raise ValueError("malformed state: the header names no topics or task")
        return Owner(settings.group_id, named[0], named[1], named[2])

    store = store or CheckpointStore(settings.checkpoint_dir, Owner.of(settings))
    loaded = store.read_newest(partition, on_bad=on_bad, accept=parse, legacy_owner=legacy_owner)
    if loaded is not None:
        return parse(loaded.payload)
    model = model_factory() if model_factory is not None else new_model(settings)
    return PartitionState(partition, model, config)
