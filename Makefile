# cachelab: the single front door. `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CARGO ?= cargo
FUZZ_SECONDS ?= 30
# pytest's worker processes (pytest-xdist). 4 on this 2-core machine: many tests wait (fault
# windows, Ray, timers), so a third worker cut the suite's wall time 16 % (391 vs 465 s, quiet)
# and a fourth another 10 % (378 vs 419 s, quiet, 1,694 tests). Building the Rust tests beside
# pytest instead of before it saved nothing: pytest took 66 s longer, the build's 56 s.
TEST_WORKERS ?= 4
# libCacheSim's CloudPhysics block trace (flat_sim.py --block-trace, byte_lru.py)
BLOCK_TRACE ?= /work/shared/reference/traces/cloudPhysicsIO.oracleGeneral.bin
export CARGO_TERM_COLOR ?= never
# Python writes its bytecode caches (__pycache__, ignored by git) while the tests run. With
# PYTHONDONTWRITEBYTECODE set, as in some CI shells, every CLI the tests start compiled cachelab
# from source and every pytest worker rewrote every test module's asserts: 470 tests of
# tests/base and two CLI files took 231 s (267 s of CPU) on a fresh clone, against 71 s (80 s).
unexport PYTHONDONTWRITEBYTECODE

.DEFAULT_GOAL := help

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

system-deps: ## install memcached (and python3-venv) from the OS packages if missing
	@scripts/install-system-deps.sh

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# pip compiles every installed module's bytecode on one core after the build (30 s of CPU for
# the 9,500 files of ray, scipy, pandas, ...); compileall does the same on every core.
install: system-deps $(PY) ## install cachelab and its test tools into .venv (release build)
	$(PY) -m pip install -q --no-compile -e '.[test]'
	$(PY) -m compileall -q -j 0 $$($(PY) -c 'import sysconfig as s; print(s.get_path("purelib"))') > /dev/null

build: $(PY) ## rebuild the Rust extension into .venv after a change (release)
	$(PY) -m pip install -q --no-deps -e .

# maturin as a tool in .venv (the same range as pyproject's build-system): a plain `maturin build`
# tags the wheel manylinux_2_X after checking the glibc symbols it links (pip's build hook would
# tag it linux_x86_64, unchecked). Same profile, features and interpreter as `install`, so after
# `make install` cargo finds every artifact fresh and only the packaging runs: 5 s, not 6 min.
wheel: $(PY) ## build the release wheel into dist/ (installs with pip where there is no Rust)
	$(PY) -m pip install -q 'maturin>=1.5,<2'
	rm -f dist/cachelab-*.whl
	$(VENV)/bin/maturin build --quiet --release --interpreter $(PY) --out dist
	@ls dist/cachelab-*.whl

# Not in `test` (about 4 min here, most of it pip fetching the dependencies; `test` must stay
# within 10 min): run it before a release, or as a CI step of its own.
wheel-check: wheel ## install the wheel in a fresh venv without Rust on PATH; run --quick there
	PYTHON=$(PYTHON) scripts/wheel-check.sh

demo: install ## the main job on the embedded default: the quick study, ending in report.html
	$(VENV)/bin/cachelab run --quick --format table --out cachelab-out/demo

# cachelab-py (the bindings) has no Rust tests of its own: `install` builds it, and pytest tests it.
# The Rust tests (and the fuzz targets' check) are built while `install` builds the extension,
# in a build directory of their own (cargo locks one per build): the release build's last,
# link-time-optimising phase and pip's unpacking use one core, so the debug build takes the
# other. Then they run beside pytest: they wait on servers (faults, timers) far more than they
# compute (33 s of wall, seconds of CPU), so they cost the suite no time. Their output is
# printed once both are done, and either one failing fails `test`.
RUST_TESTS_DIR := target/tests
RUST_TESTS_LOG := target/rust-tests.log
RUST_BUILD_LOG := target/rust-tests-build.log
# A fresh build of the tests: incremental compilation's caches cost CPU a one-off build never
# reads (130 against 114 s of CPU).
RUST_TESTS_ENV := CARGO_TARGET_DIR=$(RUST_TESTS_DIR) CARGO_INCREMENTAL=0
# The tests' OS packages (chromium, twemproxy, redis-server, PostgreSQL) install beside
# `make install` too: 40 s of apt on a fresh machine, which no build needs. `install`'s own
# system-deps then finds memcached and venv present and runs no apt (one dpkg at a time).
SYSTEM_DEPS_LOG := target/system-deps-test.log
test: system-deps $(PY) ## run every test: Rust (unit, property, real servers), fuzz target check, Python
	@mkdir -p target
	@echo "$(CARGO) test --workspace --exclude cachelab-py --no-run, make fuzz-check and the tests' OS packages (beside make install)"
	@( $(RUST_TESTS_ENV) $(CARGO) test --workspace --exclude cachelab-py \
	     --quiet --no-run && $(MAKE) --no-print-directory fuzz-check ) > $(RUST_BUILD_LOG) 2>&1 & \
	build=$$!; scripts/install-system-deps.sh test > $(SYSTEM_DEPS_LOG) 2>&1 & deps=$$!; \
	$(MAKE) --no-print-directory install; installed=$$?; wait $$build; built=$$?; \
	wait $$deps; packages=$$?; cat $(RUST_BUILD_LOG) $(SYSTEM_DEPS_LOG); \
	test "$$installed" = 0 && test "$$built" = 0 && test "$$packages" = 0
	@echo "$(CARGO) test --workspace --exclude cachelab-py (beside pytest; output below when done)"
	@( $(RUST_TESTS_ENV) $(CARGO) test --workspace --exclude cachelab-py \
	     --quiet > $(RUST_TESTS_LOG) 2>&1; echo $$? > $(RUST_TESTS_LOG).rc ) & \
	$(PY) -m pytest -q -n $(TEST_WORKERS); py=$$?; wait; \
	cat $(RUST_TESTS_LOG); rust=$$(cat $(RUST_TESTS_LOG).rc); \
	echo "Rust tests: exit $$rust; Python tests: exit $$py"; \
	test "$$rust" = 0 && test "$$py" = 0

