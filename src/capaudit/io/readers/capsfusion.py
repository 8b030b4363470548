"""CapsFusion releases, read by DuckDB like the other flat files (:mod:`.tabular`)."""

from __future__ import annotations

from pathlib import Path

from capaudit.io.readers.tabular import _DuckReader, _q


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
    refuse_row_ids = False   # LAION rows have no dataset ids: row numbers, as documented
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

    def source(self, path: Path, columns: dict[str, str] | None = None) -> str:
        head = open(path, "rb").read(4)
        if head == b"PAR1":
            return f"read_parquet({_q(path)})"
        fmt = "array" if head.lstrip().startswith(b"[") else "auto"
        return f"read_json({_q(path)}, format='{fmt}', sample_size=-1)"
