"""Partition states in a compacted Kafka topic: the record format and rules, the topic's admin, the
client that claims, reads and writes it, and the worker's mirror of its checkpoints there."""
