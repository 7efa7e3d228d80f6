# The README's two commands: `make demo` runs the self-contained demo, `make test` runs the test suite.
# Both create ./.venv on first use and install the project into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench bench-worker venv

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

venv: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'

demo: venv
	$(BIN)/sgt-worker demo

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest

# library benchmarks beside River (needs the bench extra); about 13 minutes
bench: venv
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m tests.bench

# worker benchmarks over the embedded broker: throughput, latency, restore (about 8 minutes), then
# the worker's Kafka-free core beside the model alone (about 1 minute)
bench-worker: venv
	$(BIN)/python -m tests.bench.bench_worker
	$(BIN)/python -m tests.bench.bench_worker_core
