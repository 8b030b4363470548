"""CAPability: per-dimension precision and hit of a caption against annotated image elements.

Annotations (JSONL, one element per line; ``docs/judges.md``)::

    {"image_id": 139, "dimension": "object_color", "element": "the bus is red"}

For each caption and each element annotated for its image, the judge answers
``COR`` (stated correctly), ``INC`` (mentioned but wrong) or ``MISS`` (not
mentioned) (``configs/prompts/judge_capability.txt``). Per dimension:

* precision = COR / (COR + INC): of what the caption says about the dimension, how much is right;
* hit = COR / (COR + INC + MISS): how much of the annotated content it gets right;

and their mean over dimensions. With ``--qa FILE`` (same layout plus
``"correct": true|false``: the same model's answer to a question about that
element), ``KT̄`` ("knows but cannot tell") = elements answered correctly in QA
but MISSing from the caption / elements answered correctly in QA.
"""

from __future__ import annotations

import hashlib

from capaudit.errors import InputError
from capaudit.io.layouts.json import load_json_lines
from capaudit.judge.core import Judge, Task
from capaudit.judge.parse import label_answer

__all__ = ["read_elements", "read_inputs", "compute", "LABELS"]

LABELS = ("COR", "INC", "MISS")
ELEMENT_KEYS = ("image_id", "dimension", "element")
QA_KEYS = ELEMENT_KEYS + ("correct",)


def read_inputs(cfg) -> dict:
    """``--annotations`` and ``--qa`` (a path or a URL: s3://, gs://, http(s)://, memory://),
    read once, through the storage layer, by the driver of the run and parsed: what each task
    is handed (a Ray task on a node that cannot see the driver's disk needs the content, not
    the path), with each file's sha256, which keys the run's parts: ``by_image`` (the
    elements of each image id, in the file's order), ``dims`` (every dimension, sorted),
    ``qa`` (``(image_id, dimension, element) -> correct``, or None) and ``sha256``."""
    read: dict = {"annotations": None, "qa": None}
    sha256 = {}
    for key, need in (("annotations", ELEMENT_KEYS), ("qa", QA_KEYS)):
        if cfg.get(key):
            data = _read(cfg[key], f"--{key}")
            read[key] = _parse(cfg[key], data, need)
            sha256[key] = hashlib.sha256(data).hexdigest()
    by_image: dict = {}
    for e in read["annotations"] or ():
        by_image.setdefault(e["image_id"], []).append(e)
    qa = {(q["image_id"], q["dimension"], q["element"]): bool(q["correct"])
          for q in read["qa"]} if read["qa"] is not None else None
    return {"by_image": by_image, "qa": qa, "sha256": sha256,
            "dims": sorted({e["dimension"] for e in read["annotations"] or ()})}


def read_elements(location, need: tuple = ELEMENT_KEYS) -> list[dict]:
    """The documented JSONL; a wrong line is one error naming the file, row and fix."""
    return _parse(location, _read(location), need)


def _read(location, flag: str = "--annotations") -> bytes:
    """The file's bytes (a local path, or a URL read through the storage layer); ``flag``:
    the option that named it (a missing --qa file was called an annotation file)."""
    from capaudit.core.storage.paths import read_whole

    return read_whole(location, f"{flag} file",
                      f"pass {flag} an existing JSONL file (a path or a URL)")


def _parse(location, data: bytes, need: tuple) -> list[dict]:
    from capaudit.core.storage.urls import shown_url

    path, out = shown_url(str(location)), []
    for row, obj in load_json_lines(path, data):  # bad JSON or UTF-8: one line naming the row
        missing = [k for k in need if not isinstance(obj, dict) or k not in obj]
        if missing:
            raise InputError(f"missing {', '.join(missing)}", path=path, row=row,
                             fix=f"each line needs {', '.join(need)}")
        try:
            obj["image_id"] = int(obj["image_id"])
        except (TypeError, ValueError):
            raise InputError("image_id is not an integer", path=path, row=row,
                             fix="give each line the COCO image id as a number") from None
        out.append(obj)
    if not out:   # --annotations or --qa: named by its keys, not as "annotations"
        raise InputError("no rows (an empty file)", path=path,
                         fix=f"one JSON object per line, with {', '.join(need)}")
    return out


