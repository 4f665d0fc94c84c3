# The two commands of the README, and a few more. Every target installs what it needs first.
BUILD ?= build
JOBS ?= 2
BUILD_TYPE ?= Release
CMAKE_FLAGS ?=
DEMO_MODEL ?= $(BUILD)/models/tiny

.PHONY: setup configure build run test bench clean

setup:
	./scripts/setup

configure: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

# Until the broker lands, the main job is one generation on a random tiny model.
run: build
	@test -f $(DEMO_MODEL)/model.safetensors || $(BUILD)/bin/flashq-model make-tiny --out $(DEMO_MODEL) --seed 1
	$(BUILD)/bin/flashq generate --model $(DEMO_MODEL) --prompt "The queue hands each job to a worker" --max-tokens 48

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
