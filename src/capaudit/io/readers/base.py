"""Caption readers: one registry, one small class per input format.

A reader turns a file (or folder) into a stream of Arrow record batches with
the columns ``image_key`` (text id as given), ``image_id`` (integer COCO id
or null for custom ids) and ``caption``, plus an optional ``meta`` JSON
string. Streaming batches keep memory flat for million-caption files (a
batch is bounded by rows and by caption bytes, :meth:`CaptionReader.full`); the
driver in :mod:`capaudit.io.ingest` validates each batch (empty or missing
captions) and names the offending row.

``--format auto`` asks each reader's :meth:`CaptionReader.sniff` in turn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa

from capaudit.core.registry import Registry
from capaudit.errors import InputError
from capaudit.io.layouts.json import load_json_document

READERS: Registry = Registry("caption format", group="readers")  # base set below

BATCH_ROWS = 200_000     # rows per batch at most ...
BATCH_BYTES = 4 << 20   # ... and about this much caption text: a batch of 200k ShareGPT4V-length
#                          captions would hold ~1 GB as Python strings downstream

SCHEMA = pa.schema([("image_key", pa.string()), ("image_id", pa.int64()),
                    ("caption", pa.string()), ("meta", pa.string())])

PICKLE_SUFFIXES = {".pkl", ".pickle", ".p", ".pt", ".pth", ".joblib", ".npy"}
PICKLE_MAGIC = (b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")


class CaptionReader:
    """Base class; subclasses set ``name`` and implement :meth:`read`."""

    name = "base"
    version = "1"
    expects = ""   # what sniffing looks for, named in the hint when no format matches
    # the reader options (:data:`READER_OPTIONS`) this format reads; ingest refuses any
    # other one given with it, so an option is never accepted and silently ignored
    accepts: frozenset[str] = frozenset()

    def __init__(self, id_col: str | None = None, caption_col: str | None = None,
                 batch_size: int = BATCH_ROWS, batch_bytes: int = BATCH_BYTES, **options):
        self.id_col = id_col
        self.caption_col = caption_col
        self.batch_size = batch_size
        self.batch_bytes = batch_bytes
        self.options = options

    def full(self, rows: int, text_bytes: int) -> bool:
        """Whether a batch being built is complete: ``batch_size`` rows or ``batch_bytes``
        of caption text, whichever comes first (what a batch costs is its text)."""
        return rows >= self.batch_size or text_bytes >= self.batch_bytes

    def rows_for(self, mean_bytes: float) -> int:
        """Rows per batch for captions of ``mean_bytes`` on average (at least 256)."""
        return max(256, min(self.batch_size, int(self.batch_bytes // max(mean_bytes, 1.0))))

    def bounded(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        """``batch`` in zero-copy slices that stop once they hold ``batch_bytes`` of captions,
        so what a consumer converts to Python objects at once stays bounded when later rows
        run longer than the sample a batch size was chosen from."""
        from capaudit.core.arrays import byte_lengths  # not pyarrow.compute: ~0.05 s to import

        sizes = byte_lengths(batch.column("caption"))
        if batch.num_rows < 2 or int(sizes.sum()) <= self.batch_bytes:
            yield batch
            return
        offsets = np.concatenate([[0], np.cumsum(sizes)])  # byte offsets, n + 1
        start, n = 0, batch.num_rows
        while start < n:
            end = int(np.searchsorted(offsets, offsets[start] + self.batch_bytes))
            end = min(max(end, start + 1), n)
            yield batch.slice(start, end - start)
            start = end

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:  # pragma: no cover - overridden
        return False

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:  # pragma: no cover
        raise NotImplementedError


def make_batch(keys, ids, captions, metas=None, namespace=None) -> pa.RecordBatch:
    """A batch of :data:`SCHEMA`; ``namespace`` (one name, or one per row) adds the column of
    that name when the reader knows its ids' dataset (COCO JSON, Karpathy, Flickr tokens)."""
    arrays = [pa.array(keys, pa.string()), pa.array(ids, pa.int64()),
              pa.array(captions, pa.string()),
              pa.array(metas if metas is not None else [None] * len(keys), pa.string())]
    if namespace is None:
        return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)
    ns = [namespace] * len(keys) if isinstance(namespace, str) else namespace
    return pa.RecordBatch.from_arrays(arrays + [pa.array(ns, pa.string())],
                                      schema=SCHEMA.append(pa.field("namespace", pa.string())))


def row_batches(rows, reader: CaptionReader) -> Iterator[pa.RecordBatch]:
    """Batches of :data:`SCHEMA` from ``(key, image id, caption, meta text, namespace)`` rows,
    each cut where the reader's batch is full (:meth:`CaptionReader.full`, inlined: this
    loop runs once a caption, and column lists, not rows transposed, kept it as fast as the
    readers' own loops). A caption that is not text stays None (the ingest names its row);
    the namespace column is there only when a row of the batch has one (absent reads as
    null)."""
    most_rows, most_bytes = reader.batch_size, reader.batch_bytes
    keys, ids, caps, metas, spaces, size = [], [], [], [], [], 0
    for key, iid, cap, meta, ns in rows:
        keys.append(key)
        ids.append(iid)
        metas.append(meta)
        spaces.append(ns)
        if isinstance(cap, str):
            caps.append(cap)
            size += len(cap)
        else:
            caps.append(None)
        if len(keys) >= most_rows or size >= most_bytes:
            yield make_batch(keys, ids, caps, metas, _named(spaces))
            keys, ids, caps, metas, spaces, size = [], [], [], [], [], 0
    if keys:
        yield make_batch(keys, ids, caps, metas, _named(spaces))


