# The two commands of the README, and a few more. Every target installs what it needs first.
BUILD ?= build
JOBS ?= 2
BUILD_TYPE ?= Release
CMAKE_FLAGS ?=

.PHONY: setup configure build run test sanitize tsan bench clean

setup:
	@echo "==> setup: Debian packages and test data (minutes the first time, seconds after)"
	./scripts/setup

configure: setup
	@echo "==> configure: $(BUILD) ($(BUILD_TYPE))"
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

build: configure
	@echo "==> build: -j$(JOBS) (about 7 minutes from scratch on 2 cores; ninja counts [done/total])"
	cmake --build $(BUILD) -j$(JOBS)

# The main job on the embedded default: flashq up with the demo pair, a held-out prompt streamed
# with live figures, the same job without speculation, a summary comparing the two. It builds only
# the programs the demo runs (`flashq`, and `flashq-model` for a missing demo model), not the suite.
RUN_TARGETS = flashq flashq-model
run: configure
	@echo "==> build: $(RUN_TARGETS) (-j$(JOBS))"
	cmake --build $(BUILD) -j$(JOBS) --target $(RUN_TARGETS)
	@echo "==> run: scripts/demo"
	BUILD=$(BUILD) ./scripts/demo

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)
	$(MAKE) sanitize tsan

# The sanitizer builds (docs/decisions.md, "Sanitizers in CI"): Clang, Debug at -O1 (asserts on,
# the numerics fast enough) with line tables only (-g1: file:line in reports), CPU only. A build
# directory configured with another compiler is started afresh.
SAN_CMAKE_FLAGS = -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
  "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" -DFLASHQ_CUDA=OFF
san_configure = grep -qs '^CMAKE_CXX_COMPILER:.*clang++' $(1)/CMakeCache.txt || rm -rf $(1); \
  cmake -S . -B $(1) $(SAN_CMAKE_FLAGS) -DFLASHQ_SANITIZE="$(2)" $(CMAKE_FLAGS)
# run_sanitized DIR ENV: ctest in DIR with ENV (the executables not built are left out) and the
# demo (`flashq up`: broker and worker threads in one process, which no test starts), then fails
# on any sanitizer report. Every process writes its reports to DIR/sanitizer-logs/TOOL.PID:
# the tests and also the programs they spawn from FLASHQ_BIN (DIR/bin, sanitized the same way),
# whose output no test may read. allocator_may_return_null: libzmq survives a malloc that fails
# (a peer declaring a 2^62-byte frame, tests/e2e), where the sanitizers' allocator would abort.
define run_sanitized
	rm -rf $(1)/sanitizer-logs && mkdir -p $(1)/sanitizer-logs
	rc=0; (cd $(1) && $(2) ctest --output-on-failure -j$(JOBS) -E '_NOT_BUILT$$') || rc=$$?; \
	  $(2) BUILD=$(1) ./scripts/demo >$(1)/demo.log 2>&1 || { echo "demo failed: $(1)/demo.log"; rc=1; }; \
	  reports=$$(grep -lE 'SUMMARY: |ERROR: ' $(1)/sanitizer-logs/* 2>/dev/null); \
	  if [ -n "$$reports" ]; then echo "sanitizer reports:"; cat $$reports; rc=1; fi; exit $$rc
endef

# The whole suite under AddressSanitizer (with leak checks) and UndefinedBehaviorSanitizer (no
# recovery: undefined behaviour aborts). No exclusions.
ASAN_LOGS = $(abspath $(BUILD)-asan)/sanitizer-logs
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:allocator_may_return_null=1:log_path=$(ASAN_LOGS)/asan \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:log_path=$(ASAN_LOGS)/ubsan
# Then every decoder of outside input is fuzzed (tests/fuzz: libFuzzer, ASan, UBSan) for
# FUZZ_SECONDS each from its committed seed corpus; a crash, leak or timeout fails the stage.
FUZZ_SECONDS ?= 30
sanitize: setup
	$(call san_configure,$(BUILD)-asan,address;undefined)
	cmake --build $(BUILD)-asan -j$(JOBS) --target flashq_tests
	$(call run_sanitized,$(BUILD)-asan,$(ASAN_ENV))
	@echo "==> fuzz: each decoder of outside input for $(FUZZ_SECONDS)s (scripts/fuzz)"
	cmake --build $(BUILD)-asan -j$(JOBS) --target flashq_fuzzers
	./scripts/fuzz --build $(BUILD)-asan --seconds $(FUZZ_SECONDS)

# The threaded parts under ThreadSanitizer: the worker process (I/O and engine threads), the
# client, the broker (with its ZAP thread under CURVE), end to end, the OpenMP CPU kernels, and
# the gateway (its I/O threads and broker links, driven by the OpenAI SDK tests).
# OpenMP is LLVM's libomp here, which loads the Archer tool (libarcher.so) so that TSan sees its
# barriers and joins; GCC's libgomp is not instrumented and would report false races. Runtime
# libraries are not instrumented (libomp's own locks, libzmq, libsodium): ignore_noninstrumented_modules
# drops reports from inside them (libomp asks for it: they raced on its own lock's init), and the
# only suppressions, tests/tsan.supp, are for libzmq and libsodium.
TSAN_TESTS = gateway_broker_link_test session_routing_test worker_process_test worker_job_request_test job_preparer_test output_thread_test transport_test http_endpoint_test client_test job_commands_test broker_test broker_dispatch_test unknown_model_test job_queue_test \
  e2e_test cpu_kernels_test curve_broker_test curve_cli_test flashq-gateway
TSAN_ENV = TSAN_OPTIONS=ignore_noninstrumented_modules=1:second_deadlock_stack=1:allocator_may_return_null=1:suppressions=$(CURDIR)/tests/tsan.supp:log_path=$(abspath $(BUILD)-tsan)/sanitizer-logs/tsan
tsan: setup
	$(call san_configure,$(BUILD)-tsan,thread)
	cmake --build $(BUILD)-tsan -j$(JOBS) --target $(TSAN_TESTS)
	$(call run_sanitized,$(BUILD)-tsan,$(TSAN_ENV))

# The benchmark report (docs/bench/report.md and its plots): the demo pair against concurrency for
# off, dflash and auto, tau per prompt set, the cost of each pass, and the broker in memory and
# with Redis. Then the CPU figures of docs/perf.md in real shapes with random weights.
bench: build
	@echo "==> bench: tools/bench_report (about 10 minutes on 2 cores)"
	./scripts/setup --bench
	/usr/bin/python3 tools/bench_report/bench_report.py --build $(BUILD)
	@test -f $(BUILD)/models/qwen3-0.6b/model.safetensors || $(BUILD)/bin/flashq-model make-tiny --preset qwen3-0.6b --out $(BUILD)/models/qwen3-0.6b
	@test -f $(BUILD)/models/qwen3-0.6b-drafter/model.safetensors || $(BUILD)/bin/flashq-model make-tiny --drafter-for $(BUILD)/models/qwen3-0.6b --layers 1 --block-size 16 --out $(BUILD)/models/qwen3-0.6b-drafter
	$(BUILD)/bin/flashq-bench kernels
	$(BUILD)/bin/flashq-bench engine --model $(BUILD)/models/qwen3-0.6b --drafter $(BUILD)/models/qwen3-0.6b-drafter --mode ar,dflash,auto --concurrency 1,4,16 --prompt-tokens 64 --decode-tokens 32 --repeats 1 --passes --json

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan
