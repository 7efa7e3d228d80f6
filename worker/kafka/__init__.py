"""The worker's Kafka shell: the loop, the owned partitions' runtime, rebalances, deliveries, clients."""