def rows(judge: Judge, s, evidence, cfg, inputs: dict) -> dict:
    """A chunk judged (:mod:`.parts`): a row per caption and element of its image."""
    by_image = inputs["by_image"]
    rows, tasks = [], []
    parse = label_answer(LABELS)
    for c, (iid, cap) in enumerate(zip(s.image_ids, s.captions)):
        for k, e in enumerate(by_image.get(iid, [])):
            tasks.append(Task("judge_capability", {"dimension": e["dimension"],
                                                   "element": e["element"], "caption": cap},
                              parse, expect_out=3))
            rows.append({"caption_idx": c, "image_id": iid, "kind": e["dimension"],
                         "unit_idx": k, "text": e["element"], "prompt": "judge_capability"})
    for r, v in zip(rows, judge.run(tasks)):
        r.update(status=v.status, label=v.value if v.status == "ok" else None)
        r["score"] = None if r["label"] is None else float(r["label"] == "COR")
    return {"rows": rows}


def values(s, parts: list[dict], cfg, evidence_kind: str, inputs: dict) -> tuple:
    """The set's rows in its order; precision and hit per dimension and their mean."""
    from capaudit.judge.parts import joined
    from capaudit.judge.stats import label, ratio_table

    dims, qa = inputs["dims"], inputs["qa"]
    rows = joined(parts)
    vals, prec, hit = {}, [], []
    for d in dims:
        rs = [r for r in rows if r["kind"] == d]
        per = {k: [int(r["label"] == k) for r in rs] for k in LABELS}
        ids = [r["image_id"] for r in rs]
        known = [int(r["label"] is not None) for r in rs]
        t = ratio_table(ids, {
            "precision": (per["COR"], [a + b for a, b in zip(per["COR"], per["INC"])]),
            "hit": (per["COR"], known)}, cfg["n_boot"], cfg["seed"]) if rs else {}
        for k, v in t.items():
            vals[f"{d}.{k}"] = {**v, "metric": label(f"capability.{k}", evidence_kind), "grp": d}
        prec.append(t.get("precision", {}).get("value"))
        hit.append(t.get("hit", {}).get("value"))
        if qa is not None:
            known_qa = [r for r in rs if qa.get((r["image_id"], d, r["text"]))]
            kt = [int(r["label"] == "MISS") for r in known_qa if r["label"] is not None]
            if kt:
                vals[f"{d}.kt_bar"] = {"metric": label("capability.kt_bar", evidence_kind),
                                       "grp": d, "value": sum(kt) / len(kt), "n": len(kt)}
    for k, xs in (("precision", prec), ("hit", hit)):
        xs = [x for x in xs if x is not None]
        vals[f"average.{k}"] = {"metric": label(f"capability.{k}", evidence_kind),
                                "grp": "average", "value": sum(xs) / len(xs) if xs else None,
                                "n": len(xs), "extra": {"over": "dimensions"}}
    return rows, vals, None


def check(sets, cfg, inputs: dict) -> None:
    """Before any call (a chunk cannot tell): a set none of whose images is annotated is
    one line."""
    by_image = inputs["by_image"]
    for s in sets:
        if not any(by_image.get(i) for i in s.image_ids):
            raise InputError(f"no annotated element for any image of '{s.name}'",
                             fix="check that the annotation image ids are the set's image ids")


def compute(judge: Judge, sets, evidence, cfg, inputs: dict | None = None) -> "Judged":
    """``inputs``: :func:`read_inputs` of ``cfg``, read by the run's driver (None: read here)."""
    from capaudit.judge.parts import computed

    inputs = inputs if inputs is not None else read_inputs(cfg)
    check(sets, cfg, inputs)
    return computed(rows, values, judge, sets, evidence, cfg, inputs)


compute.needs_evidence = None   # the judge reads caption and annotation, not the image
compute.by_image = True   # chunks of whole images judge as the set (:mod:`.parts`)
compute.check = check
compute.read_inputs = read_inputs   # by the run's driver, once (judge/runner.py)
