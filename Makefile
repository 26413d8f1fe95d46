# Development set-up. torch is pinned here (not in pyproject) so pip takes the CPU build
# that lies on this machine instead of downloading a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN = $(VENV)/bin

.PHONY: setup demo demo-all test test-slow bench lint clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

setup: $(BIN)/.installed

demo: setup  ## the main job: reproduce the paper's Fig. 3 (5 seeds), with a verdict on each claim
	$(BIN)/condlab reproduce fig3

demo-all: setup  ## every experiment of the documents, quick mode, with a summary table
	$(BIN)/condlab reproduce all --quick

test: setup  ## the default test suite (under ~10 minutes on 2 cores)
	$(BIN)/pytest

test-slow: setup  ## slower scientific checks on trained networks
	$(BIN)/pytest -m slow

bench: setup
	$(BIN)/python benchmarks/bench_batched.py
	$(BIN)/python benchmarks/bench_reproduce.py

lint: setup
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) runs build *.egg-info
