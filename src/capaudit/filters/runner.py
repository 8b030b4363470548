"""Run a filter over a stored caption set: new set + sentence-level log, in one transaction.

The output set is registered with its parent's name (``caption_sets.parent``),
so ``capaudit audit compare PARENT NEWSET`` can show what the filter bought
and what it cost. Two tables (DDL in :mod:`capaudit.store.schema`, SQL in
:mod:`capaudit.store.filter_log`) hold the provenance of every filtered set:

``filter_log``
    one row per *input sentence*: ``set_name`` (the output set),
    ``row_idx`` (the parent's row), ``new_row_idx`` (the output row, NULL when
    the caption left the set), ``image_id``, ``sentence_idx``, ``action``
    (keep / flag / revise / drop), ``reason``, ``original`` and ``revised``
    text (the original sentence of every row, kept ones too, so the log
    alone shows what a filter judged and how), ``critique``, ``score``.
    Hence ``count(*) = kept + dropped`` by construction, and
    :func:`log_counts` checks it from the table itself.
``filter_runs``
    one row per output set: parent, filter name and version, run id, the
    resolved options and the summary (counts, reasons, filter report).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.store import filter_log as _log
from capaudit.filters.base import (FILTERS, KEPT_ACTIONS, CaptionDoc, CaptionResult, Filter,
                                   FilterContext, FilterSummary)

__all__ = ["run_filter", "apply_filter", "ensure_tables", "read_log", "log_counts",
           "filter_run_info", "FilterOutput", "write_filtered_set"]

_LOG_SCHEMA = pa.schema([("set_name", pa.string()), ("filter", pa.string()),
                         ("run_id", pa.int32()), ("row_idx", pa.int64()),
                         ("new_row_idx", pa.int64()), ("image_id", pa.int64()),
                         ("sentence_idx", pa.int32()), ("action", pa.string()),
                         ("reason", pa.string()), ("original", pa.string()),
                         ("revised", pa.string()), ("critique", pa.string()),
                         ("score", pa.float64())])
_OUT_SCHEMA = pa.schema([("image_key", pa.string()), ("image_id", pa.int64()),
                         ("caption", pa.string()), ("meta", pa.string())])


ensure_tables = _log.ensure_tables  # DDL in capaudit.store.schema; older stores may lack them


@dataclass
class FilterOutput:
    """Everything a run produced, before it is written."""

    captions: pa.Table       # image_key, image_id, caption, meta
    log: dict[str, list]     # columns of filter_log (without set_name / run_id)
    summary: FilterSummary


def load_docs(store, set_name: str) -> list[CaptionDoc]:
    tbl = store.captions(set_name, columns="row_idx, image_key, image_id, caption, meta")
    cols = tbl.to_pydict()
    docs = []
    for r, key, iid, cap, meta in zip(cols["row_idx"], cols["image_key"], cols["image_id"],
                                      cols["caption"], cols["meta"]):
        try:
            m = json.loads(meta) if meta else {}
        except (TypeError, ValueError):
            m = {}
        docs.append(CaptionDoc(int(r), iid, cap or "", key, m if isinstance(m, dict) else {}))
    return docs


def apply_filter(filt: Filter, docs: list[CaptionDoc], context: FilterContext | None = None,
                 tick: Callable[[int], None] | None = None) -> FilterOutput:
    """Run ``filt`` over ``docs`` (no store writes); returns the new captions, log and summary."""
    filt.setup(context)
    summary = FilterSummary(filt.name)
    out = {k: [] for k in ("image_key", "image_id", "caption", "meta")}
    log = {k: [] for k in ("filter", "row_idx", "new_row_idx", "image_id", "sentence_idx",
                           "action", "reason", "original", "revised", "critique", "score")}
    results: Iterator[CaptionResult] = filt.apply(docs)
    for n, res in enumerate(results, 1):
        doc = res.doc
        if len(res.decisions) != len(doc.spans):
            raise AssertionError(f"filter {filt.name} decided {len(res.decisions)} sentences of "
                                 f"row {doc.row_idx}, which has {len(doc.spans)}")
        summary.add(res)
        new_row = None
        if res.kept:
            new_row = len(out["caption"])
            meta = {**doc.meta, **res.meta, "parent_row": doc.row_idx, "filter": filt.name}
            flags = [d.reason for d in res.decisions if d.action == "flag"]
            if flags:
                meta["flags"] = flags
            out["image_key"].append(doc.image_key)
            out["image_id"].append(doc.image_id)
            out["caption"].append(res.text())
            out["meta"].append(json.dumps(meta, default=str))
        sents = doc.sentences
        for d in res.decisions:
            log["filter"].append(filt.name)
            log["row_idx"].append(doc.row_idx)
            log["new_row_idx"].append(new_row)
            log["image_id"].append(doc.image_id)
            log["sentence_idx"].append(d.sentence_idx)
            log["action"].append(d.action)
            log["reason"].append(d.reason or None)
            log["original"].append(sents[d.sentence_idx])
            log["revised"].append(d.revised)
            log["critique"].append(d.critique)
            log["score"].append(None if d.score is None else float(d.score))
        if tick is not None and n % 1000 == 0:
            tick(1000)
    summary.extra.update(getattr(filt, "report", {}) or {})
    summary.check()
    return FilterOutput(pa.Table.from_pydict(out, schema=_OUT_SCHEMA), log, summary)


def write_filtered_set(store, parent: str, out_name: str, output: FilterOutput, *,
                       filter_name: str, version: str, config: Mapping[str, Any],
                       run_id: int | None = None, replace: bool = False):
    """Register the output set and its log atomically; returns the new set's info."""
    ensure_tables(store.con)
    n = len(output.log["row_idx"])
    log_cols = {"set_name": [out_name] * n, "run_id": [run_id] * n, **output.log}
    log_tbl = pa.Table.from_pydict({f.name: log_cols[f.name] for f in _LOG_SCHEMA},
                                   schema=_LOG_SCHEMA)
    meta = {"filter": filter_name, "version": version, "config": dict(config),
            "summary": output.summary.as_dict()}
    if out_name == parent:
        raise InputError("--out must differ from the input set", fix="choose a new name")
    with store.transaction() as con:
        if store.find_set(out_name) is not None:
            if not replace:
                raise InputError(f"a caption set named '{out_name}' already exists",
                                 fix="choose another --out name or pass --replace")
            store.delete_set(out_name)
        set_id = store.create_set(out_name, source_path=f"filter:{filter_name}", format="filter",
                                  sha256=None, parent=parent, options=dict(config), meta=meta)
        store.append_captions(set_id, output.captions, 0)
        store.finalize_set(set_id)
        _log.replace_log(con, out_name, log_tbl, [
            parent, filter_name, version, run_id, json.dumps(dict(config), default=str),
            output.summary.to_json()])
    return store.get_set(out_name)


