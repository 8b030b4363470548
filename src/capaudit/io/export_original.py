"""``sets export --to original``: the source file back, in its own layout, for training.

A filtered (or revised) set is written back into the file it came from: every record
and field the caption set did not touch is kept as it was, revised text goes in place, a
caption whose every sentence was dropped removes its record (or, in a multi-turn
conversation, that assistant turn and the question before it). A sidecar
``OUT.changes.jsonl`` lists each change without repeating the captions: a revised caption's
edits (offset, text removed, text put in), a dropped one's length
(:class:`~capaudit.io.rewrite.base.ChangeLog`).

Each caption knows its place in the source from ingestion: ``meta.src`` (record index,
0-based) and ``meta.turn`` (assistant turn), kept through filters (which copy the
parent's meta). The source file must be the one registered (same sha256), since the
indices refer to it. The export streams: the set and its source are compared row range by
row range (:func:`capaudit.store.exports.place_rows`) and the source is rewritten batch by
batch by its format's writer (:mod:`capaudit.io.rewrite`, the writers of ``filter run
--shards`` too), so memory does not grow with the set. Layouts: LLaVA/ShareGPT4V
``conversations``, LLaVA QA (``output``), ShareGPT ``messages``, CapsFusion/JSONL records
and JSON lists of records (the caption column), COCO captions JSON, CHAIR's output, Flickr
``.token`` lines, CSV/TSV (delimiter, header, quoting kept), parquet (schema, row order and
row groups kept).
Exporting a set nobody changed gives the source back byte for byte: its bytes are copied.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Iterator

from capaudit.errors import InputError
from capaudit.io.rewrite.formats import REWRITE_FORMATS
from capaudit.io.rewrite.layouts import TOKEN_DROP_WHY

__all__ = ["export_original", "root_set", "ORIGINAL_FORMATS", "TOKEN_DROP_WHY"]

ORIGINAL_FORMATS = tuple(f for f in REWRITE_FORMATS if f != "webdataset")
_NOT_ORIGINAL = ("karpathy", "fusecap", "hf", "webdataset", "filter")


def root_set(store, name: str):
    """The registered file a set derives from (following ``parent`` through filters)."""
    info = store.get_set(name)
    seen = {info.name}
    while info.format == "filter" and info.parent:
        info = store.get_set(info.parent)
        if info.name in seen:
            break
        seen.add(info.name)
    return info


def _rows(store, info) -> Iterator[tuple]:
    """``(row_idx, (src, turn), caption)`` of a set in row order; a row without ``meta.src``
    stops the export (it cannot be placed)."""
    from capaudit.store.exports import place_rows

    for batch in place_rows(store, info.set_id):
        cols = batch.to_pydict()
        for row, src, turn, cap in zip(cols["row_idx"], cols["src"], cols["turn"],
                                       cols["caption"]):
            if src is None:
                raise InputError(f"caption row {row} of '{info.name}' does not say which "
                                 "source record it came from", fix="register the file again "
                                 "(sets add --replace) and rerun the filter, then export")
            yield row, (src, turn), cap


def _order(place: tuple) -> tuple:
    return place[0], -1 if place[1] is None else place[1]


def changes_of(store, root, info) -> Iterator[tuple]:
    """``(record, turn, new text or None)`` for each caption of ``root`` that ``info`` changed
    or dropped, in source order: a merge of the two sets' rows, both in source order (a
    filter keeps its parent's order)."""
    if info.set_id == root.set_id:
        return
    derived = _rows(store, info)
    head = next(derived, None)
    for _, place, before in _rows(store, root):
        if head is not None and _order(head[1]) < _order(place):
            raise InputError(f"caption row {head[0]} of '{info.name}' names a source place "
                             f"(record {head[1][0]}, turn {head[1][1]}) its parent does not "
                             "have, or is out of the source's order", fix="export the set "
                             "with --to jsonl instead")
        if head is not None and head[1] == place:
            if head[2] != before:
                yield place[0], place[1], head[2]
            head = next(derived, None)
        else:
            yield place[0], place[1], None
    if head is not None:
        raise InputError(f"caption row {head[0]} of '{info.name}' names a source place its "
                         "parent does not have", fix="export the set with --to jsonl instead")


