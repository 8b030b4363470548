"""Export a caption set to JSONL, parquet or webdataset shards.

Outputs are written under a temporary name and renamed into place, so an
interrupted export never leaves a truncated file that looks complete.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

from capaudit.errors import InputError

FORMATS = ("jsonl", "parquet", "webdataset")


def export_set(store, name: str, to: str, out: str | Path | None = None) -> Path:
    if to not in FORMATS:
        raise InputError(f"unknown export format '{to}'", fix=f"use --to {' | '.join(FORMATS)}")
    info = store.get_set(name)
    suffix = {"jsonl": ".jsonl", "parquet": ".parquet", "webdataset": ""}[to]
    out = Path(out) if out else Path(f"{name}{suffix}")
    tmp = out.with_name(out.name + ".tmp")
    src = (f"SELECT row_idx, image_key, image_id, caption FROM captions WHERE set_id = "
           f"{int(info.set_id)} ORDER BY row_idx")
    if to == "jsonl":
        with open(tmp, "w", encoding="utf-8") as fh:
            for batch in store.con.sql(src).to_arrow_reader(100_000):
                for rec in batch.to_pylist():
                    fh.write(json.dumps({"image_id": rec["image_id"] if rec["image_id"] is not None
                                         else rec["image_key"], "caption": rec["caption"]},
                                        ensure_ascii=False) + "\n")
    elif to == "parquet":
        store.con.execute(f"COPY ({src}) TO '{str(tmp).replace(chr(39), chr(39) * 2)}' "
                          f"(FORMAT parquet)")
    else:
        tmp.mkdir(parents=True, exist_ok=True)
        rows = store.sql(
            "SELECT image_key, any_value(image_id), list(caption ORDER BY row_idx) FROM captions "
            "WHERE set_id = ? GROUP BY image_key ORDER BY min(row_idx)", [info.set_id])
        shard_size = 1000
        for s in range(0, len(rows), shard_size):
            with tarfile.open(tmp / f"{name}-{s // shard_size:05d}.tar", "w") as tf:
                for key, iid, caps in rows[s:s + shard_size]:
                    data = json.dumps({"image_id": iid, "key": key, "captions": caps}).encode()
                    member = tarfile.TarInfo(f"{_safe_key(key)}.json")
                    member.size = len(data)
                    tf.addfile(member, io.BytesIO(data))
    if out.exists() and out.is_dir() and to == "webdataset":
        import shutil
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out


def _safe_key(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in str(key))


def export_with_provenance(store, name: str, to: str, out: str | Path | None = None) -> Path:
    """:func:`export_set`, then the set's provenance (sha256, source, size) beside the output:
    the one path of ``capaudit sets export`` and :meth:`capaudit.api.AuditStore.export`."""
    from capaudit.core.config import provenance_beside

    path = export_set(store, name, to, out)
    info = store.get_set(name)
    provenance_beside(path, {"set": name, "to": to, "sha256": info.sha256,
                             "source": info.source_path, "n_captions": info.n_captions})
    return path
