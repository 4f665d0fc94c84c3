#!/usr/bin/env python3
"""The Hugging Face transformers baseline of the GPU validation (docs/gpu-validation.md): greedy decoding at
batch 1 of a model directory written by `flashq-model make-tiny` (config.json + model.safetensors
in the Hugging Face layout; random weights, so no tokenizer: the prompt is random token ids),
timed as `flashq-bench engine` times ours: the prefill apart, and decode speed as the tokens after
the first over the seconds after the first.

    hf_baseline.py --model DIR [--impl hf|ours-torch] [--device cuda|cpu]
                   [--variants eager,static-auto] [--prompt-tokens 259] [--decode-tokens 128]
                   [--repeats 3] [--warmup 1] [--compile-warmup 2]

--impl hf (the default) loads DIR with AutoModelForCausalLM in bf16. Variants:
  eager            model.generate, the default dynamic cache, nothing compiled
  static-auto      cache_implementation="static" alone: recent transformers compile the forward
                   themselves on CUDA with a static cache (CUDA graphs included); the default
  static-compile   cache_implementation="static", model.forward compiled with
                   torch.compile(mode="reduce-overhead", fullgraph=True) (transformers' guide);
                   with transformers 5.17 on the H100 it failed in the cache update ("accessing
                   tensor output of CUDAGraphs that has been overwritten"), docs/perf.md
--impl ours-torch runs the same harness on our PyTorch Qwen3 (tools/train/qwen3_model.py, float32,
CPU only), so everything but the transformers calls can be tested where transformers is missing.

Output, one JSON line per event, flushed as it happens (a run cut short by a timeout keeps what
it finished): {"event": "load", ...}, then {"event": "variant", "variant": ..., "status": "ok" |
"failed", "decode_tokens_per_s": ..., ...} per variant, then {"event": "done"}. A variant that
fails is reported with its error and the next one runs. Progress goes to stderr. Exit status: 0
when every variant ran, 1 when one failed, 2 on bad input or a missing piece (torch,
transformers, CUDA), named on stderr and in a {"event": "load", "status": "failed"} line.
"""

import argparse
import json
import os
import re
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


def say(message):
    print(f"hf_baseline: {message}", file=sys.stderr, flush=True)


def emit(event, **values):
    print(json.dumps({"event": event, **values}), flush=True)


class MissingPiece(Exception):
    """Something the host lacks (a package, CUDA): reported by name, exit status 2."""


# --- the timing harness (no transformers in here) ---------------------------------------------------

class TokenClock:
    """When a generation started, and when each generated token reached the host (its id read
    back, which waits for the device)."""

    def __init__(self):
        self.start = None
        self.tokens = []

    def begin(self):
        self.start = time.perf_counter()

    def token(self):
        self.tokens.append(time.perf_counter())


