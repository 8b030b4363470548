"""Stored annotation rows: sources (the SQL the filters and the loader share) and the parse
cache of annotation files.

Why a parse cache: an audit given ``--chair-gt FILE`` used to parse it on every run
(177k ``json.loads`` for COCO's CHAIR ground truth and instances, ~1.5 s of a 40k-caption
audit). The first load stores the parsed table in ``annotation_cache`` keyed by the file's
sha256 and the kind, one row per image with its names as a list, and later runs read it back
in columnar form; a changed file has another hash and is parsed again.
"""

from __future__ import annotations

from capaudit.store.arrow_scan import ARROW, execute_on

__all__ = ["source_sets", "source_names", "cache_usable", "cached_sets", "cache_sets", "source_entry",
           "find_source", "latest_source", "source_namespace", "list_sources", "put_source", "demographic_rows",
           "KIND_TABLES"]

# the grouped annotation tables and their value column
_TABLES = {"instance_categories": "category", "chair_gt": "object"}
# annotation kind -> the table holding its rows
KIND_TABLES = {"instances": "instance_categories", "chair-gt": "chair_gt",
               "demographics": "demographics"}


def source_entry(store, name: str) -> tuple[str, str] | None:
    """``(kind, sha256)`` of the stored source ``name``, or None."""
    return store.one("SELECT kind, sha256 FROM annotation_sources WHERE name = ?", [name])


def source_record(store, name: str) -> dict | None:
    """The stored source ``name``: kind, the path it was read from, its sha256, images and
    namespace (None: no such source)."""
    row = store.one("SELECT kind, path, sha256, n_images, namespace FROM annotation_sources "
                    "WHERE name = ?", [name])
    return None if row is None else dict(zip(("kind", "path", "sha256", "n_images",
                                              "namespace"), row))


def source_namespace(store, name: str) -> str | None:
    """Image-id namespace recorded for the stored source ``name`` (None: unknown or no such
    source)."""
    row = store.one("SELECT namespace FROM annotation_sources WHERE name = ?", [name])
    return row[0] if row else None


def find_source(store, kind: str, name: str) -> str | None:
    """``name`` when a source of that name and kind is stored."""
    row = store.one("SELECT name FROM annotation_sources WHERE name = ? AND kind = ?",
                    [name, kind])
    return row[0] if row else None


def latest_source(store, kind: str) -> str | None:
    """The most recently added source of ``kind``."""
    row = store.one("SELECT name FROM annotation_sources WHERE kind = ? "
                    "ORDER BY added_at DESC LIMIT 1", [kind])
    return row[0] if row else None


def list_sources(store) -> list[tuple]:
    """``(name, kind, n_images, path, added_at)`` of every source, oldest first."""
    return store.sql("SELECT name, kind, n_images, path, added_at FROM annotation_sources "
                     "ORDER BY added_at")


def put_source(store, name: str, kind: str, rows, *, path: str, sha256: str,
               n_images: int, namespace: str | None = None) -> None:
    """Store the rows (a pyarrow table in the column order of the kind's table) of source
    ``name`` in one transaction, replacing an earlier source of that name.

    Rows go in sorted by image id and name (an image without names first), the order an
    audit reads them in (:func:`source_sets`): the audit's
    :meth:`~capaudit.core.columnar.ColumnarSets.from_pairs` then has nothing to sort."""
    with store.transaction() as con:
        old = source_entry(store, name)
        if old:
            con.execute(f"DELETE FROM {KIND_TABLES[old[0]]} WHERE source = ?", [name])
            con.execute("DELETE FROM annotation_sources WHERE name = ?", [name])
        table = KIND_TABLES[kind]
        order = ", ".join(["image_id"] + [f"{c} NULLS FIRST" for c in [_TABLES.get(table)] if c])
        execute_on(con, f"INSERT INTO {table} SELECT * FROM {ARROW} ORDER BY {order}", rows)
        con.execute("INSERT INTO annotation_sources (name, kind, path, sha256, n_images, "
                    "namespace) VALUES (?, ?, ?, ?, ?, ?)",
                    [name, kind, path, sha256, n_images, namespace])


def demographic_rows(store, source: str) -> list[tuple]:
    """``(image_id, gender, skin_tone)`` rows of a stored demographics source."""
    return store.sql("SELECT image_id, gender, skin_tone FROM demographics WHERE source = ?",
                     [source])


def source_names(store, kind: str, source: str) -> list[str]:
    """The distinct category (instances) or object (chair-gt) names of a stored source."""
    table = KIND_TABLES[kind]
    col = _TABLES[table]
    return [r[0] for r in store.sql(f"SELECT DISTINCT {col} FROM {table} WHERE source = ? "
                                    f"AND {col} IS NOT NULL ORDER BY 1", [source])]


def cache_usable(store) -> bool:
    """A writable store (read-only opens of older files may lack the cache table)."""
    return store.one("SELECT current_setting('access_mode')")[0] != "read_only"


