# SPACE: the two commands are `make run` and `make test` (Debian 12, as root).
BUILD_DIR ?= build
JOBS ?= 2
DATA_DIR ?= /var/lib/space
LISTEN ?= 127.0.0.1:7722
# State kept between test runs (the Debian `base` template is built once, then cached).
TEST_DATA_DIR ?= /var/lib/space-test

.PHONY: all deps build run test unit integration contract bench bench-lifecycle asan fuzz clean

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
	@$(MAKE) --no-print-directory unit integration contract

# The store's tests run against SQLite and against a throwaway PostgreSQL cluster that lives
# only as long as ctest does; SPACE_TEST_PG_REQUIRED makes a missing database fail, not skip.
PG_CLUSTER = SPACE_TEST_PG_REQUIRED=1 ./scripts/pg-test-cluster.sh run --

unit:
	$(PG_CLUSTER) sh -c 'cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) --timeout 600'

integration:
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space python3 -m unittest discover -v -s tests/integration -p 'test_*.py'

contract:
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space SPACE_TEST_DATA_DIR=$(TEST_DATA_DIR) \
	  python3 tests/integration/run_contract.py core lifecycle egress

bench: build
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space python3 bench/create_exec.py

bench-lifecycle: build
	SPACE_BIN=$(abspath $(BUILD_DIR))/bin/space python3 bench/lifecycle.py

asan: deps
	@cmake -S . -B $(BUILD_DIR)-asan -DSPACE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug \
	  -USPACE_COMPONENTS >/dev/null
	@cmake --build $(BUILD_DIR)-asan -j$(JOBS)
	$(PG_CLUSTER) sh -c 'cd $(BUILD_DIR)-asan && ctest --output-on-failure -j$(JOBS) --timeout 600'

# libFuzzer on the hostile-input parsers, 60 s each (clang; corpora start empty).
fuzz: deps
	@CC=clang CXX=clang++ cmake -S . -B $(BUILD_DIR)-fuzz -DSPACE_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug \
	  -DSPACE_COMPONENTS="common;guest;snapshot" >/dev/null
	@cmake --build $(BUILD_DIR)-fuzz -j$(JOBS) --target frame_parser_fuzz json_parsers_fuzz
	$(BUILD_DIR)-fuzz/tests/fuzz/frame_parser_fuzz -max_total_time=60 -max_len=4096
	$(BUILD_DIR)-fuzz/tests/fuzz/json_parsers_fuzz -max_total_time=60 -max_len=8192

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR)-asan $(BUILD_DIR)-fuzz
