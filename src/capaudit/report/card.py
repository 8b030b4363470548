"""The audit as a Hugging Face dataset-card section (``capaudit audit card``).

Why: a cleaned dataset is published with a card, and what the card says about the data is
what its users will believe. This writes the audit into one: YAML metadata (machine-read:
every value with its interval, n and status) and markdown for people (the same values
through :mod:`capaudit.metrics.present`, the annotations and how much of each set they
cover, gaps by group, the filter history, provenance), all from the same result objects
as the terminal and the report, so the card cannot say more than the audit does.
"""

from __future__ import annotations

from typing import Any

from capaudit.metrics.present import interval_text, short_status, signed, value_text
from capaudit.metrics.spec import description, label, number_format
from capaudit.report.cells import notes as compare_notes

__all__ = ["dataset_card", "card_metadata"]

KIND_LABELS = {"instances": "COCO instances", "chair_gt": "CHAIR ground truth",
               "demographics": "image gender / skin-tone labels"}


def _record(r) -> dict[str, Any]:
    out: dict[str, Any] = {"value": r.value, "ci": [r.ci_low, r.ci_high], "n": r.n,
                           "n_images": r.n_images, "status": r.state}
    if r.notes:
        out["notes"] = list(r.notes)
    if r.coverage:
        out["coverage"] = dict(r.coverage)
    return out


def card_metadata(cmp, cfg, versions: dict) -> dict[str, Any]:
    """The YAML block: what a tool reading the card needs, nothing rounded."""
    sets = {}
    for n in cmp.names:
        res = cmp.results[n]
        sets[n] = {"captions": _total(cmp, n, "captions"), "images": _total(cmp, n, "images")}
        b = cmp.basis
        if b is not None and n in b.on_parent:
            sets[n].update(scored_on_parent=b.on_parent[n], scored_images=b.images.get(n))
        sets[n]["metrics"] = {m: _record(r) for m, r in res.results.items()}
    return {"capaudit_audit": {"version": versions.get("capaudit"), "run_id": cmp.run_id,
                               "n_boot": cfg.get("n_boot"), "seed": cfg.get("seed"),
                               "min_n": cfg.get("min_n"), "mode": cfg.get("mode"),
                               "sets": sets}}


def _total(cmp, name: str, what: str) -> int:
    """The set's own captions / images (a filtered set scored on its parent's images was
    padded with empty captions: those are not the set's)."""
    b = cmp.basis
    own = getattr(b, f"total_{what}", {}) if b is not None else {}
    return own.get(name, cmp.results[name].meta.get(f"n_{what}") or 0)


def _basis_line(cmp, name: str) -> str:
    """What the set holds and what its values were computed on, in one sentence."""
    line = (f"{_total(cmp, name, 'captions'):,} captions on "
            f"{_total(cmp, name, 'images'):,} images.")
    b = cmp.basis
    if b is not None and name in b.on_parent:
        parent = b.on_parent[name]
        line += (f" Filtered from `{parent}` and scored, as `{parent}`, on its "
                 f"{b.images.get(name, 0):,} images: each of the {b.dropped.get(name, 0):,} "
                 "captions the filter dropped counts as an empty caption.")
    return line


def _card_notes(cmp) -> list[str]:
    """The audit's notes that hold for a card (it marks no best or worst: one set per
    section, each on all its own images)."""
    skip = ("best/worst marked", "not marked, intervals overlap", "each set scored on all")
    return [line.removesuffix("; not ranked") for line in compare_notes(cmp)
            if not line.startswith(skip)]


def _metric_table(cmp, name: str) -> list[str]:
    rows = ["| metric | value | 95% interval | n (images) | status |",
            "|---|---:|---:|---:|---|"]
    for m in cmp.metrics:
        r = cmp.result(name, m)
        if r is None:
            continue
        if r.skipped:
            rows.append(f"| {label(m)} | – | – | – | {r.state} |")
            continue
        value = value_text(m, r, ci=False, n=False)
        n = "–" if r.n_images is None else f"{r.n_images:,}"
        rows.append(f"| {label(m)} | {value} | {interval_text(m, r) or '–'} | {n} | "
                    f"{short_status(r) or 'ok'} |")   # why: under Notes (status_text)
    return rows


