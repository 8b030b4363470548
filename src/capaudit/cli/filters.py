"""``capaudit filter`` (run, log, list) and ``capaudit review`` (export, import).

Thin wrappers over :mod:`capaudit.filters.runner` and :mod:`capaudit.filters.review`.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from capaudit.cli import options as opt
from capaudit.cli.common import (DbOption, console, deprecated_spelling, open_store, progress,
                                 recorded_run, refuse_shard_options)
from capaudit.cli.filter_summary import _print_summary
from capaudit.cli.filter_flags import (OVERRIDES_HELP, OverridesCommand, current_overrides,
                                       given_options, with_filter_options)
from capaudit.errors import InputError

filter_app = typer.Typer(no_args_is_help=True,
                         help="Filter caption sets (hallucination, gender, critique-revise).")
review_app = typer.Typer(no_args_is_help=True, help="Human review of flagged captions.")

@filter_app.command("run", cls=OverridesCommand, epilog=OVERRIDES_HELP)
@with_filter_options(after="out")
def run(set_name: str = typer.Argument(None, metavar="[SET]", help="Input caption set (or "
                                       "--shards)"),
        filter_name: str = typer.Option(..., "--filter", help="hallucination, gender-neutral, "
                                        "gender-balance or critique-revise"),
        out: str = typer.Option(..., "--out", help="Name of the new (filtered) set; with "
                                "--shards, the folder of the cleaned shards"),
        score_evidence: str = typer.Option(
            None, "--score-evidence", help="Also score the set before and after with this "
            "evidence (chair-gt, instances, detector, KIND=FILE or a detector JSONL): the "
            "gain measured by evidence the filter did not use"),
        seed: int = typer.Option(0, "--seed", min=0, max=2**32 - 1),
        config: Path = typer.Option(None, "--config", help="YAML with a 'filter' section"),
        replace: bool = typer.Option(False, "--replace", help="Overwrite NEWSET"),
        shards: str = typer.Option(None, "--shards", help="Clean a corpus instead, with any "
                                   "filter: one file, a folder, a glob or a brace list "
                                   "(shard-{00000..00099}.tar) of webdataset tars, parquet or "
                                   "JSON/JSONL shards"),
        executor: str = opt.Executor,
        workers: int = typer.Option(1, "--workers", min=1, help="--shards: processes (Ray "
                                    "tasks) at most"),
        address: str = opt.RayAddress,
        work_dir: str = typer.Option(None, "--work-dir", help="--shards: markers, a path or "
                                     "URL (default STORE.work/DST.filter-work); a rerun "
                                     "resumes"),
        skip_bad: bool = opt.SkipBadShards, keep_work: bool = opt.KeepWork,
        fmt: str = typer.Option(None, "--format", help="--shards: the shards' format (default: "
                                "by suffix, JSON sniffed as sets add does)"),
        caption_col: str = typer.Option(None, "--caption-col", help="--shards: caption field "
                                        "or column"),
        id_col: str = typer.Option(None, "--id-col", help="--shards: image id field or column"),
        turns: str = typer.Option(None, "--turns", help="--shards: first, all or join"),
        where: str = typer.Option(None, "--where", help="--shards: records to filter"),
        db: Path = DbOption, **options):
    """Filter SET into a new set NEWSET linked to its parent, or a corpus's shards (--shards)
    into cleaned shards of the same layout; every change is logged."""
    # options: the flags generated from the filters' declared defaults (cli/filter_flags.py)
    from capaudit.executors.base import check_address, check_executor

    check_executor(executor, None)   # an unknown executor is named first
    if shards is None and set_name is not None:   # "add --executor ray" would fail next
        refuse_shard_options("filter run --shards", "drop it to filter the set here, or "
                             "filter shards with --shards SRC --out DST",
                             executor=executor != "local", address=address is not None,
                             workers=workers != 1, work_dir=work_dir is not None,
                             skip_bad_shards=skip_bad, keep_work=keep_work,
                             format=fmt is not None, caption_col=caption_col is not None,
                             id_col=id_col is not None, turns=turns is not None,
                             where=where is not None)
    check_address(executor, address)
    if (shards is None) == (set_name is None):
        raise InputError("give either a set name or --shards",
                         fix="capaudit filter run SET ... or capaudit filter run --shards SRC "
                             "--out DST ...")
    if shards is not None:
        from capaudit.cli.filter_shards import run_shards

        if score_evidence or replace:
            raise InputError(f"{'--score-evidence' if score_evidence else '--replace'} applies "
                             "to a registered set only", fix="drop it with --shards")
        return run_shards(shards, out, filter_name, given_options(options), config=config,
                          seed=seed, overrides=current_overrides(), executor=executor,
                          workers=workers, address=address, work_dir=work_dir,
                          skip_bad=skip_bad, keep_work=keep_work, fmt=fmt,
                          reader={"caption_col": caption_col, "id_col": id_col, "turns": turns,
                                  "where": where}, db=db)
    from capaudit.filters.runner import filter_set

    store = open_store(db)
    n = store.get_set(set_name).n_captions
    with progress(transient=True) as bar:
        task = bar.add_task(f"{filter_name} on {set_name}", total=n)
        info, summary = filter_set(store, set_name, filter_name, out, given_options(options),
                                   config=config, seed=seed, replace=replace,
                                   score_evidence=score_evidence, overrides=current_overrides(),
                                   tick=lambda k: bar.advance(task, k))
    _print_summary(summary.as_dict(), info.name, set_name)


@filter_app.command("log")
def log(set_name: str = typer.Argument(..., metavar="NEWSET", help="A filtered set"),
        limit: int = typer.Option(20, "--limit", min=0, help="Rows to show (0: none)"),
        all_actions: bool = typer.Option(False, "--all", help="Also show kept sentences, with "
                                         "their text and why they were kept"),
        as_json: bool = typer.Option(False, "--print-json", help="Print the summary as JSON"),
        old_json: bool = typer.Option(False, "--json", hidden=True,
                                      help="Deprecated: --print-json"),
        db: Path = DbOption):
    """Show what a filter removed or changed, and why: full sentences, image ids, counts."""
    as_json = as_json or deprecated_spelling(old_json, "filter log --json", "--print-json")
    from capaudit.filters import logs

    store = open_store(db)
    sharded = logs.sharded_run(store, set_name) if store.find_set(set_name) is None else None
    if sharded is None:
        store.get_set(set_name)
    info = sharded or logs.filter_run_info(store, set_name)
    if info is None:
        raise InputError(f"set '{set_name}' was not made by a filter", fix="pass a --out set "
                         "of capaudit filter run / review import")
    counts = logs.shard_log_counts(info) if sharded else logs.log_counts(store, set_name)
    if as_json:
        typer.echo(json.dumps({"run": {k: v for k, v in info.items() if k != "created_at"},
                               "log_counts": counts}, indent=2, default=str))
        return
    console.print(f"[bold]{escape(set_name)}[/] = {escape(info['filter'])} v{info['version']} "
                  f"of [bold]{escape(str(info['parent']))}[/] (run {info['run_id']})",
                  markup=True)
    _print_summary(info["summary"], set_name, info["parent"])
    status = "[green]adds up[/]" if counts.get("ok") else "[red]does NOT add up[/]"
    console.print(f"  log: {counts['sentences_in']:,} sentences = {counts['kept']:,} kept + "
                  f"{counts['dropped']:,} dropped ({status})", markup=True)
    if limit:
        actions = None if all_actions else ("flag", "revise", "drop")
        tbl = logs.read_shard_log(info, actions, limit) if sharded else \
            logs.read_log(store, set_name, actions, limit)
        rows = tbl.to_pylist()
        revised = any(r["revised"] or r["critique"] for r in rows)
        table = Table("row", "image", "sent", "action", "reason", "sentence",
                      *(["revised / critique"] if revised else []), show_lines=True)
        for r in rows:
            tail = r["revised"] or ""
            if r["critique"]:
                tail = (tail + " | " if tail else "") + "critique: " + r["critique"]
            original = r["original"] if r["original"] is not None else "(not logged)"
            row = f"{r['shard']}#{r['row_idx']}" if sharded else str(r["row_idx"])
            table.add_row(row, "" if r["image_id"] is None else str(r["image_id"]),
                          str(r["sentence_idx"]), r["action"], Text(r["reason"] or ""),
                          Text(original), *([Text(tail)] if revised else []))
        console.print(table)
        shown = tbl.num_rows
        total = counts["sentences_in"] if all_actions else counts["sentences_in"] - \
            counts["actions"].get("keep", 0)
        if shown < total:
            console.print(f"  showing {shown:,} of {total:,} rows (--limit N for more"
                          f"{'' if all_actions else ', --all for kept sentences too'})")


@filter_app.command("list")
def list_filters():
    """List the registered filters."""
    from capaudit.filters.base import FILTERS

    table = Table("name", "version", "description")
    for name in FILTERS:
        e = FILTERS.entry(name)
        table.add_row(name, e.version, e.description)
    console.print(table)


@review_app.command("export")
def review_export(set_name: str = typer.Argument(..., metavar="SET",
                                                 help="A filtered set with flags (or any set "
                                                      "with --all)"),
                  out: Path = typer.Option(..., "--out", help="CSV or JSONL file to write"),
                  fmt: str = typer.Option(None, "--format", help="csv or jsonl (default: suffix)"),
                  all_rows: bool = typer.Option(False, "--all", help="Export every caption"),
                  db: Path = DbOption):
    """Write flagged captions for human editors (decision + edited_caption columns)."""
    from capaudit.core.config import provenance_beside
    from capaudit.filters.review import export_review

    n = export_review(open_store(db), set_name, out, fmt=fmt, all_rows=all_rows)
    provenance_beside(out, {"set": set_name, "format": fmt, "all": all_rows, "rows": n})
    console.print(f"wrote {n:,} caption(s) to review to {out}")


@review_app.command("import")
def review_import(set_name: str = typer.Argument(..., metavar="SET", help="The exported set"),
                  path: Path = typer.Argument(..., help="The edited CSV/JSONL file"),
                  out: str = typer.Option(..., "--out", help="Name of the new, reviewed set"),
                  fmt: str = typer.Option(None, "--format", help="csv or jsonl"),
                  strict: bool = typer.Option(False, "--strict",
                                              help="Fail if any row is refused"),
                  replace: bool = typer.Option(False, "--replace"),
                  db: Path = DbOption):
    """Merge editors' changes into a new set, refusing rows whose caption changed since export."""
    from capaudit.filters.review import import_review

    store = open_store(db)
    cfg = {"command": "review import", "set": set_name, "file": str(path), "out": out}
    with recorded_run(store, cfg) as run_id:
        info, summary, _refused = import_review(store, set_name, path, out, fmt=fmt,
                                                replace=replace, strict=strict, run_id=run_id)
    _print_summary(summary.as_dict(), info.name)


def register(app: typer.Typer) -> None:
    app.add_typer(filter_app, name="filter")
    app.add_typer(review_app, name="review")
