"""JSONL, CSV, parquet and CapsFusion files, read by DuckDB in streaming batches.

DuckDB parses these formats in C++ and hands Arrow batches over without
Python lists, which is what makes million-caption ingestion fast and flat in
memory. Batches are sized by caption bytes (:data:`~capaudit.io.readers.base.BATCH_BYTES`,
rows chosen from the first rows' mean length, then sliced if later rows run
longer); JSONL objects may be up to 16 MB (DuckDB's read buffers are twice that
per thread: 64 MB made them 128 MB each, the size of a 1M-caption file). When
DuckDB rejects a file we re-scan it in Python only to name the exact bad row
(the error path, never the hot path: :mod:`capaudit.io.readers.rescan`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import duckdb
import pyarrow as pa

from capaudit.errors import InputError
from capaudit.io.imageids import SQL_PARSE_IMAGE_ID, document_namespace
from capaudit.io.readers.base import SCHEMA, CaptionReader, file_line
from capaudit.io.readers.columns import (CAPTION_CANDIDATES, ID_CANDIDATES, missing_caption,
                                         not_captions, pick_id_column, refuse_row_numbers)
from capaudit.io.layouts import csv as csv_layout
from capaudit.io.readers.rescan import (compressed, jsonl_record_row, nested_records,
                                          oversized, scan_csv, scan_jsonl, tsv_left_open)

# a column naming the dataset; ``namespace``: the one capaudit's jsonl/parquet exports write
DATASET_COLUMNS = ("namespace", "dataset_id", "dataset", "dataset_name")
_INT_TYPES = {"BIGINT", "INTEGER", "UBIGINT", "UINTEGER", "SMALLINT", "USMALLINT", "TINYINT",
              "UTINYINT"}
_FLOAT_TYPES = {"DOUBLE", "FLOAT", "REAL"}
SAMPLE_ROWS = 2048  # rows whose mean caption length sets the rows per streamed batch
_READ_JSON = "read_json({}, format='newline_delimited', maximum_object_size=16777216{})"


def _q(path: Path | str) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class _DuckReader(CaptionReader):
    accepts = frozenset({"id_col", "caption_col", "where"})
    id_candidates = ID_CANDIDATES
    caption_candidates = CAPTION_CANDIDATES

    _chosen: tuple[str | None, str | None] = (None, None)  # (id column, caption column)
    refuse_row_ids = True   # a column that looks like an id is named, not replaced by row numbers
    evidence_namespace: str | None = None  # what a dataset column names (see ingest)
    id_hint = namespace_hint = None   # lines sets add prints (columns.integer_id_hint, ...)

    def source(self, path: Path, columns: dict[str, str] | None = None) -> str:  # pragma: no cover
        """The DuckDB table function for ``path``; ``columns`` (name -> type) is a hint that
        readers with a sampled schema (JSONL) use to read just those columns so typed."""
        raise NotImplementedError

    def scan(self, path: Path) -> InputError | None:
        """Re-read the file in Python to name the first bad row (error path only)."""
        return None

    def diagnose(self, path: Path, exc: Exception) -> InputError:
        err = oversized(path, exc) or (None if compressed(path) else self.scan(path))
        if err is not None:
            return err
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return InputError(f"cannot read as {self.name} ({first[:200]})", path=path,
                          fix="check the file format or pass --format")

    def _pick(self, cols: list[str], given: str | None, candidates, what: str, path: Path,
              flag: str) -> str | None:
        if given:
            if given not in cols:
                raise InputError(f"no column '{given}' (columns: {', '.join(cols)})", path=path,
                                 fix=f"pass {flag} with one of those columns")
            return given
        return next((c for c in candidates if c in cols), None)

    def _sample(self, con, path: Path, n: int = 50) -> list[dict]:
        """A few records as dicts, for the column hints (error path only)."""
        try:
            cur = con.execute(f"SELECT * FROM {self.source(path)} LIMIT {n}")
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r)) for r in cur.fetchall()]
        except duckdb.Error:
            return []

    def _columns(self, path: Path, con, cols: list[str], desc) -> tuple[str | None, str]:
        """(id column or None, caption column), or one line naming the columns there are and
        the likely ones (:mod:`capaudit.io.readers.columns`)."""
        cap = self.caption_col or next((c for c in self.caption_candidates if c in cols), None)
        if cap is None or cap not in cols:
            numbered = all(c == f"column{i}" for i, c in enumerate(cols))  # DuckDB's names
            # a broken first line, an empty file or records nested in a list hide the columns
            err = self.scan(path) or nested_records(path, desc)
            raise err or missing_caption(cols, self._sample(con, path), path=path,
                                         given=self.caption_col, numbered=numbered) from None
        if self.caption_col is None and (err := not_captions(  # picked by name: questions
                cols, self._sample(con, path), cap, path=path)) is not None:   # are refused
            raise err
        idc = self._pick(cols, self.id_col, self.id_candidates, "image id", path, "--id-col")
        idc, self.id_hint, self.namespace_hint = pick_id_column(
            idc, self.id_col, cols, {r[0]: r[1] for r in desc}, lambda: self._sample(con, path))
        if idc is None and self.refuse_row_ids:
            refuse_row_numbers(cols, cap, lambda: self._sample(con, path), path=path)
        return idc, cap

    def select_sql(self, path: Path, con) -> str:
        """The SELECT that yields image_key, image_id, caption, meta from the file.

        Used directly by the ingest fast path (``INSERT ... SELECT`` inside
        DuckDB, no Python per row) and by :meth:`read` for streaming batches.
        """
        try:
            desc = con.execute(f"DESCRIBE SELECT * FROM {self.source(path)}").fetchall()
        except duckdb.Error as exc:
            raise self.diagnose(path, exc) from None
        cols = [r[0] for r in desc]
        idc, cap = self._columns(path, con, cols, desc)
        self._chosen = (idc, cap)
        self.evidence_namespace = self._dataset_namespace(con, path, cols)
        src = self.source(path, columns={**({idc: "VARCHAR"} if idc else {}), cap: "JSON"})
        try:
            types = dict(con.execute(f"SELECT column_name, column_type FROM "
                                     f"(DESCRIBE SELECT * FROM {src})").fetchall())
        except duckdb.Error as exc:
            raise self.diagnose(path, exc) from None
        key_sql, id_sql = self._id_sql(idc, types.get(idc))
        cap_sql, extra = self._caption_sql(path, con, src, cap, types[cap])
        if self.options.get("where") is not None:   # records kept by --where (store.where)
            from capaudit.store.where import filtered_select

            return filtered_select(con, key_sql if idc else None, id_sql, cap_sql, extra, src,
                                   self.where_source(path), self.options["where"], path)
        return (f"SELECT {key_sql} AS image_key, {id_sql} AS image_id, {cap_sql} AS caption, "
                f"NULL::VARCHAR AS meta FROM (SELECT *{extra} FROM {src})")

    def where_source(self, path: Path) -> str:
        """The file with every field typed as DuckDB infers it, for ``--where``."""
        return self.source(path)

    def _dataset_namespace(self, con, path: Path, cols: list[str]) -> str | None:
        """The namespace a dataset column names when every record names the same dataset
        (Localized Narratives' ``"dataset_id": "mscoco_val2017"``): evidence, like a COCO
        file name, for ids that are otherwise bare numbers."""
        col = next((c for c in DATASET_COLUMNS if c in cols), None)
        if col is None:
            return None
        verbatim = col == "namespace"   # capaudit's own exports: the set's namespace itself
        try:
            names = con.execute(f"SELECT DISTINCT CAST({_qi(col)} AS VARCHAR) FROM "
                                f"{self.source(path, columns={col: 'VARCHAR'})} LIMIT 2"
                                ).fetchall()
        except duckdb.Error:
            return None  # the read itself names the bad row
        if len(names) != 1 or names[0][0] is None:
            return None
        return names[0][0] if verbatim else document_namespace({col: names[0][0]}, None)

    @staticmethod
    def _id_sql(idc: str | None, typ: str | None) -> tuple[str, str]:
        """image_key and image_id, the SQL twin of :func:`parse_image_id`: whole numbers up to
        18 digits and COCO file names are image ids; anything else ("1.5", "3.0", "-3", a
        float column's 3.0, "0801961485534636") is kept as text only, never rounded (a cast
        alone turned 1.5 into 2). Text ids are read
        as text, so a file whose ids turn from integers into file names after the sampled
        rows cannot fail half-way. (A JSON float like 3.0 reads as the text "3.0".)"""
        if idc is None:
            return "CAST(row_number() OVER () - 1 AS VARCHAR)", "NULL::BIGINT"
        col = _qi(idc)
        key = f"CAST({col} AS VARCHAR)"
        if typ in _INT_TYPES:
            return key, (f"CASE WHEN {col} >= 0 AND {col} < 1000000000000000000 "
                         f"THEN CAST({col} AS BIGINT) END")
        if typ in _FLOAT_TYPES or (typ or "").startswith("DECIMAL"):
            return key, "NULL::BIGINT"   # a fraction is no id, not even 3.0 (imageids' rule)
        # fast exact path first: the integer whose text is the id itself (no rounding)
        num = f"TRY_CAST({key} AS BIGINT)"
        return key, (f"CASE WHEN CAST({num} AS VARCHAR) = {key} AND {num} >= 0 AND "
                     f"{num} < 1000000000000000000 THEN {num} "
                     f"ELSE {SQL_PARSE_IMAGE_ID.format(col=col)} END")

    def _caption_sql(self, path: Path, con, src: str, cap: str, typ: str) -> tuple[str, str]:
        """A caption is a string, in every reader; a number, list or bytes names its row.
        Returns the caption expression and any helper column it reads."""
        col = _qi(cap)
        if typ == "VARCHAR":
            return col, ""
        if typ == "JSON":  # JSONL: strings pass, anything else stops the scan
            return (f"CASE WHEN _captype = 'VARCHAR' THEN from_json({col}, '\"VARCHAR\"') "
                    f"WHEN _captype IS NULL THEN NULL ELSE error('caption is not a string: ' "
                    f"|| _captype) END"), f", json_type({col}) AS _captype"
        row = con.execute(f"SELECT min(rn) FROM (SELECT row_number() OVER () AS rn, {col} AS c "
                          f"FROM {src}) WHERE c IS NOT NULL").fetchone()[0]
        raise InputError(f"caption column '{cap}' holds {typ} values, not text", path=path,
                         row=row or 1, fix="captions must be strings; convert the column or "
                                           "pass --caption-col naming a text column")

    def record_row(self, path: Path, index: int) -> int:
        """The row an error names for the record at 0-based ``index`` (error path only):
        the same numbering as the parse errors, so one file has one kind of row number."""
        return index + 1

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        con = duckdb.connect()
        # one scan thread: a second one doubled DuckDB's JSON read buffers (+15 MB held
        # while an 800k-caption file streams) and read no faster (#24)
        con.execute("SET threads=1")
        try:
            sql = self.select_sql(path, con)
            mean = con.sql(f"SELECT avg(strlen(caption)) FROM ({sql} LIMIT {SAMPLE_ROWS})"
                           ).fetchall()[0][0]
            reader = con.sql(sql).to_arrow_reader(self.rows_for(mean or 0.0))
            for batch in reader:
                yield from self.bounded(batch.cast(SCHEMA) if batch.schema != SCHEMA else batch)
        except duckdb.Error as exc:
            raise self.diagnose(path, exc) from None
        finally:
            con.close()


class JsonlReader(_DuckReader):
    name = "jsonl"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        first = file_line(path, head)
        return first is not None and (path.suffix.lower() in {".jsonl", ".ndjson"} or (
            first.startswith(b"{") and first.rstrip().endswith(b"}")))

    def source(self, path: Path, columns: dict[str, str] | None = None) -> str:
        """Sample the schema cheaply; read only the chosen columns, typed as asked.

        The id read as text means a type change after the sampled rows (an int
        id turning into a file name) cannot fail half-way through a large file;
        the caption read as a JSON value means one that is not a string is seen
        as such (not turned into text).
        """
        spec = ", ".join(f"{_q(c)}: {_q(t)}" for c, t in (columns or {}).items())
        return _READ_JSON.format(_q(path), f", columns={{{spec}}}" if columns else "")

    def where_source(self, path: Path) -> str:
        return _READ_JSON.format(_q(path), ", sample_size=-1")

    def scan(self, path: Path) -> InputError | None:
        return scan_jsonl(path, self._chosen[1] or self.caption_col, self.caption_candidates)

    def record_row(self, path: Path, index: int) -> int:
        """Line number of record ``index``: DuckDB skips blank lines, the count does not."""
        return index + 1 if compressed(path) else jsonl_record_row(path, index)


class CsvReader(_DuckReader):
    name = "csv"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        return not path.is_dir() and path.suffix.lower() in {".csv", ".tsv"}

    def source(self, path: Path, columns: dict[str, str] | None = None,
               typed: str = "all_varchar=true, ") -> str:
        """A .csv's quote is ``"`` (RFC 4180, as the ``--shards`` reader reads it): left to
        DuckDB's sniffer, a file whose last record opens a quote it never closes was read
        with no quoting, every caption's quotes kept as text. A .tsv is left to the sniffer
        (its quotes may be text)."""
        delim, header = csv_layout.delimiter(path), str(csv_layout.has_header(path)).lower()
        quote = ", quote='\"'" if delim == "," else ""
        return f"read_csv({_q(path)}, header={header}, {typed}delim='{delim}'{quote})"

    def where_source(self, path: Path) -> str:
        """Typed as DuckDB sniffs them: ``question_id < 10`` compares numbers."""
        return self.source(path, typed="")

    def select_sql(self, path: Path, con) -> str:
        """A .tsv's unclosed last quote, which the sniffer would keep as text, is refused."""
        if (err := tsv_left_open(path)) is not None:
            raise err
        return super().select_sql(path, con)

    record_row = staticmethod(csv_layout.record_row)   # the header is line 1, as in a sheet
    scan = staticmethod(scan_csv)


class ParquetReader(_DuckReader):
    name = "parquet"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        return not path.is_dir() and head[:4] == b"PAR1"

    def source(self, path: Path, columns: dict[str, str] | None = None) -> str:
        return f"read_parquet({_q(path)})"
