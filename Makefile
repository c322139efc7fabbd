# The two commands: `make demo` and `make test`. Both set up what they need
# and can be run again at any time.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
KAFEED := $(VENV)/bin/kafeed
EXTRAS ?= dev

.PHONY: setup fetch test test-all demo lint typecheck clean

setup: $(VENV)/.installed-$(EXTRAS)

# uv keeps a per-machine cache, so a second clone installs PyTorch in seconds.
$(VENV)/.installed-$(EXTRAS): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	test -x $(UV) || $(PY) -m pip install -q uv
	$(UV) pip install --python $(PY) -q -e ".[$(EXTRAS)]"
	touch $@

fetch: setup
	$(KAFEED) broker fetch

test: fetch lint
	$(PY) -m pytest -q

test-all: fetch
	$(PY) -m pytest -q -m "slow or not slow"

lint: setup
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/mypy

demo: fetch
	$(KAFEED) demo

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
