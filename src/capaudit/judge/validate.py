"""``capaudit judge validate``: does this judge agree with people (or with another judge)?

Labels (the DOCCI-Critique layout; JSONL or CSV, documented in ``docs/judges.md``):
one row per sentence with ``image_id``, ``caption``, ``sentence_idx`` and either
``label`` (yes/no, true/false, 1/0: is the sentence factual) or ``votes`` (a list
of such labels, majority wins, ties are left out and counted); optional
``sentence`` (the labelled sentence text, used as is: the split of the labels
wins over ours) and ``source`` (the caption's system, for the system-level
ranking). The ``--json`` output of ``capaudit audit factuality`` is accepted
as labels too (a second judge as reference), with the set name as source.

Reported: sentence-level ROC-AUC from P(yes) (only when every judged sentence
has one), macro-F1, accuracy, Cohen's kappa, and, with three or more sources,
Spearman rho and Kendall tau between the judge's and the labels' ranking of
sources by share of factual sentences.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from capaudit.errors import InputError
from capaudit.io.layouts.json import load_json_lines, utf8_text
from capaudit.judge.core import Judge
from capaudit.judge.factuality import sentence_tasks, split_sentences

__all__ = ["read_labels", "agreement", "compute_validate", "Labels", "compute"]

NEED = ("image_id", "caption", "sentence_idx")
_TRUE = {"yes", "true", "1", "factual", "correct"}
_FALSE = {"no", "false", "0", "non-factual", "nonfactual", "incorrect", "wrong"}


def _bool(v, path, row):
    s = str(v).strip().lower()
    if s in _TRUE:
        return 1
    if s in _FALSE:
        return 0
    raise InputError(f"label {v!r} is not yes/no", path=path, row=row,
                     fix="use yes/no, true/false or 1/0")


def _from_judge_json(data: dict) -> list[dict]:
    rows = []
    for src, items in data.get("items", {}).items():
        caps = {r["caption_idx"]: r["text"] for r in items if r.get("kind") == "caption"}
        for r in items:
            if r.get("kind") == "sentence" and r.get("label") in ("yes", "no"):
                rows.append({"image_id": r["image_id"], "caption": caps.get(r["caption_idx"], ""),
                             "sentence_idx": r["unit_idx"], "sentence": r["text"],
                             "label": r["label"], "source": src})
    return rows


def read_labels(location) -> tuple[list[dict], int]:
    """(rows with an integer ``y``, number of tied votes left out). ``location``: a path or
    a URL, read once, through the storage layer, by the run's driver (its tasks are handed
    the rows); a URL is named without its credentials."""
    from capaudit.core.storage.paths import read_whole
    from capaudit.core.storage.urls import name_of, shown_url

    data = read_whole(location, "labels file", "pass an existing JSONL or CSV (a path or a URL)")
    path, suffix = shown_url(str(location)), Path(name_of(location)).suffix.lower()
    if suffix == ".csv":
        raw = list(csv.DictReader(utf8_text(path, data=data).splitlines()))
    elif suffix == ".json":
        try:
            raw = _from_judge_json(json.loads(utf8_text(path, data=data)))
        except (json.JSONDecodeError, AttributeError):
            raise InputError("not the JSON output of capaudit audit factuality", path=path,
                             fix="pass that --json file, or labels as JSONL/CSV") from None
    else:   # bad JSON or UTF-8: its row named
        raw = [obj for _, obj in load_json_lines(path, data)]
    rows, ties = [], 0
    for row, r in enumerate(raw, 1):
        missing = [k for k in NEED if not isinstance(r, dict) or r.get(k) in (None, "")]
        has = isinstance(r, dict) and (r.get("label") not in (None, "") or r.get("votes"))
        if missing or not has:
            raise InputError(f"missing column(s) {', '.join(missing + ([] if has else ['label or votes']))}",
                             path=path, row=row,
                             fix="columns: image_id, caption, sentence_idx, label (or votes); "
                                 "optional sentence, source")
        if r.get("label") not in (None, ""):
            y = _bool(r["label"], path, row)
        else:
            votes = r["votes"] if isinstance(r["votes"], list) else str(r["votes"]).split("|")
            vs = [_bool(v, path, row) for v in votes]
            if 2 * sum(vs) == len(vs):
                ties += 1
                continue
            y = int(2 * sum(vs) > len(vs))
        try:
            rows.append({**r, "image_id": int(r["image_id"]), "sentence_idx": int(r["sentence_idx"]),
                         "y": y, "source": str(r.get("source") or "all")})
        except (TypeError, ValueError):
            raise InputError("image_id and sentence_idx must be integers", path=path,
                             row=row) from None
    if not rows:
        raise InputError("no usable labels", path=path)
    return rows, ties


def agreement(y: list[int], pred: list[int], p_yes: list, sources: list[str]) -> dict:
    """The validation numbers from labels, judge predictions and P(yes)."""
    from capaudit.judge.stats import cohen_kappa, macro_f1, rank_agreement, roc_auc

    out = {"n": len(y), "accuracy": sum(a == b for a, b in zip(y, pred)) / len(y) if y else None,
           "macro_f1": macro_f1(y, pred) if y else None, "kappa": cohen_kappa(y, pred),
           "roc_auc": roc_auc(y, p_yes) if y and all(p is not None for p in p_yes) else None}
    systems: dict = {}
    for s, a, b in zip(sources, y, pred):
        t = systems.setdefault(s, [0, 0, 0])
        t[0], t[1], t[2] = t[0] + a, t[1] + b, t[2] + 1
    out["systems"] = {s: {"labels": t[0] / t[2], "judge": t[1] / t[2], "n": t[2]}
                      for s, t in sorted(systems.items())}
    names = sorted(systems)
    out.update(rank_agreement([out["systems"][s]["labels"] for s in names],
                              [out["systems"][s]["judge"] for s in names]))
    return out


def compute_validate(judge: Judge, rows: list[dict], evidence) -> tuple[list[dict], dict]:
    """Judge every labelled sentence in its caption's context; items and agreement."""
    caps: dict = {}
    for r in rows:
        caps.setdefault((r["source"], r["image_id"], r["caption"]), {})[r["sentence_idx"]] = r
    tasks, items = [], []
    for (src, iid, cap), by_idx in caps.items():
        ours = split_sentences(cap)
        given = {k: r.get("sentence") for k, r in by_idx.items()}
        n = max(max(by_idx) + 1, len(ours))
        sents = [given.get(k) or (ours[k] if k < len(ours) else None) for k in range(n)]
        for k in by_idx:
            if sents[k] is None:
                raise InputError(f"sentence_idx {k} of image {iid}: the caption has only "
                                 f"{len(ours)} sentence(s) and no 'sentence' is given",
                                 fix="add the labelled sentence text in a 'sentence' column")
        ctx = [s or "" for s in sents]
        for k in sorted(by_idx):
            t = sentence_tasks(ctx[:k + 1], evidence.text(iid), evidence.image(iid))[k]
            tasks.append(t)
            items.append({"caption_idx": None, "image_id": iid, "kind": "sentence",
                          "unit_idx": k, "text": ctx[k], "source": src, "human": by_idx[k]["y"],
                          "prompt": "judge_factuality"})
    for it, v in zip(items, judge.run(tasks)):
        fact = v.value[0] if v.status == "ok" else None
        it.update(status=v.status, label=None if fact is None else ("yes" if fact else "no"),
                  score=None if fact is None else float(fact), p_yes=v.p_yes,
                  critique=v.value[1] if v.status == "ok" and v.value[1] else None)
    done = [it for it in items if it["score"] is not None]
    agr = agreement([it["human"] for it in done], [int(it["score"]) for it in done],
                    [it["p_yes"] for it in done], [it["source"] for it in done])
    agr["not_scored"] = len(items) - len(done)
    return items, agr


@dataclass(frozen=True)
class Labels:
    """A labels file as the runner's one unit of judging (:mod:`.step`): its name, the
    image ids its evidence is cut to, its rows."""

    name: str
    image_ids: list
    rows: list


def rows(judge: Judge, labels: Labels, evidence, cfg) -> dict:
    """The labels file judged, whole (:mod:`.parts`; never chunked: its rows carry no
    caption index to put them back in order)."""
    items, agr = compute_validate(judge, labels.rows, evidence)
    return {"rows": items, "agreement": agr}


def values(labels: Labels, parts: list[dict], cfg, evidence_kind: str) -> tuple:
    """The step's view of :func:`compute_validate`: the items and, beside them, the
    agreement."""
    (part,) = parts
    return part["rows"], None, {"agreement": part["agreement"]}


def compute(judge: Judge, sets, evidence, cfg) -> "Judged":
    from capaudit.judge.parts import computed

    return computed(rows, values, judge, sets, evidence, cfg)
