# Two commands matter: `make demo` (set everything up, run the example pipeline) and
# `make test` (lint, then the whole suite, as CI runs it). Both install what they need first.
PYTHON ?= python3
PIP := $(PYTHON) -m pip
DEMO_DIR ?= demo

# Compiled modules are kept, outside the tree: where PYTHONDONTWRITEBYTECODE is set, every
# `coord` process a test starts compiled the whole package again (~0.15 s of CPU each).
export PYTHONPYCACHEPREFIX := $(CURDIR)/.cache/pycache
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install system-deps python-deps proto engine-image install-check test test-fast demo bench lint clean

install: system-deps python-deps proto

# Debian packages: bubblewrap for the sandbox runtime; Podman for the container runtime;
# chromium for the browser tests (the lineage page, coord serve's web view), driven by Playwright.
system-deps:
	@command -v bwrap >/dev/null || { apt-get update -qq && apt-get install -y -qq bubblewrap; }
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }
	bash engines/spark/podman-setup.sh

# Installed again only when pyproject.toml changed since (the stamp is in .cache/, gitignored)
# or the installed package is another checkout's: a `make test-fast` does not spend 10 s on
# pip finding everything in place.
python-deps: .cache/python-deps.stamp
	@cd / && $(PYTHON) -c "import coordinator, sys; sys.exit(coordinator.__file__ != '$(CURDIR)/coordinator/__init__.py')" \
		2>/dev/null || $(PIP) install -q -e '$(CURDIR)[dev]'

.cache/python-deps.stamp: pyproject.toml
	$(PIP) install -q -e '.[dev]'
	@mkdir -p .cache && touch $@

# gRPC stubs for the coordinator and the engine, generated from proto/engine.proto.
proto:
	bash proto/generate.sh

# The container image, and for the sandbox this machine's class archive of Spark (faster starts).
engine-image: install
	bash engines/spark/build-image.sh
	$(PYTHON) -m coordinator.cli system prepare

# Three workers on two cores, each with one engine its Spark tests share (the Spark tests of a
# module stay on one worker, tests/conftest.py): a third fills the time the others spend
# waiting on servers, engines and sleeps. Clean-clone CI: tests 15:55 with three, 16:58 with
# four (each worker's engine and the Spark chains then compete for the cores).
XDIST := -n 3 --dist loadgroup

test: install engine-image lint install-check
	$(PYTHON) -m pytest -q $(XDIST) --durations=20

# A plain `pip install .` (no [dev] extras) in a fresh virtual environment, and a user's first
# pull with its `coord` (tests/install/plain_pull.sh): what the commands import is declared in
# pyproject.toml and what they read (the manifests' schemas) is in the package. Out of the tree:
# the clone's .cache/, reused wheels from pip's cache.
PLAIN_VENV := $(CURDIR)/.cache/plain-venv
install-check: proto
	rm -rf $(PLAIN_VENV) && $(PYTHON) -m venv $(PLAIN_VENV)
	$(PLAIN_VENV)/bin/pip install -q '$(CURDIR)'
	rm -rf '$(CURDIR)/build'
	bash tests/install/plain_pull.sh $(PLAIN_VENV)/bin/coord

# Everything but the tests that run Spark, start engines, need containers or a browser: no
# engine starts (a test that opens one fails).
test-fast: python-deps proto lint
	$(PYTHON) -m pytest -q $(XDIST) -m "not spark and not engine_start and not container and not browser"

demo: install
	bash examples/demo.sh $(DEMO_DIR)

bench: install
	$(PYTHON) bench/run_all.py

# ruff, then mypy over coordinator/ (settings in pyproject.toml): a type error fails CI.
lint:
	$(PYTHON) -m ruff check coordinator engines tests bench
	$(PYTHON) -m mypy

clean:
	rm -rf $(DEMO_DIR) .pytest_cache .hypothesis build *.egg-info $(PLAIN_VENV)
