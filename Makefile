# The two commands: `make demo` and `make test`. Both set up what they need
# and can be run again at any time.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
KAFEED := $(VENV)/bin/kafeed
EXTRAS ?= dev

.PHONY: setup system-deps fetch test test-all demo lint clean

setup: $(VENV)/.installed-$(EXTRAS)

# uv keeps a per-machine cache, so a second clone installs PyTorch in seconds.
$(VENV)/.installed-$(EXTRAS): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	test -x $(UV) || $(PY) -m pip install -q uv
	$(UV) pip install --python $(PY) -q -e ".[$(EXTRAS)]"
	touch $@

fetch: setup
	$(KAFEED) broker fetch

# Debian's Prometheus server, for the scrape test; best effort: without it that
# one test skips and says why.
system-deps:
	@command -v prometheus >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null) \
	  || echo "prometheus not installed: its scrape test will be skipped"; }

test: fetch lint system-deps
	$(PY) -m pytest -q --durations=15

test-all: fetch
	KAFEED_HYPOTHESIS=thorough $(PY) -m pytest -q -m "slow or not slow"

lint: setup
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/mypy

demo: fetch
	$(KAFEED) demo

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
