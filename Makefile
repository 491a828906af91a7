# Every target does its own setup: a virtualenv in .venv, the tools, and a release build.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEPS   := $(VENV)/.deps-installed
export PYO3_PYTHON := $(abspath $(BIN)/python)
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(abspath $(BIN)):$(PATH)

.PHONY: demo test check bench build lint api rust-test py-test portable-test upstream-test wheel-check soak clean redis redis-test

demo: build
	$(BIN)/python examples/queue_demo.py
	$(BIN)/python examples/demo.py

# `browser` and `redis` first: py-test runs the browser tests of tests/reader and tests/dashboard
# too, and the Redis backend's tests (tests/redis) on servers of their own.
test: lint rust-test browser redis py-test portable-test upstream-test wheel-check

# The inner loop: the lints of `make lint`, then the Python tests not marked slow (the slow ones
# spawn many processes or run many generated examples). `make test` still runs every test.
check: lint
	$(BIN)/python -m pytest -m "not slow"

build: $(DEPS)
	$(BIN)/maturin develop --release --quiet

lint: build
	cargo fmt --all --check
	cargo clippy --workspace --all-targets --quiet -- -D warnings
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m mypy.stubtest diskcache_oxide._core
	$(BIN)/python -m diskcache_oxide._generate --check
	bash tools/wheels/check-macos.sh check

# The faces' methods (python/diskcache_oxide/_faces/*.py), generated as source from the API table
# and Cache's signatures and docstrings: run after changing a call, its docstring or its row
# (see python/diskcache_oxide/_api.py and docs/decisions/D-051-faces-as-generated-source.md).
api: build
	$(BIN)/python -m diskcache_oxide._generate

rust-test: $(DEPS)
	cargo test -p diskcache-oxide-engine --quiet

# Then the Django backend's tests again with every LOCATION a Redis URL (tests/django/conftest.py
# starts its own server): DjangoCache opens its LOCATION with diskcache_oxide.open().
py-test: build
	$(BIN)/python -m pytest
	DCO_DJANGO_BACKEND=redis $(BIN)/python -m pytest tests/django

# The queue, job, claim and compute-once tests again with the portable fallbacks forced
# (polling wake-ups, SQLite's own WAL index locks: D-040), as they run where there is no inotify.
# On a directory only: the fallbacks change nothing on Redis, whose runs `py-test` made.
PORTABLE_TESTS := tests/queue tests/payonce tests/durability/test_wal.py \
	tests/durability/test_platform.py
portable-test: build
	DISKCACHE_OXIDE_PORTABLE=1 DCO_BACKENDS=directory $(BIN)/python -m pytest $(PORTABLE_TESTS)

# python-diskcache 5.6.3's own tests (test_core, test_fanout, test_deque, test_index,
# test_recipes) against diskcache_oxide, once with pickle=True and once in the safe format.
# The first run downloads the sdist with pip into target/upstream/; tests/upstream/deselected.txt
# lists what is not run, and why. Then the same for diskcache-community 5.8.1's copies of those
# tests (its sdist holds them too; tests/upstream/deselected-community.txt).
upstream-test: build
	$(BIN)/python tests/upstream/run.py
	$(BIN)/python tests/upstream/run.py --suite community

# The wheel as a user gets it: the manylinux2014 wheel of this machine's CPU that `make wheels`
# builds (the one pip picks on any glibc Linux, not a build tagged for this machine's glibc),
# installed with --no-index into a virtualenv that has nothing else (an undeclared run-time
# dependency fails here), and the README run from /tmp.
HOST_TARGET := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')
wheel-check:
	WHEEL_TARGETS=$(HOST_TARGET) bash tools/wheels/build.sh
	bash tools/wheels/host-check.sh $(HOST_TARGET)

# The wheels users install (D-066), into dist/: manylinux2014 (glibc 2.17) and musllinux_1_2 for
# x86_64 and aarch64, macOS 11+ for arm64 and x86_64, and the sdist, all built here with
# maturin --zig (tools in target/wheel-tools, cargo output in target/cross). Each Linux wheel's
# newest glibc symbol is checked against its tag; prints every wheel's tag and size.
# WHEEL_TARGETS="x86_64-unknown-linux-gnu sdist" builds only those.
.PHONY: wheels wheels-check lint-macos
wheels:
	bash tools/wheels/build.sh

# Each Linux wheel of dist/ installed with --no-index into an empty virtualenv on a real
# interpreter of its platform, then tests/wheel/check_installed.py and tests/wheel/exchange.py:
# manylinux2014 x86_64 in a Debian 11 root (glibc 2.31), aarch64 under qemu-user with Debian's
# arm64 Python, musllinux x86_64 on a CPython built with musl-gcc. Roots and interpreters are
# cached in target/wheel-roots/; needs root (chroot, mount, apt-get). WHEEL_RUNS="glibc musl"
# runs only those. Exits 2 when a run was skipped because its tool cannot be had.
WHEEL_RUNS ?= glibc aarch64 musl
wheels-check:
	bash tools/wheels/check.sh $(WHEEL_RUNS)

