"""Caption rows of a stored set: read-only summaries (the SQL behind ``sets show``) and the
statements ingestion runs on the rows it writes (fast path, blank check, namespaces).

Why here: statements against the store live behind ``store/``; the CLI formats what these
functions return and :mod:`capaudit.io.ingest` decides what to do with them.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from capaudit.store.arrow_scan import ARROW, execute_on

__all__ = ["set_stats", "has_image_ids", "sample_captions", "insert_selected", "first_blank_row", "count_rows",
           "namespace_candidate_pages", "set_namespace", "RowNamespaces"]


def set_stats(store, set_id: int) -> tuple[int, int, int, float | None]:
    """``(rows, images, rows with an integer id, mean caption length)``; images counted as
    everywhere (:data:`capaudit.store.sets.IMAGE`)."""
    from capaudit.store.sets import IMAGE

    return store.one(f"SELECT count(*), count(DISTINCT {IMAGE}), count(image_id), "
                     "avg(length(caption)) FROM captions WHERE set_id = ?", [set_id])


def has_image_ids(store, set_id: int) -> bool:
    """Whether some row has an integer image id (one row read, where :func:`set_stats`
    counts distinct images over the whole set: 1.2M rows held ~500 MB)."""
    return store.one("SELECT 1 FROM captions WHERE set_id = ? AND image_id IS NOT NULL "
                     "LIMIT 1", [set_id]) is not None


def sample_captions(store, set_id: int, n: int) -> list[tuple[str, str]]:
    """The first ``n`` ``(image_key, caption)`` rows in stored order."""
    return store.sql("SELECT image_key, caption FROM captions WHERE set_id = ? "
                     "ORDER BY row_idx LIMIT ?", [set_id, n])


def insert_selected(store, set_id: int, select: str) -> None:
    """Insert the rows of a reader's ``select`` (columns image_key, image_id, caption, meta)
    as set ``set_id`` in one statement, numbering rows from 0; a row without meta gets
    ``{"src": row}`` (its source record, for ``sets export --to original``). DuckDB's error
    is left to the caller, which names the file and row."""
    store.con.execute(
        f"INSERT INTO captions (set_id, row_idx, image_key, image_id, caption, meta) "
        f"SELECT ?, row_number() OVER () - 1, image_key, image_id, coalesce(caption, ''), "
        f"coalesce(meta, json_object('src', row_number() OVER () - 1)) FROM ({select})",
        [set_id])


def first_blank_row(store, set_id: int, whitespace: str) -> int | None:
    """Smallest ``row_idx`` of the set whose caption is empty or only characters of
    ``whitespace``; None when there is none."""
    # only a caption that starts with whitespace (or is empty) can be all whitespace: the
    # cheap first-character test leaves trim() a handful of rows instead of millions
    codes = ", ".join(str(ord(c)) for c in whitespace)
    row = store.one(f"SELECT min(row_idx) FROM (SELECT row_idx, caption FROM captions "
                    f"WHERE set_id = ? AND (caption = '' OR ascii(caption) IN ({codes}))) "
                    f"WHERE trim(caption, ?) = ''", [set_id, whitespace])
    return row[0] if row else None


def source_record(store, set_id: int, row_idx: int) -> int:
    """The source record (``meta.src``) caption row ``row_idx`` came from: the row itself
    unless ``--where`` left records out before it."""
    row = store.one("SELECT TRY_CAST(json_extract(meta, '$.src') AS BIGINT) FROM captions "
                    "WHERE set_id = ? AND row_idx = ?", [set_id, row_idx])
    return row[0] if row and row[0] is not None else row_idx


def short_caption_counts(store, set_id: int) -> tuple[int, int, int]:
    """``(captions, of one or two words, a lone multiple-choice letter)`` of a set: what tells
    an answers file (ScienceQA's "A", "B") from captions."""
    return store.one(
        "SELECT count(*), count(*) FILTER (WHERE CASE WHEN length(caption) <= 64 THEN "
        "regexp_matches(caption, '^\\s*\\S+(\\s+\\S+)?\\s*$') ELSE false END), "
        "count(*) FILTER (WHERE CASE WHEN length(caption) <= 8 THEN "
        "regexp_matches(caption, '^\\s*\\(?[A-Ea-e]\\)?[.):]?\\s*$') ELSE false END) "
        "FROM captions WHERE set_id = ?", [set_id])


def count_rows(store, set_id: int) -> int:
    """Number of caption rows stored for the set."""
    return store.one("SELECT count(*) FROM captions WHERE set_id = ?", [set_id])[0]


NAMESPACE_PAGE = 100_000   # rows per page of namespace_candidate_pages


def namespace_candidate_pages(store, set_id: int, page: int | None = None
                              ) -> Iterator[list[tuple[str, int]]]:
    """``(image_key, first row_idx)`` of rows with an integer id and no namespace yet whose
    key carries evidence of one (a path separator or a ``COCO_`` name), ``page`` rows at a
    time in row order (a key in several pages comes once per page, first in the first).

    Why pages: one list of every key held 1.2M ShareGPT4V keys in Python, ~450 MB of the
    ingest's peak."""
    page = page or NAMESPACE_PAGE
    top = store.one("SELECT max(row_idx) FROM captions WHERE set_id = ?", [set_id])[0]
    for lo in range(0, -1 if top is None else top + 1, page):
        yield store.sql("SELECT image_key, min(row_idx) AS r FROM captions WHERE set_id = ? "
                        "AND row_idx >= ? AND row_idx < ? AND namespace IS NULL AND "
                        "image_id IS NOT NULL AND regexp_matches(image_key, '[/\\\\]|COCO_', "
                        "'i') GROUP BY image_key ORDER BY r", [set_id, lo, lo + page])


def set_namespace(store, set_id: int, namespace: str) -> None:
    """Give every row with an integer id, and the set itself, ``namespace``."""
    store.con.execute("UPDATE captions SET namespace = ? WHERE set_id = ? AND "
                      "image_id IS NOT NULL", [namespace, set_id])
    store.con.execute("UPDATE caption_sets SET namespace = ? WHERE set_id = ?",
                      [namespace, set_id])


class RowNamespaces:
    """Image key -> namespace pairs gathered page by page in a temporary table of the
    transaction (nothing of them stays in Python), then given to the set's rows at once."""

    TABLE = "capaudit_row_namespaces"

    def __init__(self, store):
        self.store, self.rows = store, 0
        store.con.execute(f"CREATE OR REPLACE TEMP TABLE {self.TABLE} (k VARCHAR, ns VARCHAR)")

    def add(self, by_key: dict[str, str]) -> None:
        import pyarrow as pa

        if by_key:
            tbl = pa.table({"k": list(by_key), "ns": list(by_key.values())})
            execute_on(self.store.con, f"INSERT INTO {self.TABLE} SELECT k, ns FROM {ARROW}",
                       tbl)
            self.rows += len(by_key)

    def apply(self, set_id: int) -> None:
        """Give the set's rows still without a namespace their key's (a key's namespace is
        a function of the key: its copies from several pages agree). The caller drops the
        table (:meth:`drop`), whether this ran or not."""
        if self.rows:
            with self.store.statement_room():   # a join over every row of the set
                self.store.con.execute(
                    f"UPDATE captions SET namespace = m.ns FROM (SELECT DISTINCT k, ns FROM "
                    f"{self.TABLE}) m WHERE set_id = ? AND namespace IS NULL AND image_key = m.k",
                    [set_id])

    def drop(self) -> None:
        """Drop the table (a failed transaction's error is the one to report, not this)."""
        import duckdb

        with contextlib.suppress(duckdb.Error):
            self.store.con.execute(f"DROP TABLE IF EXISTS {self.TABLE}")
