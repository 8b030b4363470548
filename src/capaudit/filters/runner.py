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
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.store import filter_log as _log
from capaudit.filters.base import FILTERS, CaptionDoc, Filter, FilterContext, FilterSummary
from capaudit.filters.stream import BATCH_CAPTIONS, LOG_SCHEMA, FilteredBatch, filter_batches

__all__ = ["run_filter", "apply_filter", "ensure_tables", "read_log", "log_counts",
           "filter_run_info", "FilterOutput", "write_filtered_set", "iter_docs"]

_OUT_SCHEMA = pa.schema([("image_key", pa.string()), ("image_id", pa.int64()),
                         ("caption", pa.string()), ("meta", pa.string())])


ensure_tables = _log.ensure_tables  # DDL in capaudit.store.schema; older stores may lack them


@dataclass
class FilterOutput:
    """Everything a run produced, held in memory (:func:`apply_filter`: small sets, tests)."""

    captions: pa.Table       # image_key, image_id, caption, meta
    log: dict[str, list]     # columns of filter_log (without set_name / run_id)
    summary: FilterSummary


def _meta(meta) -> dict:
    try:
        m = json.loads(meta) if meta else {}
    except (TypeError, ValueError):
        m = {}
    return m if isinstance(m, dict) else {}


def iter_docs(store, set_name: str, batch_rows: int = BATCH_CAPTIONS) -> Iterator[CaptionDoc]:
    """The set's captions in row order, read in row ranges (8 x ``batch_rows``: few queries)
    and turned into Python objects ``batch_rows`` at a time (never the whole set)."""
    for chunk in _log.caption_stream(store, store.get_set(set_name).set_id, 8 * batch_rows):
        for start in range(0, chunk.num_rows, batch_rows):
            cols = chunk.slice(start, batch_rows).to_pydict()
            for r, key, iid, cap, meta in zip(cols["row_idx"], cols["image_key"],
                                              cols["image_id"], cols["caption"], cols["meta"]):
                yield CaptionDoc(int(r), iid, cap or "", key, _meta(meta))


def _output_rows(filter_name: str, fb: FilteredBatch) -> pa.Table:
    """The kept captions of one batch as output rows (meta: the parent's, the parent row,
    the filter, any flags)."""
    out = {k: [] for k in ("image_key", "image_id", "caption", "meta")}
    for res in fb.results:
        if not res.kept:
            continue
        doc = res.doc
        meta = {**doc.meta, **res.meta, "parent_row": doc.row_idx, "filter": filter_name}
        flags = [d.reason for d in res.decisions if d.action == "flag"]
        if flags:
            meta["flags"] = flags
        out["image_key"].append(doc.image_key)
        out["image_id"].append(doc.image_id)
        out["caption"].append(res.text())
        out["meta"].append(json.dumps(meta, default=str))
    return pa.Table.from_pydict(out, schema=_OUT_SCHEMA)


def apply_filter(filt: Filter, docs: Iterable[CaptionDoc]) -> FilterOutput:
    """Run ``filt`` over ``docs`` (no store writes), everything kept in memory: for small
    inputs and tests; :func:`run_filter` streams."""
    filt.setup()
    summary = FilterSummary(filt.name)
    tables, log = [], {k: [] for k in LOG_SCHEMA.names if k not in ("set_name", "run_id")}
    for fb in filter_batches(filt, docs, summary):
        tables.append(_output_rows(filt.name, fb))
        for k in log:
            log[k] += fb.log.cols[k]
    return FilterOutput(pa.concat_tables(tables) if tables else _OUT_SCHEMA.empty_table(),
                        log, summary)


def _check_out(store, parent: str, out_name: str, replace: bool) -> None:
    if out_name == parent:
        raise InputError("--out must differ from the input set", fix="choose a new name")
    if store.find_set(out_name) is not None and not replace:
        raise InputError(f"a caption set named '{out_name}' already exists",
                         fix="choose another --out name or pass --replace")


def write_filtered_set(store, parent: str, out_name: str, output: FilterOutput, *,
                       filter_name: str, version: str, config: Mapping[str, Any],
                       run_id: int | None = None, replace: bool = False):
    """Register an in-memory output set and its log atomically; returns the new set's info."""
    n = len(output.log["row_idx"])
    log_cols = {"set_name": [out_name] * n, "run_id": [run_id] * n, **output.log}
    log_tbl = pa.Table.from_pydict({f.name: log_cols[f.name] for f in LOG_SCHEMA},
                                   schema=LOG_SCHEMA)
    _check_out(store, parent, out_name, replace)
    with _new_set(store, parent, out_name, filter_name, config) as (con, set_id):
        store.append_captions(set_id, output.captions, 0)
        _log.append_log(con, log_tbl)
        _finish_set(store, con, set_id, parent, out_name, filter_name, version, config,
                    run_id, output.summary)
    return store.get_set(out_name)


