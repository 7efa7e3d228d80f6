"""Checkpoints: the protocol (snapshot, outputs acknowledged, file durable, offsets committed), its
exactly-once variant, the checkpoint files and the backoff after a failed write."""
