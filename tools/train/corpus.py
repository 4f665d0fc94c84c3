"""The demo pair's text: the Python standard library as Debian's python3.11 installs it.

A fixed list of modules is held out of every training step (tokenizer, target and drafter) and
used only for evaluation prompts. The list is part of the model card (models/demo/README.md).
"""

import os

STDLIB_DIR = "/usr/lib/python3.11"

# Held-out modules, relative to STDLIB_DIR; a name ending in "/" is a whole package. Chosen as
# ordinary, self-contained library code of different kinds (parsing, numbers, text, data).
HELD_OUT = (
    "argparse.py",
    "csv.py",
    "fractions.py",
    "graphlib.py",
    "heapq.py",
    "json/",
    "pprint.py",
    "shlex.py",
    "statistics.py",
    "textwrap.py",
)

# Not the standard library's own sources: packages installed into the interpreter's directory,
# and the build configuration.
_SKIPPED_DIRS = ("dist-packages", "site-packages", "config-3.11-x86_64-linux-gnu", "__pycache__")


def _is_held_out(relative):
    return any(relative == h or (h.endswith("/") and relative.startswith(h)) for h in HELD_OUT)


def source_files(stdlib_dir=STDLIB_DIR):
    """(training files, held-out files): sorted lists of relative paths of every *.py file."""
    train, held_out = [], []
    for root, dirs, files in os.walk(stdlib_dir):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED_DIRS)
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            relative = os.path.relpath(os.path.join(root, name), stdlib_dir)
            (held_out if _is_held_out(relative) else train).append(relative)
    return sorted(train), sorted(held_out)


def read_source(relative, stdlib_dir=STDLIB_DIR):
    with open(os.path.join(stdlib_dir, relative), encoding="utf-8", errors="replace") as f:
        return f.read()