@contextmanager
def _new_set(store, parent, out_name, filter_name, config):
    """The output set created inside a bulk transaction (an earlier one of that name
    dropped: the caller checked ``replace``): ``with _new_set(...) as (con, set_id)``."""
    ensure_tables(store.con)
    with store.bulk_transaction() as con:
        if store.find_set(out_name) is not None:
            store.delete_set(out_name)
        _log.clear_log(con, out_name)
        yield con, store.create_set(out_name, source_path=f"filter:{filter_name}",
                                    format="filter", sha256=None, parent=parent,
                                    options=dict(config))


def _finish_set(store, con, set_id, parent, out_name, filter_name, version, config, run_id,
                summary: FilterSummary) -> None:
    store.update_set_meta(set_id, {"filter": filter_name, "version": version,
                                   "config": dict(config), "summary": summary.as_dict()})
    store.finalize_set(set_id)
    _log.insert_run(con, out_name, [parent, filter_name, version, run_id,
                                    json.dumps(dict(config), default=str), summary.to_json()])


def _scoring(store, score_evidence):
    if score_evidence is None:
        return None
    from capaudit.filters.evidence import resolve_evidence

    kind = score_evidence[0]   # loaded first: a bad file fails before the filter runs
    return (kind, *resolve_evidence(kind, score_evidence[1], store))


def run_filter(store, set_name: str, filter_name: str, options: Mapping[str, Any] | None = None,
               out: str | None = None, *, replace: bool = False, run_id: int | None = None,
               tick: Callable[[int], None] | None = None,
               score_evidence: tuple[str, str | None] | None = None):
    """Filter a stored set into ``out``, streaming: the set is read, filtered and written
    (new captions, log rows) in batches inside one transaction, so memory does not grow
    with the set. Returns ``(SetInfo, FilterSummary)``.

    ``score_evidence`` (``(kind, file or stored source)``) scores the set before
    and after with that evidence (:class:`capaudit.filters.rescore.IndependentTally`);
    the result is stored in the summary as ``independent``.
    """
    if not out:
        raise InputError("no output set name", fix="pass --out NEWSET")
    store.get_set(set_name)  # clear error for an unknown input set
    _check_out(store, set_name, out, replace)
    from capaudit.filters.options import make_filter

    filt = make_filter(filter_name, options or {})
    scoring = _scoring(store, score_evidence)
    filt.setup(FilterContext(store, set_name))
    tally = None
    if scoring is not None:
        from capaudit.filters.rescore import IndependentTally

        tally = IndependentTally(*scoring)
    summary = FilterSummary(filt.name)
    config = filt.config()
    with _new_set(store, set_name, out, filt.name, config) as (con, set_id):
        start = 0
        for fb in filter_batches(filt, iter_docs(store, set_name), summary, tick=tick):
            rows = _output_rows(filt.name, fb)
            start += store.append_captions(set_id, rows, start)
            _log.append_log(con, fb.log.table(out, run_id))
            if tally is not None:
                _tally(tally, fb, rows)
        if tally is not None:
            used = summary.extra.get("evidence") or {}
            summary.extra["independent"] = tally.result(used.get("kind"), used.get("source"))
        _finish_set(store, con, set_id, set_name, out, filt.name, filt.version, config,
                    run_id, summary)
    return store.get_set(out), summary


def _tally(tally, fb: FilteredBatch, rows: pa.Table) -> None:
    texts = iter(rows.column("caption").to_pylist())
    for res, new_row in zip(fb.results, fb.new_rows):
        after = None if new_row is None else CaptionDoc(new_row, res.doc.image_id, next(texts))
        tally.add(res.doc, after)


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

    opts = filter_options(filter_name, given, config, overrides, seed)
    seed = opts.get("seed", seed)   # --filter.seed: the run records the seed the filter used
    scoring = None
    if score_evidence:
        from capaudit.filters.evidence import evidence_files
        from capaudit.filters.rescore import parse_score_evidence

        scoring = parse_score_evidence(score_evidence, evidence_files(opts))
    store.get_set(set_name)
    cfg = {"command": "filter run", "set": set_name, "out": out, "filter": filter_name,
           "version": FILTERS.version(filter_name), "options": opts,
           "score_evidence": list(scoring) if scoring else None,
           **({"chosen": opts.chosen} if opts.chosen else {})}
    with recorded_run(store, cfg, seed) as run_id:
        return run_filter(store, set_name, filter_name, opts, out, replace=replace,
                          run_id=run_id, tick=tick, score_evidence=scoring)


# reading back: capaudit.filters.logs (re-exported: the CLI and review import them from here)
from capaudit.filters.logs import filter_run_info, log_counts, read_log  # noqa: E402
