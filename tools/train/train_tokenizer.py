#!/usr/bin/python3
"""Step 1 of the demo pair: a SentencePiece BPE tokenizer for Python source, and the token streams.

Trains with Debian's spm_train on the training lines of the standard library (corpus.py), then
encodes every source file whole (newlines and indentation included) into
    WORK/tokens/train.npy     uint16 ids, files joined by </s>
    WORK/tokens/held_out.npy  the same for the held-out modules
and writes WORK/tokenizer/tokenizer.model.

Code needs its whitespace back exactly: no normalisation, no dummy prefix, no collapsing of
spaces, runs of spaces as pieces of their own (indentation), digits split, and byte fallback so
that "\\n" (never inside a training line) and any rare character encode losslessly.
"""

import argparse
import os
import shutil
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

SPM_FLAGS = [
    "--model_type=bpe",
    "--character_coverage=0.9999",
    "--byte_fallback=true",
    "--split_digits=true",
    "--remove_extra_whitespaces=false",
    "--add_dummy_prefix=false",
    "--allow_whitespace_only_pieces=true",
    "--normalization_rule_name=identity",
    "--max_sentence_length=8192",
    "--unk_id=0",
    "--bos_id=1",
    "--eos_id=2",
    "--pad_id=-1",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True, help="work directory")
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-lines", type=int, default=1_000_000, help="lines spm_train samples")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    train_files, held_out_files = corpus.source_files()
    print(f"tokenizer: {len(train_files)} training files, {len(held_out_files)} held out", flush=True)
    tok_dir = os.path.join(args.work, "tokenizer")
    if os.path.isdir(tok_dir):
        shutil.rmtree(tok_dir)
    os.makedirs(tok_dir)

    lines_path = os.path.join(tok_dir, "train_lines.txt")
    count = 0
    with open(lines_path, "w", encoding="utf-8") as out:
        for relative in train_files:
            for line in corpus.read_source(relative).split("\n"):
                if line.strip():
                    out.write(line + "\n")
                    count += 1
    print(f"tokenizer: {count} non-blank lines -> spm_train (vocab {args.vocab})", flush=True)

    started = time.time()
    command = ["spm_train", f"--input={lines_path}", f"--model_prefix={tok_dir}/tokenizer",
               f"--vocab_size={args.vocab}", f"--random_seed={args.seed}",
               f"--input_sentence_size={args.max_lines}", f"--num_threads={args.threads}"] + SPM_FLAGS
    log_path = os.path.join(tok_dir, "spm_train.log")
    with open(log_path, "w") as log:
        subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT)
    os.remove(lines_path)
    print(f"tokenizer: trained in {time.time() - started:.0f}s (log {log_path})", flush=True)

    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=os.path.join(tok_dir, "tokenizer.model"))
    assert sp.get_piece_size() == args.vocab and sp.eos_id() == 2
    tokens_dir = os.path.join(args.work, "tokens")
    os.makedirs(tokens_dir, exist_ok=True)
    for name, files in (("train", train_files), ("held_out", held_out_files)):
        stream, chars, lossy = [], 0, []
        for relative in files:
            text = corpus.read_source(relative)
            ids = sp.encode(text)
            if sp.decode(ids) != text:
                lossy.append(relative)
            stream.extend(ids)
            stream.append(sp.eos_id())
            chars += len(text)
        np.save(os.path.join(tokens_dir, f"{name}.npy"), np.array(stream, dtype=np.uint16))
        with open(os.path.join(tokens_dir, f"{name}_files.txt"), "w") as f:
            f.write("\n".join(files) + "\n")
        print(f"tokenizer: {name}: {len(files)} files, {chars} chars -> {len(stream)} tokens "
              f"({chars / len(stream):.2f} chars/token); round trip lossy for {len(lossy)} files {lossy[:5]}",
              flush=True)

    sample = "def f(x):\n    if x:\n        return 'a\\tb'  # 12345\n\treturn None\n"
    ids = sp.encode(sample)
    print("tokenizer: sample pieces", [sp.id_to_piece(i) for i in ids], flush=True)
    assert sp.decode(ids) == sample, "sample does not survive encode/decode"


if __name__ == "__main__":
    main()