# The engine and binding type-checked (and clippy-linted) for macOS, so a change that breaks the
# macOS build fails here, not at release time: zig compiles SQLite's C for the build scripts.
lint-macos:
	bash tools/wheels/check-macos.sh

# The crash-consistency harness at length (tests/durability/test_crash_consistency.py runs 800
# kills in `make test`); DCO_CRASH_KILLS sets the number of kills, DCO_CRASH_SEED the schedule.
# Then the load soak (tests/durability/test_load.py runs its processes 4 s in `make test`) for
# DCO_SOAK_SECONDS; DCO_SOAK_REPORT=path writes its figures as JSON. Then the property tests
# with new examples (`make test` repeats the same ones every run).
DCO_CRASH_KILLS ?= 2000
DCO_SOAK_SECONDS ?= 60
soak: build
	DCO_CRASH_KILLS=$(DCO_CRASH_KILLS) $(BIN)/python -m pytest tests/durability/test_crash_consistency.py -q -s
	DCO_SOAK_SECONDS=$(DCO_SOAK_SECONDS) $(BIN)/python -m pytest tests/durability/test_load.py -k soak -q -s
	DCO_HYPOTHESIS=explore $(BIN)/python -m pytest -q tests/api/test_differential.py tests/api/test_state_machine.py

# bench_redis.py runs rq, arq and saq (benches/requirements.txt, installed here only) beside the
# Redis backend, on a redis-server it starts (installed first if missing, as for redis-test).
bench: build
	$(BIN)/python -m pip install --quiet -r benches/requirements.txt
	$(BIN)/python benches/bench_cache.py
	$(BIN)/python benches/bench_queue.py
	$(BIN)/python benches/bench_mixed.py
	$(BIN)/python benches/bench_threads.py
	$(BIN)/python benches/bench_working_set.py
	$(BIN)/python benches/bench_scale.py
	$(BIN)/python benches/bench_claims.py
	$(BIN)/python benches/bench_migrate.py
	bash tests/helpers/setup_redis.sh
	$(BIN)/python benches/bench_redis.py

# The docs site (docs/writing-docs.md): mkdocs with Material, the README as its home page and an
# API reference from the docstrings, built --strict into target/site (open target/site/index.html).
# The docs tools need Python 3.11+. NO_MKDOCS_2_WARNING quiets Material's banner about its future.
.PHONY: docs
docs: build
	@test -x $(BIN)/mkdocs || { echo "make docs: mkdocs needs Python 3.11 or newer"; exit 1; }
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Debian's redis-server (and redis-cli), for the Redis backend's tests; installed if missing. The
# tests start their own servers and clusters on 127.0.0.1 (tests/helpers/redis_servers.py); the
# package's own service is not used.
redis:
	bash tests/helpers/setup_redis.sh

# The Redis backend's tests (tests/redis): installs redis-server first if missing. If it cannot
# be installed, the tests that need a server are skipped, saying why.
redis-test: build
	bash tests/helpers/setup_redis.sh || echo "redis-test: no redis-server; its tests will be skipped"
	$(BIN)/python -m pytest tests/redis

# The reader app (examples/reader): its web app and queue worker on 127.0.0.1, sharing
# READER_DIR; prints the address (port READER_PORT, default 8000, or a free one). Ctrl-C stops it.
.PHONY: reader browser reader-test
READER_DIR ?= target/reader
reader: build
	cd examples/reader && $(abspath $(BIN))/python -m reader $(abspath $(READER_DIR))

# Debian's chromium and chromium-driver, for the reader's browser tests; installed if missing.
browser:
	bash tests/helpers/setup_browser.sh

# The reader's tests (tests/reader), in headless Chromium; installs it first if missing. If it
# cannot be installed, the browser tests are skipped, saying why.
reader-test: build
	bash tests/helpers/setup_browser.sh || echo "reader-test: no headless Chromium; its tests will be skipped"
	$(BIN)/python -m pytest tests/reader

# The command line's and the dashboard's tests (tests/cli, tests/dashboard), the dashboard's in
# headless Chromium (installed first if missing, as for reader-test; skipped if it cannot be).
# Screenshots go to target/dashboard-artifacts/.
.PHONY: dashboard-test
dashboard-test: build
	bash tests/helpers/setup_browser.sh || echo "dashboard-test: no headless Chromium; its tests will be skipped"
	$(BIN)/python -m pytest tests/cli tests/dashboard

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(DEPS): requirements-dev.txt | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

clean:
	rm -rf $(VENV) target python/diskcache_oxide/*.so
