# Quick start: `make serve` (install + serve the bundled examples on an embedded PostgreSQL)
# and `make test` (install dev deps + run the whole suite). Both create .venv when missing.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
APP    ?= tether.examples:app
PORT   ?= 8000

.PHONY: serve test check lint bench clean

$(BIN)/tether: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(BIN)/tether

serve: $(BIN)/tether
	$(BIN)/tether serve $(APP) --port $(PORT)

test: lint
	$(BIN)/python -m pytest

lint: $(BIN)/tether
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

check: test

bench: $(BIN)/tether
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python bench/engine.py

clean:
	rm -rf $(VENV) .tether .pytest_cache .mypy_cache
