"""Register a caption file as a named set in the store.

Streams the reader's Arrow batches straight into DuckDB inside one
transaction: bad input found half-way (an empty caption at row 812,345)
rolls everything back, so the store never holds half a set. Adding the same
file (same sha256, format and options) again is a no-op; a changed file under
an existing name needs ``replace=True``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pyarrow as pa

from capaudit.core.names import check_path_text, check_set_name
from capaudit.errors import InputError
from capaudit.io.imageids import compatible, file_evidence, infer_namespace
from capaudit.io.readers.base import (check_options, detect_format, get_reader, read_head,
                                      refuse_pickle)
from capaudit.store import captions
from capaudit.store.db import Store
from capaudit.store.sets import SetInfo


@dataclass
class AddResult:
    info: SetInfo
    added: bool  # False when the same file was already registered under this name


def fingerprint(path: Path) -> str:
    """sha256 of a file, or of a folder's files (names and bytes, sorted)."""
    h = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def check_batch(batch: pa.RecordBatch, path: Path, start_row: int) -> None:
    """Refuse a missing or empty caption, naming its row (1-based record number)."""
    check_captions(batch.column("caption").to_pylist(), path, start_row)


def check_captions(captions: list, path: Path, start_row: int) -> None:
    """:func:`check_batch` on a batch's captions already read as ``str`` (or None).

    Blank means ``str.strip()`` leaves nothing: the same code points as pyarrow's
    ``utf8_trim_whitespace`` (and :data:`_WHITESPACE`, the SQL path's); checked here, not with
    ``pyarrow.compute``, whose import alone costs ~0.05 s of an audit's start-up."""
    if None not in captions and all(map(str.strip, captions)):
        return
    idx = next(i for i, c in enumerate(captions) if c is None or not c.strip())
    raise InputError("empty or missing caption", path=path, row=start_row + idx + 1,
                     fix="drop the record or give it a caption")


# what str.strip() and pyarrow's utf8_trim_whitespace remove (tabs, NBSP, U+3000, ...):
# a caption of only these is empty on both paths, not just one of only spaces
_WHITESPACE = "".join(c for c in map(chr, range(0x3001)) if c.isspace())


def _ingest_sql(store: Store, reader, path: Path, set_id: int) -> int:
    """Fast path for DuckDB-native formats: one INSERT ... SELECT, then checks in SQL."""
    import duckdb

    select = reader.select_sql(path, store.con)
    try:  # meta.src: the source record, so that `sets export --to original` finds it back
        captions.insert_selected(store, set_id, select)
    except duckdb.Error as exc:
        raise reader.diagnose(path, exc) from None
    bad = captions.first_blank_row(store, set_id, _WHITESPACE)
    if bad is not None:
        raise InputError("empty or missing caption", path=path,
                         row=reader.record_row(path, captions.source_record(store, set_id, bad)),
                         fix="drop the record or give it a caption")
    return captions.count_rows(store, set_id)


def assign_namespaces(store: Store, set_id: int, path: Path, namespace: str | None,
                      evidence: str | None = None) -> None:
    """Give each row the namespace its image key is evidence for (:mod:`.imageids`); with
    ``namespace`` (``sets add --namespace``) every row gets it, unless a row's evidence names
    another dataset (a ``COCO_val2014_`` name in a set declared ``nocaps``): refused by row.
    ``evidence`` (what the file itself names, e.g. a ``dataset_id`` column) is given to every
    row when no row's key says otherwise."""
    seen: set[str] = set()                       # the namespaces the keys name
    staged = None if namespace else captions.RowNamespaces(store)
    try:
        for page in captions.namespace_candidate_pages(store, set_id):
            found = {}
            for key, row in page:                   # in row order: the first row of a key
                ns = infer_namespace(key)
                if ns is None:
                    continue
                if namespace and not ns.startswith("path:") and not compatible(ns, namespace):
                    raise InputError(f"image '{key}' is a {ns} image, not {namespace}",
                                     path=path, row=row + 1,
                                     fix=f"drop --namespace {namespace}, or fix the row")
                seen.add(ns)
                found[key] = ns
            if staged is not None:
                staged.add(found)
        if namespace:
            captions.set_namespace(store, set_id, namespace)
        elif file_evidence(evidence, seen):
            captions.set_namespace(store, set_id, evidence)
        else:
            staged.apply(set_id)
    finally:
        if staged is not None:
            staged.drop()


ANSWERS_SHARE = 0.5   # captions of one or two words past this share: an answers file ...
ANSWERS_MIN = 20      # ... of at least this many captions


def _note_answers(store: Store, set_id: int) -> None:
    """A set whose captions are mostly one or two words (ScienceQA's "A", "B", read with
    ``--skip-no-image``) is answers, not captions: read, with the counts in the set's meta,
    which ``sets add`` and ``sets show`` print as a warning (:func:`answers_warning`)."""
    n, short, letters = captions.short_caption_counts(store, set_id)
    # lone letters say it at any size; short captions only past a handful (two words of
    # a five-caption file are no evidence)
    if n and (letters >= ANSWERS_SHARE * n or n >= ANSWERS_MIN and short >= ANSWERS_SHARE * n):
        store.update_set_meta(set_id, {"answers_like": {"captions": n, "short": short,
                                                        "letters": letters}})


def answers_warning(meta: dict | None) -> str | None:
    """The warning of a set read as answers (:func:`_note_answers`), or None."""
    got = (meta or {}).get("answers_like")
    if not got:
        return None
    letters = (f", {got['letters']:,} a lone multiple-choice letter such as 'A'"
               if got["letters"] else "")
    return (f"warning: {got['short']:,} of {got['captions']:,} captions are one or two words"
            f"{letters}: this looks like a file of answers, not of captions, and every caption "
            "metric will measure the answers (keep the description records with --where, or "
            "add the file that holds the captions)")