def cached_sets(store, sha256: str, kind: str):
    """The parsed ``{image_id: names}`` of a file seen before, as a columnar mapping
    (:class:`~capaudit.core.columnar.ColumnarSets`); ``None`` when not cached."""
    rows = (f"SELECT image_id, items FROM annotation_cache "
            f"WHERE sha256 = '{_hex(sha256)}' AND kind = '{_name(kind)}'")
    return _read_sets(store, rows, [])


def source_sets(store, table: str, col: str, source: str):
    """The stored source ``source`` of ``instance_categories`` (category) or ``chair_gt``
    (object) as the audit reads it: a :class:`~capaudit.core.columnar.ColumnarSets`, the rows
    read as arrays (each name as its code) and grouped in numpy, so an audit of
    stored annotations builds no Python object per row (``None`` when the source has no
    rows). An image stored with no names (a NULL row) keeps an empty set."""
    from capaudit.core.arrays import to_numpy
    from capaudit.core.columnar import ColumnarSets

    if _TABLES.get(table) != col:
        raise ValueError(f"not an annotation table/column: {table}.{col}")
    names = sorted(r[0] for r in store.sql(
        f"SELECT DISTINCT {col} FROM {table} WHERE source = ? AND {col} IS NOT NULL", [source]))
    # each name's position in ``names`` (an ENUM's code), -1 for an image stored with none
    code = (f"coalesce(enum_code(CAST({col} AS ENUM({', '.join(_quote(n) for n in names)}))), -1)"
            if names else "-1")
    tbl = store.con.sql(f"SELECT image_id, CAST({code} AS BIGINT) FROM {table} "
                        "WHERE source = ?", params=[source]).to_arrow_table()
    if tbl.num_rows == 0:
        return None
    return ColumnarSets.from_pairs(to_numpy(tbl.column(0)), to_numpy(tbl.column(1)), names)


def _read_sets(store, rows: str, params: list):
    """``rows`` (a SELECT of ``image_id, items VARCHAR[]``) as a ColumnarSets; ``None`` when
    it has no rows."""
    import numpy as np

    from capaudit.core.columnar import ColumnarSets
    from capaudit.core.arrays import to_numpy

    names = [r[0] for r in store.sql(f"SELECT DISTINCT unnest(items) FROM ({rows})", params)]
    # the names as a DuckDB ENUM: the lists come back dictionary-encoded (codes + names),
    # without pyarrow.compute's dictionary_encode (whose import alone costs ~0.05 s)
    items = "items" if not names else \
        f"CAST(items AS ENUM({', '.join(_quote(n) for n in names)})[]) AS items"
    tbl = store.con.sql(f"SELECT image_id, {items} FROM ({rows}) ORDER BY image_id",
                        params=params).to_arrow_table()
    if tbl.num_rows == 0:
        return None
    lists = tbl.column(1).combine_chunks()
    codes = to_numpy(lists.values.indices) if names else np.zeros(0, np.int64)
    return ColumnarSets(to_numpy(tbl.column(0)), to_numpy(lists.offsets), codes,
                        lists.values.dictionary.to_pylist() if names else [])


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _hex(s: str) -> str:
    if not all(c in "0123456789abcdef" for c in s):
        raise ValueError("not a sha256 hex digest")
    return s


def _name(s: str) -> str:
    if not s.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"not an annotation kind: {s!r}")
    return s


def cache_sets(store, sha256: str, kind: str, sets) -> None:
    """Store a parsed table (its own transaction: a cache, not part of any run)."""
    tbl = _items_table(sets)
    # an image with no names keeps an empty list (present, nothing in it)
    with store.transaction():
        store.con.execute("DELETE FROM annotation_cache WHERE sha256 = ? AND kind = ?",
                          [sha256, kind])
        execute_on(store.con, "INSERT INTO annotation_cache SELECT ?, ?, image_id, items "
                   f"FROM {ARROW}", tbl, [sha256, kind])


def _items_table(sets):
    """``(image_id, items list<string>)`` of a ``{image_id: names}`` mapping; a ColumnarSets
    straight from its arrays (its names dictionary-encoded, no Python object per image)."""
    import numpy as np
    import pyarrow as pa

    from capaudit.core.arrays import from_numpy, strings

    if all(hasattr(sets, a) for a in ("ids", "offsets", "codes", "names")):
        values = pa.DictionaryArray.from_arrays(from_numpy(sets.codes.astype(np.int32)),
                                                strings(sets.names))
        return pa.table({"image_id": from_numpy(sets.ids), "items": pa.ListArray.from_arrays(
            from_numpy(sets.offsets.astype(np.int32)), values)})
    items = [sorted(v) for v in sets.values()]
    offsets = np.zeros(len(items) + 1, np.int32)
    np.cumsum([len(v) for v in items], out=offsets[1:])
    return pa.table({"image_id": from_numpy(np.fromiter(sets, np.int64, len(sets))),
                     "items": pa.ListArray.from_arrays(from_numpy(offsets),
                                                       strings([x for v in items for x in v]))})
