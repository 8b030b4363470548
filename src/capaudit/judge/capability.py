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

from pathlib import Path

from capaudit.errors import InputError
from capaudit.io.layouts.json import load_json_lines
from capaudit.judge.core import Judge, Task
from capaudit.judge.parse import label_answer

__all__ = ["read_elements", "compute", "LABELS"]

LABELS = ("COR", "INC", "MISS")


def read_elements(path: str | Path, need: tuple = ("image_id", "dimension", "element")) -> list[dict]:
    """The documented JSONL; a wrong line is one error naming the file, row and fix."""
    path = Path(path)
    if not path.is_file():
        raise InputError("annotation file not found", path=path, fix="pass an existing JSONL file")
    out = []
    for row, obj in load_json_lines(path):    # bad JSON or UTF-8: one line naming the row
        missing = [k for k in need if not isinstance(obj, dict) or k not in obj]
        if missing:
            raise InputError(f"missing {', '.join(missing)}", path=path, row=row,
                             fix=f"each line needs {', '.join(need)}")
        try:
            obj["image_id"] = int(obj["image_id"])
        except (TypeError, ValueError):
            raise InputError("image_id is not an integer", path=path, row=row) from None
        out.append(obj)
    if not out:
        raise InputError("no annotations", path=path)
    return out


def _annotations(cfg) -> tuple[dict, list, dict | None]:
    """(the elements by image id, every dimension, the QA answers or None)."""
    elements = read_elements(cfg["annotations"])
    qa = {(q["image_id"], q["dimension"], q["element"]): bool(q["correct"])
          for q in read_elements(cfg["qa"], ("image_id", "dimension", "element", "correct"))} \
        if cfg.get("qa") else None
    by_image: dict = {}
    for e in elements:
        by_image.setdefault(e["image_id"], []).append(e)
    return by_image, sorted({e["dimension"] for e in elements}), qa


def rows(judge: Judge, s, evidence, cfg) -> dict:
    """A chunk judged (:mod:`.parts`): a row per caption and element of its image."""
    by_image = _annotations(cfg)[0]
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


def values(s, parts: list[dict], cfg, evidence_kind: str) -> tuple:
    """The set's rows in its order; precision and hit per dimension and their mean."""
    from capaudit.judge.parts import joined
    from capaudit.judge.stats import label, ratio_table

    _, dims, qa = _annotations(cfg)
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


def check(sets, cfg) -> None:
    """Before any call (a chunk cannot tell): a set none of whose images is annotated is
    one line."""
    by_image = _annotations(cfg)[0]
    for s in sets:
        if not any(by_image.get(i) for i in s.image_ids):
            raise InputError(f"no annotated element for any image of '{s.name}'",
                             fix="check that the annotation image ids are the set's image ids")


def compute(judge: Judge, sets, evidence, cfg) -> "Judged":
    from capaudit.judge.parts import computed

    check(sets, cfg)
    return computed(rows, values, judge, sets, evidence, cfg)


compute.needs_evidence = None   # the judge reads caption and annotation, not the image
compute.by_image = True   # chunks of whole images judge as the set (:mod:`.parts`)
compute.check = check
