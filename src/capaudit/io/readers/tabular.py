"""JSONL, CSV, parquet and CapsFusion files, read by DuckDB in streaming batches.

DuckDB parses these formats in C++ and hands Arrow batches over without
Python lists, which is what makes million-caption ingestion fast and flat in
memory. When DuckDB rejects a file we re-scan it in Python only to name the
exact bad row (the error path, never the hot path).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import duckdb
import pyarrow as pa

from capaudit.errors import InputError
from capaudit.io.imageids import SQL_PARSE_IMAGE_ID
from capaudit.io.readers.base import SCHEMA, CaptionReader

ID_CANDIDATES = ("image_id", "image", "file_name", "id", "key", "image_url", "url")
CAPTION_CANDIDATES = ("caption", "text", "capsfusion", "description")


def _q(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _q_str(name: str) -> str:
    return "'" + name.replace("'", "''") + "'"


def _qi(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class _DuckReader(CaptionReader):
    id_candidates = ID_CANDIDATES
    caption_candidates = CAPTION_CANDIDATES

    def source(self, path: Path, columns: list[str] | None = None) -> str:  # pragma: no cover
        raise NotImplementedError

    def diagnose(self, path: Path, exc: Exception) -> InputError:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return InputError(f"cannot read as {self.name} ({first[:200]})", path=path,
                          fix="check the file format or pass --format")

    def _pick(self, cols: list[str], given: str | None, candidates, what: str, path: Path,
              flag: str, required: bool) -> str | None:
        if given:
            if given not in cols:
                raise InputError(f"no column '{given}' (columns: {', '.join(cols)})", path=path,
                                 fix=f"pass {flag} with one of those columns")
            return given
        for cand in candidates:
            if cand in cols:
                return cand
        if required:
            raise InputError(f"no {what} column found (columns: {', '.join(cols)})", path=path,
                             fix=f"pass {flag} naming the {what} column")
        return None

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
        types = {r[0]: r[1] for r in desc}
        cap = self._pick(cols, self.caption_col, self.caption_candidates, "caption", path,
                         "--caption-col", True)
        idc = self._pick(cols, self.id_col, self.id_candidates, "image id", path, "--id-col",
                         False)
        src = self.source(path, columns=[c for c in (idc, cap) if c])
        if idc is None:
            key_sql, id_sql = "CAST(row_number() OVER () - 1 AS VARCHAR)", "NULL::BIGINT"
        elif types[idc] in ("BIGINT", "INTEGER", "UBIGINT", "UINTEGER", "SMALLINT"):
            key_sql, id_sql = f"CAST({_qi(idc)} AS VARCHAR)", f"CAST({_qi(idc)} AS BIGINT)"
        else:
            key_sql = f"CAST({_qi(idc)} AS VARCHAR)"
            id_sql = (f"coalesce(TRY_CAST({_qi(idc)} AS BIGINT), "
                      f"{SQL_PARSE_IMAGE_ID.format(col=_qi(idc))})")
        return (f"SELECT {key_sql} AS image_key, {id_sql} AS image_id, "
                f"CAST({_qi(cap)} AS VARCHAR) AS caption, NULL::VARCHAR AS meta FROM {src}")

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        con = duckdb.connect()
        try:
            sql = self.select_sql(path, con)
            reader = con.sql(sql).to_arrow_reader(self.batch_size)
            for batch in reader:
                yield batch.cast(SCHEMA) if batch.schema != SCHEMA else batch
        except duckdb.Error as exc:
            raise self.diagnose(path, exc) from None
        finally:
            con.close()


def _scan_lines(path: Path, check) -> InputError | None:
    with open(path, "rb") as fh:
        for row, raw in enumerate(fh, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                return InputError("not valid UTF-8", path=path, row=row,
                                  fix="re-encode the file as UTF-8")
            err = check(row, text)
            if err:
                return err
    return None


class JsonlReader(_DuckReader):
    name = "jsonl"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        if path.is_dir():
            return False
        first = head.lstrip().split(b"\n", 1)[0]
        return path.suffix.lower() in {".jsonl", ".ndjson"} or (
            first.startswith(b"{") and first.rstrip().endswith(b"}"))

    def source(self, path: Path, columns: list[str] | None = None) -> str:
        """Sample the schema cheaply; read the chosen columns as text.

        Reading only the id and caption columns, typed VARCHAR, means a type
        change after the sampled rows (an int id turning into a file name)
        cannot fail half-way through a large file.
        """
        if columns:
            spec = ", ".join(f"{_q_str(c)}: 'VARCHAR'" for c in columns)
            return (f"read_json({_q(path)}, format='newline_delimited', "
                    f"maximum_object_size=67108864, columns={{{spec}}})")
        return f"read_json({_q(path)}, format='newline_delimited', maximum_object_size=67108864)"

    def diagnose(self, path: Path, exc: Exception) -> InputError:
        def check(row, text):
            if not text.strip():
                return None
            try:
                rec = json.loads(text)
            except json.JSONDecodeError as e:
                return InputError(f"malformed JSON ({e.msg})", path=path, row=row,
                                  fix="one JSON object per line")
            if not isinstance(rec, dict):
                return InputError("line is not a JSON object", path=path, row=row,
                                  fix="one JSON object per line")
            return None
        return _scan_lines(path, check) or super().diagnose(path, exc)


class CsvReader(_DuckReader):
    name = "csv"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        return not path.is_dir() and path.suffix.lower() in {".csv", ".tsv"}

    def source(self, path: Path, columns: list[str] | None = None) -> str:
        delim = "\t" if path.suffix.lower() == ".tsv" else ","
        return f"read_csv({_q(path)}, header=true, all_varchar=true, delim='{delim}')"

    def diagnose(self, path: Path, exc: Exception) -> InputError:
        return _scan_lines(path, lambda row, text: None) or super().diagnose(path, exc)


class ParquetReader(_DuckReader):
    name = "parquet"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        return not path.is_dir() and head[:4] == b"PAR1"

    def source(self, path: Path, columns: list[str] | None = None) -> str:
        return f"read_parquet({_q(path)})"


class CapsFusionReader(_DuckReader):
    """CapsFusion releases: columns ``laion_2b``, ``laion_coco`` and the fused caption.

    The fused caption's key is ``capsfusion`` in some releases and ``capsfuion_official``
    (sic) in the project's own ``data/example_data.json``: both are sniffed and either is
    the default caption; ``--caption-col`` picks any column of the file (``laion_2b`` to
    audit the alt-texts). The image id is ``image_url``/``image`` when present, else the
    row number, kept as text (LAION rows have no dataset ids: nothing joins them).
    """

    name = "capsfusion"
    expects = "records with 'laion_coco' and 'capsfusion' or 'capsfuion_official'"
    caption_candidates = ("capsfusion", "capsfuion_official")
    id_candidates = ("image_id", "image", "image_url", "url", "id", "key")
    FUSED = (b"capsfusion", b"capsfuion_official")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        if path.is_dir():
            return False
        if head[:4] == b"PAR1":
            import pyarrow.parquet as pq
            try:
                names = set(pq.read_schema(path).names)
            except Exception:  # not a readable parquet: let the parquet reader complain
                return False
            return "laion_coco" in names and bool(names & {f.decode() for f in cls.FUSED})
        return b"laion_coco" in head and any(f in head for f in cls.FUSED)

    def source(self, path: Path, columns: list[str] | None = None) -> str:
        head = open(path, "rb").read(4)
        if head == b"PAR1":
            return f"read_parquet({_q(path)})"
        fmt = "array" if head.lstrip().startswith(b"[") else "auto"
        return f"read_json({_q(path)}, format='{fmt}', sample_size=-1)"
