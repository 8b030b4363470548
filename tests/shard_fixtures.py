"""Corpora for the sharded filter's tests, built by code: webdataset tars with binary images,
parquet shards with a schema of their own, JSON arrays of the real GPT-4V captions.

The evidence is written by hand so every expected caption can be derived by hand: image ``i``
has the objects listed for it, and the hallucination filter (reference CHAIR words) drops a
sentence naming an object its image lacks.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

# (image id, caption, what the filter leaves: derived by hand from EVIDENCE)
CAPTIONS = [
    (1, "A dog runs on the grass. A giraffe stands nearby.", "A dog runs on the grass."),
    (2, "A cat sleeps on a bed.", "A cat sleeps on a bed."),
    (3, "A giraffe eats leaves from a tree.", None),              # every sentence goes
    (4, "Two people ride bicycles. A truck waits behind them. It is sunny.",
     "Two people ride bicycles. It is sunny."),
    (5, "A pizza sits on a table.", "A pizza sits on a table."),
]
EVIDENCE = {1: ["dog"], 2: ["cat", "bed"], 3: ["tree"], 4: ["person", "bicycle"],
            5: ["pizza", "dining table"]}


def write_evidence(path: Path, evidence: dict | None = None) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for iid, objs in (evidence or EVIDENCE).items():
            fh.write(json.dumps({"image_id": iid, "objects": objs}) + "\n")
    return path


def image_bytes(i: int) -> bytes:
    """A binary "image": every byte value, in an order of its own, NULs included."""
    return bytes((i * 37 + k * 11) % 256 for k in range(3000 + 97 * i))


def _add(tf: tarfile.TarFile, name: str, data: bytes, i: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), 1_600_000_000 + i, 0o640
    info.uid, info.gid, info.uname, info.gname = 1000 + i, 2000 + i, f"u{i}", f"g{i}"
    tf.addfile(info, io.BytesIO(data))


def write_tar(path: Path, rows=CAPTIONS, caption_in: str = "txt") -> Path:
    """A webdataset tar: per sample ``KEY.jpg`` (binary), the caption (``.txt``, or ``.json``'s
    ``caption`` with ``caption_in='json'``), ``KEY.json`` metadata, and ``KEY.cls``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tf:
        for iid, cap, _ in rows:
            key = f"{iid:09d}"
            _add(tf, f"{key}.jpg", image_bytes(iid), iid)
            meta = {"image_id": iid, "url": f"http://x/{iid}.jpg", "width": 640}
            if caption_in == "json":
                meta["caption"] = cap
            else:
                _add(tf, f"{key}.txt", cap.encode("utf-8"), iid)
            _add(tf, f"{key}.json", json.dumps(meta).encode(), iid)
            _add(tf, f"{key}.cls", str(iid % 3).encode(), iid)
    return path


def tar_members(path: Path) -> list[tuple]:
    """Every member of a tar: header fields and bytes, in order."""
    out = []
    with tarfile.open(path, "r") as tf:
        for m in tf:
            data = tf.extractfile(m).read() if m.isfile() else None
            out.append((m.name, m.mode, m.mtime, m.uid, m.gid, m.uname, m.gname, m.type, data))
    return out


def records_json(shared, n: int, start: int = 0) -> list[dict]:
    """``n`` records of the real ShareGPT4V GPT-4V captions (COCO 2017 ids)."""
    data = json.loads(shared("data", "enriched", "sharegpt4v_gpt4v_coco2017_890.json")
                      .read_text("utf-8"))
    return data[start:start + n]


def split_json(records: list[dict], folder: Path, parts: int, indent: int = 1) -> list[Path]:
    """``records`` as ``parts`` JSON arrays ``part-K.json`` (as ``json.dumps`` writes)."""
    os.makedirs(folder, exist_ok=True)
    size = -(-len(records) // parts)
    paths = []
    for k in range(parts):
        p = folder / f"part-{k}.json"
        p.write_text(json.dumps(records[k * size:(k + 1) * size], indent=indent,
                                ensure_ascii=False), "utf-8")
        paths.append(p)
    return paths


def run_cli(*args: str) -> int:
    from capaudit.cli.main import main

    return main([str(a) for a in args])
