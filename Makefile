# Development set-up. torch is pinned here (not in pyproject) so pip takes the CPU build
# that lies on this machine instead of downloading a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN = $(VENV)/bin

.PHONY: setup demo test test-slow bench lint clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

setup: $(BIN)/.installed

demo: setup  ## the main job: Fig. 3's tanh network, 8 seeds in one batch, analysed at epoch 100
	$(BIN)/condlab train --preset fig3 --seeds 8 --out runs/fig3-demo
	$(BIN)/condlab analyze runs/fig3-demo/seed0 --epoch 100

test: setup  ## the default test suite (under ~10 minutes on 2 cores)
	$(BIN)/pytest

test-slow: setup  ## slower scientific checks on trained networks
	$(BIN)/pytest -m slow

bench: setup
	$(BIN)/python benchmarks/bench_batched.py

lint: setup
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) runs build *.egg-info
