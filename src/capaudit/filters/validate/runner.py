"""``capaudit filter validate LABELS --set NEWSET``: a filter run's decisions against human labels.

The steps: read the labels (:func:`capaudit.io.labels.read_labels`, the layout given or
sniffed); read the filter run of NEWSET (``filter_runs``) and its input set's captions with
their logged sentences (:mod:`.units`); join (:mod:`.join`: how many matched, why the rest
did not; too few is refused in one line); lay the labels on the filter's sentences
(:mod:`.align`); count and bootstrap (:mod:`.scores`); store the validation in one
transaction (``filter_validations``, ``filter_validation_units``), then write ``--json`` and
``--disagreements``. Every output target is checked before anything is read or stored, so a
refused command stores nothing and writes nothing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from capaudit.errors import InputError
from capaudit.filters.validate.join import CONFLICTS, check_enough, match_labels
from capaudit.filters.validate.scores import (N_BOOT, breakdown, graded_scores, level_scores)
from capaudit.filters.validate.units import (Unit, build_units, load_captions,
                                             load_shard_captions, reason_class)

__all__ = ["validate_filter", "disagreement_rows"]


def _run(store, set_name: str) -> dict:
    """The filter run that wrote ``set_name``: a filtered set, or the ``--out`` of a
    ``filter run --shards`` run (as ``filter log`` finds it)."""
    from capaudit.filters.logs import filter_run_info, sharded_run

    sharded = sharded_run(store, set_name) if store.find_set(set_name) is None else None
    if sharded is not None:
        return sharded
    store.get_set(set_name)
    info = filter_run_info(store, set_name)
    if info is None:
        raise InputError(f"set '{set_name}' was not made by filter run on a registered set",
                         fix=f"capaudit filter run SET --filter hallucination --action flag "
                             f"--out {set_name}, then validate --set {set_name}")
    if store.find_set(info["parent"]) is None:
        raise InputError(f"the input set '{info['parent']}' of '{set_name}' is gone",
                         fix="filter a registered set again, then validate its output")
    return info


def _run_kind(info: dict) -> str:
    ev = (info.get("summary") or {}).get("evidence") or {}
    return str(ev.get("kind") or info.get("config", {}).get("evidence") or info["filter"])


def _scores(units: dict[str, list[Unit]], n_boot: int, seed: int) -> dict:
    out: dict = {}
    for level, us in units.items():
        if not us:
            continue
        groups = [u.image_id for u in us]
        if level == "graded":
            out["graded"] = graded_scores([u.share for u in us], [u.grade for u in us],
                                          groups, n_boot, seed)
            continue
        labels, flagged = [u.label for u in us], [u.flagged for u in us]
        out[level] = level_scores(labels, flagged, groups, n_boot, seed)
        out[level]["by_reason"] = breakdown(labels, flagged, [reason_class(u.reason)
                                                              for u in us])
        out[level]["by_evidence"] = breakdown(labels, flagged, [u.evidence for u in us])
    return out


def disagreement_rows(units: dict[str, list[Unit]]) -> list[dict]:
    """Every labelled unit where the filter and the people disagree, as a reviewer reads it:
    ``missed`` (hallucinated, kept) or ``false-flag`` (faithful, flagged)."""
    out = []
    for level in ("sentence", "caption"):
        for u in units.get(level, []):
            if bool(u.label) == u.flagged:
                continue
            out.append({"level": level, "kind": "missed" if u.label else "false-flag",
                        "image_id": u.image_id, "row_idx": u.row_idx,
                        "sentence_idx": u.sentence_idx, "label": u.label,
                        "action": u.action, "reason": u.reason, "evidence": u.evidence,
                        "label_row": u.label_row, "text": u.text})
    return out


def _unit_columns(units: dict[str, list[Unit]], set_name: str, sha: str,
                  layout: str) -> dict[str, list]:
    """The units as ``filter_validation_units``' columns."""
    from capaudit.store.validations import UNIT_COLUMNS

    flat = [(lv, u) for lv, us in units.items() for u in us]
    n = len(flat)
    cols = {"set_name": [set_name] * n, "labels_sha256": [sha] * n, "layout": [layout] * n,
            "level": [lv for lv, _ in flat]}
    cols["image_id"] = [int(u.image_id) if u.image_id.isdigit() and len(u.image_id) < 19
                        else None for _, u in flat]
    for name, _ in UNIT_COLUMNS:
        if name not in cols:
            cols[name] = [getattr(u, name) for _, u in flat]
    return cols


