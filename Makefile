# Leasehold build and test entry points. `make test` is what CI runs (.ci/run).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

# PostgreSQL and Redis for a recipe: scripts/services.sh prints the export lines of their URLs
# (the machine's own servers, or throwaway ones it starts), evaluated in the recipe's shell.
SERVICES = exports="$$(scripts/services.sh)" && eval "$$exports" &&

.PHONY: venv .venv assets dist chromium promtool test model-nightly demo bench lint format services-stop clean

# The virtualenv, (re)installed whenever a requirements file changes.
venv .venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -r requirements-dev.txt
	touch $@

# htmx, its idiomorph extension and cytoscape from the npm registry (pinned in
# package-lock.json), copied where the console serves them.
HTMX := static/vendor/htmx.min.js static/vendor/idiomorph-ext.min.js static/vendor/cytoscape.min.js
assets: $(HTMX)
$(HTMX): package.json package-lock.json
	npm ci --no-audit --no-fund
	npm run vendor

# The wheel (dist/leasehold-*.whl): store, workers and webapp with the Lua scripts,
# the migrations, the templates and static files (htmx included). `pip install dist/*.whl`
# then gives the `leasehold` command.
dist: $(STAMP) $(HTMX)
	rm -rf build dist/leasehold-*.whl
	$(BIN)/pip wheel --no-deps -w dist .

# Debian's Chromium for the browser tests (Playwright drives it; it downloads no browser).
chromium:
	@command -v chromium >/dev/null || { apt-get update && apt-get install -y chromium; }

# promtool for tests/unit/test_prometheus_alerts.py (`promtool check rules` on
# deploy/prometheus-alerts.yml): Debian's `prometheus` package has it. Only the one binary is
# taken from the .deb (apt-get download, dpkg-deb): installing the package would run its
# postinst, which adds a user and starts a Prometheus server on :9090.
PROMTOOL ?= $(VENV)/tools/promtool
promtool:
	@test -x $(PROMTOOL) || { \
	  tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  ( cd "$$tmp" && { apt-get download prometheus 2>/dev/null || { apt-get update && apt-get download prometheus; }; } ) && \
	  mkdir -p $(dir $(PROMTOOL)) && \
	  dpkg-deb --fsys-tarfile "$$tmp"/prometheus_*.deb | tar -xO ./usr/bin/promtool >$(PROMTOOL).part && \
	  chmod +x $(PROMTOOL).part && mv $(PROMTOOL).part $(PROMTOOL); }

# Lint (ruff, and vulture for dead code: .ci/vulture.sh), then the test suite against PostgreSQL and Redis (started if needed by
# scripts/services.sh, whose export lines are evaluated in the same shell): most of it
# in PYTEST_WORKERS processes (pytest-xdist; every test makes its own store, so they
# share nothing; worksteal: a process that runs out takes tests queued for another, so
# the slowest ones do not finish alone at the end), then the fault-injection,
# many-process and browser tests one at a time (they time real processes and a real
# browser, which sharing two cores would skew).
PYTEST_WORKERS ?= 3
SERIAL := tests/faults tests/browser tests/store/test_contract_processes.py
test: $(STAMP) $(HTMX) chromium promtool
	$(SERVICES) export PROMTOOL=$(abspath $(PROMTOOL)) && \
	$(BIN)/ruff format --check . && \
	$(BIN)/ruff check . && \
	VULTURE=$(BIN)/vulture .ci/vulture.sh && \
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist worksteal $(SERIAL:%=--ignore=%) $(PYTEST_ARGS) && \
	$(BIN)/pytest $(SERIAL) $(PYTEST_ARGS)

# The stores against the reference model at a nightly length (tests/README.md).
# Seven pytest workers for the file's 13 tests: with fewer than two tests a
# worker, xdist sends them one to each in turn, so the six long runs (one a
# backend) start together and share the cores to the end (more tests in the
# file need MODEL_WORKERS above half their number). With two workers, or six
# (two tests each at the start), a long run could wait behind another and run
# alone at the end, one core half idle: 23.8-26.5 min a run, 22.8-24.3 with seven.
MODEL_EXAMPLES ?= 500
MODEL_STEPS ?= 60
MODEL_WORKERS ?= 7
model-nightly: $(STAMP)
	$(SERVICES) LEASEHOLD_MODEL_EXAMPLES=$(MODEL_EXAMPLES) LEASEHOLD_MODEL_STEPS=$(MODEL_STEPS) \
	$(BIN)/pytest -n $(MODEL_WORKERS) --timeout 7200 tests/store/test_contract_model.py $(PYTEST_ARGS)

# The main job: console + API under gunicorn on 127.0.0.1:8000, two worker processes,
# the standard library indexed. STORE=postgresql+psycopg://… or redis://… for another store.
STORE ?= sqlite:///instance/leasehold.db
demo: $(STAMP) $(HTMX)
	$(BIN)/python -m workers.demo --store "$(STORE)"

# Every benchmark and speed target a run of Leasehold alone can check,
# 3 runs each, in one table (median, min-max, target, met?); ~11 min on 2 CPUs.
# BENCH_ARGS="--quick" for a smoke run; bench/README.md has the rest.
# bench-scale: the same figures with 1,000,000 finished jobs already in each store.
BENCH_ARGS ?=
.PHONY: bench-scale
bench: $(STAMP)
	$(SERVICES) \
	$(BIN)/python -m bench.run_all $(BENCH_ARGS) && \
	$(BIN)/python -m bench.job_log_cost

bench-scale: $(STAMP)
	$(SERVICES) \
	$(BIN)/python -m bench.run_all --scale --metrics enqueue,drain,latency $(BENCH_ARGS)

