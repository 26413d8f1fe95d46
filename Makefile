# Development set-up. torch is pinned here (not in pyproject) so pip takes the CPU build
# that lies on this machine instead of downloading a multi-GB CUDA build.
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN = $(VENV)/bin

.PHONY: setup demo demo-all docs test test-slow test-cluster bench lint clean

# pip's output (progress, warnings about ignored locations) goes to $(VENV)/pip.log, shown only
# when a step fails: the first screen of `make demo` is the result, not the installation.
LOG = $(VENV)/pip.log
PIP = $(BIN)/pip install --disable-pip-version-check -q

# _em.c: the line counter's compiled EM, built by the editable install (rebuilt when it changes)
$(BIN)/.installed: pyproject.toml src/condlab/_accel/_em.c
	@echo "setting up $(VENV) (a few minutes the first time; pip's output goes to $(LOG))"
	@$(PYTHON) -m venv $(VENV)
	@: > $(LOG)
	@$(PIP) --upgrade pip >> $(LOG) 2>&1 || { cat $(LOG); exit 1; }
	@$(PIP) "$(TORCH)" >> $(LOG) 2>&1 || { cat $(LOG); exit 1; }
	@$(PIP) -e ".[dev]" >> $(LOG) 2>&1 || { cat $(LOG); exit 1; }
	@touch $@

setup: $(BIN)/.installed

demo: setup  ## the main job: reproduce the paper's Fig. 3 (3 data draws x 3 init seeds), with a verdict on each claim; then its HTML page
	$(BIN)/condlab reproduce fig3
	$(BIN)/condlab report runs/reproduce/latest --out runs/reproduce/latest/report.html

demo-all: setup  ## every experiment of the documents, quick mode, with a summary table
	$(BIN)/condlab reproduce all --quick

docs: setup  ## every experiment with the default grid and diagnostics, then docs/reproduction.md from it
	$(BIN)/condlab reproduce all
	$(BIN)/python tools/make_docs.py runs/reproduce/latest

test: setup  ## the default test suite (under 5 minutes on 2 cores)
	$(BIN)/pytest

test-slow: setup  ## whole experiments and slower scientific checks on trained networks
	$(BIN)/pytest -m 'slow or experiment'

test-cluster: setup  ## the Ray executor on a loopback two-node cluster and S3 server, as CI runs it (root)
	@$(PIP) "ray[default]==2.60.0" "moto[server]==5.2.5" >> $(LOG) 2>&1 || { cat $(LOG); exit 1; }
	CONDLAB_REQUIRE_RAY_TEST=1 $(BIN)/pytest -q -m slow tests/test_sweep_ray.py

bench: setup
	$(BIN)/python benchmarks/bench_batched.py
	$(BIN)/python benchmarks/bench_wide.py
	$(BIN)/python benchmarks/bench_reproduce.py
	$(BIN)/python benchmarks/bench_sweep.py

lint: setup
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) runs build *.egg-info
