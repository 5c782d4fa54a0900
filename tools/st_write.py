"""The safetensors writing the checkpoint generators share (gen_k3.py, gen_dspark.py,
gen_vision.py, gen_hollow.py): float32 -> BF16 rounding, a file's head, the config and
index. A file is the
head (its JSON's length, 8 bytes little-endian, then the JSON padded with spaces to a
multiple of 8) and the tensors' bytes back to back in the order the head's offsets give.
"""
import json
import os

import numpy as np

DTYPE_SIZE = {"F32": 4, "BF16": 2, "U8": 1}


def bf16_bits(a):
    """float32 array -> uint16 bf16 bits, round to nearest even (no NaN inputs here)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return r.astype(np.uint16)


def bf16_bytes(a):
    """a rounded to BF16, little-endian bytes in row-major order."""
    return bf16_bits(a).astype("<u2").tobytes()


def nbytes(dtype, shape):
    n = DTYPE_SIZE[dtype]
    for s in shape:
        n *= s
    return n


def head(entries, metadata=None, sort_names=False):
    """The head for entries [(name, dtype, shape)] whose bytes follow in that order.
    The JSON lists __metadata__ (when given) first, then the names in the order given or,
    sort_names, sorted. Returns (head bytes, {name: [begin, end]}, data bytes)."""
    off, hdr = 0, {}
    for name, dtype, shape in entries:
        nb = nbytes(dtype, shape)
        hdr[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + nb]}
        off += nb
    doc = {} if metadata is None else {"__metadata__": metadata}
    for k in sorted(hdr) if sort_names else hdr:
        doc[k] = hdr[k]
    hj = json.dumps(doc, separators=(",", ":")).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)
    return len(hj).to_bytes(8, "little") + hj, {k: v["data_offsets"] for k, v in hdr.items()}, off


def write_bf16(path, ts, metadata=None):
    """ts [(name, float array)] written as one file, every tensor BF16, in the order given.
    Returns the data bytes."""
    blobs = [bf16_bytes(a) for _, a in ts]
    h, _, total = head([(name, "BF16", np.shape(a)) for name, a in ts], metadata)
    with open(path, "wb") as f:
        f.write(h)
        for b in blobs:
            f.write(b)
    return total


def write_index(out, cfg, weight_map, total):
    """A checkpoint's config.json and model.safetensors.index.json (names sorted)."""
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": {k: weight_map[k] for k in sorted(weight_map)}}, f, indent=2)
        f.write("\n")