# Retention: pruning 100,000 finished jobs on each store (time, longest batch) and the drain
# with unique keys and a paused queue against a plain drain (bench/retention.py).
.PHONY: bench-retention
bench-retention: $(STAMP)
	$(SERVICES) \
	$(BIN)/python -m bench.retention $(BENCH_ARGS)

# The console at scale: p50/p99 of every console page (overview, job lists and filters, a deep
# page, the job page, the searches, a bulk preview) with 1,000,000 jobs of mixed statuses in
# each store (bench/console_pages.py; ~8 min a store). BENCH_ARGS="--jobs 20000" for a smoke run.
.PHONY: bench-console
bench-console: $(STAMP)
	$(SERVICES) \
	$(BIN)/python -m bench.console_pages $(BENCH_ARGS)

# The API: POST /api/jobs and an async endpoint under gunicorn (gunicorn.conf.py, 2 processes
# x 4 threads, 16 clients) side by side with a bare Flask app (bench/bare_app.py) on every
# store: req/s, p50/p99, the ratio and its target (bench/api_enqueue.py; ~4 min).
.PHONY: bench-api
bench-api: $(STAMP)
	$(SERVICES) \
	$(BIN)/python -m bench.api_enqueue $(BENCH_ARGS)

# A drain on a throwaway 3-master Redis Cluster, the namespace on one master against shards=3,
# and the Redis CPU a job on each master with the ceiling it gives (bench/cluster_drain.py; ~1 min).
.PHONY: bench-cluster
bench-cluster: $(STAMP)
	@command -v redis-server >/dev/null || { apt-get update && apt-get install -y redis-server; }
	$(BIN)/python -m bench.cluster_drain $(BENCH_ARGS)

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	VULTURE=$(BIN)/vulture .ci/vulture.sh

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Stops only the throwaway servers scripts/services.sh started (never the machine's own).
services-stop:
	scripts/services.sh stop

# Removes the virtualenv and tool caches. Leaves instance/ and .services/ alone.
clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis test-artifacts build dist *.egg-info
	find . -path ./instance -prune -o -path ./.services -prune -o \
		-type d -name __pycache__ -prune -exec rm -rf {} +

# The long soak of tests/faults: 5,000 jobs on 16 worker processes per
# store while children are killed; 500 burst-worker runs a store under CPU load (every exit 0,
# every job Completed); then the long PostgreSQL scenarios (LEASEHOLD_SOAK_LONG=1:
# a transaction held 60 s, a 10 s crash-restart of a private cluster, ten rounds of
# terminated backends); prints the soak table and the measured figures (~40 minutes).
SOAK_JOBS ?= 5000
SOAK_PROCESSES ?= 16
SOAK_KILLS ?= 12
BURST_SOAK_RUNS ?= 500
.PHONY: soak
soak: $(STAMP)
	$(SERVICES) \
	LEASEHOLD_SOAK_JOBS=$(SOAK_JOBS) LEASEHOLD_SOAK_PROCESSES=$(SOAK_PROCESSES) \
	LEASEHOLD_SOAK_KILLS=$(SOAK_KILLS) LEASEHOLD_SOAK_LONG=1 LEASEHOLD_BURST_SOAK_RUNS=$(BURST_SOAK_RUNS) \
	$(BIN)/pytest tests/faults/test_soak.py tests/faults/test_burst_soak.py tests/faults/test_pg_long_transaction.py \
		tests/faults/test_pg_restart.py tests/faults/test_pg_terminate.py \
		-m faults -p no:cacheprovider -q -s $(PYTEST_ARGS)

# Side by side: Leasehold with huey, dramatiq, rq, celery, arq (Redis) and
# procrastinate (PostgreSQL) in one run: single and bulk enqueue, drain (each system's fastest
# configuration of a small sweep; Leasehold with every feature on, and plain), latency with idle
# workers, CPU per job, worker RSS; then the API against a bare Flask app (bench/api_enqueue.py).
# Prints ratios and every speed target as met or not (~25-35 min). Own venvs: bench/.peers-venv.
# BENCH_PEERS_ARGS="--quick" for a smoke run; BENCH_API_ARGS: extra arguments of bench/api_enqueue.py.
BENCH_PEERS_ARGS ?=
BENCH_API_ARGS ?=
.PHONY: bench-peers
bench-peers: $(STAMP)
	bench/peers/setup.sh
	$(SERVICES) \
	BENCH_PEERS_REDIS_URL="$${BENCH_PEERS_REDIS_URL:-$${LEASEHOLD_TEST_REDIS_URL%/*}/13}" \
	$(BIN)/python -m bench.peers.run --sweep --api --api-args "$(BENCH_API_ARGS)" $(BENCH_PEERS_ARGS)

# Redis server instructions a job (callgrind; the same count every run, unlike seconds):
# Leasehold (every feature on) and its Redis peers, single and bulk enqueue and a drain, then
# Leasehold's store alone one job a call and batched (bench/peers/life_cost.py), on one
# redis-server of its own under valgrind (bench/peers/cost.py; ~2 min); every budget, met or
# not. BENCH_COST_ARGS: its options. Then a 3-master cluster under valgrind, unsharded against
# shards=3: each master's share of a 3-queue drain (bench/peers/shard_cost.py; ~2 min).
BENCH_COST_ARGS ?=
.PHONY: bench-cost
bench-cost: $(STAMP)
	@command -v valgrind >/dev/null || { apt-get update && apt-get install -y valgrind; }
	bench/peers/setup.sh
	$(SERVICES) \
	$(BIN)/python -m bench.peers.cost $(BENCH_COST_ARGS) && \
	$(BIN)/python -m bench.peers.shard_cost
