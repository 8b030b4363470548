"""numpy <-> Arrow for fixed-width columns, through the buffers.

Why not ``Array.to_numpy()``, ``np.asarray(array)`` or ``pa.array(ndarray)``: when pandas is
installed, pyarrow imports it on the first such conversion (and on a Python scalar given to a
compute function) only to ask whether the input is a pandas object. That import costs
~0.4 s of CPU, a fifth of a whole 40k-caption ``audit run``, which never holds a pandas
object. These helpers do the same conversions on the buffers: same values, same types,
no pandas (tests/test_arrays.py compares them with pyarrow's own).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["to_numpy", "from_numpy", "strings", "from_list", "byte_lengths"]


def to_numpy(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A null-free numeric Arrow array as numpy (read-only, zero copy for one chunk)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if arr.null_count:
        raise ValueError(f"{arr.null_count} nulls in an array read as numpy")
    if pa.types.is_boolean(arr.type):  # bit-packed
        return _bits(arr.buffers()[1], arr.offset, len(arr))
    dtype = _NUMPY.get(str(arr.type))
    if dtype is None:
        raise TypeError(f"not a numeric Arrow type: {arr.type}")
    if not len(arr):
        return np.zeros(0, dtype)
    return np.frombuffer(arr.buffers()[1], dtype, count=len(arr), offset=arr.offset * dtype.itemsize)


def from_numpy(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """A 1-d numeric or boolean numpy array as Arrow; ``valid`` (bool, optional) marks the
    non-null entries, as ``pa.array(values, mask=~valid)`` would."""
    values = np.ascontiguousarray(values)
    typ = pa.from_numpy_dtype(values.dtype)
    n = len(values)
    data = np.packbits(values, bitorder="little") if values.dtype == bool else values
    if valid is None:
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(data)], null_count=0)
    valid = np.asarray(valid, bool)
    return pa.Array.from_buffers(typ, n, [pa.py_buffer(np.packbits(valid, bitorder="little")),
                                          pa.py_buffer(data)], null_count=int(n - valid.sum()))


_NUMPY = {name: np.dtype(name) for name in
          ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")} | {
    "halffloat": np.dtype(np.float16), "float": np.dtype(np.float32),
    "double": np.dtype(np.float64)}


def strings(values: list[str]) -> pa.Array:
    """A list of ``str`` (no None) as an Arrow ``string`` array, as ``pa.array`` would."""
    return _utf8([v.encode("utf-8") for v in values])


def _utf8(data: list[bytes], valid: np.ndarray | None = None) -> pa.Array:
    """Encoded texts as a ``string`` array (under 2 GiB in all); ``valid`` as for
    :func:`from_numpy` (a null's bytes are empty)."""
    offsets = np.zeros(len(data) + 1, np.int32)
    np.cumsum([len(b) for b in data], out=offsets[1:])
    bitmap = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.string(), len(data),
                                 [bitmap, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))],
                                 null_count=0 if valid is None else int(len(data) - valid.sum()))


_INT_RANGE = {"int32": (-2**31, 2**31 - 1), "int64": (-2**63, 2**63 - 1)}
_LIST_TYPES = {"string": (str, None), "int32": (int, np.int32), "int64": (int, np.int64),
               "double": (float, np.float64)}


def from_list(values: list, typ: pa.DataType) -> pa.Array:
    """A list of ``str``, ``int`` or ``float`` values of one kind and ``None`` (null) as an
    Arrow ``string``, ``int32``/``int64`` or ``double`` array, the array
    ``pa.array(values, typ)`` gives. Anything else (another type or value, an int out of
    range, text that is no UTF-8, over 2 GiB of text) is left to ``pa.array`` itself, which
    converts it or raises as it always did."""
    kind, dtype = _LIST_TYPES.get(str(typ), (None, None))
    if kind is None or not {type(v) for v in values} <= {kind, type(None)}:
        return pa.array(values, typ)
    valid = np.array([v is not None for v in values], bool)
    valid = None if valid.all() else valid
    if kind is str:
        try:
            data = [b"" if v is None else v.encode("utf-8") for v in values]
        except UnicodeEncodeError:
            return pa.array(values, typ)
        return pa.array(values, typ) if sum(map(len, data)) >= 2**31 else _utf8(data, valid)
    filled = [0 if v is None else v for v in values]
    if kind is int:
        low, high = _INT_RANGE[str(typ)]
        if filled and not (low <= min(filled) and max(filled) <= high):
            return pa.array(values, typ)
    return from_numpy(np.array(filled, dtype), valid)


def byte_lengths(arr: pa.Array) -> np.ndarray:
    """UTF-8 bytes of each value of a ``string``/``binary`` array (0 for a null), int64, as
    ``fill_null(binary_length(arr), 0)``, read from the offsets buffer."""
    wide = pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
    if not (wide or pa.types.is_string(arr.type) or pa.types.is_binary(arr.type)):
        return byte_lengths(arr.cast(pa.large_binary()))  # other layouts (views): offsets
    n = len(arr)
    if not n:
        return np.zeros(0, np.int64)
    width = np.dtype(np.int64 if wide else np.int32)
    offsets = np.frombuffer(arr.buffers()[1], width, count=n + 1, offset=arr.offset * width.itemsize)
    sizes = np.diff(offsets).astype(np.int64)
    if arr.null_count:  # a null slot's length is unspecified by Arrow: count it as 0
        sizes[~_bits(arr.buffers()[0], arr.offset, n)] = 0
    return sizes


def _bits(buf, offset: int, n: int) -> np.ndarray:
    """``n`` bools from an Arrow bitmap (data or validity) starting at bit ``offset``."""
    bits = np.frombuffer(buf, np.uint8) if n else np.zeros(0, np.uint8)
    return np.unpackbits(bits, bitorder="little", count=offset + n)[offset:].astype(bool)
