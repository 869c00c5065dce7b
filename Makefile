# Quick start: `make serve` (install + serve the bundled examples on an embedded PostgreSQL)
# and `make test` (install + run the whole suite). Both make .venv from requirements/lock.txt
# when it is missing or the lock changed.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
APP    ?= tether.examples:app
PORT   ?= 8000
# Every Python package our own runs use (the runtime, dev, docs and bench extras, pip, setuptools
# and uv), pinned with hashes; pyproject.toml keeps ranges for the published package.
LOCK   := requirements/lock.txt
# The lock's subset a deployment installs (`make lock` writes both)
RUNTIME := requirements/runtime.txt

.PHONY: serve test test-external-pg check lint docs bench bench-tasks clean chaos chaos-short lock

# .venv holds exactly the lock: made anew (venv --clear) whenever the lock's text changes, so
# nothing from an older lock stays; pip checks every hash and resolves nothing (--no-deps).
# .venv/.lock is the copy it was made from (a lock rewritten unchanged costs nothing).
$(VENV)/.lock: $(LOCK)
	if cmp -s $(LOCK) $@; then touch $@; else \
		$(PYTHON) -m venv --clear $(VENV) && \
		$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r $(LOCK) && \
		cp $(LOCK) $@; fi

# The package itself, editable, built with the locked setuptools; `pip check` fails when the
# lock no longer satisfies pyproject.toml (run `make lock`).
$(BIN)/tether: $(VENV)/.lock pyproject.toml
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	$(BIN)/python -m pip check
	touch $(BIN)/tether

# Re-resolves requirements/lock.txt from pyproject.toml and requirements/tools.in (uv; pins kept
# where they still fit: `make lock LOCK_ARGS=--upgrade` takes the newest releases,
# `LOCK_ARGS='--upgrade-package NAME'` one package); requirements/runtime.txt, the part of it a
# deployment needs (the package's own dependencies, no extras, at the lock's versions); and
# tests/node/package-lock.json from tests/node/package.json (whose versions are exact). Commit
# them with what they change.
lock: $(VENV)/.lock
	$(BIN)/uv pip compile --quiet --universal --generate-hashes --extra dev --extra bench \
		--custom-compile-command 'make lock' $(LOCK_ARGS) \
		pyproject.toml requirements/tools.in -o $(LOCK)
	$(BIN)/uv pip compile --quiet --universal --generate-hashes --custom-compile-command 'make lock' \
		--constraint $(LOCK) pyproject.toml requirements/runtime.in -o $(RUNTIME)
	cd tests/node && npm install --package-lock-only --omit-lockfile-registry-resolved \
		--no-audit --no-fund --loglevel=error

serve: $(BIN)/tether
	$(BIN)/tether serve $(APP) --port $(PORT)

# The suite with branch coverage ([tool.coverage] in pyproject); fails under the recorded floor.
# Two processes (pytest-xdist), each test file on one of them, each with its own PostgreSQL.
test: lint docs
	scripts/ensure-chromium  # Debian's chromium for the console's browser tests (tests/console)
	scripts/ensure-test-packages  # Debian's nginx, postgresql, systemd (gateway, TLS, units)
	$(BIN)/python -m pytest -n 2 --dist loadfile --cov --cov-report=term:skip-covered --durations=25

# The whole suite through PgBouncer (transaction pooling, LISTEN on a direct connection), then
# the short reliability suite directly, against a throwaway cluster of Debian's `postgresql`
# package (installed when missing, as is `pgbouncer`; a different major version from the
# embedded one).
test-external-pg: $(BIN)/tether
	PY=$(BIN)/python scripts/external-pg

lint: $(BIN)/tether
	$(BIN)/ruff check src tests bench scripts reliability deploy
	$(BIN)/ruff format --check src tests bench reliability deploy
	$(BIN)/mypy
	$(BIN)/lint-imports

# The user guide (docs/, mkdocs.yml) into site/; --strict fails on any warning (a broken link,
# a page missing from the nav). The CLI and settings reference is generated from the code.
docs: $(BIN)/tether
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

check: test

# The lock holds the bench extra (DBOS, FastMCP) too.
bench: $(BIN)/tether
	$(BIN)/python bench/engine.py

bench-tasks: $(BIN)/tether
	$(BIN)/python bench/tasks_get.py --rounds 3

# Reliability suite (not part of `make test`): chaos with kills, database outages, a paused
# worker, soak, bad input at volume. About 30 min; chaos-short about 4 min.
chaos: $(BIN)/tether
	$(BIN)/python -m reliability.chaos $(CHAOS_ARGS)

chaos-short: $(BIN)/tether
	$(BIN)/python -m reliability.chaos --short $(CHAOS_ARGS)

clean:
	rm -rf $(VENV) .tether .pytest_cache .mypy_cache site
