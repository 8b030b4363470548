"""The audit as a Hugging Face dataset-card section (``capaudit audit card``).

Why: a cleaned dataset is published with a card, and what the card says about the data is
what its users will believe. This writes the audit's part of one: YAML metadata
(machine-read: every value with its interval, n and status) and markdown for people (the
same values through :mod:`capaudit.metrics.present`, the annotations and how much of each
set they cover, gaps by group, what each filter removed, the independent score of a
circular value, provenance), all from the same result objects as the terminal and the
report, so the card cannot say more than the audit does. It names no local path: an
annotation is named by what it is and its sha256, a filter's evidence the same way, the
command without ``--db`` and with file names only. :mod:`capaudit.report.card_file` merges
it into the dataset's own card.
"""

from __future__ import annotations

from typing import Any

from capaudit.metrics.present import interval_text, short_status, signed, value_text
from capaudit.metrics.spec import description, label, number_format
from capaudit.audit.result_status import UNRANKED
from capaudit.report.cells import notes as compare_notes

__all__ = ["dataset_card", "card_metadata", "annotation_identities", "public_command"]

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


def annotation_identities(store, sources: dict) -> dict[str, dict]:
    """``{kind: {"what", "sha256"}}`` of the annotations an audit read (no path, no store
    name: what they are and their content's hash)."""
    from capaudit.io.annotation_store import source_sha256

    return {k: {"what": KIND_LABELS.get(k, k), "sha256": source_sha256(store, src)}
            for k, src in (sources or {}).items()}


def _named(ident: dict) -> str:
    sha = ident.get("sha256")
    return f"{ident['what']} (sha256 `{sha}`)" if sha else f"{ident['what']} (given in Python)"


def card_metadata(cmp, cfg, versions: dict, idents: dict | None = None) -> dict[str, Any]:
    """The YAML block: what a tool reading the card needs, nothing rounded."""
    sets = {}
    for n in cmp.names:
        res = cmp.results[n]
        sets[n] = {"captions": _total(cmp, n, "captions"), "images": _total(cmp, n, "images")}
        b = cmp.basis
        if b is not None and n in b.on_parent:
            sets[n].update(scored_on_parent=b.on_parent[n], scored_images=b.images.get(n))
        sets[n]["metrics"] = {m: _record(r) for m, r in res.results.items()}
        if getattr(cmp, "validations", {}).get(n):   # filter validate: against human labels
            sets[n]["filter_validations"] = [_validation(v) for v in cmp.validations[n]]
    return {"capaudit_audit": {"version": versions.get("capaudit"), "run_id": cmp.run_id,
                               "n_boot": cfg.get("n_boot"), "seed": cfg.get("seed"),
                               "min_n": cfg.get("min_n"), "mode": cfg.get("mode"),
                               "annotations": dict(idents or {}), "sets": sets}}


