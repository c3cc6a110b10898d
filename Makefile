# `make run`: set up and serve on http://127.0.0.1:8080 (`umaserver dev`).  `make test`: set up and run every check.
# `make check`: lint, types and the tests that start no process, in parallel (a quick loop).
# `make bench` (QUICK=1 for a short subset): the benchmark, see bench/README.md.
# `make bench-ab [BASE=<commit>]`: the benchmark's regression gate, an A/B of BASE against this checkout.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CONFIG := local.toml

.PHONY: run test check lint typecheck unit unit-postgresql fuzz bench bench-ab bench-deps clean system-deps npm-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Reinstall only when a requirements file changed.
$(VENV)/.installed: requirements.txt requirements-dev.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

# `umaserver dev` (issue 26): writes local.toml (kept out of git) with a fresh secret the first
# time and reuses it, serves on http://127.0.0.1:8080 with a temporary database, and prints ready
# tokens for the README's seed (applied when the file is there).
SEED := umaserver/examples/seed.toml
run: $(VENV)/.installed
	$(BIN)/python -m umaserver dev --config $(CONFIG) $(if $(wildcard $(SEED)),--seed $(SEED))

# lint-imports: the layers and no-cycles contracts of pyproject.toml's [tool.importlinter].
lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-logo

typecheck: $(VENV)/.installed
	$(BIN)/mypy

# xmlsec1 lets the tests run pysaml2 as an independent SAML identity provider; chromium and
# chromium-driver run the browser tests (headless, offline); postgresql's server binaries run the
# throwaway cluster of the PostgreSQL tests (tests/postgres_fixture.py: initdb and postgres, never
# the package's own service). Debian packages, installed when missing; where they cannot be
# installed, `make test` stops saying what to install (it never skips them).
CHROMIUM := /usr/bin/chromium
CHROMEDRIVER := /usr/bin/chromedriver
system-deps:
	@missing=""; \
	command -v xmlsec1 >/dev/null || missing="$$missing xmlsec1"; \
	[ -x $(CHROMIUM) ] || missing="$$missing chromium"; \
	[ -x $(CHROMEDRIVER) ] || missing="$$missing chromium-driver"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then apt-get update -qq && apt-get install -y -qq $$missing >/dev/null; \
	  elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then sudo apt-get update -qq && sudo apt-get install -y -qq $$missing >/dev/null; \
	  else echo "install the Debian packages$$missing (apt-get install$$missing) to run the SAML interoperability, browser and PostgreSQL tests" >&2; exit 1; fi; \
	  [ -x $(CHROMIUM) ] && [ -x $(CHROMEDRIVER) ] && command -v xmlsec1 >/dev/null && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	    echo "installing$$missing failed: install the Debian packages$$missing (apt-get install$$missing) to run the SAML interoperability, browser and PostgreSQL tests" >&2; exit 1; }; \
	fi

# oidc-provider under Node.js runs as a real OpenID provider for the tests (tests/oidc_provider);
# `npm ci` again only when its lockfile changed (npm's own node_modules/.package-lock.json is the
# stamp). Without Node.js 20 and npm, `make test` stops saying so (it never skips those tests).
OIDC_PROVIDER := tests/oidc_provider
$(OIDC_PROVIDER)/node_modules/.package-lock.json: $(OIDC_PROVIDER)/package.json $(OIDC_PROVIDER)/package-lock.json
	@command -v npm >/dev/null && command -v node >/dev/null || { \
	  echo "install Node.js 20 and npm (node and npm on PATH) to run the OpenID provider tests ($(OIDC_PROVIDER))" >&2; exit 1; }
	@node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || { \
	  echo "node $$(node --version) is too old: install Node.js 20 to run the OpenID provider tests ($(OIDC_PROVIDER))" >&2; exit 1; }
	npm ci --prefix $(OIDC_PROVIDER) --no-audit --no-fund
	touch $@

npm-deps: $(OIDC_PROVIDER)/node_modules/.package-lock.json

