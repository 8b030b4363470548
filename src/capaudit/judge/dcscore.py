"""DCScore in both directions (DeCapBench): hallucination and omission from information units.

Steps, each a judge call (prompts ``judge_units``, ``judge_match``, ``judge_verify_unit``):

1. **decompose** the model caption and the reference description of the same
   image (all its human captions joined) into primitive information units, each
   with a type (object, attribute, count, relation, text, action, scene, other)
   and a relevance flag (units stating nothing visible are left out of both P and R);
2. **match** the units of the two descriptions (a unit may match several);
3. **verify** the unmatched units of the described side against the evidence.

Arithmetic (:func:`unit_scores`, checked by hand in the tests). With ``M(g)`` the
reference units matched by described unit ``g``:

* precision = (matched units + unmatched units verified true) / relevant units
  (an unmatched unit whose verification is unparsed/failed leaves the denominator);
* recall = sum over reference units ``r`` of ``min(1, sum_{g matches r} 1/|M(g)|)``
  / relevant reference units: a unit matching ``k`` reference units spreads its
  credit ``1/k`` over them (our reading of the paper's one-to-many weighting: one
  vague unit cannot cover many specific ones);
* F1 = 2PR / (P + R); hallucination rate = 1 - P; omission rate = 1 - R.

**HAR** describes the model caption with the human description as reference;
**MAR** the reverse (the matching is shared: it is symmetric). Set level:
precision and recall as ratios of sums over captions, F1 as the mean per-caption
F1, all with image-bootstrap intervals; per unit type the hallucination and
omission rates; Welch's t-test of per-caption F1 between the first two sets.
"""

from __future__ import annotations

from capaudit.judge.core import Judge, Task
from capaudit.judge.parse import UNIT_TYPES, matches, unit_list, yes_no_critique

__all__ = ["unit_scores", "compute"]


def unit_scores(gen: list[dict], ref: list[dict], pairs, verified: dict) -> dict:
    """P/R/F1 of one described caption against one reference (indices into the full lists)."""
    G = [g for g, u in enumerate(gen) if u["relevant"]]
    R = [r for r, u in enumerate(ref) if u["relevant"]]
    Gs, Rs = set(G), set(R)
    M: dict[int, set] = {}
    for g, r in pairs:
        if g in Gs and r in Rs:
            M.setdefault(g, set()).add(r)
    correct, known = {}, []
    for g in G:
        if g in M:
            correct[g] = 1
        elif verified.get(g) is not None:
            correct[g] = int(bool(verified[g]))
        else:
            continue  # unmatched and unverifiable: unknown, not wrong
        known.append(g)
    credit = {r: 0.0 for r in R}
    for g, rs in M.items():
        for r in rs:
            credit[r] += 1.0 / len(rs)
    credit = {r: min(1.0, c) for r, c in credit.items()}
    p_num, p_den = float(sum(correct.values())), len(known)
    r_num, r_den = float(sum(credit.values())), len(R)
    prec = p_num / p_den if p_den else None
    rec = r_num / r_den if r_den else None
    f1 = (2 * prec * rec / (prec + rec) if prec + rec > 0 else 0.0) \
        if prec is not None and rec is not None else None
    by_type: dict[str, list[float]] = {}
    for g in known:
        t = by_type.setdefault(gen[g]["type"], [0.0, 0, 0.0, 0])
        t[0] += correct[g]
        t[1] += 1
    for r in R:
        t = by_type.setdefault(ref[r]["type"], [0.0, 0, 0.0, 0])
        t[2] += credit[r]
        t[3] += 1
    return {"p_num": p_num, "p_den": p_den, "r_num": r_num, "r_den": r_den,
            "precision": prec, "recall": rec, "f1": f1, "by_type": by_type}


def _numbered(units: list[dict]) -> str:
    return "\n".join(f"{k}. {u['text']}" for k, u in enumerate(units)) or "(none)"


def _placeholder(n: int) -> list[dict]:
    return [{"text": f"unit {k}", "type": "object", "relevant": True, "sentence": None}
            for k in range(n)]


