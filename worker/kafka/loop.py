"""The Kafka shell of the worker: consume, process, produce, checkpoint, in one loop.

One :class:`Worker` runs one consumer (group member) and one idempotent producer (transactional with
``processing_guarantee`` exactly_once), and wires together the modules that do the work:

* :mod:`worker.kafka.rebalance`: partitions assigned (restored from their checkpoints, both topics sought to
  the offsets in them), revoked (checkpointed first) and lost (dropped, nothing written);
* :mod:`worker.kafka.partition_runtime`: fetched records merged per partition in a deterministic order and
  processed in runs, with pausing, recovery from model failures and from outputs lost for good;
* :mod:`worker.checkpoints.protocol`: snapshot, outputs acknowledged, file durable, state topic (when one is
  configured: :mod:`worker.state_topic.mirror`), offsets committed; :mod:`worker.checkpoints.transactional`
  instead with exactly_once: snapshot, outputs, state topic and offsets committed in one transaction, file
  durable;
* :mod:`worker.kafka.publisher`: each run's outputs produced and counted in its partition's ledger.

:meth:`Worker.__init__` builds these collaborators in order and hands each the ones it uses. This
module owns the clients' lifetimes and the loop's turns. The worker only stops on :meth:`Worker.stop`
(or a fatal client error); at shutdown it writes a final checkpoint of every owned partition and raises
:class:`FinalCheckpointError` after shutting down if one could not be written (the command line exits
non-zero then; the records since the partition's last checkpoint are replayed by its next owner).

Usage (needs a broker)::

    >>> worker = Worker(load_settings({"bootstrap_servers": "127.0.0.1:9092"}))  # doctest: +SKIP
    >>> threading.Thread(target=worker.run).start(); worker.stop()                # doctest: +SKIP
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer

from worker.checkpoints.file_store import CheckpointStore, Owner
from worker.checkpoints.protocol import FLUSH_TIMEOUT_S, Checkpointer
from worker.checkpoints.transactional import TransactionalCheckpointer
from worker.config import ConfigError, WorkerSettings, describe
from worker.core.model_protocol import ModelClass, StreamModel
from worker.core.sgt_models import preload
from worker.kafka.clients import Clients, consumer_config, producer_config
from worker.kafka.partition_runtime import OwnedPartition, PartitionRuntime
from worker.kafka.publisher import Publisher
from worker.kafka.rebalance import Rebalancer
from worker.logs import RepeatFilter, fields
from worker.metrics import Health, WorkerMetrics
from worker.state_topic.errors import StateTopicError, StateTopicLost
from worker.state_topic.mirror import StateMirror, features_partitions

_GAUGE_INTERVAL_S = 1.0
_CLIENT_LOG_INTERVAL_S = 30.0  # the Kafka clients log one message (a reconnect failure...) at most this often
_GC_THRESHOLD = 20_000  # allocations between first-generation collections (default 700)
_REWIND_DELAY_S = 1.0  # from an output lost for good to the producer's renewal and the rewinds


class FinalCheckpointError(RuntimeError):
    """The worker stopped, but the final checkpoint of some partition could not be written."""


class Worker:
    """One member of the worker group; :meth:`run` blocks until :meth:`stop` is called."""

    def __init__(
        self,
        settings: WorkerSettings,
        metrics: WorkerMetrics | None = None,
        health: Health | None = None,
        client_overrides: Mapping[str, Any] | None = None,
        log: logging.Logger | None = None,
        model_factory: Callable[[], StreamModel] | None = None,
        model_registry: Mapping[str, ModelClass] | None = None,
    ) -> None:
        self.settings = settings
        self.metrics = metrics or WorkerMetrics()
        self.health = health or Health(max_checkpoint_failures=settings.unhealthy_after_checkpoint_failures)
        self.log = log or logging.getLogger("worker")
        # the Kafka clients' logs and errors, each shape at most once per interval (see RepeatFilter)
        self._client_log = self.log.getChild("librdkafka")
        if not any(isinstance(f, RepeatFilter) for f in self._client_log.filters):
            self._client_log.addFilter(RepeatFilter(_CLIENT_LOG_INTERVAL_S))
        self.clients = Clients()
        # the collaborators, each built before the ones that use it and handed to their constructors
        self.store = CheckpointStore(
            settings.checkpoint_dir,
            Owner.of(settings),
            self.log.getChild("checkpoint"),
            on_lost=self.metrics.checkpoint_dir_lost.inc,
        )
        # the state topic (None when off); its clients are created by run(), as they connect at once
        self.mirror = StateMirror.of(settings, self.metrics, self.log, self._with_callbacks({}))
        self.owned: dict[int, OwnedPartition] = {}  # written by the runtime alone
        self.checkpointer = (
            TransactionalCheckpointer(
                settings,
                self.clients,
                self.store,
                self.metrics,
                self.log,
                self.owned,
                self.health,
                self.mirror,
            )
            if settings.processing_guarantee == "exactly_once"
            else Checkpointer(
                settings, self.clients, self.store, self.metrics, self.log, self.health, self.mirror
            )
        )
        self.publisher = Publisher(settings, self.clients, self.metrics, self.log)
        self.runtime = PartitionRuntime(
            settings,
            self.clients,
            self.metrics,
            self.log,
            self.owned,
            self.publisher,
            self.store,
            self.checkpointer,
            self.mirror,
            model_factory,
            model_registry,
        )
        self.rebalancer = Rebalancer(
            settings, self.runtime, self.checkpointer, self.metrics, self.health, self.log
        )
        self.topics = self.runtime.topics
        self._stop = threading.Event()
        self._lost: str | None = None  # why the state topic is gone, once it is (see _state_topic_lost)
        self._overrides = dict(client_overrides or {})
        self._next_gauges = 0.0
        self._rewind_at: float | None = None  # when the partitions that lost an output rewind
        self.make_producer: Callable[[], Producer] = lambda: self.checkpointer.started(
            Producer(self._with_callbacks(producer_config(self.settings, self._overrides)))
        )

    # -- lifecycle ------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Ask :meth:`run` to finish: final checkpoint, flush, commit, leave the group. Thread-safe."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:
        """Consume and learn until stopped; then shut down cleanly.

        Raises :class:`~worker.checkpoints.file_store.OwnerConflict` before anything starts when the
        checkpoint directory belongs to another deployment, and :class:`FinalCheckpointError` after a clean
        shutdown whose final checkpoint failed.
        """
        self.store.acquire()
        _tune_gc()
        self.clients.producer = self.make_producer()
        consumer = self.clients.consumer = Consumer(
            self._with_callbacks(consumer_config(self.settings, self._overrides))
        )
        try:
            opened = self._open_state_topic(consumer)
        except BaseException:
            self._shutdown()
            raise
        if not opened:
            self._shutdown()
            return
        consumer.subscribe(
            self.topics,
            on_assign=self.rebalancer.on_assign,
            on_revoke=self.rebalancer.on_revoke,
            on_lost=self.rebalancer.on_lost,
        )
        self.log.info("worker started", extra=fields(topics=self.topics, group=self.settings.group_id))
        preload()  # while the group join runs in the client's background threads
        try:
            while not self._stop.is_set():
                self.step()
        except BaseException as exc:
            # The state may be half-updated: write nothing, the next owner replays from the last checkpoint.
            self.log.exception("worker loop failed; leaving without a final checkpoint")
            self.runtime.drop(sorted(self.owned))
            fenced = self.checkpointer.as_fenced(exc)
            self._shutdown(flush=fenced is None)  # a fenced producer's outputs can never commit
            if fenced is not None:
                raise fenced from exc
            raise
        complete = self._shutdown()
        if self._lost is not None:
            raise StateTopicLost(self._lost)
        if not complete:
            raise FinalCheckpointError("the final checkpoint of some partition was not written")

    def _open_state_topic(self, consumer: Consumer) -> bool:
        """With a state topic: create or check it and connect its clients, before the group join (a
        new client takes about half a second, which would otherwise delay the first restore). False
        when the worker was stopped while waiting for the features topic to exist; ConfigError (naming
        the setting) when the state topic cannot be used."""
        mirror = self.mirror
        if mirror is None:
            return True
        partitions = features_partitions(consumer, self.settings.features_topic, self._stop.is_set, self.log)
        if partitions is None:
            return False
        try:
            mirror.prepare(partitions)
        except StateTopicError as exc:
            raise ConfigError(f"{describe('state_topic')}: {exc}") from None
        return True

    def step(self) -> None:
        """One turn of the loop: consume a batch, process what is ready, produce, maybe checkpoint."""
        producer = self.clients.producer
        assert producer is not None
        messages = self._fetch()
        self.health.beat()
        if messages:
            self.runtime.ingest(messages)
        if self.checkpointer.fenced:  # found by the previous turn's checkpoints or a rewind's
            self._give_up_fenced()
        self.runtime.process_all()
        producer.poll(0)
        self.checkpointer.maybe_checkpoint(self.owned)
        if self.mirror is not None and self.mirror.lost is not None and self._lost is None:
            self._state_topic_lost(self.mirror.lost)
        now = time.monotonic()
        if self._rewind_at is not None or self.runtime.latched():
            self.recover_deliveries(now)
        self.publisher.observe_latencies()  # of the deliveries reported inside poll() and flush()
        if now >= self._next_gauges:
            self._next_gauges = now + _GAUGE_INTERVAL_S
            self.runtime.update_gauges(now)

    def _state_topic_lost(self, reason: str) -> None:
        """The state topic was deleted (or created again): report it and stop, as Kafka Streams does
        when a changelog topic goes missing. Unhealthy from now on; the final checkpoints go to the
        files alone, and :meth:`run` raises StateTopicLost once shut down (exit code 6), so that the
        next start creates the topic again and fills it from the files (a worker on an empty disk
        would otherwise find no state)."""
        self._lost = reason
        self.health.fail(f"state topic lost: {reason}")
        self.checkpointer.drop_mirror()
        self.stop()

    def _give_up_fenced(self) -> None:
        """Drop the partitions a newer owner claimed in the state topic (no outputs or commits)."""
        fenced = self.checkpointer.take_fenced()
        for partition, why in fenced.items():
            self.runtime.give_up([partition], why)
        self.health.forget(sorted(fenced))
        if self.mirror is not None:
            self.mirror.release(sorted(fenced))

    def _fetch(self) -> list[Message]:
        """Wait up to the poll timeout for one record, then take what else is already fetched.

        ``consume(n, timeout)`` alone waits the whole timeout unless ``n`` records are there, which at
        a low rate adds up to the timeout to every record's latency; ``poll`` returns on the first one.
        """
        consumer = self.clients.consumer
        assert consumer is not None
        # no wait while records already fetched are ready: the last turn processed a bounded share
        first = consumer.poll(0 if self.runtime.more_ready else self.settings.poll_timeout_seconds)
        if first is None:
            return []
        batch = self.settings.batch_size
        return [first, *consumer.consume(batch - 1, 0)] if batch > 1 else [first]

    def _shutdown(self, flush: bool = True) -> bool:
        """Final checkpoint, close the clients (flushing the producer unless told not to); whether every
        owned partition got its checkpoint."""
        self.log.info("worker stopping", extra=fields(partitions=sorted(self.owned)))
        self.health.set_ready(False)
        complete = True
        try:
            if self.owned:
                complete = self.checkpointer.checkpoint_now(self.owned, list(self.owned), force=True)
        except BaseException:
            self.runtime.drop(sorted(self.owned))  # closing the consumer must not try again (on_revoke)
            flush = False  # nor may the producer be flushed: it failed (a fenced one raises again)
            raise
        finally:
            if self.clients.consumer is not None:
                self.clients.consumer.close()  # runs on_revoke (nothing left to write) and leaves the group
            if self.clients.producer is not None and flush:
                left = self.clients.producer.flush(FLUSH_TIMEOUT_S)
                if left:
                    self.log.error("records left undelivered at shutdown", extra=fields(undelivered=left))
            self.checkpointer.close()
            if self.mirror is not None:
                self.mirror.close()
            self.store.release()
            self.clients.consumer = self.clients.producer = None
            if complete:
                self.log.info("worker stopped")
            else:
                self.log.error("worker stopped without its final checkpoint; the next start replays")
        return complete

    # -- client configuration -------------------------------------------------------------------------

    def _with_callbacks(self, conf: dict[str, Any]) -> dict[str, Any]:
        # librdkafka's own log lines go through the worker's logger (JSON, like every other line)
        # rather than straight to stderr; they reach it from poll(), on this thread
        return {**conf, "error_cb": self._on_error, "logger": self._client_log}

    def _on_error(self, error: KafkaError) -> None:
        level = logging.ERROR if error.fatal() else logging.WARNING
        self._client_log.log(level, "kafka client error", extra=fields(error=str(error), code=error.code()))
        if error.fatal():
            self._stop.set()

    # -- producing ------------------------------------------------------------------------------------

    def recover_deliveries(self, now: float) -> None:
        """Outputs were lost for good: renew the producer, then rewind every partition that lost one.

        The checkpoint protocol renews the producer (:meth:`Checkpointer.renew_producer`: a new one for
        at_least_once; exactly_once aborts the transaction, which latches every partition). The rewinds
        wait ``_REWIND_DELAY_S``, so that a broker refusing everything at once costs one rewind a
        second, not one a turn.
        """
        if self._rewind_at is None:
            self._rewind_at = now + _REWIND_DELAY_S
            return
        if now < self._rewind_at:
            return
        self._rewind_at = None
        self.checkpointer.renew_producer(self.make_producer)
        for partition in self.runtime.latched():
            self.runtime.rewind_lost_output(partition)


def _tune_gc() -> None:
    """Make Python's cyclic garbage collector cheap for the processing loop.

    Each record allocates a few dozen short-lived containers (decoded JSON, tuples, output dicts) and
    almost none of them form reference cycles, so the default first-generation threshold (700
    allocations) runs a collection every few records. Objects alive at start-up (modules, settings)
    are moved out of the collector's reach with ``gc.freeze`` and collections run less often
    (BENCHMARKS.md section 6 has the measured effect). Cycles are still collected, in larger batches.
    """
    gc.freeze()
    gc.set_threshold(_GC_THRESHOLD, *gc.get_threshold()[1:])