# The tests run in parallel worker processes (pytest-xdist). Most of a live test's time is spent
# waiting on other processes (a server, the browser, PostgreSQL), so `unit` runs more workers than
# cores: WORKERS=N overrides it. A test that starts a process takes its port from free_port() and
# its files from tmp_path (never a fixed port or a path of the checkout); a session fixture runs
# once per worker; `--dist loadgroup` keeps the tests of a module that shares a fixture of its own
# (a server, a browser) on one worker (tests/conftest.py marks them). CHECK_WORKERS: `make check`,
# whose tests start no process, gains nothing past the cores.
WORKERS ?= 4
CHECK_WORKERS ?= 2
unit: $(VENV)/.installed system-deps npm-deps
	$(BIN)/pytest -n $(WORKERS) --dist loadgroup

# The live and browser flows again, each test on a fresh PostgreSQL database of a throwaway cluster
# (the storage conformance suite runs on both backends in `unit` already). The whole suite on
# PostgreSQL: `UMASERVER_TEST_DATABASE=postgresql make unit`.
unit-postgresql: $(VENV)/.installed system-deps npm-deps
	UMASERVER_TEST_DATABASE=postgresql $(BIN)/pytest -q -n $(WORKERS) --dist loadgroup tests/test_live_*.py tests/test_browser_*.py

test: lint typecheck unit unit-postgresql

# The quick loop: lint, types and the tests that start no process beside them (not `live`: no
# server, browser, OpenID provider or PostgreSQL cluster). Run `make test` before landing.
check: lint typecheck
	$(BIN)/pytest -q -n $(CHECK_WORKERS) -m "not live"

# The fuzz of tests/test_fuzz.py, longer: 1,000 examples per operation, a random seed each run
# (printed by Hypothesis on a failure; FUZZ_SEED=<n> repeats one).
FUZZ_EXAMPLES ?= 1000
FUZZ_SEED ?= random
fuzz: $(VENV)/.installed
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_SEED=$(FUZZ_SEED) $(BIN)/pytest -q tests/test_fuzz.py

# The benchmark (bench/README.md): wrk and postgresql from Debian's packages (installed when missing, like
# system-deps: it never skips), the bench tools of requirements-bench.txt beside the server's
# requirements, and oidc-provider (npm-deps) as the peer. Writes bench/results/latest.md, latest.json
# and throughput.png. `make bench QUICK=1`: a small subset with short runs, in under 2 minutes.
QUICK ?=
$(VENV)/.bench-installed: requirements.txt requirements-bench.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet -r requirements.txt -r requirements-bench.txt
	touch $@

bench-deps:
	@missing=""; \
	command -v wrk >/dev/null || missing="$$missing wrk"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then apt-get update -qq && apt-get install -y -qq $$missing >/dev/null; \
	  elif command -v sudo >/dev/null && command -v apt-get >/dev/null; then sudo apt-get update -qq && sudo apt-get install -y -qq $$missing >/dev/null; \
	  else echo "install the Debian packages$$missing (apt-get install$$missing) to run the benchmark" >&2; exit 1; fi; \
	  command -v wrk >/dev/null && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	    echo "installing$$missing failed: install the Debian packages$$missing (apt-get install$$missing) to run the benchmark" >&2; exit 1; }; \
	fi

bench: $(VENV)/.bench-installed bench-deps npm-deps
	QUICK=$(QUICK) $(BIN)/python bench/run.py

# The regression gate (bench/README.md, bench/ab.py): the main table's paths at concurrency 1 and 8,
# BASE against this checkout (uncommitted changes included), three interleaved rounds on one
# machine; it fails when a path is more than 5% slower. BASE defaults to where this branch left
# main (on main: HEAD~1).
BASE ?=
bench-ab: $(VENV)/.bench-installed bench-deps
	$(BIN)/python bench/ab.py $(if $(BASE),--base $(BASE))

# Also what a build of the package leaves (`pip install .`, `pip wheel .`): build/ and *.egg-info.
clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .import_linter_cache $(OIDC_PROVIDER)/node_modules build *.egg-info
