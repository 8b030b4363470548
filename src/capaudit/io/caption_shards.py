"""Caption shards of a web-scale set, read streaming: the unit of work of a sharded audit.

Why a separate reader: ``audit run --shards`` never loads a whole shard,
let alone a whole set; each shard is read in record batches of ``(image id,
caption)`` and handed to the audit chunk by chunk. Three layouts:

- webdataset tars (img2dataset: ``KEY.jpg`` + ``KEY.txt``/``KEY.json``, or
  the ``capaudit shards build`` layout), read member by member;
- parquet shards (img2dataset / DataComp metadata), read row group by row group;
- a Hugging Face ``datasets`` folder (``save_to_disk``: ``data-*.arrow`` IPC
  streams, each one a shard), read batch by batch.

Ids: the image id is parsed like everywhere else
(:func:`~capaudit.io.imageids.parse_image_id`: integers and COCO file names);
any other id (a DataComp ``uid``) gives no image id, and the caption is its
own bootstrap unit. A damaged shard raises one :class:`InputError` naming it.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.io.imageids import parse_image_id

__all__ = ["SHARD_SUFFIXES", "find_shards", "iter_shard_rows"]

SHARD_SUFFIXES = (".tar", ".parquet", ".arrow")
ID_COLUMNS = ("image_id", "key", "uid", "id", "image")
CAPTION_COLUMNS = ("caption", "text", "TEXT", "alt_text", "captions")
BATCH = 8192


def find_shards(spec: str | Path) -> list[Path]:
    """Shard files of a folder, a glob or one file, sorted by name (the audit's order)."""
    text = str(spec)
    if any(ch in text for ch in "*?["):
        paths = [Path(p) for p in sorted(glob.glob(text))]
    elif Path(text).is_dir():
        paths = sorted(p for p in Path(text).iterdir())
    elif Path(text).exists():
        paths = [Path(text)]
    else:
        raise InputError("no such shard folder, file or glob", path=text, fix="check --shards")
    shards = [p for p in paths if p.is_file() and p.suffix in SHARD_SUFFIXES]
    if not shards and len(paths) == 1 and paths[0].is_file():
        raise InputError(f"not a shard ({', '.join(SHARD_SUFFIXES)})", path=text,
                         fix=f"audit a caption file without --shards: capaudit audit run {text}")
    if not shards:
        raise InputError("no .tar, .parquet or .arrow shards here", path=text,
                         fix="point --shards to a webdataset, parquet or HF datasets folder")
    return shards


def _pick(names: list[str], wanted: tuple[str, ...], path: Path, what: str,
          required: bool) -> str | None:
    for w in wanted:
        if w in names:
            return w
    if required:
        raise InputError(f"no {what} column (looked for {', '.join(wanted)}; has "
                         f"{', '.join(names[:12])})", path=path,
                         fix="rename the column or write the shard with one of those names")
    return None


def _no_guard(raw, iid: int | None, n: int = 1) -> int | None:
    return iid


def _batch_rows(batch: pa.RecordBatch, id_col: str | None, cap_col: str, path: Path,
                row0: int, guard=_no_guard) -> Iterator[tuple[int | None, str]]:
    ids = batch.column(id_col).to_pylist() if id_col else [None] * batch.num_rows
    caps = batch.column(cap_col).to_pylist()
    for i, (raw, cap) in enumerate(zip(ids, caps)):
        texts = cap if isinstance(cap, list) else [cap]
        iid = guard(raw, parse_image_id(raw), len(texts))
        for text in texts:
            if not isinstance(text, str):
                raise InputError("caption is missing or not text", path=path, row=row0 + i + 1,
                                 fix="drop the row or fill its caption")
            yield iid, text


def _columnar_batches(path: Path) -> Iterator[pa.RecordBatch]:
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        yield from pq.ParquetFile(path).iter_batches(batch_size=BATCH)
        return
    with pa.memory_map(str(path)) as src:
        try:
            reader = pa.ipc.open_stream(src)
        except pa.ArrowInvalid:
            reader = pa.ipc.open_file(src)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)
            return
        yield from reader


def _columnar_rows(path: Path, guard=_no_guard) -> Iterator[tuple[int | None, str]]:
    row0, cols = 0, None
    for batch in _columnar_batches(path):
        if cols is None:
            names = batch.schema.names
            cols = (_pick(names, ID_COLUMNS, path, "image id", False),
                    _pick(names, CAPTION_COLUMNS, path, "caption", True))
        yield from _batch_rows(batch, cols[0], cols[1], path, row0, guard)
        row0 += batch.num_rows


def _tar_rows(path: Path, guard=_no_guard) -> Iterator[tuple[int | None, str]]:
    from capaudit.io.readers.webdataset import iter_samples, parse_sample

    for row, (key, files) in enumerate(iter_samples(path), start=1):
        meta, texts = parse_sample(key, files, path, row)
        raw = meta.get("image_id")
        raw = raw if raw is not None else meta.get("key", key)
        iid = guard(raw, parse_image_id(raw), len(texts))
        for text in texts:
            if not isinstance(text, str):
                raise InputError(f"sample '{key}' caption is not text", path=path, row=row)
            yield iid, text


def iter_shard_rows(path: str | Path, guard=_no_guard) -> Iterator[tuple[int | None, str]]:
    """``(image id or None, caption)`` of one shard, in file order, streaming.

    ``guard(raw key, parsed id, captions of the row)`` may hide an id (``None``): the
    join rule of :class:`capaudit.audit.shards.outputs.JoinGuard`."""
    path = Path(path)
    if path.suffix == ".tar":
        yield from _tar_rows(path, guard)
        return
    try:
        yield from _columnar_rows(path, guard)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"not a readable {path.suffix[1:]} shard ({str(exc).splitlines()[0]})",
                         path=path, fix="rewrite the shard or pass --skip-bad-shards") from None
