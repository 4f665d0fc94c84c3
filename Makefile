# The two commands of the README, and a few more. Every target installs what it needs first.
BUILD ?= build
JOBS ?= 2
BUILD_TYPE ?= Release
CMAKE_FLAGS ?=

.PHONY: setup configure build run test bench clean

setup:
	./scripts/setup

configure: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# The main job on the embedded default: flashq up, one producer job streamed, shutdown.
run: build
	BUILD=$(BUILD) ./scripts/demo

test: build
	cd $(BUILD) && ctest --output-on-failure -j$(JOBS)

# Real shapes with random weights: the CPU figures of docs/perf.md.
bench: build
	@test -f $(BUILD)/models/qwen3-0.6b/model.safetensors || $(BUILD)/bin/flashq-model make-tiny --preset qwen3-0.6b --out $(BUILD)/models/qwen3-0.6b
	@test -f $(BUILD)/models/qwen3-0.6b-drafter/model.safetensors || $(BUILD)/bin/flashq-model make-tiny --drafter-for $(BUILD)/models/qwen3-0.6b --layers 1 --block-size 16 --out $(BUILD)/models/qwen3-0.6b-drafter
	$(BUILD)/bin/flashq-bench kernels
	$(BUILD)/bin/flashq-bench engine --model $(BUILD)/models/qwen3-0.6b --mode ar --json
	$(BUILD)/bin/flashq-bench engine --model $(BUILD)/models/qwen3-0.6b --drafter $(BUILD)/models/qwen3-0.6b-drafter --mode ar,dflash,auto --concurrency 1,4,16 --prompt-tokens 64 --decode-tokens 32 --repeats 1 --passes --json

clean:
	rm -rf $(BUILD)