def run_filter(store, set_name: str, filter_name: str, options: Mapping[str, Any] | None = None,
               out: str | None = None, *, replace: bool = False, run_id: int | None = None,
               filt: Filter | None = None, tick: Callable[[int], None] | None = None,
               score_evidence: tuple[str, str | None] | None = None):
    """Filter a stored set into ``out``; returns ``(SetInfo, FilterSummary)``.

    ``score_evidence`` (``(kind, file or stored source)``) scores the set before
    and after with that evidence (:func:`capaudit.filters.rescore.independent_chair`);
    the result is stored in the summary as ``independent``.
    """
    if not out:
        raise InputError("no output set name", fix="pass --out NEWSET")
    store.get_set(set_name)  # clear error for an unknown input set
    if filt is None:
        cls = FILTERS.get(filter_name)
        filt = cls(**{k: v for k, v in dict(options or {}).items() if v is not None})
    scoring = None
    if score_evidence is not None:
        from capaudit.filters.evidence import resolve_evidence
        from capaudit.filters.rescore import independent_chair

        kind = score_evidence[0]   # loaded first: a bad file fails before the filter runs
        scoring = (kind, *resolve_evidence(kind, score_evidence[1], store))
    docs = load_docs(store, set_name)
    output = apply_filter(filt, docs, FilterContext(store, set_name), tick)
    if scoring is not None:
        used = output.summary.extra.get("evidence") or {}
        after = [CaptionDoc(i, iid, cap) for i, (iid, cap) in enumerate(zip(
            output.captions.column("image_id").to_pylist(),
            output.captions.column("caption").to_pylist()))]
        output.summary.extra["independent"] = independent_chair(
            docs, after, *scoring, filter_kind=used.get("kind"),
            filter_source=used.get("source"))
    info = write_filtered_set(store, set_name, out, output, filter_name=filt.name,
                              version=filt.version, config=filt.config(), run_id=run_id,
                              replace=replace)
    return info, output.summary


