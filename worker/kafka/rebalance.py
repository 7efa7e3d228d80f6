"""Rebalance handling: what the worker does when the group gives it partitions or takes them away.

* **Assign**: restore each features partition from its checkpoint (with a state topic: the newer of
  the file and the topic's copy, after claiming the partition there; one another worker claimed
  meanwhile is left out) and start both topics at the offsets in it (the checkpoint is the truth; the
  group's committed offsets are informational, and are brought up to the restored offsets here). The
  eager ``range`` assignor co-assigns equal partition numbers of the two topics when their partition
  counts are equal; anything else is logged as an error. The worker is ready from here on, even with
  no partitions: an idle member (more members than partitions) is in the group and takes partitions
  at the next rebalance.
* **Revoke** (an orderly rebalance): checkpoint the partitions (flush, write, commit) before they are
  released, so the next owner starts where this one stopped. Not ready until the next assignment.
* **Lost** (the group moved on without us, e.g. after a long stall): drop the partitions without
  writing anything, since another member may already own them. Not ready until the next assignment.
"""

from __future__ import annotations

import logging

from confluent_kafka import Consumer, TopicPartition

from worker.checkpoints.protocol import Checkpointer
from worker.config import WorkerSettings
from worker.core.merge import FEATURES, LABELS
from worker.kafka.partition_runtime import PartitionRuntime
from worker.logs import fields
from worker.metrics import Health, WorkerMetrics


class Rebalancer:
    """The consumer's ``on_assign`` / ``on_revoke`` / ``on_lost`` callbacks for one worker."""

    def __init__(
        self,
        settings: WorkerSettings,
        runtime: PartitionRuntime,
        checkpointer: Checkpointer,
        metrics: WorkerMetrics,
        health: Health,
        log: logging.Logger,
    ) -> None:
        self.settings, self.runtime, self.checkpointer = settings, runtime, checkpointer
        self.metrics, self.health, self.log = metrics, health, log

    def on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.metrics.rebalances.labels(event="assign").inc()
        by_topic: dict[str, set[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, set()).add(tp.partition)
        features = by_topic.get(self.settings.features_topic, set())
        labels = by_topic.get(self.settings.labels_topic or "", set())
        if self.settings.labels_topic and features != labels:
            self.log.error(
                "features and labels partitions are not co-assigned; are the partition counts equal?",
                extra=fields(features=sorted(features), labels=sorted(labels)),
            )
        assignment = []
        labels_topic = self.settings.labels_topic
        for p in sorted(features):
            owned = self.runtime.assign(p, labels_assigned=bool(labels_topic) and p in labels)
            if owned is None:  # another worker claimed it in the state topic: leave its topics unassigned
                continue
            assignment.append(
                TopicPartition(self.settings.features_topic, p, owned.state.next_offsets[FEATURES])
            )
            if labels_topic and owned.labels_assigned:
                assignment.append(TopicPartition(labels_topic, p, owned.state.next_offsets[LABELS]))
        consumer.assign(assignment)
        self.checkpointer.commit_restored([tp for tp in assignment if tp.offset > 0])
        self.health.set_ready(True)
        self.log.info("partitions assigned", extra=fields(partitions=sorted(features)))

    def on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.metrics.rebalances.labels(event="revoke").inc()
        self.health.set_ready(False)
        revoked = sorted(
            {tp.partition for tp in partitions if tp.topic == self.settings.features_topic}
            & set(self.runtime.owned)
        )
        try:
            self.checkpointer.checkpoint_now(self.runtime.owned, revoked, force=False)
        finally:
            self.runtime.drop(revoked)
            self.health.forget(revoked)
            self.checkpointer.take_fenced(revoked)  # given up already
            if self.runtime.mirror is not None:
                self.runtime.mirror.release(revoked)
            self.log.info("partitions revoked", extra=fields(partitions=revoked))

    def on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self.metrics.rebalances.labels(event="lost").inc()
        self.health.set_ready(False)
        lost = sorted({tp.partition for tp in partitions} & set(self.runtime.owned))
        # a write in flight is finished first: it must not land after the next owner's own writes
        self.checkpointer.settle(lost, commit=False)
        self.runtime.drop(lost)
        self.health.forget(lost)
        if self.runtime.mirror is not None:
            self.runtime.mirror.release(lost)
        self.log.warning("partitions lost; nothing written", extra=fields(partitions=lost))