test-fast: install ## the Python tests not marked slow (no Ray, browser, fault or CLI-process runs)
	@scripts/install-system-deps.sh test
	$(PY) -m pytest -q -n $(TEST_WORKERS) -m "not slow"

lint: $(PY) ## rustfmt, clippy (warnings are errors), ruff
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets --quiet -- -D warnings
	$(VENV)/bin/ruff check python tests benches

fuzz-check: ## type-check the decoder fuzz targets (no libFuzzer, no instrumentation: seconds)
	cd fuzz && $(CARGO) check --quiet --no-default-features

fuzz-build: ## build the decoder fuzz targets (libFuzzer, coverage instrumentation, stable Rust)
	cd fuzz && RUSTFLAGS="$(FUZZ_RUSTFLAGS)" $(CARGO) build --quiet --release --target $(HOST)

# Both targets, FUZZ_SECONDS each: decode (memcached; every seed, RESP's too: libFuzzer reads
# fuzz/seeds recursively) and resp (RESP2/RESP3, fuzz/seeds/resp).
fuzz: fuzz-build ## fuzz the decoders (memcached, RESP) for FUZZ_SECONDS each (default 30)
	mkdir -p fuzz/corpus/decode fuzz/corpus/resp
	fuzz/target/$(HOST)/release/decode -max_total_time=$(FUZZ_SECONDS) fuzz/corpus/decode fuzz/seeds
	fuzz/target/$(HOST)/release/resp -max_total_time=$(FUZZ_SECONDS) fuzz/corpus/resp fuzz/seeds/resp

bench: install ## every benchmark, side by side with its peer (LIBCACHESIM=, MEMTIER=, AIO_PEER=, REDIS_BENCHMARK= paths to the peers)
	$(PY) benches/profile_overhead.py
	$(PY) benches/flat_sim.py $(if $(LIBCACHESIM),--libcachesim $(LIBCACHESIM))
	$(PY) benches/flat_sim.py --block-trace $(BLOCK_TRACE) $(if $(LIBCACHESIM),--libcachesim $(LIBCACHESIM))
	$(PY) benches/byte_lru.py --trace $(BLOCK_TRACE) $(if $(LIBCACHESIM),--libcachesim $(LIBCACHESIM))
	$(PY) benches/request_sim.py
	$(PY) benches/usl_fit.py
	$(PY) benches/load_vs_memtier.py $(if $(MEMTIER),--memtier $(MEMTIER))
	$(PY) benches/pacer_lateness.py
	$(PY) benches/load_memory.py $(if $(MEMTIER),--memtier $(MEMTIER))
	$(PY) benches/load_vs_redis.py $(if $(REDIS_BENCHMARK),--redis-benchmark $(REDIS_BENCHMARK)) $(if $(MEMTIER),--memtier $(MEMTIER))
	$(PY) benches/tiered.py
	$(PY) benches/replay_accuracy.py
	$(PY) benches/run_time.py
	$(PY) benches/ray_agents.py
	$(PY) benches/pool_proxy.py --pin
	$(PY) benches/capture_cost.py --pin
	$(PY) benches/size_check.py
	$(PY) benches/scale_twice.py
	$(PY) benches/latency_model.py
	$(PY) benches/cold_values.py
	$(PY) benches/part_costs.py
	$(PY) benches/plot_formats.py
	$(PY) benches/hand_vs_library.py
	$(PY) benches/aio_get_many.py $(if $(AIO_PEER),--peer $(AIO_PEER))

bench-%: install ## one benchmark: bench-profile_overhead, bench-flat_sim, bench-request_sim, ...
	$(PY) benches/$*.py

clean: ## remove build outputs (keeps .venv)
	$(CARGO) clean
	rm -rf fuzz/target python/cachelab/*.so

# With an explicit --target, RUSTFLAGS reach only the fuzzed code, not build scripts.
HOST = $(shell rustc -vV | sed -n 's/^host: //p')
FUZZ_RUSTFLAGS := -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
	-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
	-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks

.PHONY: help system-deps install build wheel wheel-check demo test test-fast lint fuzz-build fuzz bench clean
