"""Reads and writes .safetensors files without the safetensors package (Debian does not ship it).

The format: an 8-byte little-endian header length, a JSON header mapping each tensor name to
{dtype, shape, data_offsets} (offsets relative to the end of the header), then the raw data.
We write tensors in sorted name order, contiguous, with the header padded by spaces to a
multiple of 8 bytes so every tensor starts aligned.
"""

import json
import struct

import numpy as np
import torch

_DTYPE_NAMES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16"}
_NAME_DTYPES = {name: dtype for dtype, name in _DTYPE_NAMES.items()}


def _raw_bytes(tensor):
    tensor = tensor.detach().contiguous().cpu()
    if tensor.dtype == torch.bfloat16:
        # numpy has no bfloat16: reinterpret the 16-bit patterns as int16.
        return tensor.view(torch.int16).numpy().tobytes()
    return tensor.numpy().tobytes()


def write_safetensors(path, tensors, dtype=torch.bfloat16, metadata=None):
    """Writes {name: tensor} to `path`, converting every tensor to `dtype`."""
    header = {}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        blob = _raw_bytes(tensors[name].to(dtype))
        header[name] = {
            "dtype": _DTYPE_NAMES[dtype],
            "shape": list(tensors[name].shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = dict(metadata or {"format": "pt"})
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for blob in blobs:
            out.write(blob)


def read_safetensors(path):
    """Returns {name: float32 tensor} for a file written by write_safetensors (or by anyone)."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        dtype = _NAME_DTYPES[entry["dtype"]]
        chunk = data[begin:end]
        if dtype == torch.bfloat16:
            array = np.frombuffer(chunk, dtype=np.int16).copy()
            tensor = torch.from_numpy(array).view(torch.bfloat16)
        elif dtype == torch.float16:
            tensor = torch.from_numpy(np.frombuffer(chunk, dtype=np.float16).copy())
        else:
            tensor = torch.from_numpy(np.frombuffer(chunk, dtype=np.float32).copy())
        tensors[name] = tensor.reshape(entry["shape"]).float()
    return tensors