def time_generation(generate, prompt, new_tokens, warmup, repeats):
    """generate(prompt, new_tokens, clock) runs one greedy generation, calling clock.begin()
    before the prefill and clock.token() as each token is known. Returns the median run by decode
    speed, the per-run speeds and the first call's seconds (compilation shows there)."""
    first_call_s = None
    for _ in range(warmup):
        began = time.perf_counter()
        generate(prompt, new_tokens, TokenClock())
        if first_call_s is None:
            first_call_s = time.perf_counter() - began
    runs = []
    for _ in range(repeats):
        clock = TokenClock()
        generate(prompt, new_tokens, clock)
        if clock.start is None or len(clock.tokens) < 2:
            raise RuntimeError(f"the generation reported {len(clock.tokens)} tokens; the clock needs 2 or more")
        decode_s = clock.tokens[-1] - clock.tokens[0]
        decoded = len(clock.tokens) - 1
        prefill_s = clock.tokens[0] - clock.start
        runs.append({"prefill_s": prefill_s, "decode_s": decode_s, "decode_tokens": decoded,
                     "decode_tokens_per_s": decoded / decode_s if decode_s > 0 else float("inf")})
    runs.sort(key=lambda r: r["decode_tokens_per_s"])
    median = dict(runs[len(runs) // 2])
    median["decode_ms_per_token"] = 1e3 * median["decode_s"] / median["decode_tokens"]
    median["prefill_tokens_per_s"] = prompt_length(prompt) / median["prefill_s"] if median["prefill_s"] > 0 else None
    median["runs_decode_tokens_per_s"] = [r["decode_tokens_per_s"] for r in runs]
    median["first_call_s"] = first_call_s
    return median


def prompt_length(prompt):
    return int(prompt.shape[-1])


def random_prompt(torch, vocab_size, length, seed, device):
    # Ordinary ids only, as flashq-bench draws them (below the tokenizer's 4096 and the padding row).
    generator = torch.Generator().manual_seed(seed)
    high = max(2, min(vocab_size, 4096) - 8)
    return torch.randint(0, high, (1, length), generator=generator).to(device)


# --- ours-torch: tools/train/qwen3_model.py, for testing the harness without transformers ---------

def find_train_dir():
    candidates = [os.environ.get("FLASHQ_TRAIN_DIR", ""), os.path.join(HERE, "..", "train"),
                  os.path.join(os.getcwd(), "tools", "train")]
    for candidate in candidates:
        if candidate and os.path.isfile(os.path.join(candidate, "qwen3_model.py")):
            return os.path.abspath(candidate)
    raise MissingPiece("--impl ours-torch needs tools/train/qwen3_model.py (looked in "
                       + ", ".join(c for c in candidates if c) + "; set FLASHQ_TRAIN_DIR)")


def load_ours_torch(torch, args):
    if args.device != "cpu":
        raise MissingPiece("--impl ours-torch runs on the CPU only (qwen3_model.py builds its masks there)")
    sys.path.insert(0, find_train_dir())
    from qwen3_model import Qwen3Model, shape_from_config  # noqa: E402
    from safetensors_io import read_safetensors  # noqa: E402

    with open(os.path.join(args.model, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    model = Qwen3Model(shape_from_config(config))
    tensors = read_safetensors(os.path.join(args.model, "model.safetensors"))
    model.load_hf_tensors(tensors)
    if not config.get("tie_word_embeddings", False):
        head = tensors["lm_head.weight"]
        model.lm_head = lambda final: final @ head.t()  # qwen3_model.py ties the head; this one is apart
    model.eval()

    @torch.no_grad()
    def generate(prompt, new_tokens, clock):
        caches = [{} for _ in model.layers]
        clock.begin()
        logits, _ = model(prompt, caches=caches)
        token = logits[:, -1].argmax(-1, keepdim=True)
        int(token)
        clock.token()
        position = prompt_length(prompt)
        for _ in range(new_tokens - 1):
            logits, _ = model(token, caches=caches, start=position)
            position += 1
            token = logits[:, -1].argmax(-1, keepdim=True)
            int(token)
            clock.token()

    info = {"impl": "ours-torch", "dtype": "float32", "architecture": "Qwen3Model (tools/train)",
            "parameters": sum(p.numel() for p in model.parameters()), "torch": torch.__version__}
    return config, info, {"eager": lambda: generate}


# --- hf: transformers ---------------------------------------------------------------------------

def version_tuple(text):
    return tuple(int(x) for x in re.findall(r"\d+", text)[:2])


def load_hf(torch, args):
    try:
        import transformers
        from transformers import AutoModelForCausalLM, GenerationConfig
    except ImportError as e:
        raise MissingPiece(f"transformers is not installed for {sys.executable} ({e})") from e
    if args.device == "cuda" and not torch.cuda.is_available():
        raise MissingPiece(f"torch {torch.__version__} under {sys.executable} sees no CUDA device")

    # transformers 4.56 renamed torch_dtype to dtype; older releases would ignore `dtype`.
    dtype_key = "dtype" if version_tuple(transformers.__version__) >= (4, 56) else "torch_dtype"
    load_kwargs = {dtype_key: torch.bfloat16, "output_loading_info": True}
    began = time.perf_counter()
    note = None
    try:
        model, loading = AutoModelForCausalLM.from_pretrained(args.model, device_map=args.device, **load_kwargs)
    except Exception as e:  # device_map wants accelerate in some releases; a real failure recurs below
        note = f"device_map refused ({e.__class__.__name__}: {str(e)[:200]}); loaded on the CPU, then moved"
        model, loading = AutoModelForCausalLM.from_pretrained(args.model, **load_kwargs)
        model.to(args.device)
    model.eval()
    if args.device == "cuda":
        torch.cuda.synchronize()
    load_s = time.perf_counter() - began
    config = model.config.to_dict()
    unread = {k: sorted(loading.get(k) or [])[:10] for k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    info = {"impl": "hf", "transformers": transformers.__version__, "torch": torch.__version__,
            "dtype": str(model.dtype).replace("torch.", ""), "architecture": type(model).__name__,
            "attn_implementation": getattr(model.config, "_attn_implementation", None),
            "parameters": sum(p.numel() for p in model.parameters()), "load_s": load_s,
            "reads_every_tensor": not any(unread.values()), "loading_info": unread}
    if note:
        info["note"] = note
    if args.device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()

    eos = config.get("eos_token_id")
    pad = eos[0] if isinstance(eos, list) else eos
    try:
        from transformers.generation.streamers import BaseStreamer
    except ImportError:
        BaseStreamer = object
    generation_keys = GenerationConfig().to_dict()

    class ClockStreamer(BaseStreamer):
        """generate() hands a streamer the prompt first, then each new token on the host."""

        def __init__(self, clock, length):
            self.clock, self.length, self.prompt_seen = clock, length, False

        def put(self, value):
            if not self.prompt_seen and value.numel() == self.length:
                self.prompt_seen = True
                return
            self.clock.token()

        def end(self):
            pass

    def generator(extra):
        def generate(prompt, new_tokens, clock):
            streamer = ClockStreamer(clock, prompt_length(prompt))
            clock.begin()
            out = model.generate(input_ids=prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                 max_new_tokens=new_tokens, min_new_tokens=new_tokens, pad_token_id=pad,
                                 streamer=streamer, **extra)
            made = int(out.shape[-1]) - prompt_length(prompt)
            if made != new_tokens:
                raise RuntimeError(f"generate made {made} tokens, not {new_tokens}")
        return generate

    def eager():
        return generator({})

    def static_compile():
        # We compile the forward ourselves; generate's own automatic compilation (transformers
        # >= 4.48, static cache on CUDA) would wrap it a second time.
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
        extra = {"cache_implementation": "static"}
        if "disable_compile" in generation_keys:
            extra["disable_compile"] = True
        return generator(extra)

    def static_auto():
        return generator({"cache_implementation": "static"})

    variants = {"eager": eager, "static-compile": static_compile, "static-auto": static_auto}
    return config, info, variants


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a directory written by flashq-model make-tiny")
    parser.add_argument("--impl", choices=["hf", "ours-torch"], default="hf")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--variants", default=None,
                        help="comma-separated: eager, static-compile, static-auto (hf); eager (ours-torch)")
    parser.add_argument("--prompt-tokens", type=int, default=259)
    parser.add_argument("--decode-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs before an eager variant")
    parser.add_argument("--compile-warmup", type=int, default=2,
                        help="untimed runs before a compiled variant (compile, then CUDA graph capture)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.prompt_tokens < 2 or args.decode_tokens < 2 or args.repeats < 1:
        parser.error("--prompt-tokens and --decode-tokens must be at least 2, --repeats at least 1")
    if not os.path.isfile(os.path.join(args.model, "config.json")):
        parser.error(f"{args.model}: no config.json (a directory written by flashq-model make-tiny)")
    names = (args.variants or ("eager,static-auto" if args.impl == "hf" else "eager")).split(",")

    try:
        try:
            import torch
        except ImportError as e:
            raise MissingPiece(f"torch is not installed for {sys.executable} ({e})") from e
        say(f"loading {args.model} ({args.impl}, {args.device})")
        began = time.perf_counter()
        config, info, variants = (load_hf if args.impl == "hf" else load_ours_torch)(torch, args)
        info.setdefault("load_s", time.perf_counter() - began)
    except MissingPiece as e:
        say(str(e))
        emit("load", status="failed", error=str(e), python=sys.executable)
        return 2
    except Exception as e:  # e.g. transformers cannot read the directory: that is the finding
        say(f"cannot load {args.model}: {e.__class__.__name__}: {e}")
        emit("load", status="failed", error=f"{e.__class__.__name__}: {str(e)[:1500]}",
             traceback=traceback.format_exc()[-3000:], python=sys.executable)
        return 1
    emit("load", status="ok", model=args.model, device=args.device, python=sys.executable, variants=names,
         prompt_tokens=args.prompt_tokens, decode_tokens=args.decode_tokens, repeats=args.repeats, **info)

    prompt = random_prompt(torch, config["vocab_size"], args.prompt_tokens, args.seed, args.device)
    failed = 0
    for name in names:
        if name not in variants:
            emit("variant", variant=name, status="failed",
                 error=f"no variant {name} for --impl {args.impl} (have: {', '.join(variants)})")
            failed += 1
            continue
        say(f"variant {name}")
        try:
            if args.device == "cuda":
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
            generate = variants[name]()
            warmup = args.warmup if name == "eager" else args.compile_warmup
            result = time_generation(generate, prompt, args.decode_tokens, warmup, args.repeats)
            if args.device == "cuda":
                result["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
            emit("variant", variant=name, status="ok", **result)
        except Exception as e:  # a variant that fails is a result to report, not the end of the run
            failed += 1
            emit("variant", variant=name, status="failed", error=f"{e.__class__.__name__}: {str(e)[:1500]}",
                 traceback=traceback.format_exc()[-3000:])
    emit("done", failed=failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
