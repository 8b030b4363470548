"""The caption sets of a store: their rows in ``caption_sets`` and their captions.

:class:`SetQueries` is the part of :class:`~capaudit.store.db.Store` that
registers, finalises, lists, reads and deletes caption sets; it runs on the
store's connection (``self.con``, ``self.one``, ``self.sql``,
``self.transaction``, ``self.path``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterator, Mapping

import pyarrow as pa

from capaudit.core.names import check_set_name, did_you_mean
from capaudit.errors import InputError
from capaudit.store.arrow_scan import ARROW, execute_on

# One image per image id, else per image key (a URL, a hex key): the one rule every count of
# images follows (sets add and list, sets show, the audit's header, units and table; the
# audit's twin is capaudit.io.imageids.image_units)
IMAGE = "coalesce(CAST(image_id AS VARCHAR), 'key:' || image_key)"

__all__ = ["SetInfo", "SetQueries"]


@dataclass
class SetInfo:
    set_id: int
    name: str
    source_path: str | None
    format: str | None
    sha256: str | None
    n_captions: int
    n_images: int
    parent: str | None
    options: dict
    meta: dict
    created_at: object = None
    namespace: str | None = None   # image-id namespace (capaudit.io.imageids); None = unassigned


_SET_COLS = ("set_id, name, source_path, format, sha256, n_captions, n_images, parent, "
             "options, meta, created_at, namespace")


def _set_from_row(row) -> SetInfo:
    vals = list(row)
    vals[8] = json.loads(vals[8]) if vals[8] else {}
    vals[9] = json.loads(vals[9]) if vals[9] else {}
    return SetInfo(*vals)


def _nfc(name: str) -> str:
    import unicodedata

    return unicodedata.normalize("NFC", name)


class SetQueries:
    """Caption-set methods of :class:`~capaudit.store.db.Store` (a mixin over its connection)."""

    def find_set(self, name: str) -> SetInfo | None:
        """The set called ``name``, its Unicode form aside: ``café`` typed as one code point
        (NFC) or as ``e`` + a combining accent (NFD) is one name (they were two sets)."""
        if not isinstance(name, str):
            return None
        row = self.one(f"SELECT {_SET_COLS} FROM caption_sets WHERE name = ? OR "
                       "nfc_normalize(name) = ? ORDER BY name = ? DESC LIMIT 1",
                       [name, _nfc(name), _nfc(name)])
        return _set_from_row(row) if row else None

    def get_set(self, name: str) -> SetInfo:
        info = self.find_set(name)
        if info is None:
            names = [r[0] for r in self.con.execute("SELECT name FROM caption_sets").fetchall()]
            raise InputError(f"no caption set named '{name}' in {self.path}",
                             fix=did_you_mean(name, names, "see capaudit sets list"))
        return info

    def list_sets(self) -> list[SetInfo]:
        rows = self.con.execute(f"SELECT {_SET_COLS} FROM caption_sets ORDER BY name").fetchall()
        return [_set_from_row(r) for r in rows]

    def create_set(self, name: str, *, source_path: str | None, format: str | None,
                   sha256: str | None, parent: str | None = None,
                   options: Mapping | None = None, meta: Mapping | None = None) -> int:
        """Insert the set row (inside the caller's transaction); returns set_id. The name is
        checked here, where every way of making a set passes (add, filter, enrich, caption)."""
        name = check_set_name(name)   # NFC: names are stored in one Unicode form
        if self.find_set(name) is not None:
            raise InputError(f"a caption set named '{name}' already exists",
                             fix="choose another name or pass --replace")
        set_id = self.one("SELECT nextval('set_id_seq')")[0]
        self.con.execute(
            "INSERT INTO caption_sets (set_id, name, source_path, format, sha256, n_captions, "
            "n_images, parent, options, meta) VALUES (?, ?, ?, ?, ?, 0, 0, ?, ?, ?)",
            [set_id, name, source_path, format, sha256, parent,
             json.dumps(dict(options or {}), default=str), json.dumps(dict(meta or {}), default=str)])
        return set_id

    def append_captions(self, set_id: int, batch: pa.RecordBatch | pa.Table, start_row: int) -> int:
        """Append a batch with columns image_key, image_id, caption[, meta]."""
        n = batch.num_rows
        if n == 0:
            return 0
        tbl = pa.Table.from_batches([batch]) if isinstance(batch, pa.RecordBatch) else batch
        meta = "meta" if "meta" in tbl.column_names else "NULL"
        ns = "namespace" if "namespace" in tbl.column_names else "NULL"
        execute_on(self.con,
                   f"INSERT INTO captions (set_id, row_idx, image_key, image_id, caption, meta, "
                   f"namespace) SELECT ?, ? + row_number() OVER () - 1, image_key, "
                   f"image_id, caption, {meta}, {ns} FROM {ARROW}", tbl, [set_id, start_row])
        return n

    def finalize_set(self, set_id: int) -> None:
        with self.statement_room():   # statements over every row of the set
            self._finalize(set_id)

    def _finalize(self, set_id: int) -> None:
        self.set_namespaces(set_id)
        self.con.execute(
            "UPDATE caption_sets SET n_captions = s.n, n_images = s.m FROM ("
            f"SELECT count(*) AS n, count(DISTINCT {IMAGE}) AS m FROM captions "
            "WHERE set_id = ?) s WHERE set_id = ?", [set_id, set_id])

    def update_set_meta(self, set_id: int, extra: Mapping) -> None:
        """Merge ``extra`` into a set's ``meta`` JSON (e.g. records skipped at ingestion)."""
        row = self.one("SELECT meta FROM caption_sets WHERE set_id = ?", [set_id])
        meta = {**(json.loads(row[0]) if row and row[0] else {}), **dict(extra)}
        self.con.execute("UPDATE caption_sets SET meta = ? WHERE set_id = ?",
                         [json.dumps(meta, default=str), set_id])

    def set_namespaces(self, set_id: int) -> None:
        """Rows of a derived set take the namespace of their parent's rows (same image key);
        the set's own namespace is its rows' common one, ``mixed`` when they disagree, NULL
        when no row has one (see :mod:`capaudit.io.imageids`)."""
        self.con.execute(
            "UPDATE captions c SET namespace = p.namespace FROM ("
            "SELECT DISTINCT image_key, first(namespace) AS namespace FROM captions "
            "WHERE set_id = (SELECT s.set_id FROM caption_sets s JOIN caption_sets d "
            "ON s.name = d.parent WHERE d.set_id = ?) GROUP BY image_key) p "
            "WHERE c.set_id = ? AND c.namespace IS NULL AND c.image_key = p.image_key",
            [set_id, set_id])
        self.con.execute(
            "UPDATE caption_sets SET namespace = coalesce(caption_sets.namespace, s.ns) FROM ("
            "SELECT CASE WHEN count(namespace) = 0 THEN NULL WHEN count(DISTINCT namespace) = 1 "
            "AND count(*) FILTER (WHERE image_id IS NOT NULL AND namespace IS NULL) = 0 "
            "THEN any_value(namespace) ELSE 'mixed' END "
            "AS ns FROM captions WHERE set_id = ?) s WHERE set_id = ?", [set_id, set_id])

    def delete_set(self, name: str) -> None:
        info = self.get_set(name)
        self.con.execute("DELETE FROM captions WHERE set_id = ?", [info.set_id])
        self.con.execute("DELETE FROM caption_sets WHERE set_id = ?", [info.set_id])
        for table in ("filter_validations", "filter_validation_units"):   # about this set's run
            self.con.execute(f"DELETE FROM {table} WHERE set_name = ?", [info.name])

    def add_set_from_table(self, name: str, table: pa.Table, *, source: str, format: str,
                           parent: str | None = None, meta: Mapping | None = None,
                           replace: bool = False, sha256: str | None = None) -> SetInfo:
        """Register captions produced by capaudit itself (enrich, filter, caption)."""
        with self.transaction():
            if self.find_set(name) is not None:
                name = self.find_set(name).name
                if not replace:
                    raise InputError(f"a caption set named '{name}' already exists",
                                     fix="choose another name or pass --replace")
                self.delete_set(name)
            set_id = self.create_set(name, source_path=source, format=format, sha256=sha256,
                                     parent=parent, meta=meta)
            self.append_captions(set_id, table, 0)
            self.finalize_set(set_id)
        return self.get_set(name)

    def captions(self, name: str, columns: str = "row_idx, image_key, image_id, caption") -> pa.Table:
        info = self.get_set(name)
        return self.con.sql(
            f"SELECT {columns} FROM captions WHERE set_id = $sid ORDER BY row_idx",
            params={"sid": info.set_id}).to_arrow_table()

    def set_images(self, name: str) -> list[tuple]:
        """Distinct ``(image_key, image_id, namespace)`` of a set (for the coverage check)."""
        info = self.get_set(name)
        return self.sql("SELECT DISTINCT image_key, image_id, namespace FROM captions "
                        "WHERE set_id = ?", [info.set_id])

    def image_counts(self, name: str) -> tuple[int, int, list]:
        """``(images, integer ids, namespaces of the rows with one)`` of a set, counted in the
        store: :meth:`set_images`' units (an id, else the key) without a row of them in
        Python (1.2M rows were ~400 MB there)."""
        sid = self.get_set(name).set_id
        ids, keys, bare = self.one(
            "SELECT count(DISTINCT image_id), count(DISTINCT image_key) FILTER (WHERE image_id "
            "IS NULL), count(*) FILTER (WHERE image_id IS NULL AND image_key IS NULL) FROM "
            "captions WHERE set_id = ?", [sid])
        spaces = [r[0] for r in self.sql("SELECT DISTINCT namespace FROM captions WHERE "
                                         "set_id = ? AND image_id IS NOT NULL ORDER BY 1",
                                         [sid])]
        return ids + keys + (bare > 0), ids, spaces

    def image_id_chunks(self, name: str, namespaces: list) -> Iterator[list[int]]:
        """The distinct integer ids of the set's rows whose namespace is one of
        ``namespaces`` (``None`` in it: rows without one), a chunk at a time."""
        if not namespaces:
            return
        named = [ns for ns in namespaces if ns is not None]
        where = " OR ".join((["namespace IN (SELECT unnest($ns))"] if named else [])
                            + (["namespace IS NULL"] if None in namespaces else []))
        reader = self.con.sql(
            f"SELECT DISTINCT image_id FROM captions WHERE set_id = $sid AND image_id IS NOT "
            f"NULL AND ({where})", params={"sid": self.get_set(name).set_id,
                                           **({"ns": named} if named else {})}
        ).to_arrow_reader(1 << 16)
        for batch in reader:
            yield batch.column(0).to_pylist()

    def iter_captions(self, name: str, batch_size: int = 100_000) -> Iterator[pa.RecordBatch]:
        info = self.get_set(name)
        cur = self.con.cursor()
        try:
            reader = cur.sql(
                "SELECT row_idx, image_key, image_id, caption FROM captions WHERE set_id = $sid "
                "ORDER BY row_idx", params={"sid": info.set_id}).to_arrow_reader(batch_size)
            yield from reader
        finally:
            cur.close()

