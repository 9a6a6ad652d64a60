# SPACE: the two commands are `make run` and `make test` (Debian 12, as root).
BUILD_DIR ?= build
JOBS ?= 2
DATA_DIR ?= /var/lib/space
LISTEN ?= 127.0.0.1:7722
# State kept between test runs (the Debian `base` template is built once, then cached).
TEST_DATA_DIR ?= /var/lib/space-test

.PHONY: all deps build run test unit integration contract security abuse bench bench-quick bench-create bench-lifecycle bench-egress bench-vm bench-templates bench-ports bench-object-store asan fuzz fuzz-ci lint clean

all: build

deps:
	@./scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -USPACE_COMPONENTS >/dev/null
	@cmake --build $(BUILD_DIR) -j$(JOBS)

run: build
	$(BUILD_DIR)/bin/space dev --listen $(LISTEN) --data-dir $(DATA_DIR)

test: build
	@$(MAKE) --no-print-directory unit integration contract security
	@$(MAKE) --no-print-directory abuse

# The store's tests run against SQLite and against a throwaway PostgreSQL cluster, the object
# store's against a throwaway Ceph RGW (scripts/s3-test-cluster.sh); both live only as long as
# the tests do. The *_REQUIRED variables make a missing server fail the tests, not skip them.
TEST_SERVERS = SPACE_TEST_PG_REQUIRED=1 SPACE_TEST_S3_REQUIRED=1 ./scripts/s3-test-cluster.sh run -- \
  ./scripts/pg-test-cluster.sh run --

unit:
	$(TEST_SERVERS) sh -c 'cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) --timeout 600'

integration:
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space python3 -m unittest discover -v -s tests/integration -p 'test_*.py'

contract:
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space SPACE_TEST_DATA_DIR=$(TEST_DATA_DIR) \
	  python3 tests/integration/run_contract.py core lifecycle egress

# The escape suite (prints the verdict table; fails if any attempt broke).
security:
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space SPACE_TEST_DATA_DIR=$(TEST_DATA_DIR) \
	  python3 tests/security/run.py

# The abuse tests (fork/memory/disk/inode bombs, output flood beside a neighbour; ~60 s): each
# abuser must hit its limit with the reason in its record, the node must answer, and the
# neighbour's exec p50 must stay within ABUSE_MAX_RATIO of idle (the issue's 2x, in `make test`
# too), measured interleaved. A window set over the bound is measured again, up to twice, and
# the last decides (docs/security.md, "Abuse").
ABUSE_MAX_RATIO ?= 2
abuse:
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space SPACE_TEST_DATA_DIR=$(TEST_DATA_DIR) \
	  SPACE_ABUSE_MAX_RATIO=$(ABUSE_MAX_RATIO) \
	  python3 -m unittest discover -v -s tests/security -p 'test_*.py'

# The whole suite (bench/suite.py, ~10 min on 2 cores): writes docs/benchmarks.md and
# docs/benchmarks-latency.svg. bench-quick: small n, no density, writes build/bench-quick.md.
# bench-create: the original create/exec micro-benchmark. None of them runs in `make test`.
bench: build
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space python3 bench/suite.py

bench-quick: build
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space python3 bench/suite.py --quick

bench-create: build
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space python3 bench/create_exec.py

bench-lifecycle: build
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space python3 bench/lifecycle.py

bench-egress: build
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space SPACE_TEST_DATA_DIR=$(TEST_DATA_DIR) python3 bench/egress.py

# Preview ports: latency and throughput through a preview URL against the same server on the host.
bench-ports: build
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space SPACE_TEST_DATA_DIR=$(TEST_DATA_DIR) python3 bench/ports.py

# The snapshot store on S3 (a throwaway Ceph RGW): export and restore throughput against a
# plain upload and download of the same bytes, and stored bytes per rolling snapshot.
bench-object-store: build
	./scripts/s3-test-cluster.sh run -- $(BUILD_DIR)/src/snapshot/object_store_bench --out $(BUILD_DIR)/bench-object-store.md

# Recipe builds cold and cached, and creates from a built template against base.
bench-templates: build
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space SPACE_TEST_DATA_DIR=$(TEST_DATA_DIR) python3 bench/templates.py

# The vm runtime: cold boot vs restore from a full checkpoint vs fork (TCG without /dev/kvm).
bench-vm: build
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space python3 bench/vm.py

asan: deps
	@cmake -S . -B $(BUILD_DIR)-asan -DSPACE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
	  -USPACE_COMPONENTS >/dev/null
	@cmake --build $(BUILD_DIR)-asan -j$(JOBS)
	$(TEST_SERVERS) sh -c 'cd $(BUILD_DIR)-asan && ctest --output-on-failure -j$(JOBS) --timeout 600'

# libFuzzer on the hostile-input parsers, FUZZ_SECONDS each (clang; each keeps its corpus in
# $(BUILD_DIR)-fuzz/corpus-<target>, seeded from tests/fuzz/corpus/<target> where that exists).
# `make fuzz FUZZ_SECONDS=3600` is the long run.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = frame_parser_fuzz json_parsers_fuzz http_request_fuzz gateway_parsers_fuzz \
  connect_envelope_fuzz path_resolution_fuzz gateway_ipc_fuzz broker_request_fuzz blob_channel_fuzz \
  websocket_frame_fuzz
fuzz: deps
	@CC=clang CXX=clang++ cmake -S . -B $(BUILD_DIR)-fuzz -DSPACE_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug \
	  -DSPACE_COMPONENTS="common;protocol;guest;snapshot" >/dev/null
	@cmake --build $(BUILD_DIR)-fuzz -j$(JOBS) --target $(FUZZ_TARGETS)
	@for t in $(FUZZ_TARGETS); do \
	  echo "== $$t ($(FUZZ_SECONDS) s)"; \
	  log=$(BUILD_DIR)-fuzz/$$t.log; corpus=$(BUILD_DIR)-fuzz/corpus-$$t; mkdir -p $$corpus; \
	  seeds=; if [ -d tests/fuzz/corpus/$$t ]; then seeds=tests/fuzz/corpus/$$t; fi; \
	  $(BUILD_DIR)-fuzz/tests/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -max_len=8192 -print_final_stats=1 \
	    -artifact_prefix=$(BUILD_DIR)-fuzz/$$t- $$corpus $$seeds >$$log 2>&1; rc=$$?; \
	  grep -E '^(stat::number_of_executed_units|#[0-9]+ *DONE)' $$log; \
	  if [ $$rc -ne 0 ]; then tail -40 $$log; exit 1; fi; \
	done

# CI's short fuzz run: every target for a few seconds (build + run about 2.5 min on one core).
fuzz-ci:
	@$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(or $(FUZZ_CI_SECONDS),5)

# clang-tidy (.clang-tidy) and clang-format --dry-run -Werror (.clang-format) on the C++ files
# changed since LINT_BASE (default origin/main, else HEAD~1), through $(BUILD_DIR)'s compile
# commands; `make lint LINT_BASE=<commit>` for another base.
lint: deps
	@BUILD_DIR=$(BUILD_DIR) JOBS=$(JOBS) ./scripts/lint.sh

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR)-asan $(BUILD_DIR)-fuzz
