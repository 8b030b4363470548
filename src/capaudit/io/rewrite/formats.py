"""Which writer takes which source: by the format ``sets add`` read it as (or a shard's).

The JSON formats are told apart by their first bytes: a top-level array is streamed record by
record (:class:`~capaudit.io.rewrite.json_records.JsonArrayRewriter`), anything else is read
as JSONL; COCO's captions JSON is one object, read whole (its ``annotations`` are the
records). A JSON format this table does not name (a reader added later, such as COCO's
results list) is written back as flat records with the caption in one field, the layout
every JSON list of records has.
"""

from __future__ import annotations

import io
from typing import IO, Mapping

from capaudit.io.rewrite.base import ChangeLog, Rewriter

__all__ = ["open_rewriter", "REWRITE_FORMATS", "CONVERSATION_FORMATS"]

CONVERSATION_FORMATS = ("sharegpt4v", "llava", "sharegpt")
REWRITE_FORMATS = CONVERSATION_FORMATS + ("capsfusion", "jsonl", "coco-results", "json", "coco",
                                          "chair", "flickr-token", "csv", "parquet",
                                          "webdataset")
_NOT_JSON = ("karpathy", "fusecap", "hf")   # formats whose records cannot be written back


def _layout(fmt: str, options: Mapping, path: str):
    from capaudit.io.readers import get_reader
    from capaudit.io.readers.base import READERS
    from capaudit.io.rewrite.layouts import RecordLayout

    reader = None
    if fmt in READERS.names():
        accepts = READERS.get(fmt).accepts   # the options the set was read with, as sets add
        reader = get_reader(fmt, **{k: v for k, v in options.items()   # gave them
                                    if v is not None and k in accepts})
    layout = RecordLayout(fmt, reader, options.get("caption_col"), options.get("id_col"))
    layout.reader_path = path
    return layout


def open_rewriter(fmt: str, options: Mapping, src: IO[bytes], out: IO[bytes] | None,
                  path: str, log: ChangeLog, **batching) -> Rewriter:
    """The writer of format ``fmt`` (a ``sets add`` format name) over the open binary source
    ``src``; ``options``: the reader options the set was registered with (``caption_col``,
    ``id_col``, ``turns``, ``where``, ``skip_no_image``)."""
    from capaudit.errors import InputError

    cap, idc = options.get("caption_col"), options.get("id_col")
    if fmt == "webdataset":
        from capaudit.io.rewrite.tar import TarRewriter

        return TarRewriter(src, out, path, log, caption_key=cap or "caption",
                           id_field=idc or "image_id", **batching)
    if fmt in ("parquet", "parquet-shard") or (fmt == "capsfusion" and _peek(src, 4) == b"PAR1"):
        from capaudit.io.rewrite.parquet import ParquetRewriter

        extra = {}
        if fmt != "parquet-shard":   # a registered file: the tabular reader's columns
            from capaudit.io.readers.capsfusion import CapsFusionReader
            from capaudit.io.readers.columns import CAPTION_CANDIDATES, ID_CANDIDATES
            reader = CapsFusionReader if fmt == "capsfusion" else None
            extra = {"caption_candidates": reader.caption_candidates if reader
                     else CAPTION_CANDIDATES,
                     "id_candidates": reader.id_candidates if reader else ID_CANDIDATES}
        return ParquetRewriter(src, out, path, log, caption_col=cap, id_col=idc, **extra,
                               **batching)
    if fmt == "csv":
        from capaudit.io.layouts import csv as csv_layout
        from capaudit.io.readers.columns import CAPTION_CANDIDATES, ID_CANDIDATES
        from capaudit.io.rewrite.text_lines import CsvRewriter

        return CsvRewriter(src, out, path, log, delimiter=csv_layout.delimiter(path),
                           header=csv_layout.has_header(path), caption_col=cap, id_col=idc,
                           caption_candidates=CAPTION_CANDIDATES, id_candidates=ID_CANDIDATES,
                           **batching)
    if fmt == "flickr-token":
        from capaudit.io.rewrite.text_lines import FlickrTokenRewriter

        return FlickrTokenRewriter(src, out, path, log, **batching)
    if fmt in _NOT_JSON:
        raise InputError(f"a {fmt} source cannot be written back in its own layout",
                         path=path, fix="export with --to jsonl, parquet, sharegpt4v, llava "
                                        "or coco")
    from capaudit.io.rewrite import json_records as jr

    if fmt in ("coco", "chair"):
        cls = jr.ChairRewriter if fmt == "chair" else jr.CocoRewriter
        return cls(src, out, path, log, **batching)
    layout = _layout(fmt, options, path)
    from capaudit.io.layouts.json import is_json_array

    cls = jr.JsonArrayRewriter if is_json_array(_peek(src, 4096)) else jr.JsonlRewriter
    return cls(src, out, path, log, layout=layout, **batching)


def _peek(src, n: int) -> bytes:
    """The first ``n`` bytes of a stream without consuming them (it must be a buffered reader
    or seekable)."""
    if hasattr(src, "peek"):
        return src.peek(n)[:n]
    pos = src.tell()
    head = src.read(n)
    src.seek(pos)
    return head


def buffered(fh) -> io.BufferedReader:
    """``fh`` as a buffered reader (``peek``), unless it is one."""
    return fh if isinstance(fh, io.BufferedReader) else io.BufferedReader(fh)