def _refuse_device(path: Path) -> None:
    """A device or a pipe (``/dev/zero``, ``/dev/stdin``) has no end to hash or to sniff: its
    one endless line would be read into memory, so only files and folders are taken."""
    import stat

    mode = path.stat().st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise InputError("is a device or a pipe, not a file", path=path,
                         fix="save the captions to a file and add that")


def what_differs(existing, sha: str, fmt: str, options: dict) -> str:
    """What a second ``sets add`` of a name changes: the file's content, or the options only
    (``--namespace coco2014`` on the same file: "other content" sent the user to look for a
    change in a file that had none, #46)."""
    if existing.sha256 != sha:
        return "with other content (the file differs from the one registered)"
    old = {**(existing.options or {}), "format": existing.format}
    new = {**options, "format": fmt}
    changed = [f"--{k.replace('_', '-')} {_shown(new.get(k))} (was {_shown(old.get(k))})"
               for k in sorted(set(old) | set(new), key=str) if old.get(k) != new.get(k)]
    return "from the same file with other options: " + ", ".join(changed)


def _shown(value) -> str:
    return "none" if value is None or value is False else str(value)


def add_caption_set(store: Store, name: str, path: str | Path, fmt: str = "auto", *,
                    replace: bool = False, id_col: str | None = None,
                    caption_col: str | None = None, namespace: str | None = None,
                    on_batch: Callable[[int], None] | None = None,
                    **reader_options) -> AddResult:
    """Register ``path`` as set ``name`` (``fmt="hf"`` also takes a cached Hub dataset id).

    ``path`` may be a URL (``s3://``, ``gs://``, ``hf://``, ``https://``): the object (or the
    files under a remote folder) is streamed to a private temporary copy, read like a local
    file and removed; the set's source is the URL, credentials masked
    (:func:`capaudit.core.storage.local_copy.local_copy`)."""
    from capaudit.core.storage.paths import as_local

    name = check_set_name(name)   # before anything is downloaded
    with as_local(path) as (local, url):
        return _add(store, name, local, fmt, replace, id_col, caption_col, namespace,
                    on_batch, reader_options, source=url)


def _add(store: Store, name: str, path: Path, fmt: str, replace: bool, id_col, caption_col,
         namespace, on_batch, reader_options: dict, source: str | None = None) -> AddResult:
    name = check_set_name(name)   # NFC: one Unicode form of a name
    check_path_text(path)
    hub = fmt == "hf" and not path.exists()   # a Hub dataset id, read from the local cache
    if not path.exists() and not hub:
        raise InputError("no such file or folder", path=path, fix="check the path (a "
                         "Hugging Face Hub dataset id needs --format hf)")
    if not hub:
        _refuse_device(path)
        refuse_pickle(path, read_head(path, 8))
    fmt = detect_format(path) if fmt == "auto" else fmt
    check_options(fmt, {**reader_options, "id_col": id_col, "caption_col": caption_col}, path)
    reader_options = {k: v for k, v in reader_options.items() if v is not None and v is not False}
    reader = get_reader(fmt, id_col=id_col, caption_col=caption_col, **reader_options)
    options = {"id_col": id_col, "caption_col": caption_col, **reader_options}
    if namespace:
        options["namespace"] = namespace
    sha = reader.fingerprint(path) if hub else fingerprint(path)
    existing = store.find_set(name)
    if existing is not None and not replace:
        if existing.sha256 == sha and existing.format == fmt and existing.options == options:
            return AddResult(existing, added=False)
        raise InputError(f"a caption set named '{name}' already exists "
                         + what_differs(existing, sha, fmt, options),
                         fix="pass --replace to register it again with these options, or "
                             "choose another name")
    # batches from a reader: written blocks evicted, not held (1.2M ShareGPT4V captions took
    # 1.8 GB, 944 MB bounded); DuckDB reading a file itself needs its own room (32 MB blocks)
    with store.bulk_transaction(bounded=not hasattr(reader, "select_sql")):
        if existing is not None:
            store.delete_set(name)
        set_id = store.create_set(name, source_path=source or str(path if hub else
                                                                  path.resolve()),
                                  format=fmt, sha256=sha,
                                  options=options)
        if hasattr(reader, "select_sql"):
            row = _ingest_sql(store, reader, path, set_id)
            if on_batch:
                on_batch(row)
        else:
            row = 0
            for batch in reader.read(path):
                check_batch(batch, path, row)
                row += store.append_captions(set_id, batch, row)
                if on_batch:
                    on_batch(batch.num_rows)
        if row == 0:
            raise InputError("the file holds no captions", path=path)
        if getattr(reader, "set_meta", None):   # what the file says of itself (CHAIR's scores)
            store.update_set_meta(set_id, reader.set_meta)
        if getattr(reader, "skipped_no_image", 0):
            store.update_set_meta(set_id, {"skipped_no_image": reader.skipped_no_image})
        if getattr(reader, "id_hint", None):
            store.update_set_meta(set_id, {"id_hint": reader.id_hint})
        _note_answers(store, set_id)
        assign_namespaces(store, set_id, path, namespace,
                          getattr(reader, "evidence_namespace", None))
        store.finalize_set(set_id)
        if getattr(reader, "namespace_hint", None) and store.get_set(name).namespace is None:
            store.update_set_meta(set_id, {"namespace_hint": reader.namespace_hint})
    return AddResult(store.get_set(name), added=True)
