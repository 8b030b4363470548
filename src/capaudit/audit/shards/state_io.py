"""Shard state files without pickles: one ``.npz`` of numpy arrays plus a JSON header.

Why: ``audit run --shards`` saves each shard's metric accumulators in the work
directory, a folder the user controls; unpickling a swapped file would run
its code. Here a state is written as a tree the loader can only *rebuild*:
JSON scalars, lists, tagged dicts and tuples, numpy arrays (stored in the
``.npz``, read with ``allow_pickle=False``, never object dtype) and instances
of the dataclasses in :data:`STATE_TYPES` (the accumulator states of the
built-in metrics: ``UnitSums``, ``UnitCells``, ``Vocabulary``,
``HyperLogLog``, ``RetrievalState``), each registered by the metric module
that defines it (:mod:`capaudit.metrics.state_types`). The loader looks types
up by name in that registry and imports nothing else. A plugin metric whose
state is another dataclass registers it with :func:`register_state` (or names
it in its ``state_types``); any other state cannot be saved safely and the
sharded run says so in one line.
"""

from __future__ import annotations

import dataclasses
import io
import json
import zipfile
from typing import Any

import numpy as np

from capaudit.metrics.state_types import STATE_TYPES, register_state

__all__ = ["STATE_TYPES", "StateError", "dumps_state", "loads_state", "register_state"]

_BUILTINS_LOADED = []
HEADER = "header"
FORMAT = "capaudit-shard-state/1"


class StateError(ValueError):
    """A state that cannot be written safely, or a file that is not a valid state."""


def _builtin_types() -> dict[str, type]:
    if not _BUILTINS_LOADED:
        _BUILTINS_LOADED.append(True)
        import capaudit.metrics  # noqa: F401  (the built-in metric modules register theirs)
    return STATE_TYPES


def _encode(v: Any, arrays: list[np.ndarray]) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)) and not isinstance(v, np.generic):
        return v
    if isinstance(v, (np.ndarray, np.generic)):
        arr = np.asarray(v)
        if arr.dtype.hasobject:
            raise StateError("a numpy array of Python objects")
        arrays.append(arr)
        return {"array" if isinstance(v, np.ndarray) else "scalar": len(arrays) - 1}
    if isinstance(v, list):  # ints (posting lists) as they are: the common, large case
        return v if all(type(x) is int for x in v) else [_encode(x, arrays) for x in v]
    if isinstance(v, tuple):
        return {"tuple": [_encode(x, arrays) for x in v]}
    if isinstance(v, dict) and all(type(k) is str for k in v):  # token tables
        return {"sdict": {k: x if type(x) is int else _encode(x, arrays) for k, x in v.items()}}
    if isinstance(v, dict):
        return {"dict": [[_encode(k, arrays), _encode(x, arrays)] for k, x in v.items()]}
    name = f"{type(v).__module__}.{type(v).__qualname__}"
    if _builtin_types().get(name) is type(v):
        return {"type": name, "fields": {f.name: _encode(getattr(v, f.name), arrays)
                                         for f in dataclasses.fields(v)}}
    raise StateError(f"a {name} (not a registered state type)")


def _decode(v: Any, arrays: dict[str, np.ndarray]) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return v if all(type(x) is int for x in v) else [_decode(x, arrays) for x in v]
    if not isinstance(v, dict) or len(v) not in (1, 2):
        raise StateError(f"unexpected value {str(v)[:40]!r}")
    if "array" in v:
        return arrays[f"a{int(v['array'])}"]
    if "scalar" in v:
        return arrays[f"a{int(v['scalar'])}"][()]
    if "tuple" in v:
        return tuple(_decode(x, arrays) for x in v["tuple"])
    if "sdict" in v:
        return {k: x if type(x) is int else _decode(x, arrays) for k, x in v["sdict"].items()}
    if "dict" in v:
        return {_decode(k, arrays): _decode(x, arrays) for k, x in v["dict"]}
    cls = _builtin_types().get(v.get("type"))
    if cls is None:
        raise StateError(f"unknown state type {str(v.get('type'))[:60]!r}")
    return cls(**{k: _decode(x, arrays) for k, x in v["fields"].items()})


def dumps_state(obj: Any) -> bytes:
    """``obj`` as the bytes of an ``.npz`` file; :class:`StateError` names what cannot be saved."""
    arrays: list[np.ndarray] = []
    header = json.dumps({"format": FORMAT, "state": _encode(obj, arrays)},
                        separators=(",", ":"), check_circular=False)
    buf = io.BytesIO()
    np.savez(buf, **{HEADER: np.frombuffer(header.encode(), np.uint8)},
             **{f"a{i}": a for i, a in enumerate(arrays)})
    return buf.getvalue()


def loads_state(data: bytes) -> Any:
    """Rebuild a state from :func:`dumps_state` bytes; never unpickles, never imports."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
        header = json.loads(arrays.pop(HEADER).tobytes().decode())
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise StateError("not a capaudit shard state")
        return _decode(header["state"], arrays)
    except StateError:
        raise
    except (ValueError, KeyError, TypeError, OSError, EOFError, zipfile.BadZipFile,
            UnicodeDecodeError, AttributeError, RecursionError) as exc:
        raise StateError(" ".join(str(exc).split())[:120] or type(exc).__name__) from None
