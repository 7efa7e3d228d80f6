"""The sgt-stream Kafka worker: partition-aware test-then-train with exact checkpoints."""
