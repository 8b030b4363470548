"""The filtered set's captions as the filter judged them, and the labelled units built on them.

Why apart from the runner: reading the log back (one row per sentence, grouped by caption)
and turning each matched labelled caption into caption-level, sentence-level and graded
units is the part a reviewer checks by hand; the runner only orders the steps.

A caption counts as *flagged* when any of its sentences in the filter log has an action
other than ``keep`` (flag, revise or drop): run the filter with ``--action flag`` and every
sentence stays in the set and in the log. A sentence's *reason* is the first word of its
logged reason (``unsupported``, ``non-visual``, ``negated``, ``no-evidence``, ``no object
mention`` ...); its *evidence* is the kind the run read (``chair-gt``, ``instances``,
``detector``), ``none`` where the image had none (``no-evidence``).
"""

from __future__ import annotations

from dataclasses import dataclass

from capaudit.filters.validate.align import sentence_labels
from capaudit.filters.validate.join import Matched, SetCaption

__all__ = ["Unit", "load_captions", "load_shard_captions", "reason_class", "evidence_of",
           "build_units"]


@dataclass
class Unit:
    """One labelled caption or sentence and the filter's decision on it."""

    level: str                  # caption / sentence / graded
    image_id: str               # as the label file gives it (the bootstrap's image)
    row_idx: int
    sentence_idx: int | None
    text: str
    label: int | None
    grade: float | None
    flagged: bool
    action: str
    reason: str                 # the log's reason (a caption: its first flagged sentence's)
    evidence: str
    label_row: int
    share: float = 0.0          # graded: the share of the caption's characters not kept


def load_captions(store, parent_id: int, set_name: str, ids: set[str]) -> list[SetCaption]:
    """The rows of the run's input set whose image id or key is one of ``ids``, each with its
    logged sentences ``(sentence_idx, text, action, reason)`` in order (the log of those rows
    only)."""
    from capaudit.store.exports import caption_batches
    from capaudit.store.filter_log import log_of_rows

    out = []
    for batch in caption_batches(store, parent_id):
        for row, key, iid, cap in zip(*(batch.column(c).to_pylist() for c in
                                        ("row_idx", "image_key", "image_id", "caption"))):
            if str(key) in ids or (iid is not None and str(iid) in ids):
                out.append(SetCaption(row, iid, key, cap))
    by_row: dict[int, list] = {}
    for row, si, text, action, reason in log_of_rows(store, set_name,
                                                     [c.row_idx for c in out]):
        by_row.setdefault(row, []).append((si, text or "", action, reason or ""))
    for c in out:
        c.sentences = by_row.get(c.row_idx, [])
    return out


def load_shard_captions(info: dict, ids: set[str]) -> list[SetCaption]:
    """The captions of a ``filter run --shards`` run whose image id is one of ``ids``, read
    from its per-shard logs (the run's input shards may be gone or remote): each caption is
    its logged sentences, exact slices of it, joined by a space (the join then matches it
    with the labels' text exactly, or up to white space, and lays spans by text); its row is
    its place in the run's logs in shard order (``row_idx`` of the disagreement file).
    Shard logs carry image ids, not keys: labels are joined by id."""
    from capaudit.errors import InputError
    from capaudit.filters.logs import log_captions, shard_log_files

    if not shard_log_files(info):
        raise InputError(f"the filter run --shards ... --out {info['set_name']} has no shard "
                         "logs left", path=info["config"].get("log_dir"),
                         fix="run filter run --shards again (with --action flag)")
    keep: list[SetCaption] = []
    cols = ["shard", "row_idx", "image_id", "sentence_idx", "original", "action", "reason"]
    for n, group in enumerate(log_captions(info, cols)):   # n: its place in the run's logs
        iid = group[0][2]
        if iid is None or str(iid) not in ids:   # kept only when labels name its id
            continue
        sentences = [(si, text or "", action, reason or "")
                     for _, _, _, si, text, action, reason in group]
        keep.append(SetCaption(n, iid, None, " ".join(s[1].strip() for s in sentences),
                               sentences))
    return keep


def reason_class(reason: str) -> str:
    first = (reason or "").split(";")[0].strip()
    return first.split(":")[0].strip() or "(none)"


def evidence_of(reason: str, run_kind: str) -> str:
    return "none" if reason_class(reason) == "no-evidence" else run_kind


def _caption_unit(m: Matched, run_kind: str, level: str) -> Unit:
    sents = [s for row in m.rows for s in row.sentences]
    bad = [s for s in sents if s[2] != "keep"]
    first = bad[0] if bad else (sents[0] if sents else (0, "", "keep", ""))
    row = m.rows[0]
    total = sum(len(s[1]) for s in row.sentences)
    removed = sum(len(s[1]) for s in row.sentences if s[2] != "keep")
    lab = m.labelled
    return Unit(level, lab.image_id, row.row_idx, None, row.caption, lab.caption_label(),
                lab.grade, bool(bad), first[2], first[3] if bad else "kept",
                evidence_of(first[3], run_kind), lab.row,
                removed / total if total else 0.0)


def build_units(matched: list[Matched], levels: tuple[str, ...],
                run_kind: str) -> tuple[dict[str, list[Unit]], int]:
    """``{level: units}`` for the levels the layout allows, and the label sentences that
    were not found in their caption."""
    out: dict[str, list[Unit]] = {lv: [] for lv in levels}
    missing = 0
    for m in matched:
        for lv in ("caption", "graded"):
            if lv in out:
                unit = _caption_unit(m, run_kind, lv)
                if (lv == "caption" and unit.label is not None) or \
                        (lv == "graded" and unit.grade is not None):
                    out[lv].append(unit)
        if "sentence" not in out:
            continue
        labels, miss = sentence_labels(m)
        missing += miss
        row = m.rows[0]
        for (si, text, action, reason), label in zip(row.sentences, labels):
            if label is None:
                continue
            out["sentence"].append(Unit("sentence", m.labelled.image_id, row.row_idx, si,
                                        text, label, None, action != "keep", action,
                                        reason, evidence_of(reason, run_kind),
                                        m.labelled.row))
    return out, missing
