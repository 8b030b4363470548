"""What a dataset card says about a filtered set: what was removed, and the score to believe.

Why apart from :mod:`capaudit.report.card`: these read the set's lineage and filter log from
the store (not the audit's results), and they are what a reader of a cleaned dataset asks
first: how much did the filter remove, and did it help by evidence it did not use? A
filter's options are written without the paths and URLs among them (a card is published):
its evidence is named by what it is and its sha256.
"""

from __future__ import annotations

from capaudit.metrics.spec import label

__all__ = ["filtering", "history", "validation_lines"]

EVIDENCE_LABELS = {"chair-gt": "CHAIR ground truth", "instances": "COCO instance categories",
                   "detector": "detector output"}
# filter options that hold a path, a URL or an environment name: never written on a card
_PRIVATE = {"evidence_source", "evidence_sha256", "chair_gt", "instances", "detections",
            "demographics", "images", "prompt_dir", "judge_url", "reviser_url", "api_key_env",
            "filter"}


def _evidence(opts: dict) -> str | None:
    kind = opts.get("evidence")
    if not kind:
        return None
    sha = opts.get("evidence_sha256")
    return f"{EVIDENCE_LABELS.get(kind, kind)}" + (f" (sha256 `{sha}`)" if sha else "")


def _public_options(opts: dict) -> list[str]:
    keep = {k: v for k, v in opts.items() if v is not None and k not in _PRIVATE
            and k != "evidence" and not (isinstance(v, str) and ("/" in v or "\\" in v))}
    return [f"{k}={v}" for k, v in sorted(keep.items())[:10]]


def history(store, name: str) -> list[str]:
    """The chain of filters from the set back to its first parent, one line each."""
    lines, seen = [], set()
    info = store.find_set(name) if store is not None else None
    while info is not None and info.parent and info.name not in seen:
        seen.add(info.name)
        opts = info.options or {}
        what = opts.get("filter") or info.format or "derived"
        parts = _public_options(opts)
        if ev := _evidence(opts):
            parts.insert(0, f"evidence: {ev}")
        lines.append(f"- `{info.name}` from `{info.parent}`: {what}"
                     + (f" ({', '.join(parts)})" if parts else "")
                     + f"; {info.n_captions:,} captions")
        info = store.find_set(info.parent)
    return lines or ["- none: the set is as it was added"]


def _counts(store, name: str) -> dict | None:
    """Sentences and captions the filter that wrote ``name`` judged and removed (its log)."""
    from capaudit.store import filter_log

    if store is None or not filter_log.has_tables(store):
        return None
    actions = filter_log.action_counts(store, name)
    if not actions:
        return None
    caps_in, caps_out = filter_log.caption_counts(store, name)
    return {"sentences": sum(actions.values()), "dropped": actions.get("drop", 0),
            "revised": actions.get("revise", 0), "flagged": actions.get("flag", 0),
            "captions": caps_in, "captions_removed": caps_in - caps_out}


def filtering(cmp, store, name: str) -> list[str]:
    """The "Filtering" part of a filtered set's section: what its filter removed and, for a
    value scored with the filter's own evidence, the independent score beside it."""
    from capaudit.audit.circular import independent_note

    info = store.find_set(name) if store is not None else None
    counts = _counts(store, name) if info is not None and info.format == "filter" else None
    if counts is None:
        return []
    opts = info.options or {}
    lines = [f"Filtering ({opts.get('filter') or 'filter'} of `{info.parent}`"
             + (f", evidence: {ev}" if (ev := _evidence(opts)) else "") + "):", "",
             f"- sentences removed: {counts['dropped']:,} of {counts['sentences']:,} "
             f"(revised {counts['revised']:,}, flagged for review {counts['flagged']:,})",
             f"- captions removed: {counts['captions_removed']:,} of {counts['captions']:,} "
             "(every sentence of a caption removed)"]
    for m in cmp.metrics:
        r = cmp.result(name, m)
        if r is not None and not r.skipped and r.status == "circular":
            lines.append(f"- {label(m)}: circular under the evidence the filter used; "
                         + independent_note(r.extra.get("independent")))
    from capaudit.store.validations import validations_of

    return lines + validation_lines(validations_of(store, name)) + [""]


def _scored(level: dict, key: str) -> str:
    value, (lo, hi) = level.get(key), level.get("ci", {}).get(key) or (None, None)
    n = {"precision": level.get("n_precision"), "recall": level.get("n_recall")}.get(
        key, level.get("n"))
    if value is None:
        return f"{key} n/a (n {n:,})"
    return f"{key} {value:.3f}" + (f" [{lo:.3f}, {hi:.3f}]" if lo is not None else "") + \
        f" (n {n:,})"


def validation_lines(validations: list[dict]) -> list[str]:
    """One line per validation of the set against human labels (``filter validate``): the
    label file by name and sha256, the status, how many labelled captions matched, and per
    level precision, recall and F1 with their interval and n."""
    out = []
    for v in validations:
        r, m = v["result"], v["matching"]
        parts = [f"{lv}: " + ", ".join(_scored(r[lv], k) for k in ("precision", "recall", "f1"))
                 for lv in ("caption", "sentence") if lv in r]
        if "graded" in r and r["graded"].get("spearman") is not None:
            parts.append(f"graded: Spearman(share removed, grade) {r['graded']['spearman']:.3f}"
                         f" (n {r['graded']['n']:,})")
        sha = (v.get("labels_sha256") or "")[:16]
        out.append(f"- validated against human labels `{v['labels']}` ({v['layout']}, sha256 "
                   f"`{sha}…`): status {v['status']}; {m.get('matched', 0):,} of "
                   f"{m.get('labelled_captions', 0):,} labelled captions matched; "
                   + "; ".join(parts))
    return out