def _named(spaces: list) -> list | None:
    return spaces if any(ns is not None for ns in spaces) else None


def read_head(path: Path, n: int = 65536) -> bytes:
    if path.is_dir():
        return b""
    with open(path, "rb") as fh:
        head = fh.read(n)
    return head[3:] if head.startswith(b"\xef\xbb\xbf") else head  # a UTF-8 BOM: not content


def first_line(head: bytes) -> bytes:
    """The first non-blank line of a file's head, for the readers' sniffers."""
    return head.lstrip().split(b"\n", 1)[0]


def file_line(path: Path, head: bytes) -> bytes | None:
    """:func:`first_line` of a file; None for a folder (what a reader of lines never reads),
    so a line sniffer tests ``first is not None and ...``."""
    return None if path.is_dir() else first_line(head)


def refuse_pickle(path: Path, head: bytes) -> None:
    if path.suffix.lower() in PICKLE_SUFFIXES or head.startswith(PICKLE_MAGIC):
        raise InputError("pickle files are refused, never loaded: unpickling can run arbitrary "
                         "code", path=path, fix="convert it to JSONL, JSON, CSV or parquet")


def detect_format(path: Path) -> str:
    """Pick a reader by asking each one to sniff the file."""
    head = read_head(path)
    refuse_pickle(path, head)
    for name in SNIFF_ORDER:
        if READERS.get(name).sniff(path, head):
            return name
    if head.lstrip()[:1] in (b"{", b"[") or path.suffix.lower() == ".json":
        load_json_document(path)   # a damaged JSON file: its line and column, not the list
    tried = "; ".join(f"{n} (wants {READERS.get(n).expects or EXPECTS.get(n, n)})"
                      for n in SNIFF_ORDER)
    raise InputError(f"cannot tell the caption format; tried {tried}", path=path,
                     fix="pass --format (a command without it, such as audit run: register the "
                         "file with capaudit sets add NAME FILE --format FORMAT, then give NAME)"
                         f", one of: {', '.join(sorted(READERS.names()))}")


READERS.base = CaptionReader

# what the readers without an ``expects`` of their own look for (named in the sniff hint)
EXPECTS = {"webdataset": ".tar shards", "hf": "a datasets save_to_disk folder",
           "parquet": "a parquet file", "jsonl": "a .jsonl file or one JSON object per line",
           "csv": "a .csv or .tsv file"}
SNIFF_ORDER = ["webdataset", "hf", "capsfusion", "parquet", "chair", "karpathy", "coco",
               "coco-results", "sharegpt", "sharegpt4v", "llava", "fusecap", "json",
               "flickr-token", "jsonl", "csv"]


def get_reader(fmt: str, **options) -> CaptionReader:
    return READERS.get(fmt)(**options)


# every reader option (``sets add`` flag / ``add_set`` keyword); each reader's ``accepts``
# names those it reads
READER_OPTIONS = ("id_col", "caption_col", "split", "turns", "where", "skip_no_image")


def flag(option: str) -> str:
    """The ``sets add`` flag of ``option`` (the API turns it back into a keyword)."""
    return "--" + option.replace("_", "-")


def check_options(fmt: str, given, path: Path | None = None) -> None:
    """Refuse, in one line, an option no reader knows (with a did-you-mean) and the options
    given that format ``fmt`` does not read, naming the formats they apply to (None and
    False are "not given": the CLI's unset flags)."""
    unknown = [k for k in given if k not in READER_OPTIONS]
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], [*READER_OPTIONS, "namespace"], n=1)
        hint = f"did you mean {flag(close[0])}? " if close else ""
        raise InputError(f"unknown option {flag(unknown[0])}",
                         fix=f"{hint}the options: {', '.join(map(flag, READER_OPTIONS))}, "
                             "--namespace")
    refused = [k for k in READER_OPTIONS if given.get(k) not in (None, False)
               and k not in READERS.get(fmt).accepts]
    if not refused:
        return
    where = "; ".join(f"{flag(k)} applies to " + (", ".join(
        n for n in READERS.names() if k in getattr(READERS.get(n), "accepts", ())) or "none")
        for k in refused)
    one = len(refused) == 1
    raise InputError(f"{', '.join(map(flag, refused))} {'does' if one else 'do'} not apply to "
                     f"{fmt} files", path=path, fix=f"drop {'it' if one else 'them'}; {where}")


for _name, _target in {
    "coco": "capaudit.io.readers.coco:CocoReader",
    "sharegpt4v": "capaudit.io.readers.llava:ShareGPT4VReader",
    "llava": "capaudit.io.readers.llava:LLaVAReader",
    "sharegpt": "capaudit.io.readers.llava:ShareGPTReader",
    "karpathy": "capaudit.io.readers.karpathy:KarpathyReader",
    "flickr-token": "capaudit.io.readers.flickr:FlickrTokenReader",
    "fusecap": "capaudit.io.readers.llava:FuseCapReader",
    "coco-results": "capaudit.io.readers.coco_results:CocoResultsReader",
    "chair": "capaudit.io.readers.chair:ChairOutputReader",
    "json": "capaudit.io.readers.coco_results:JsonListReader",
    "capsfusion": "capaudit.io.readers.capsfusion:CapsFusionReader",
    "jsonl": "capaudit.io.readers.tabular:JsonlReader",
    "csv": "capaudit.io.readers.tabular:CsvReader",
    "parquet": "capaudit.io.readers.tabular:ParquetReader",
    "webdataset": "capaudit.io.readers.webdataset:WebDatasetReader",
    "hf": "capaudit.io.readers.hf:HFDiskReader",
}.items():
    READERS.register(_name, _target, version="1")
