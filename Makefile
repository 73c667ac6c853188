# Two commands matter: `make run` (the service with its embedded defaults) and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: install run test lint typecheck unit integration schemas facts kafka-up kafka-down cluster-up cluster-down postgres-up postgres-down bench load compiled bench-compiled constraints rules-test clean

# Installs the versions deploy/docker/constraints.txt pins (those the tests last passed on, and
# the image's), so a dependency's new release changes nothing until `make constraints` takes it.
$(VENV)/.installed: pyproject.toml deploy/docker/constraints.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q -U pip
	$(VENV)/bin/pip install -q -c deploy/docker/constraints.txt -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# The local broker on KAFKA_PORT, unless BLACKJACK_KAFKA_BOOTSTRAP names another (its own
# address, as 127.0.0.1 or localhost, is the local broker's): said on stderr either way.
KAFKA_SH ?= deploy/kafka/kafka.sh
LOCAL_BROKER = port="$${KAFKA_PORT:-9092}"; \
	case "$$BLACKJACK_KAFKA_BOOTSTRAP" in \
	  "" | "127.0.0.1:$$port" | "localhost:$$port") $(KAFKA_SH) up >&2 ;; \
	  *) echo "make: the broker at $$BLACKJACK_KAFKA_BOOTSTRAP (BLACKJACK_KAFKA_BOOTSTRAP); no local broker started" >&2 ;; \
	esac

# The local broker (fetched from Maven Central on first use), then the service on
# http://127.0.0.1:8080 with a development shoe key generated once into the git-ignored var/.
# The service connects to the broker the script started (KAFKA_PORT, 9092) unless
# BLACKJACK_KAFKA_BOOTSTRAP names another, which is then used and no local broker started.
run: install
	@$(LOCAL_BROKER)
	BLACKJACK_KAFKA_BOOTSTRAP="$${BLACKJACK_KAFKA_BOOTSTRAP:-127.0.0.1:$${KAFKA_PORT:-9092}}" \
	BLACKJACK_SHOE_KEY_FILE="$${BLACKJACK_SHOE_KEY_FILE:-var/shoe.key}" $(VENV)/bin/blackjack serve

lint: install
	$(VENV)/bin/ruff check services tests
	$(VENV)/bin/ruff format --check services tests

typecheck: install
	$(VENV)/bin/mypy

unit: install
	$(VENV)/bin/pytest -q tests/unit

integration: install
	$(VENV)/bin/pytest -q tests/integration

# Everything: lint, types, unit tests, and the integration tests on a real broker and databases.
test: lint typecheck
	$(VENV)/bin/pytest -q tests

# Moves the pins to the newest versions pyproject.toml allows (every dependency's own too), and
# writes them down: then `make test`, and commit constraints.txt with what it needed.
constraints: install
	$(VENV)/bin/pip install -q -U --upgrade-strategy eager -e '.[dev]'
	$(VENV)/bin/pip freeze --exclude-editable | \
	  sed '1i # The versions make install, .ci/run and the image install (pip install -c): those this\n# repository'"'"'s tests pass on. `make constraints` moves them to the newest pyproject.toml allows.' \
	  >deploy/docker/constraints.txt

schemas: install
	$(VENV)/bin/blackjack schemas --write
	$(VENV)/bin/blackjack asyncapi --write
	$(VENV)/bin/blackjack openapi --write

# The decider's typed event constructors, generated from the event models
# (services/blackjack/domain/facts.py; a unit test fails when they drift).
facts: install
	$(PY) -m blackjack.codegen.facts --write

# The Prometheus rules through Prometheus's own engine: promtool (built from the Go module
# proxy into .cache/tools/ on first use) checks them and runs their unit tests
# (deploy/prometheus/rules.test.yml); `make test` runs the same in tests/deploy.
rules-test:
	deploy/prometheus/promtool.sh check rules deploy/prometheus/rules.yml
	deploy/prometheus/promtool.sh test rules deploy/prometheus/rules.test.yml

kafka-up:
	deploy/kafka/kafka.sh up

kafka-down:
	deploy/kafka/kafka.sh down

# Three KRaft nodes on KAFKA_CLUSTER_PORT.. (29192), for the failover drill (docs/load.md)
cluster-up:
	deploy/kafka/cluster.sh up

cluster-down:
	deploy/kafka/cluster.sh down

postgres-up:
	deploy/postgres/postgres.sh up

postgres-down:
	deploy/postgres/postgres.sh down

# Rounds per second on one core through the real decider, e.g.
#   make bench BENCH_ARGS='--baseline-cmd ".venv/bin/python /tmp/bjbase/run_1anddone.py {seconds} {variant}"'
# (docs/benchmark.md: how to fetch and wrap the baseline simulator; never committed).
bench: install
	$(VENV)/bin/blackjack bench $(BENCH_ARGS)

# The command handler under load on the local broker (KAFKA_PORT, as `run`), against a bare
# transactional echo, with the proof that nothing was lost or done twice (docs/load.md), e.g.
#   make load LOAD_ARGS='--tables 40 --rounds 50 --variant mini-h17'
load: install
	@$(LOCAL_BROKER)
	BLACKJACK_KAFKA_BOOTSTRAP="$${BLACKJACK_KAFKA_BOOTSTRAP:-127.0.0.1:$${KAFKA_PORT:-9092}}" \
	$(VENV)/bin/blackjack loadtest $(LOAD_ARGS)

# The same source with the rules engine compiled by mypyc (deploy/mypyc/build.sh): the
# simulator's fast path. Any blackjack command runs on it with PYTHONPATH=.build/compiled.
compiled: install
	PY=$(PY) deploy/mypyc/build.sh

bench-compiled: compiled
	PYTHONPATH=.build/compiled $(VENV)/bin/blackjack bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .build .mypy_cache .ruff_cache .pytest_cache .hypothesis