def _decompose(judge: Judge, texts: list[str], assumed: int) -> dict:
    uniq = list(dict.fromkeys(texts))
    tasks = [Task("judge_units", {"caption": t}, unit_list, expect_out=20 * assumed) for t in uniq]
    out = {}
    for t, v in zip(uniq, judge.run(tasks)):
        out[t] = _placeholder(assumed) if v.status == "dry-run" else \
            (v.value if v.status == "ok" else None)
    return out


def _verify(judge: Judge, asks: list[tuple], evidence) -> dict:
    """``{(image_id, unit text): True/False/None}`` for the unmatched units."""
    uniq = list(dict.fromkeys(asks))
    tasks = [Task("judge_verify_unit", {"evidence": evidence.text(i), "unit": t},
                  yes_no_critique, evidence.image(i), expect_out=15) for i, t in uniq]
    return {k: (v.value[0] if v.status == "ok" else None)
            for k, v in zip(uniq, judge.run(tasks))}


def rows(judge: Judge, s, evidence, cfg) -> dict:
    """A chunk judged (:mod:`.parts`): its detail rows, and each caption's
    :func:`unit_scores` of both directions (``har``, ``mar``), which the rows do not hold
    and the set's values need."""
    assumed = int(cfg.get("assumed_units", 8))
    if not evidence.references:
        from capaudit.errors import InputError

        raise InputError("dcscore needs the human captions of the same images",
                         fix="pass --reference SET")
    ref_text = [evidence.references_for(i) for i in s.image_ids]
    units = _decompose(judge, list(s.captions) + ref_text, assumed)
    pairs = _match(judge, units, s.captions, ref_text, assumed)
    verified = _verify(judge, _unmatched(s, units, ref_text, pairs), evidence)
    rows, caps = _caption_rows(s, units, ref_text, pairs, verified)
    return {"rows": rows, **caps}


def values(s, parts: list[dict], cfg, evidence_kind: str) -> tuple:
    """The set's rows in its order and its values (:func:`_set_values`)."""
    from capaudit.judge.parts import joined, per_caption

    caps = {d: per_caption(parts, d, len(s.captions)) for d in ("har", "mar")}
    return joined(parts), _set_values(evidence_kind, s.image_ids, caps, cfg), None


def compute(judge: Judge, sets, evidence, cfg) -> "Judged":
    from capaudit.judge.parts import computed

    return computed(rows, values, judge, sets, evidence, cfg)


def across(out: "Judged") -> dict:
    """What spans the sets: Welch's t-test of the first two sets' per-caption HAR F1 (their
    ``caption-har`` rows), run by the merge over every set's rows."""
    from capaudit.judge.stats import welch

    if len(out.items) < 2:
        return {}
    a, b = list(out.items)[:2]
    f1 = {n: [r["score"] for r in out.items[n] if r["kind"] == "caption-har"] for n in (a, b)}
    return {"welch_har_f1": {"score": "per-caption HAR F1", "a": a, "b": b,
                             **welch(f1[a], f1[b])}}


def _match(judge: Judge, units: dict, captions, ref_text: list[str], assumed: int) -> dict:
    """``{caption index: [(model unit, reference unit), ...] or None}`` (None: the match
    failed); a caption whose units are missing on either side has no pairs."""
    pairs_tasks, idx = [], []
    for c, (cap, rt) in enumerate(zip(captions, ref_text)):
        a, b = units.get(cap), units.get(rt)
        if a and b:
            pairs_tasks.append(Task("judge_match", {"units_a": _numbered(a),
                                                    "units_b": _numbered(b)},
                                    matches(len(a), len(b)), expect_out=6 * len(a)))
            idx.append(c)
    pairs: dict[int, list | None] = {c: [] for c in range(len(captions))}
    for c, v in zip(idx, judge.run(pairs_tasks)):
        pairs[c] = v.value if v.status == "ok" else \
            ([(k, k) for k in range(0, assumed, 2)] if v.status == "dry-run" else None)
    return pairs


