# tracescore: the two set-up commands are `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install backends demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# --no-compile: pip would byte-compile every module of every package (half the install's time);
	# Python compiles, and caches, only what is imported.
	$(PY) -m pip install -q --no-compile -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# Real trace backends for tests/backends/, each in its own virtualenv (their dependencies
# never mix with tracescore's). Versions are the ones the tests were written against;
# a new version gets a new folder. They are kept per machine, not per clone, so a fresh
# clone's `make test` reuses them (each takes minutes to install).
BACKENDS ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/tracescore/backends
PHOENIX_VERSION := 20.26.1
MLFLOW_VERSION := 3.17.2
PHOENIX_VENV := $(BACKENDS)/phoenix-$(PHOENIX_VERSION)
MLFLOW_VENV := $(BACKENDS)/mlflow-$(MLFLOW_VERSION)
export TRACESCORE_PHOENIX_VENV := $(abspath $(PHOENIX_VENV))
export TRACESCORE_MLFLOW_VENV := $(abspath $(MLFLOW_VENV))

$(PHOENIX_VENV)/.installed:
	test -x $(PHOENIX_VENV)/bin/python || $(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install -q --upgrade pip
	$(PHOENIX_VENV)/bin/python -m pip install -q 'arize-phoenix==$(PHOENIX_VERSION)'
	touch $@

$(MLFLOW_VENV)/.installed:
	test -x $(MLFLOW_VENV)/bin/python || $(PYTHON) -m venv $(MLFLOW_VENV)
	$(MLFLOW_VENV)/bin/python -m pip install -q --upgrade pip
	$(MLFLOW_VENV)/bin/python -m pip install -q 'mlflow==$(MLFLOW_VERSION)'
	touch $@

backends:  # both at once: each is mostly waiting on downloads
	$(MAKE) -j2 $(PHOENIX_VENV)/.installed $(MLFLOW_VENV)/.installed

lint: install
	$(VENV)/bin/ruff check collector scorers adapters tests bench
	$(VENV)/bin/mypy scorers adapters collector

# Parallel workers (pytest-xdist): most tests wait on sockets, subprocesses and timers, so more
# workers than cores; the tests of one real backend share a worker (conftest.py).
TEST_WORKERS ?= 4

test: lint backends
	$(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist loadgroup

demo: install
	$(VENV)/bin/tracescore demo

clean:
	rm -rf $(VENV) .tracescore
