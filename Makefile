# SPACE: the two commands are `make run` and `make test` (Debian 12, as root).
BUILD_DIR ?= build
JOBS ?= 2
DATA_DIR ?= /var/lib/space
LISTEN ?= 127.0.0.1:7722
# State kept between test runs (the Debian `base` template is built once, then cached).
TEST_DATA_DIR ?= /var/lib/space-test

.PHONY: all deps build run test unit integration contract bench bench-lifecycle asan clean

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

unit:
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS) --timeout 600

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
	cd $(BUILD_DIR)-asan && ctest --output-on-failure -j$(JOBS) --timeout 600

clean:
	rm -rf $(BUILD_DIR) $(BUILD_DIR)-asan
