"""The worker's Kafka-free core: a partition's records decoded, merged, joined, predicted and learned.

Nothing here imports a Kafka client, the Kafka shell (:mod:`worker.kafka`), the checkpoint protocol
(:mod:`worker.checkpoints`) or the state topic (:mod:`worker.state_topic`); tests/worker/test_layering.py
checks it. So the core can be tested, benchmarked and reasoned about without a broker.
"""
