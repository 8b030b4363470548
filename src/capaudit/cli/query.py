"""``capaudit query`` (plain SQL over the store) and ``capaudit demo``."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import typer
from rich.table import Table

from capaudit.cli.common import DbOption, console, db_path, open_store
from capaudit.errors import InputError


def run_query(store, sql: str):
    import duckdb

    try:
        cur = store.con.execute(sql)
        cols = [d[0] for d in cur.description] if cur.description else []
        rows = cur.fetchall()
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0]
        if isinstance(exc, duckdb.PermissionException) or "configuration has been locked" in first:
            raise InputError(f"query refused: it may read and change only the store, never "
                             f"files, other databases, extensions or settings ({first})",
                             fix="query the store's tables; write files with capaudit sets "
                                 "export") from None
        raise InputError(f"query failed: {first}", fix="check the SQL; "
                         "tables: caption_sets, captions, runs, metrics, caption_details, "
                         "annotation_sources, instance_categories, chair_gt, demographics") from None
    return cols, rows


def query(sql: str = typer.Argument(..., help="SQL to run against the store"),
          as_csv: bool = typer.Option(False, "--csv", help="Print CSV"),
          as_json: bool = typer.Option(False, "--json", help="Print JSON lines"),
          write: bool = typer.Option(False, "--write", help="Allow statements that modify the store"),
          db: Path = DbOption):
    """Run SQL against the store (read-only unless --write)."""
    store = open_store(db, read_only=not write, sandbox=True)
    cols, rows = run_query(store, sql)
    if as_csv:
        w = csv.writer(sys.stdout)
        w.writerow(cols)
        w.writerows(rows)
    elif as_json:
        for r in rows:
            sys.stdout.write(json.dumps(dict(zip(cols, r)), default=str) + "\n")
    else:
        table = Table(*cols)
        for r in rows:
            table.add_row(*["" if v is None else str(v) for v in r])
        console.print(table)


DEMO_DIR = Path(__file__).resolve().parents[1] / "data" / "demo"


def _refuse_non_demo(db: Path) -> None:
    """The demo replaces its database: refuse a file holding anything but demo sets (so that
    ``$CAPAUDIT_DB`` pointing at a real store never loses it)."""
    if not Path(db).exists():
        return
    from capaudit.errors import InputError
    from capaudit.store import Store

    try:
        with Store(db, read_only=True) as st:
            foreign = [s for s in st.list_sets()
                       if not str(s.source_path or "").startswith(str(DEMO_DIR))]
    except InputError:
        foreign = None  # not a capaudit store at all
    if foreign is None or foreign:
        what = (f"holds the set '{foreign[0].name}' ({foreign[0].source_path})" if foreign
                else "is not a capaudit demo store")
        raise InputError(f"{db} {what}; the demo replaces its database",
                         fix="pass --db NEW.duckdb (or unset CAPAUDIT_DB)")


def build_demo(db: Path, report_dir: Path | None = None, run_audit: bool = True) -> dict:
    """A fresh database from the bundled 1,000-image sample, then ``audit compare`` with the
    gaps by gender and skin tone."""
    from capaudit.io.annotation_store import add_annotations
    from capaudit.io.ingest import add_caption_set
    from capaudit.store import Store

    _refuse_non_demo(db)
    for suffix in ("", ".wal"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    store = Store(db)
    for name, file in (("coco", "coco_captions.json"), ("oscar", "oscar.jsonl"),
                       ("nic", "nic.jsonl")):
        add_caption_set(store, name, DEMO_DIR / file)
    add_annotations(store, "instances", DEMO_DIR / "instance_categories.jsonl")
    add_annotations(store, "chair-gt", DEMO_DIR / "chair_gt.jsonl")
    add_annotations(store, "demographics", DEMO_DIR / "demographics.jsonl")
    out = {"store": store, "sets": ["coco", "oscar", "nic"]}
    if run_audit:
        from capaudit.report.compare import compare_and_report

        out["compare"] = compare_and_report(store, out["sets"], report_dir or
                                            Path("capaudit-demo-report"),
                                            cfg={"disparity": ["gender", "skin_tone"]})
    return out


def demo(db: Path = typer.Option(None, "--db", help="Where to build the demo database "
                                 "(replaced; default $CAPAUDIT_DB, else ./capaudit-demo.duckdb; "
                                 "a store holding other sets is refused)"),
         report: Path = typer.Option(Path("capaudit-demo-report"), "--report",
                                     help="Folder for report.md / report.html")):
    """Build a fresh demo database from bundled COCO data and compare coco, oscar and nic."""
    db = db_path(db, default="capaudit-demo.duckdb")
    result = build_demo(db, report)
    console.print(f"demo database: {db} (sets: {', '.join(result['sets'])})")
    if "compare" in result:
        from capaudit.cli.compare_view import print_compare
        print_compare(result["compare"])
        console.print(f"report: {report / 'report.md'} and {report / 'report.html'}")
    console.print(f"try: capaudit query --db {db} \"SELECT * FROM metrics LIMIT 10\"")


def register(app: typer.Typer) -> None:
    app.command("query")(query)
    app.command("demo")(demo)
