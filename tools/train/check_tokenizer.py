#!/usr/bin/python3
"""Checks that our C++ tokenizer (flashq-model tokenize) agrees with SentencePiece's Python
binding on the demo tokenizer: every held-out line encodes to the same ids, and each held-out
file's ids (whole file, newlines included) decode back to the file byte for byte.

Usage: check_tokenizer.py --model DIR [--flashq-model build/bin/flashq-model]
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="directory holding tokenizer.model")
    parser.add_argument("--flashq-model", default="build/bin/flashq-model")
    args = parser.parse_args()

    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=os.path.join(args.model, "tokenizer.model"))
    _, held_out = corpus.source_files()
    texts = [corpus.read_source(f) for f in held_out]

    lines = [line for text in texts for line in text.split("\n") if line]
    run = subprocess.run([args.flashq_model, "tokenize", "--model", args.model], input="\n".join(lines) + "\n",
                         capture_output=True, text=True, check=True)
    cpp_ids = [json.loads(row) for row in run.stdout.splitlines()]
    assert len(cpp_ids) == len(lines), f"{len(cpp_ids)} outputs for {len(lines)} lines"
    encode_diffs = [line for line, ids in zip(lines, cpp_ids) if sp.encode(line) != ids]

    file_ids = [sp.encode(text) for text in texts]
    run = subprocess.run([args.flashq_model, "tokenize", "--model", args.model, "--decode"],
                         input="\n".join(json.dumps(ids) for ids in file_ids) + "\n",
                         capture_output=True, text=True, check=True)
    decoded = [json.loads(row) for row in run.stdout.splitlines()]
    decode_diffs = [f for f, text, back in zip(held_out, texts, decoded) if text != back]

    print(f"check_tokenizer: {len(lines)} lines, encode differs on {len(encode_diffs)}; "
          f"{len(texts)} files, decode differs on {len(decode_diffs)}")
    for line in encode_diffs[:3]:
        print("  encode differs:", repr(line), sp.encode(line))
    for name in decode_diffs[:3]:
        print("  decode differs:", name)
    sys.exit(1 if encode_diffs or decode_diffs or len(decoded) != len(texts) else 0)


if __name__ == "__main__":
    main()