# what a writer that rewrites the file cannot keep, said when it rewrote one
REWRITE_NOTES = {
    "parquet": "revised parquet: rows, schema (its metadata too), compression and row groups "
               "as the source's (a row group that lost rows is smaller, one over 256 MB of "
               "rows is written in parts); the footer's writer "
               "(created_by) and the pages' encoding are pyarrow's, so the bytes differ",
    "chair": "revised CHAIR output: the file's own scores (overall_metrics, each sentence's "
             "metrics and mscoco_* words) are kept as the source had them and describe the "
             "captions before revision; `capaudit audit run` scores the revised set",
}


def export_original(store, name: str, out: Path, report: dict | None = None
                    ) -> tuple[Path, Path]:
    """Write set ``name`` back into its source layout; returns (file, changes sidecar).
    Nothing changed (the registered set, or a filter that kept every caption as it was): the
    source's bytes, copied. ``report`` (a dict) receives ``note``, what the file keeps and
    what it cannot (:data:`REWRITE_NOTES`)."""
    from capaudit.core.safe_write import atomic_open, check_file_target
    from capaudit.io.ingest import fingerprint
    from capaudit.io.rewrite import ChangeLog, open_rewriter
    from capaudit.io.rewrite.base import pulled
    from capaudit.io.rewrite.formats import buffered

    root = root_set(store, name)
    if root.format not in ORIGINAL_FORMATS and root.format in _NOT_ORIGINAL:
        raise InputError(f"'{name}' comes from a {root.format} file, which cannot be written "
                         "back in its own layout", fix=f"export with --to jsonl, parquet, "
                         f"sharegpt4v, llava or coco (original supports {', '.join(ORIGINAL_FORMATS)})")
    src = Path(root.source_path or "")
    if not src.is_file() or fingerprint(src) != root.sha256:
        raise InputError(f"the source of '{root.name}' is missing or changed since it was "
                         "registered", path=src, fix="restore the file, or register it again")
    sidecar = out.with_name(out.name + ".changes.jsonl")
    check_file_target(sidecar)  # refused before writing
    changes = changes_of(store, root, store.get_set(name))
    first = next(changes, None)
    if first is None:   # nothing changed: the source itself, byte for byte
        import shutil

        with open(src, "rb") as raw, atomic_open(out, "wb") as fh, atomic_open(sidecar):
            shutil.copyfileobj(raw, fh, 1 << 20)
        _noted(report, "nothing changed: the source's bytes, copied")
        return out, sidecar
    pull = pulled(itertools.chain([first], changes))
    _noted(report, REWRITE_NOTES.get("parquet" if _is_parquet(root.format, src)
                                     else root.format))
    # two sets read whole: DuckDB's buffer pool would keep every block read (1.4 GB at 1.2M
    # ShareGPT4V captions, 513 MB bounded), so the reads run under the bulk writes' bound
    with store.bounded_cache(), open(src, "rb") as raw, atomic_open(out, "wb") as fh, \
            atomic_open(sidecar) as side:
        writer = open_rewriter(root.format, root.options or {}, buffered(raw), fh, str(src),
                               ChangeLog(side))
        for batch in writer.batches():
            writer.write(batch, pull(batch))
        writer.finish()
    return out, sidecar


def _noted(report: dict | None, note: str | None) -> None:
    if report is not None and note:
        report["note"] = note


def _is_parquet(fmt: str, src: Path) -> bool:
    """A parquet source (``parquet``, or a CapsFusion release in parquet)."""
    with open(src, "rb") as fh:
        return fmt == "parquet" or fh.read(4) == b"PAR1"
