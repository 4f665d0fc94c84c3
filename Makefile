# The two commands of the README, and a few more. Every target installs what it needs first.
BUILD ?= build
JOBS ?= 2
BUILD_TYPE ?= Release
CMAKE_FLAGS ?=

.PHONY: setup configure build run test sanitize bench clean

setup:
	./scripts/setup

configure: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# The main job on the embedded default: flashq up, one producer job streamed, shutdown.
run: build
	BUILD=$(BUILD) ./scripts/demo

test: build sanitize
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# Every suite that feeds hostile input to a parser or a socket, again under AddressSanitizer and
# UndefinedBehaviorSanitizer (the whole suite under sanitizers comes with the Redis work).
SANITIZED_TESTS = protocol_test broker_test job_queue_test safetensors_test client_test tokenizer_test model_config_test
sanitize: setup
	cmake -S . -B $(BUILD)-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFLASHQ_CUDA=OFF \
	  -DFLASHQ_SANITIZE="address;undefined" $(CMAKE_FLAGS)
	cmake --build $(BUILD)-asan -j$(JOBS) --target $(SANITIZED_TESTS)
	set -e; for t in $(SANITIZED_TESTS); do \
	  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
	    $(BUILD)-asan/tests/$$t --gtest_brief=1 || exit 1; done

# Real shapes with random weights: the CPU figures of docs/perf.md.
bench: build
	@test -f $(BUILD)/models/qwen3-0.6b/model.safetensors || $(BUILD)/bin/flashq-model make-tiny --preset qwen3-0.6b --out $(BUILD)/models/qwen3-0.6b
	@test -f $(BUILD)/models/qwen3-0.6b-drafter/model.safetensors || $(BUILD)/bin/flashq-model make-tiny --drafter-for $(BUILD)/models/qwen3-0.6b --layers 1 --block-size 16 --out $(BUILD)/models/qwen3-0.6b-drafter
	$(BUILD)/bin/flashq-bench kernels
	$(BUILD)/bin/flashq-bench engine --model $(BUILD)/models/qwen3-0.6b --mode ar --json
	$(BUILD)/bin/flashq-bench engine --model $(BUILD)/models/qwen3-0.6b --drafter $(BUILD)/models/qwen3-0.6b-drafter --mode ar,dflash,auto --concurrency 1,4,16 --prompt-tokens 64 --decode-tokens 32 --repeats 1 --passes --json

clean:
	rm -rf $(BUILD)