def _coverage(cmp, name: str) -> list[str]:
    cov = cmp.results[name].meta.get("coverage") or {}
    total = cov.get("n_images") or 0
    sources = getattr(cmp.annotations, "sources", {}) or {}
    lines = []
    for kind, k in cov.get("covered", {}).items():
        share = f" ({100 * k / total:.1f}%)" if total else ""
        lines.append(f"- {KIND_LABELS.get(kind, kind)}: {k:,} of {total:,} images{share}"
                     + (f", from `{sources[kind]}`" if kind in sources else ""))
    return lines or ["- none needed by these metrics"]


def _gaps(cmp, name: str) -> list[str]:
    lines = []
    for by, d in (cmp.disparities or {}).get(name, {}).items():
        a, b = d.diff_key.split("-")
        own = (f"; on its own {_total(cmp, name, 'images'):,} images, not its parent's"
               if cmp.basis is not None and name in cmp.basis.on_parent else "")
        lines += [f"By {by} ({a} − {b}; 95% interval; n = images of the smaller group{own}):",
                  "",
                  f"| metric | {a} | {b} | {a} − {b} |", "|---|---:|---:|---:|"]
        for m, per in d.results.items():
            gap = per.get(d.diff_key)
            if gap is None or gap.value is None:
                continue
            f = number_format(m)
            whole = cmp.result(name, m)     # 0 by construction on the set: so in each group
            tag = "; ".join(t for t in (short_status(gap), short_status(whole)
                                        if whole is not None and whole.status ==
                                        "by-construction" else "") if t)
            iv = (f"[{signed(gap.ci_low, f)}, {signed(gap.ci_high, f)}] "
                  if gap.ci_low is not None and gap.ci_high is not None else "")
            lines.append(f"| {label(m)} | {value_text(m, per.get(a))} | "
                         f"{value_text(m, per.get(b))} | {signed(gap.value, f)} "
                         f"{iv}n={gap.n_images or gap.n:,}"
                         + (f" ({tag})" if tag else "") + " |")
        lines.append("")
    return lines


def _history(store, name: str) -> list[str]:
    """The chain of filters from the set back to its first parent."""
    lines, seen = [], set()
    info = store.find_set(name) if store is not None else None
    while info is not None and info.parent and info.name not in seen:
        seen.add(info.name)
        opts = {k: v for k, v in (info.options or {}).items() if v is not None and k != "filter"}
        what = (info.options or {}).get("filter") or info.format or "derived"
        lines.append(f"- `{info.name}` from `{info.parent}`: {what}"
                     + (f" ({', '.join(f'{k}={v}' for k, v in sorted(opts.items())[:8])})"
                        if opts else "") + f"; {info.n_captions:,} captions")
        info = store.find_set(info.parent)
    return lines or ["- none: the set is as it was added"]


def dataset_card(cmp, store, cfg, versions: dict, command: str) -> str:
    """The card text: ``---`` YAML ``---`` then the markdown section."""
    import yaml

    meta = yaml.safe_dump(card_metadata(cmp, cfg, versions), sort_keys=False,
                          allow_unicode=True)
    md = ["---", meta.rstrip(), "---", "", "## Audit (capaudit)", "",
          f"Values with 95% bootstrap intervals over images ({cfg.get('n_boot')} resamples, "
          f"seed {cfg.get('seed')}); n is the number of images a value rests on; a status "
          "other than ok says what to read with it.", ""]
    for n in cmp.names:
        res = cmp.results[n]
        md += [f"### {n}", "", _basis_line(cmp, n), ""]
        md += _metric_table(cmp, n) + ["", "Annotations and their coverage:", ""]
        md += _coverage(cmp, n) + [""] + _gaps(cmp, n)
        md += ["Filter history:", ""] + _history(store, n) + [""]
    md += ["### Notes", ""] + [f"- {line}" for line in _card_notes(cmp)] + [""]
    md += ["### Definitions", ""] + [f"- *{label(m)}*: {description(m)}" for m in cmp.metrics
                                     if description(m)] + [""]
    md += ["### Provenance", "", f"- command: `{command}`",
           f"- run: {cmp.run_id}" if cmp.run_id is not None else "- run: not stored",
           "- versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())), ""]
    return "\n".join(md)