def filter_set(store, set_name: str, filter_name: str, out: str, given: Mapping[str, Any],
               *, config: str | Path | None = None, seed: int = 0, replace: bool = False,
               score_evidence: str | None = None, tick: Callable[[int], None] | None = None,
               overrides: Mapping[str, str] | list[tuple[str, str]] | None = None):
    """Resolve ``given`` options (defaults < YAML < given < ``overrides``, the raw
    ``--filter.KEY VALUE`` strings), record a run and filter ``set_name`` into ``out``;
    returns ``(SetInfo, FilterSummary)``.

    The one path of ``capaudit filter run`` and :meth:`capaudit.api.AuditStore.filter`.
    """
    from capaudit.core.runs import recorded_run
    from capaudit.filters.options import filter_options

    given = dict(given)
    if "seed" in FILTERS.get(filter_name).defaults:  # the run's seed, for filters that draw
        given["seed"] = seed
    opts = filter_options(filter_name, given, config, overrides)
    seed = opts.get("seed", seed)   # --filter.seed: the run records the seed the filter used
    scoring = None
    if score_evidence:
        from capaudit.filters.rescore import parse_score_evidence

        scoring = parse_score_evidence(score_evidence, {
            "chair-gt": opts.get("chair_gt"), "instances": opts.get("instances"),
            "detector": opts.get("detections")})
    store.get_set(set_name)
    cfg = {"command": "filter run", "set": set_name, "out": out, "filter": filter_name,
           "version": FILTERS.version(filter_name), "options": opts,
           "score_evidence": list(scoring) if scoring else None}
    with recorded_run(store, cfg, seed) as run_id:
        return run_filter(store, set_name, filter_name, opts, out, replace=replace,
                          run_id=run_id, tick=tick, score_evidence=scoring)


# -- reading back ------------------------------------------------------------------
_has_tables = _log.has_tables


def filter_run_info(store, set_name: str) -> dict | None:
    """The ``filter_runs`` row of an output set (None when it is not a filtered set)."""
    if not _has_tables(store):
        return None
    row = _log.run_row(store, set_name)
    if row is None:
        return None
    p, f, v, r, c, s, t = row
    return {"set_name": set_name, "parent": p, "filter": f, "version": v, "run_id": r,
            "config": json.loads(c) if c else {}, "summary": json.loads(s) if s else {},
            "created_at": t}


def read_log(store, set_name: str, actions: tuple[str, ...] | None = ("flag", "revise", "drop"),
             limit: int | None = None) -> pa.Table:
    """Log rows of ``set_name`` (default: everything but plain keeps)."""
    if not _has_tables(store):
        return pa.Table.from_pylist([], schema=_LOG_SCHEMA)
    return _log.log_rows(store, set_name, actions, limit)


def log_counts(store, set_name: str) -> dict:
    """Counts recomputed from the stored log; ``ok`` says whether in = kept + dropped."""
    if not _has_tables(store):
        return {}
    by = _log.action_counts(store, set_name)
    n_in = sum(by.values())
    kept = sum(by.get(a, 0) for a in KEPT_ACTIONS)
    dropped = by.get("drop", 0)
    caps = _log.caption_counts(store, set_name)
    out = {"sentences_in": n_in, "kept": kept, "dropped": dropped, "actions": by,
           "captions_in": int(caps[0]), "captions_out": int(caps[1])}
    ok = n_in == kept + dropped and set(by) <= set(KEPT_ACTIONS) | {"drop"}
    info = store.find_set(set_name)
    if info is not None:  # the log must also agree with the stored sets
        ok = ok and info.n_captions == out["captions_out"]
        parent = store.find_set(info.parent) if info.parent else None
        if parent is not None:
            ok = ok and parent.n_captions == out["captions_in"]
    out["ok"] = ok
    return out
