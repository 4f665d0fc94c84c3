"""Minimal .safetensors reader for the NumPy reference; every float tensor comes back as float32.

Written from the file format alone (not from flashq's C++ loader), so that the two can disagree:

    [8 bytes: little-endian u64 N][N bytes: JSON header][data]

The header maps tensor name -> {"dtype", "shape", "data_offsets": [begin, end]}, offsets counted
from the first byte after the header; an optional "__metadata__" entry holds strings only.
A sharded checkpoint is a directory with model.safetensors.index.json whose "weight_map" maps
tensor name -> shard file name.

F32, F16 and BF16 are read: they are what model weights are stored in, and each converts to
float32 exactly (bf16 is the top half of a float32; every f16 value is a float32 value).
U8 is read too, as raw uint8 (never converted): MXFP4 checkpoints store their packed FP4 blocks
and E8M0 scales that way (mxfp4_reference.py decodes them).
"""

import json
import os

import numpy as np

# dtype name in the header -> (little-endian numpy storage type, bytes per element)
_STORAGE = {
    "F32": (np.dtype("<f4"), 4),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2),  # kept as raw bits, widened below
    "U8": (np.dtype("u1"), 1),     # kept as raw bytes: packed MXFP4 blocks and scales
}

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"


def read_header(path):
    """Returns (header dict without __metadata__, absolute offset of the data section)."""
    file_size = os.path.getsize(path)
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) != 8:
            raise ValueError(f"{path}: shorter than the 8-byte header length")
        header_len = int.from_bytes(prefix, "little", signed=False)
        if header_len > file_size - 8:
            raise ValueError(f"{path}: header length {header_len} exceeds file size {file_size}")
        header = json.loads(f.read(header_len).decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header is not a JSON object")
    header.pop("__metadata__", None)
    return header, 8 + header_len


def bf16_bits_to_float32(bits):
    """bf16 is the upper 16 bits of an IEEE float32: put them back there, zero the rest."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _decode(name, entry, data, path):
    dtype = entry["dtype"]
    if dtype not in _STORAGE:
        raise ValueError(f"{path}: tensor {name} has dtype {dtype}; only F32, F16, BF16, U8 are read")
    storage, itemsize = _STORAGE[dtype]
    shape = tuple(int(d) for d in entry["shape"])
    begin, end = (int(o) for o in entry["data_offsets"])
    count = int(np.prod(shape, dtype=np.int64))  # prod(()) == 1: a scalar holds one element
    if not (0 <= begin <= end <= len(data)):
        raise ValueError(f"{path}: tensor {name} offsets [{begin}, {end}) outside data of {len(data)} bytes")
    if end - begin != count * itemsize:
        raise ValueError(f"{path}: tensor {name} spans {end - begin} bytes, shape {list(shape)} {dtype} needs {count * itemsize}")
    raw = np.asarray(data[begin:end]).view(storage)
    if dtype == "BF16":
        values = bf16_bits_to_float32(raw)
    elif dtype == "U8":
        values = raw.copy()
    else:
        values = raw.astype(np.float32)  # copies: the result must not alias the mapped file
    return values.reshape(shape)


def load_safetensors_file(path, names=None):
    """All tensors of one file (or only `names`) as {name: float32 ndarray, or uint8 for U8}."""
    header, data_start = read_header(path)
    wanted = header.keys() if names is None else names
    missing = [n for n in wanted if n not in header]
    if missing:
        raise KeyError(f"{path}: tensors not in file: {missing[:5]}")
    # A memory map keeps peak memory at the float32 results, not file + results.
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=data_start) if os.path.getsize(path) > data_start \
        else np.zeros(0, dtype=np.uint8)
    return {name: _decode(name, header[name], data, path) for name in wanted}


def load_safetensors(path):
    """Tensors of a .safetensors file, or of a checkpoint directory (sharded via the index, or a
    single model.safetensors), as {name: float32 ndarray, or uint8 for U8}."""
    if os.path.isfile(path):
        return load_safetensors_file(path)
    index_path = os.path.join(path, INDEX_NAME)
    if os.path.isfile(index_path):
        with open(index_path, "r", encoding="utf-8") as f:
            weight_map = json.load(f)["weight_map"]
        names_by_shard = {}
        for name, shard in weight_map.items():
            names_by_shard.setdefault(shard, []).append(name)
        tensors = {}
        for shard, names in sorted(names_by_shard.items()):
            tensors.update(load_safetensors_file(os.path.join(path, shard), names))
        return tensors
    single_path = os.path.join(path, SINGLE_NAME)
    if os.path.isfile(single_path):
        return load_safetensors_file(single_path)
    raise FileNotFoundError(f"{path}: neither {INDEX_NAME} nor {SINGLE_NAME} found")