def _write_disagreements(path, rows: list[dict]) -> None:
    import csv
    import json

    from capaudit.core.safe_write import atomic_open

    cols = ["level", "kind", "image_id", "row_idx", "sentence_idx", "label", "action",
            "reason", "evidence", "label_row", "text"]
    with atomic_open(path, "w", newline="") as f:
        if str(path).lower().endswith((".csv", ".tsv")):
            w = csv.DictWriter(f, cols, delimiter="\t" if str(path).endswith(".tsv") else ",")
            w.writeheader()
            w.writerows(rows)
        else:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")


def validate_filter(store, labels: str | Path, set_name: str, *, layout: str | None = None,
                    conflicts: str | None = None, allow_few: bool = False,
                    n_boot: int = N_BOOT, seed: int = 0, json_out: str | Path | None = None,
                    disagreements: str | Path | None = None) -> dict:
    """Validate the filter run that wrote ``set_name`` against the labels in ``labels``;
    store it and return the result (``{"status", "matching", "caption", "sentence",
    "graded", ...}``, the levels the labels allow)."""
    from capaudit.core.runs import recorded_run
    from capaudit.core.safe_write import check_file_target
    from capaudit.io.labels import read_labels
    from capaudit.store.validations import replace_validation

    for target in (json_out, disagreements):
        if target is not None:
            check_file_target(target)
    if conflicts is not None and conflicts not in CONFLICTS:
        raise InputError(f"--conflicts {conflicts}", fix=f"one of {', '.join(CONFLICTS)}")
    info = _run(store, set_name)
    reader, rows = read_labels(labels, layout)
    ids = {r.image_id.strip() for r in rows} | {r.image_id.strip().lstrip("0") or "0"
                                                for r in rows if r.image_id.strip().isdigit()}
    if info["config"].get("log_dir"):   # a sharded run: its captions from its shard logs
        set_name = info["set_name"]
        captions = load_shard_captions(info, ids)
    else:
        captions = load_captions(store, store.get_set(info["parent"]).set_id, set_name, ids)
    matching = match_labels(rows, captions, conflicts or reader.repeats, labels)
    status = check_enough(matching, labels, allow_few)
    units, missing = build_units(matching.matched, reader.levels, _run_kind(info))
    match = {**matching.as_dict(), "sentence_not_in_caption": missing}
    sha = hashlib.sha256(Path(labels).read_bytes()).hexdigest()
    result = {"status": status, "set": set_name, "parent": info["parent"],
              "filter": info["filter"], "filter_run_id": info["run_id"],
              "evidence": _run_kind(info),
              "labels": Path(labels).name, "labels_sha256": sha, "layout": reader.name,
              "matching": match, **_scores(units, n_boot, seed)}
    with recorded_run(store, {"command": "filter validate", "set": set_name,
                              "labels": str(labels), "layout": reader.name,
                              "n_boot": n_boot}, seed) as run_id:
        result["run_id"] = run_id
        with store.transaction() as con:
            replace_validation(con, {"set_name": set_name, "labels": Path(labels).name,
                                     "labels_sha256": sha, "layout": reader.name,
                                     "status": status, "run_id": run_id,
                                     "matching": match, "result": result},
                               _unit_columns(units, set_name, sha, reader.name))
    if json_out is not None:
        import json

        from capaudit.core.safe_write import write_text

        write_text(json_out, json.dumps(result, indent=2, default=str) + "\n")
    if disagreements is not None:
        _write_disagreements(disagreements, disagreement_rows(units))
    result["disagreements"] = len(disagreement_rows(units))
    return result