def _unmatched(s, units: dict, ref_text: list[str], pairs: dict) -> list[tuple]:
    """``(image id, unit text)`` of the relevant units, on either side, that matched nothing."""
    asks = []
    for c, (iid, cap, rt) in enumerate(zip(s.image_ids, s.captions, ref_text)):
        a, b, pr = units.get(cap), units.get(rt), pairs[c]
        if a is None or b is None or pr is None:
            continue
        ma, mb = {g for g, _ in pr}, {r for _, r in pr}
        asks += [(iid, u["text"]) for g, u in enumerate(a) if u["relevant"] and g not in ma]
        asks += [(iid, u["text"]) for r, u in enumerate(b) if u["relevant"] and r not in mb]
    return asks


def _caption_rows(s, units: dict, ref_text: list[str], pairs: dict,
                  verified: dict) -> tuple[list[dict], dict[str, list]]:
    """The detail rows (each caption's HAR and MAR score, each model unit) and the
    per-caption :func:`unit_scores` of both directions (None where units or match failed)."""
    rows, caps = [], {"har": [], "mar": []}
    for c, (iid, cap, rt) in enumerate(zip(s.image_ids, s.captions, ref_text)):
        a, b, pr = units.get(cap), units.get(rt), pairs[c]
        ok = a is not None and b is not None and pr is not None
        for d, (gen, ref, prs) in {"har": (a, b, pr), "mar": (b, a, [(y, x) for x, y in pr or []])}.items():
            sc = unit_scores(gen, ref, prs, {g: verified.get((iid, u["text"]))
                                             for g, u in enumerate(gen)}) if ok else None
            caps[d].append(sc)
            rows.append({"caption_idx": c, "image_id": iid, "kind": f"caption-{d}",
                         "unit_idx": -1, "text": cap, "prompt": "judge_match",
                         "status": "ok" if ok else "unparsed",
                         "score": sc["f1"] if sc else None,
                         "precision": sc and sc["precision"], "recall": sc and sc["recall"]})
        for k, u in enumerate(a or []):
            rows.append({"caption_idx": c, "image_id": iid, "kind": f"unit-{u['type']}",
                         "unit_idx": k, "text": u["text"], "prompt": "judge_units",
                         "status": "ok", "label": "relevant" if u["relevant"] else "irrelevant",
                         "matched": bool(pr) and k in {g for g, _ in pr},
                         "verified": verified.get((iid, u["text"]))})
    return rows, caps


def _set_values(evidence_kind: str, image_ids, caps: dict[str, list], cfg) -> dict:
    """A set's values per direction: precision, recall and F1 with image-bootstrap
    intervals, hallucination and omission rates, and those rates per unit type."""
    from capaudit.judge.stats import label, ratio_table

    vals = {}
    for d, scs in caps.items():
        good = [x for x in scs if x is not None]
        t = ratio_table(image_ids, {
            "precision": ([x["p_num"] if x else 0 for x in scs], [x["p_den"] if x else 0 for x in scs]),
            "recall": ([x["r_num"] if x else 0 for x in scs], [x["r_den"] if x else 0 for x in scs]),
            "f1": ([x["f1"] or 0.0 if x else 0 for x in scs],
                   [int(x is not None and x["f1"] is not None) for x in scs])},
            cfg["n_boot"], cfg["seed"])
        for k, v in t.items():
            vals[label(f"dcscore.{d}.{k}", evidence_kind)] = v
        for k, src in (("hallucination", "precision"), ("omission", "recall")):
            v = t[src]
            vals[label(f"dcscore.{d}.{k}", evidence_kind)] = {
                "value": None if v["value"] is None else 1 - v["value"], "n": v["n"],
                "ci_low": None if v["ci_high"] is None else 1 - v["ci_high"],
                "ci_high": None if v["ci_low"] is None else 1 - v["ci_low"]}
        for typ in UNIT_TYPES:
            tot = [sum(x["by_type"].get(typ, [0, 0, 0, 0])[j] for x in good) for j in range(4)]
            for k, num, den in (("hallucination", tot[1] - tot[0], tot[1]),
                                ("omission", tot[3] - tot[2], tot[3])):
                if den:
                    name = label(f"dcscore.{d}.{k}", evidence_kind)
                    vals[f"{name}[{typ}]"] = {"metric": name, "grp": typ,
                                              "value": num / den, "n": int(den)}
    return vals


compute.needs_evidence = "image"
compute.across = across
compute.by_image = True   # chunks of whole images judge as the set (:mod:`.parts`)
