"""Caption shards of a web-scale set, read streaming: the unit of work of a sharded audit.

Why a separate reader: ``audit run --shards`` never loads a whole shard,
let alone a whole set; each shard is read in record batches of ``(image id,
caption)`` and handed to the audit chunk by chunk. Three layouts:

- webdataset tars (img2dataset: ``KEY.jpg`` + ``KEY.txt``/``KEY.json``, or
  the ``capaudit shards build`` layout), read member by member;
- parquet shards (img2dataset / DataComp metadata), read row group by row group;
- a Hugging Face ``datasets`` folder (``save_to_disk``: ``data-*.arrow`` IPC
  streams, each one a shard), read batch by batch.

Where: a shard is named by a path or a URL (``s3://``, ``gs://``, ``hf://``, ``https://``);
:func:`find_shard_entries` lists a folder, a glob, a brace list (``shard-{00000..00099}.parquet``)
or a manifest (a ``.txt`` of shard names) through :func:`capaudit.core.storage.listing.list_files`
(narrow prefixes, never the whole bucket), and a remote shard is read streaming: a tar
member by member from a retrying block reader, a parquet file footer first, then the
byte ranges of the needed columns, row group by row group (bounded memory).

Ids: the image id is parsed like everywhere else
(:func:`~capaudit.io.imageids.parse_image_id`: integers and COCO file names);
any other id (a DataComp ``uid``) gives no image id, and the caption is its
own bootstrap unit. A damaged shard raises one :class:`InputError` naming it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pyarrow as pa

from capaudit.core.storage.urls import local_path, name_of, shown_url
from capaudit.errors import InputError
from capaudit.io.imageids import parse_image_id
from capaudit.io.layouts.parquet import CAPTION_COLUMNS, ID_COLUMNS
from capaudit.io.shard_formats import STREAMED_SHARD_SUFFIXES

__all__ = ["find_shard_entries", "iter_shard_rows", "shards_name"]

BATCH = 8192


def find_shard_entries(spec, storage_options: dict | None = None) -> list:
    """The shards of a folder, a glob, a brace list, a manifest or one file (paths or URLs),
    sorted by location (the audit's order), each a :class:`capaudit.core.storage.listing.Entry`
    (location, size, the store's identity of its content)."""
    from capaudit.core.storage.listing import list_files

    text = str(spec)
    try:
        entries = list_files(text, storage_options, manifest=True)
    except InputError as exc:
        if "no such" in str(exc) and "{" not in text:
            raise InputError("no such shard folder, file or glob", path=shown_url(text),
                             fix="check --shards") from None
        raise
    shards = [e for e in entries if Path(e.name).suffix in STREAMED_SHARD_SUFFIXES]
    if not shards and len(entries) == 1 and entries[0].location.rstrip("/") == text.rstrip("/"):
        raise InputError(f"not a shard ({', '.join(STREAMED_SHARD_SUFFIXES)})", path=shown_url(text),
                         fix=f"audit a caption file without --shards: capaudit audit run {text}")
    if not shards:
        raise InputError("no .tar, .parquet or .arrow shards here", path=shown_url(text),
                         fix="point --shards to a webdataset, parquet or HF datasets folder")
    return shards


def shards_name(spec) -> str:
    """The set name a shard spec suggests: a folder's name, or the folder of a glob, a brace
    list, a manifest or a shard file (``s3://b/laion/shard-{0..9}.tar`` -> ``laion``)."""
    from capaudit.core.storage.urls import is_url, parent_of

    text = str(spec).split("*")[0].split("{")[0].split("?")[0] if is_url(spec) else \
        str(spec).split("*")[0].split("{")[0]
    fixed = text.rstrip("/") or "."
    local = local_path(fixed)
    if local is not None and local.is_dir() and not text.endswith(("-", "_")):
        return local.resolve().name or "shards"
    if is_url(fixed) and text.endswith("/"):
        return name_of(fixed) or "shards"
    if is_url(fixed) and not Path(name_of(fixed)).suffix and fixed == text.rstrip("/") \
            and "*" not in str(spec) and "{" not in str(spec):
        return name_of(fixed) or "shards"   # a prefix named without a trailing slash
    return name_of(parent_of(fixed)) or (local.resolve().parent.name if local else "") \
        or "shards"


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


def _columns(names: list[str], path) -> tuple[str | None, str]:
    return (_pick(names, ID_COLUMNS, path, "image id", False),
            _pick(names, CAPTION_COLUMNS, path, "caption", True))


def _columnar_batches(path, source, options=None) -> Iterator[pa.RecordBatch]:
    """Record batches of a parquet or Arrow shard, each read by its layout
    (:mod:`capaudit.io.layouts`); of a parquet shard only the id and caption columns (a
    DataComp shard's other 30 columns are never read)."""
    if Path(name_of(path)).suffix == ".parquet":
        from capaudit.io.layouts.parquet import record_batches

        yield from record_batches(source, lambda names: [c for c in _columns(names, path) if c],
                                  BATCH, options)
        return
    from capaudit.io.layouts.arrow import record_batches

    yield from record_batches(source)


def _columnar_rows(path, source, guard=_no_guard, options=None
                   ) -> Iterator[tuple[int | None, str]]:
    row0, cols = 0, None
    for batch in _columnar_batches(path, source, options):
        if cols is None:
            cols = _columns(batch.schema.names, path)
        yield from _batch_rows(batch, cols[0], cols[1], path, row0, guard)
        row0 += batch.num_rows


def _tar_rows(path, source, guard=_no_guard) -> Iterator[tuple[int | None, str]]:
    from capaudit.io.layouts.tar import iter_samples
    from capaudit.io.readers.webdataset import parse_sample

    for row, (key, files) in enumerate(iter_samples(path, source), start=1):
        meta, texts = parse_sample(key, files, path, row)
        raw = meta.get("image_id")
        raw = raw if raw is not None else meta.get("key", key)
        iid = guard(raw, parse_image_id(raw), len(texts))
        for text in texts:
            if not isinstance(text, str):
                raise InputError(f"sample '{key}' caption is not text", path=path, row=row)
            yield iid, text


def iter_shard_rows(location, guard=_no_guard, storage_options: dict | None = None
                    ) -> Iterator[tuple[int | None, str]]:
    """``(image id or None, caption)`` of one shard (a path or a URL), in file order,
    streaming.

    ``guard(raw key, parsed id, captions of the row)`` may hide an id (``None``): the
    join rule of :class:`capaudit.audit.shards.outputs.JoinGuard`."""
    from capaudit.core.storage.paths import readable

    ranged = Path(name_of(location)).suffix == ".parquet"   # by its URL: ranges, not blocks
    with readable(location, storage_options, ranged=ranged) as (shown, source):
        yield from _rows(shown, source, guard, storage_options)


def _rows(path, source, guard, options=None) -> Iterator[tuple[int | None, str]]:
    if Path(name_of(path)).suffix == ".tar":
        yield from _tar_rows(path, source, guard)
        return
    try:
        yield from _columnar_rows(path, source, guard, options)
    except (pa.ArrowException, OSError) as exc:
        from capaudit.io.layouts.parquet import unreadable

        raise unreadable(path, exc, Path(name_of(path)).suffix[1:]) from None
