# Leasehold build and test entry points. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: venv .venv test lint format services-stop clean

# The virtualenv, (re)installed whenever a requirements file changes.
venv .venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -r requirements-dev.txt
	touch $@

# Lint, then the test suite against PostgreSQL and Redis (started if needed by
# scripts/services.sh, whose export lines are evaluated in the same shell).
test: $(STAMP)
	exports="$$(scripts/services.sh)" && eval "$$exports" && \
	$(BIN)/ruff format --check . && \
	$(BIN)/ruff check . && \
	$(BIN)/pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Stops only the throwaway servers scripts/services.sh started (never the machine's own).
services-stop:
	scripts/services.sh stop

# Removes the virtualenv and tool caches. Leaves instance/ and .services/ alone.
clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis test-artifacts
	find . -path ./instance -prune -o -path ./.services -prune -o \
		-type d -name __pycache__ -prune -exec rm -rf {} +
