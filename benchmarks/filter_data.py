"""The filter benchmarks' data: N distinct ShareGPT4V-length captions with chair-gt evidence.

    PYTHONPATH=src python benchmarks/filter_data.py N OUT_DIR [--shared ../shared]

Issue #31's data, made the same way by every filter benchmark (``make_filter_data(n)``):
the 890 real GPT-4V captions of ``data/enriched/sharegpt4v_gpt4v_coco2017_890.json``
repeated until there are ``n``. Copy ``k`` (k = 0, 1, ...) of a caption has its sentences
rotated by ``k`` (sentence ``k mod m`` first) and the sentence ``Copy k.`` appended, so no
two captions are equal (a filter's per-caption cache cannot hide its cost).

Image ids: copy ``k`` of the image with COCO id ``i`` gets id ``k * 1,000,000 + i`` (COCO
ids are below 600,000, so ids never collide; copy 0 keeps its own id). The records keep
ShareGPT4V's layout, the image named ``coco/train2017/{id:012d}.jpg``, so ``sets add`` reads
them as a ``coco2017`` set. The evidence written beside them
(``chair_objects_trainval2014_copies.jsonl``: the name says COCO ids, as the shared file's
does) gives every copy's id exactly the CHAIR objects of the original image from
``data/coco2014/chair_objects_trainval2014.jsonl``: each copy is judged against its own
image's ground truth, as if it were a fresh COCO image with the same objects.

Sentences are split by a plain regex (after ``.``, ``!`` or ``?`` and whitespace), on
purpose independent of capaudit's own splitter, so the data does not change when the
code under test does.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or ROOT.parent / "shared")
SOURCE = Path("data/enriched/sharegpt4v_gpt4v_coco2017_890.json")
CHAIR_GT = Path("data/coco2014/chair_objects_trainval2014.jsonl")
ID_STRIDE = 1_000_000
EVIDENCE_NAME = "chair_objects_trainval2014_copies.jsonl"
_SPLIT = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class FilterData:
    """Where :func:`make_filter_data` wrote the set and its evidence."""

    captions: Path    # ShareGPT4V JSON array (``sets add NAME PATH`` reads it)
    chair_gt: Path    # {"image_id", "objects"} per line, one per caption's image
    n: int


def originals(shared: Path = DEFAULT_SHARED) -> list[tuple[int, str, dict]]:
    """``(image id, caption, record)`` of the 890 real captions, in file order."""
    out = []
    for rec in json.loads((shared / SOURCE).read_text()):
        caption = next(t["value"] for t in rec["conversations"] if t["from"] == "gpt")
        out.append((int(rec["id"]), caption, rec))
    return out


def copy_caption(caption: str, k: int) -> str:
    """Copy ``k`` of ``caption``: its sentences rotated by ``k``, then ``Copy k.``."""
    sents = [s for s in _SPLIT.split(caption.strip()) if s]
    r = k % len(sents) if sents else 0
    return " ".join(sents[r:] + sents[:r] + [f"Copy {k}."])


def filter_records(n: int, shared: Path = DEFAULT_SHARED) -> Iterator[dict]:
    """The ``n`` ShareGPT4V records, copy by copy (all 890 of copy 0, then copy 1, ...)."""
    base = originals(shared)
    for j in range(n):
        k, (iid, caption, rec) = divmod(j, len(base))[0], base[j % len(base)]
        new_id = k * ID_STRIDE + iid
        yield {"id": f"{new_id:012d}", "image": f"coco/train2017/{new_id:012d}.jpg",
               "conversations": [rec["conversations"][0],
                                 {"from": "gpt", "value": copy_caption(caption, k)}]}


def evidence_rows(n: int, shared: Path = DEFAULT_SHARED) -> Iterator[dict]:
    """``{"image_id", "objects"}`` for every image of the first ``n`` records."""
    ids = [iid for iid, _, _ in originals(shared)]
    wanted = set(ids)
    objects = {}
    with open(shared / CHAIR_GT) as fh:
        for line in fh:
            row = json.loads(line)
            if row["image_id"] in wanted:
                objects[row["image_id"]] = row["objects"]
    for j in range(n):
        iid = ids[j % len(ids)]
        yield {"image_id": (j // len(ids)) * ID_STRIDE + iid, "objects": objects.get(iid, [])}


def make_filter_data(n: int, out_dir: str | Path | None = None,
                     shared: Path = DEFAULT_SHARED) -> FilterData:
    """Write ``n`` captions (``d{n}.json``) and their evidence into ``out_dir`` (default:
    ``/tmp/capaudit-filter-data``); an existing pair of the same ``n`` is reused."""
    out = Path(out_dir or "/tmp/capaudit-filter-data")
    out.mkdir(parents=True, exist_ok=True)
    data = FilterData(out / f"d{n}.json", out / f"d{n}_{EVIDENCE_NAME}", n)
    if not (data.captions.exists() and data.chair_gt.exists()):
        _write_array(data.captions, filter_records(n, shared))
        tmp = data.chair_gt.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            for row in evidence_rows(n, shared):
                fh.write(json.dumps(row) + "\n")
        tmp.rename(data.chair_gt)
    return data


def _write_array(path: Path, records: Iterator[dict]) -> None:
    """A JSON array written record by record (temporary name, then renamed)."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w") as fh:
        fh.write("[")
        for i, rec in enumerate(records):
            fh.write(("," if i else "") + "\n" + json.dumps(rec))
        fh.write("\n]\n")
    tmp.rename(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int)
    ap.add_argument("out_dir", type=Path)
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    args = ap.parse_args()
    data = make_filter_data(args.n, args.out_dir, args.shared)
    print(json.dumps({"captions": str(data.captions), "chair_gt": str(data.chair_gt),
                      "n": data.n}))


if __name__ == "__main__":
    main()
