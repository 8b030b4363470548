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

from capaudit.cli.common import DbOption, console, open_store, progress, recorded_run
from capaudit.cli.filter_flags import (OVERRIDES_HELP, OverridesCommand, current_overrides,
                                       given_options, with_filter_options)

filter_app = typer.Typer(no_args_is_help=True,
                         help="Filter caption sets (hallucination, gender, critique-revise).")
review_app = typer.Typer(no_args_is_help=True, help="Human review of flagged captions.")

def _pct(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _print_independent(ind: dict) -> None:
    b, a = ind["before"], ind["after"]
    console.print(Text(
        f"  scored with {ind['evidence']} from {ind['source']} ({ind['covered']:,} of "
        f"{ind['set_images']:,} images): CHAIR_s {_pct(b['chair_s'])} -> "
        f"{_pct(a['chair_s'])}, CHAIR_i {_pct(b['chair_i'])} -> {_pct(a['chair_i'])}, "
        f"mentions/caption {_pct(b['mentions_per_caption'])} -> "
        f"{_pct(a['mentions_per_caption'])}"))


def _print_evidence(summary: dict, out: str, parent: str | None) -> None:
    """Which evidence judged the set, its coverage, what the parse spared, and whether the
    before/after CHAIR is independent of the filter (it is not under the same evidence)."""
    ev = summary.get("evidence")
    ind = summary.get("independent")
    if not isinstance(ev, dict):
        if ind:
            _print_independent(ind)
        return
    n, c = ev.get("set_images") or 0, ev.get("covered") or 0
    cov = f"{c:,} of {n:,} images ({100 * c / n:.1f}%)" if n else "no images with an id"
    console.print(Text(f"  evidence: {ev['kind']} from {ev.get('source')}: covers {cov}"))
    cats = ev.get("categories")
    if cats:   # "79 of 80 COCO categories; missing: tennis racket"
        console.print(Text(f"  evidence categories: {cats['line']}"
                           + ("; a sentence naming a missing one is judged unsupported"
                              if cats.get("missing") else ""),
                           style="yellow" if cats.get("missing") else ""))
    if n and c / n < 0.5:
        console.print(Text(f"  warning: most images have no {ev['kind']} evidence; their "
                           "captions are kept unjudged (reason no-evidence)", style="yellow"))
    p = summary.get("parse") or {}
    if p:
        line = (f"  non-visual ({p.get('non_visual')}): {p.get('non_visual_mentions', 0):,} "
                f"mention(s), {p.get('non_visual_sentences', 0):,} sentence(s) spared")
        if p.get("modifiers"):
            line += (f"; modifiers: {p.get('modifier_mentions', 0):,} mention(s), "
                     f"{p.get('modifier_sentences', 0):,} sentence(s) spared")
        console.print(Text(line))
    if ind:
        _print_independent(ind)
    if not ind or ind.get("circular"):
        other = "instances" if ev["kind"] == "chair-gt" else "chair-gt"
        console.print(Text(
            f"  circular: {out} was filtered with {ev['kind']}, so its CHAIR under "
            f"{ev['kind']} is ~0 by construction; audit compare {parent or 'PARENT'} {out} with "
            f"that evidence measures the filter against itself. Score it independently: "
            f"--score-evidence {other} (or a detector JSONL file)", style="yellow"))


def _print_summary(summary: dict, out: str, parent: str | None = None) -> None:
    console.print(f"[bold]{escape(summary['filter'])}[/] -> [bold]{escape(out)}[/]: captions "
                  f"{summary['captions_in']:,} in, {summary['captions_out']:,} out; sentences "
                  f"{summary['sentences_in']:,} in = {summary['sentences_kept']:,} kept + "
                  f"{summary['sentences_dropped']:,} dropped", markup=True)
    acts = summary.get("actions", {})
    console.print("  actions: " + ", ".join(f"{a} {n:,}" for a, n in acts.items() if n))
    if summary.get("reasons"):
        console.print("  reasons: " + ", ".join(f"{r} {n:,}"
                                                for r, n in list(summary["reasons"].items())[:6]))
    _print_evidence(summary, out, parent)
    review = (summary.get("review") or {}).get("sentences")
    if review:
        console.print(Text(f"  review: {review:,} kept sentence(s) open with a referring word "
                           "(\"These ...\", \"It ...\") right after a dropped one; see filter log "
                           f"{out}, or capaudit review export {out}", style="yellow"))
    bal = summary.get("balance")
    if bal:
        b, a = bal["images_before"], bal["images_after"]
        console.print(f"  images man/woman: before {b['man']:,}/{b['woman']:,}, after "
                      f"{a['man']:,}/{a['woman']:,} (labels from {bal['labels_from']})")
    co = summary.get("cooccurrence")
    if co:
        # short headers, shares in %, names whole: seven columns fit 80 characters
        table = Table(title="co-occurrence: images of men / women with the object "
                            "(most skewed first)")
        table.add_column("object", no_wrap=True)
        for col in ("man", "woman", "man %", "man after", "woman after", "man % after"):
            table.add_column(col, justify="right")
        before, after = co["before"], co["after"]
        key = lambda o: -abs((before[o]["man_share"] or 0.5) - 0.5)  # noqa: E731
        share = lambda v: "-" if v is None else f"{100 * v:.1f}"  # noqa: E731
        for o in sorted(before, key=key)[:15]:
            b, a = before[o], after.get(o, {"man": 0, "woman": 0, "man_share": None})
            table.add_row(o, f"{b['man']:,}", f"{b['woman']:,}", share(b["man_share"]),
                          f"{a['man']:,}", f"{a['woman']:,}", share(a["man_share"]))
        console.print(table)
    refused = summary.get("refused")
    if refused:
        console.print(f"[yellow]refused {len(refused)} row(s)[/]:", markup=True)
        for r in refused[:10]:
            console.print(Text(f"  file row {r['file_row']}, row_idx {r['row_idx']}: {r['why']}"))


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
        shards: str = typer.Option(None, "--shards", help="Clean a corpus instead: one file, a "
                                   "folder, a glob or a brace list (shard-{00000..00099}.tar) "
                                   "of webdataset tars, parquet or JSON/JSONL shards"),
        executor: str = typer.Option("local", "--executor", help="--shards: local or ray"),
        workers: int = typer.Option(1, "--workers", min=1, help="--shards: processes (Ray "
                                    "tasks) at most"),
        address: str = typer.Option(None, "--address", help="--shards: Ray cluster (auto)"),
        work_dir: Path = typer.Option(None, "--work-dir", help="--shards: markers (default "
                                      "STORE.work/DST.filter-work); a rerun resumes"),
        skip_bad: bool = typer.Option(False, "--skip-bad-shards", help="--shards: report and "
                                      "skip unreadable shards"),
        keep_work: bool = typer.Option(False, "--keep-work", help="--shards: keep the work "
                                       "folder after success"),
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
    from capaudit.errors import InputError

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
        as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON"),
        db: Path = DbOption):
    """Show what a filter removed or changed, and why: full sentences, image ids, counts."""
    from capaudit.errors import InputError
    from capaudit.filters.runner import filter_run_info, log_counts, read_log

    store = open_store(db)
    store.get_set(set_name)
    info = filter_run_info(store, set_name)
    if info is None:
        raise InputError(f"set '{set_name}' was not made by a filter", fix="pass a --out set "
                         "of capaudit filter run / review import")
    counts = log_counts(store, set_name)
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
        tbl = read_log(store, set_name, None if all_actions else ("flag", "revise", "drop"), limit)
        rows = tbl.to_pylist()
        revised = any(r["revised"] or r["critique"] for r in rows)
        table = Table("row", "image", "sent", "action", "reason", "sentence",
                      *(["revised / critique"] if revised else []), show_lines=True)
        for r in rows:
            tail = r["revised"] or ""
            if r["critique"]:
                tail = (tail + " | " if tail else "") + "critique: " + r["critique"]
            original = r["original"] if r["original"] is not None else "(not logged)"
            table.add_row(str(r["row_idx"]), "" if r["image_id"] is None else str(r["image_id"]),
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
    from capaudit.filters.review import export_review

    from capaudit.core.config import provenance_beside

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
