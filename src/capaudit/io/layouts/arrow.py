"""Arrow IPC files (a Hugging Face ``datasets`` folder's ``data-*.arrow``): the layout's reader.

``save_to_disk`` writes IPC streams; an IPC file (random access, footer) is read too. A
local file is memory-mapped, a remote one read from its open stream. No writer: no command
writes this layout back (``filter run --shards`` refuses ``.arrow``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pyarrow as pa

__all__ = ["record_batches"]


def record_batches(source) -> Iterator[pa.RecordBatch]:
    """The batches of ``source``: a local ``Path`` or an open binary file."""
    if isinstance(source, Path):
        with pa.memory_map(str(source)) as src:
            yield from _ipc_batches(src)
        return
    yield from _ipc_batches(source)


def _ipc_batches(src) -> Iterator[pa.RecordBatch]:
    try:
        reader = pa.ipc.open_stream(src)
    except pa.ArrowInvalid:
        src.seek(0)
        reader = pa.ipc.open_file(src)
        for i in range(reader.num_record_batches):
            yield reader.get_batch(i)
        return
    yield from reader