def _validation(v: dict) -> dict[str, Any]:
    """A stored ``filter validate`` as the YAML holds it: the labels by file name and sha256,
    the status, the matching, and each level's values with their n and interval."""
    r = v["result"]
    keep = ("precision", "recall", "f1", "n", "n_precision", "n_recall", "n_images", "counts",
            "ci", "spearman")
    return {"labels": v["labels"], "labels_sha256": v["labels_sha256"], "layout": v["layout"],
            "status": v["status"], "matched": v["matching"].get("matched"),
            "labelled_captions": v["matching"].get("labelled_captions"),
            **{lv: {k: r[lv][k] for k in keep if k in r[lv]}
               for lv in ("caption", "sentence", "graded") if lv in r}}


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
    section, each on all its own images; the annotations are listed by hash instead)."""
    skip = ("best/worst marked", "not marked, intervals overlap", "each set scored on all",
            "annotations: ")
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


def _coverage(cmp, name: str, idents: dict) -> list[str]:
    cov = cmp.results[name].meta.get("coverage") or {}
    total = cov.get("n_images") or 0
    lines = []
    for kind, k in cov.get("covered", {}).items():
        share = f" ({100 * k / total:.1f}%)" if total else ""
        sha = (idents.get(kind) or {}).get("sha256")
        lines.append(f"- {KIND_LABELS.get(kind, kind)}: {k:,} of {total:,} images{share}"
                     + (f", sha256 `{sha}`" if sha else ""))
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
            whole = cmp.result(name, m)     # by construction / circular on the set: so
            tag = "; ".join(t for t in (short_status(gap), whole.status.replace("-", " ")
                                        if whole is not None and whole.status in UNRANKED
                                        else "") if t)   # in each group
            iv = (f"[{signed(gap.ci_low, f)}, {signed(gap.ci_high, f)}] "
                  if gap.ci_low is not None and gap.ci_high is not None else "")
            lines.append(f"| {label(m)} | {value_text(m, per.get(a))} | "
                         f"{value_text(m, per.get(b))} | {signed(gap.value, f)} "
                         f"{iv}n={gap.n_images or gap.n:,}"
                         + (f" ({tag})" if tag else "") + " |")
        lines.append("")
    return lines


def dataset_card(cmp, store, cfg, versions: dict, command: str) -> tuple[dict, str]:
    """``(YAML metadata, the markdown section)`` of the audit (the section without the
    markers :mod:`capaudit.report.card_file` puts around it)."""
    from capaudit.report.card_parts import filtering, history

    idents = annotation_identities(store, getattr(cmp.annotations, "sources", {}))
    md = ["## Audit (capaudit)", "",
          f"Values with 95% bootstrap intervals over images ({cfg.get('n_boot')} resamples, "
          f"seed {cfg.get('seed')}); n is the number of images a value rests on; a status "
          "other than ok says what to read with it (`circular`: scored with the evidence "
          "the set's filter used, its independent score beside it).", ""]
    for n in cmp.names:
        md += [f"### {n}", "", _basis_line(cmp, n), ""]
        md += _metric_table(cmp, n) + ["", "Annotations and their coverage:", ""]
        md += _coverage(cmp, n, idents) + [""] + _gaps(cmp, n)
        md += filtering(cmp, store, n)
        md += ["Filter history:", ""] + history(store, n) + [""]
    md += ["### Notes", ""] + [f"- {line}" for line in _card_notes(cmp)] + [""]
    md += ["### Definitions", ""] + [f"- *{label(m)}*: {description(m)}" for m in cmp.metrics
                                     if description(m)] + [""]
    md += ["### Provenance", "", f"- command: `{public_command(command)}`",
           f"- run: {cmp.run_id}" if cmp.run_id is not None else "- run: not stored"]
    md += [f"- annotations: {_named(i)}" for i in idents.values()]
    md += ["- versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())), ""]
    return card_metadata(cmp, cfg, versions, idents), "\n".join(md)


# options whose value is a file: only its name is written
_PATH_OPTIONS = ("--out", "--chair-gt", "--instances", "--demographics", "--config",
                 "--profiles-file", "--lic-reference", "--reference", "--clip-model", "--images")


def public_command(command: str) -> str:
    """The command as a card may show it: no ``--db`` (a local store), and only the file
    name of every path given (an option's value or a caption file named as a set)."""
    import shlex
    from pathlib import PurePath

    words, out, skip = shlex.split(command), [], False
    for n, w in enumerate(words):
        if skip:
            skip = False
            continue
        opt, eq, val = w.partition("=")
        if opt == "--db":
            skip = not eq
            continue
        prev = words[n - 1] if n else ""
        if eq and opt in _PATH_OPTIONS:
            w = f"{opt}={PurePath(val).name}"
        elif prev in _PATH_OPTIONS or ("/" in w and not w.startswith("-")):
            w = PurePath(w).name
        out.append(shlex.quote(w))
    return " ".join(out)
