# The two commands: `make demo` and `make test`. Both set up what they need
# and can be run again at any time.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
UV := $(VENV)/bin/uv
KAFEED := $(VENV)/bin/kafeed
EXTRAS ?= dev

.PHONY: setup system-deps fetch test pytest test-all durations demo demo-sites demo-federated lint clean flower-venv

# Some machines set PYTHONDONTWRITEBYTECODE for everything; here it would make every
# pytest worker and every CLI a test starts compile its imports again (collection took
# 23-30 s a worker, 10 s of it in compile; 10 s with the bytecode cached).
unexport PYTHONDONTWRITEBYTECODE

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
# one test skips and says why. Never part of `make test`: a test command changes
# nothing outside the checkout and ~/.cache unless asked (.ci/run asks).
system-deps:
	@command -v prometheus >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null) \
	  || echo "prometheus not installed: its scrape test will be skipped"; }

# The tests spend most of their time waiting on brokers, group rebalances and child
# processes (about a third of one core busy when run one at a time), so they run in
# TEST_WORKERS pytest-xdist processes, each with its own broker; mypy runs beside them.
# On a quiet 2-core machine, 1,343 tests: 3 workers 535 s (1.4 cores busy), 4 workers 470 s.
TEST_WORKERS ?= 4

test: fetch
	@$(MAKE) --no-print-directory -j2 lint pytest

pytest: fetch
	$(PY) -m pytest -q -n $(TEST_WORKERS) --durations=15

# After a full run: the tests that took longest, so that a fresh clone starts them first.
durations:
	$(PY) -m tests.scheduling

test-all: fetch
	KAFEED_HYPOTHESIS=thorough $(PY) -m pytest -q -m "slow or not slow"

# mypy's cache lives beside uv's, per machine: a file whose hash it has seen is not checked
# again, so a second clone checks in seconds what took 25-65 s of CPU beside the tests.
MYPY_CACHE_DIR ?= $(HOME)/.cache/kafeed/mypy
export MYPY_CACHE_DIR

lint: setup
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/mypy

demo: fetch
	$(KAFEED) demo

demo-sites: fetch
	$(KAFEED) demo --sites

# Three sites and a coordinator on one machine (docs/federated.md).
demo-federated: fetch
	$(KAFEED) federate demo

# Flower, for benchmarks/bench_federated.py's comparison, in an environment of its own: flwr 1.42
# pins protobuf below 7 and kafeed needs 7. The same torch as ours, so uv links it from its cache.
FLOWER_VENV ?= $(HOME)/.cache/kafeed/flower-venv
flower-venv: setup
	test -x $(FLOWER_VENV)/bin/python || $(UV) venv -q --python $(PY) $(FLOWER_VENV)
	$(UV) pip install --python $(FLOWER_VENV)/bin/python -q "flwr==1.42.*" numpy \
	  "torch==$$($(PY) -c 'import torch; print(torch.__version__.split("+")[0])')"

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
