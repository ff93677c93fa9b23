# Two commands do all the set-up on a fresh machine:
#   make run    create .venv if missing, install, measure the default sweep, print the Table-7 view
#   make test   create .venv if missing, install dev extras, lint, pytest
# and one more for the other frameworks:
#   make envs   a dedicated environment each for jax, tensorflow and mxnet (under $DLPERF_DATA_DIR, default
#               ~/.local/share/dlperf), installed in parallel from the committed constraints files and verified
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The default sweep: the seven networks at the paper's batch sizes, every thread count up to the cores,
# each cell capped so the whole sweep takes minutes, not hours. Override: make run RUN_ARGS="--threads 1,2,4".
RUN_ARGS ?= --max-time 20 --timeout 300

ENVS ?= jax tensorflow mxnet

.PHONY: run test lint format pytest clean envs

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[torch,dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/dlperf run $(RUN_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/ruff format --check src tests benchmarks examples

format: $(STAMP)
	$(BIN)/ruff format src tests benchmarks examples
	$(BIN)/ruff check --fix src tests benchmarks examples

pytest: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

test: lint pytest

# One install per framework, side by side (they download, mostly); each log is printed when it fails.
envs: $(STAMP)
	@pids=""; for fw in $(ENVS); do \
		$(BIN)/dlperf env install $$fw > $(VENV)/env-$$fw.log 2>&1 & pids="$$pids $$!:$$fw"; \
	done; status=0; for p in $$pids; do \
		if wait $${p%%:*}; then tail -n 1 $(VENV)/env-$${p#*:}.log; \
		else echo "env install $${p#*:} failed:"; cat $(VENV)/env-$${p#*:}.log; status=1; fi; \
	done; exit $$status

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
