"""``filter run --shards ... --reference-col NAME``: each record's own reference texts, read as
the shard is read.

Why here: a shard run has no stored set whose source the worker could re-read for the column
(the set run reads it once, :func:`capaudit.filters.reference_sources.references_from_column`);
the references travel with their record, so the shard task takes them from each batch of
records it filters: a JSON or JSONL record's field, a webdataset sample's ``.json`` field, a
parquet row's column (a string or a list of strings), a CSV/TSV record's column by its
header name (a cell holds one text, or a list written as JSON text, ``["a dog", "a bus"]``,
as label files write list fields in CSV cells). The batch's images get those texts (the
texts of all the batch's records of an image, as the set run joins every record of an image),
followed by the ``--references FILE`` texts when both are given (the set run's order); only
the batch's are held, so memory stays bounded by the batch.
"""

from __future__ import annotations

from capaudit.errors import InputError

__all__ = ["record_value", "BatchReferences", "ReferenceColumn"]


def record_value(rec, name: str):
    """Field ``name`` of a record as its shard's reader holds it (None when it has none): a
    JSON record (JSONL ``(line, value)``, JSON list ``(gap, text, value)``), a webdataset
    sample (``(members, meta, where)``: its JSON meta), a parquet row ``(batch, i)``."""
    from capaudit.io.rewrite.text_lines import CsvRaw

    raw = rec.raw
    if isinstance(raw, CsvRaw):
        return _csv_cell(raw, name)
    if isinstance(raw, dict):
        return raw.get(name)
    if not isinstance(raw, tuple):
        return None
    for part in raw:
        if isinstance(part, dict):
            return part.get(name)
    head = raw[0] if raw else None
    if hasattr(head, "schema") and name in head.schema.names:   # a parquet record batch
        return head.column(name)[raw[1]].as_py()
    return None


def _csv_cell(raw, name: str):
    """A CSV record's cell of column ``name`` (None without that column): a JSON list of
    strings when the cell is one, else the cell's text (a single reference)."""
    import json

    if name not in raw.names or raw.names.index(name) >= len(raw.fields):
        return None
    cell = raw.fields[raw.names.index(name)]
    if cell.lstrip().startswith("["):
        try:
            value = json.loads(cell)
        except ValueError:
            return cell
        if isinstance(value, list) and all(isinstance(t, str) for t in value):
            return value
    return cell


class BatchReferences:
    """``get(image_id)``: a batch's column texts, then the file's (what
    :class:`capaudit.filters.reference_evidence.WithReferences` reads as ``refs``)."""

    def __init__(self, batch: dict, fixed: dict):
        self.batch, self.fixed = batch, fixed

    def get(self, iid, default=None):
        texts = self.batch.get(iid, []) + self.fixed.get(iid, [])
        return texts or default

    def __bool__(self) -> bool:
        return True


class ReferenceColumn:
    """The column's texts of each batch put on the worker's evidence; at the shard's end, a
    column empty in every record (or in none) is one line naming the shard."""

    def __init__(self, evidence, column: str):
        self.evidence, self.column = evidence, column
        self.fixed = evidence.refs if isinstance(evidence.refs, dict) else evidence.refs.fixed
        self.texts = self.present = 0

    def batch(self, records) -> None:
        from capaudit.filters.reference_sources import reference_texts

        refs: dict[int, list[str]] = {}
        for rec in records:
            value = record_value(rec, self.column)
            self.present += value is not None
            texts = reference_texts(value)   # as the set run reads its column
            self.texts += len(texts)
            for iid in dict.fromkeys(p.image_id for p in rec.places if p.image_id is not None):
                refs.setdefault(int(iid), []).extend(texts)
        self.evidence.use_references(BatchReferences(refs, self.fixed))

    def check(self, shard: str) -> None:
        if not self.texts:
            what = "is empty in every record" if self.present else "is in no record"
            raise InputError(f"reference column '{self.column}' {what} of the shard",
                             path=shard, fix="name the field that holds the references (a "
                             "string or a list of strings: a JSON/JSONL field, a tar sample's "
                             ".json field, a parquet or CSV column; in a CSV cell a list is JSON "
                             "text) with --reference-col, or pass --references FILE")
