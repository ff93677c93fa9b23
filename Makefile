# Two commands do all the set-up on a fresh machine:
#   make run    create .venv if missing, install, measure the default sweep, print the Table-7 view
#   make test   create .venv if missing, install the dev and docs extras, lint, pytest without the tests marked slow
#   make test-slow  only those (end-to-end sweeps; tests of 5 s or more), two at a time (pytest-xdist); CI runs both
#   make docs       the documentation site, built strictly (a warning fails it) and offline into site/;
#   make docs-serve ... served at http://127.0.0.1:8000 while you edit docs/
#   make docs-reference  the reference pages' generated text (commands, flags, export columns, exit codes) made again
#   make docs-images  the pictures of docs/images/, made again from a small run (about 1.5 minutes; needs chromium)
#   make gpu-test   on a GPU machine, the tests marked gpu (pytest -m gpu), a skip failing (DLPERF_REQUIRE=cuda)
#   make gpu-check  on a GPU machine, the acceptance check (benchmarks/gpu_check.py): PASS/FAIL lines into GPU_CHECK_OUT
# and one more for the other frameworks:
#   make envs   a dedicated environment each for jax, tensorflow and mxnet (under $DLPERF_DATA_DIR, default
#               ~/.local/share/dlperf), installed in parallel from the committed constraints files and verified
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The default sweep: the seven networks at the paper's batch sizes, every thread count up to the cores,
# each cell capped so the whole sweep takes minutes, not hours. RUN_ARGS replaces these flags, caps included:
# make run RUN_ARGS="--max-time 20 --timeout 300 --threads 1,2,4".
RUN_ARGS ?= --max-time 20 --timeout 300

ENVS ?= jax tensorflow mxnet

.PHONY: run test test-slow docs docs-reference docs-serve docs-images gpu-test gpu-check lint format pytest clean envs

$(STAMP): pyproject.toml
	@echo "installing dlperf with PyTorch, Ray and the test and docs tools into $(VENV) (about a minute)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[torch,dev,docs,ray]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/dlperf run $(RUN_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples docs
	$(BIN)/ruff format --check src tests benchmarks examples docs

format: $(STAMP)
	$(BIN)/ruff format src tests benchmarks examples docs
	$(BIN)/ruff check --fix src tests benchmarks examples docs

# The tests keep compiled bytecode (__pycache__, ignored by git) even where the environment says not to write it
# (PYTHONDONTWRITEBYTECODE, set in some containers): else every test process and each of the ~thousand dlperf children
# they start compiles dlperf and re-rewrites the tests' asserts again (measured: 777 s of test time became 711 s).
TESTENV = env -u PYTHONDONTWRITEBYTECODE

# Each prints its 15 slowest tests, so a test that grows slow shows in CI's output. The fast tests run two at a time
# (pytest-xdist: most of their time is starting interpreters and frameworks, one core each); those marked serial
# count the cores a step keeps busy or compare two timings, so they run after, alone.
pytest: $(STAMP)
	$(TESTENV) $(BIN)/python -m pytest -q -m "not slow and not serial" -n 2 -rs --durations=15 $(PYTEST_ARGS)
	$(TESTENV) $(BIN)/python -m pytest -q -m "serial and not slow" --durations=5 $(PYTEST_ARGS)

test: lint pytest

# The slow tests are independent sweeps in their own child processes and temporary stores, and the tests of 5 s or more
# whose kind a faster test covers in make test (one TensorFlow process of several, one browser test of four): two run
# side by side; those also marked serial (two timings compared) alone, after them.
test-slow: $(STAMP)
	$(TESTENV) $(BIN)/python -m pytest -q -m "slow and not serial" -n 2 -rs --durations=15 $(PYTEST_ARGS)
	$(TESTENV) $(BIN)/python -m pytest -q -m "slow and serial" --durations=5 $(PYTEST_ARGS)

# The site: docs/ and mkdocs.yml, the command reference, export columns and exit codes generated from the code
# (docs/hooks/), ARCHITECTURE.md and BENCHMARKS.md included; --strict turns a broken link or missing page into a failure.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# The reference pages' generated text (docs/reference/: every command and flag, export column and exit code), written
# again from the code between its markers; tests/docs/test_reference.py fails while what is committed is stale.
docs-reference: $(STAMP)
	$(BIN)/python docs/hooks/generated.py

docs-serve: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve

# The pictures the pages show (docs/images/*.png), made by docs/images.py from tiny workloads with short timers in a
# temporary store: the report's sections screenshotted in headless Chromium, dlperf plot's charts, a profile's bar, a
# crossover chart. Commit what it writes; tests/docs/test_images.py checks the list against the files.
docs-images: $(STAMP)
	$(BIN)/python docs/images.py

# Every test marked gpu, slow ones included, one at a time (they share the GPUs): on a GPU machine a skip is a failure.
# The tests of 2 GPUs fail only where GPU_REQUIRE lists multi-gpu too: make gpu-test GPU_REQUIRE=cuda,multi-gpu
GPU_REQUIRE ?= cuda
gpu-test: $(STAMP)
	DLPERF_REQUIRE=$(GPU_REQUIRE) $(BIN)/python -m pytest -q -m gpu -rs --durations=15 $(PYTEST_ARGS)

# The GPU acceptance check, with the machine's own torch and JAX and dlperf from this tree (nothing installed): a
# Markdown table, its JSON, the cells and a log in GPU_CHECK_OUT; GPU_CHECK_ARGS="--only table7,modes" reruns sections.
# On a lent GPU (15 minutes in all), two calls: GPU_CHECK_ARGS="--budget 450", its files brought back to gpu-check/call1;
# then, with the device tool's carry naming gpu-check/call1, GPU_CHECK_ARGS="--resume gpu-check/call1 --only left
# --budget 300" (docs/guides/ci.md).
GPU_CHECK_OUT ?= gpu-check
GPU_PYTHON ?= python3
gpu-check:
	DLPERF_COMMIT=$${DLPERF_COMMIT:-$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} PYTHONUNBUFFERED=1 \
		$(GPU_PYTHON) benchmarks/gpu_check.py $(GPU_CHECK_OUT) $(GPU_CHECK_ARGS)

# One install per framework, side by side (they download, mostly); each log is printed when it fails.
envs: $(STAMP)
	@pids=""; for fw in $(ENVS); do \
		$(BIN)/dlperf env install $$fw > $(VENV)/env-$$fw.log 2>&1 & pids="$$pids $$!:$$fw"; \
	done; status=0; for p in $$pids; do \
		if wait $${p%%:*}; then tail -n 1 $(VENV)/env-$${p#*:}.log; \
		else echo "env install $${p#*:} failed:"; cat $(VENV)/env-$${p#*:}.log; status=1; fi; \
	done; exit $$status

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache site
