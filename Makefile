# tracescore: the two set-up commands are `make demo` and `make test`.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

lint: install
	$(VENV)/bin/ruff check collector scorers adapters tests bench
	$(VENV)/bin/mypy scorers adapters collector

test: lint
	$(VENV)/bin/pytest -q

demo: install
	$(VENV)/bin/tracescore demo

clean:
	rm -rf $(VENV) .tracescore
