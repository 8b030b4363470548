"""``capaudit annotations``: store instance categories, CHAIR ground truth, demographics."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from capaudit.cli.common import DbOption, console, open_store

ann_app = typer.Typer(no_args_is_help=True, help="Store image annotations for audits.")


@ann_app.command("add")
def add(kind: str = typer.Argument(..., help="instances, chair-gt or demographics"),
        path: Path = typer.Argument(..., help="COCO instances JSON, or the JSONL/CSV forms"),
        name: str = typer.Option(None, "--name", help="Source name (default: the kind)"),
        replace: bool = typer.Option(False, "--replace"), db: Path = DbOption):
    """Load an annotation file into the store (same file again: no-op)."""
    from capaudit.io.annotation_store import add_annotations

    src, n = add_annotations(open_store(db), kind, path, name, replace)
    console.print(f"{kind} annotations '{src}': {n:,} images")


@ann_app.command("derive-demographics")
def derive(human_set: str = typer.Argument(..., help="Registered set of human captions"),
           rule: str = typer.Option("all", "--rule", help="all or majority"),
           name: str = typer.Option("derived-demographics", "--name"),
           out: Path = typer.Option(None, "--out", help="Also write the labels as JSONL"),
           db: Path = DbOption):
    """Image gender from human captions: all (or most) captions use man words only -> male."""
    import json
    import tempfile

    from capaudit.io.annotation_store import add_annotations
    from capaudit.io.annotations import demographics_from_captions
    from capaudit.text.gender import predict_gender

    store = open_store(db)
    tbl = store.captions(human_set)
    ids = tbl.column("image_id").to_pylist()
    preds = [predict_gender(c) for c in tbl.column("caption").to_pylist()]
    labels = demographics_from_captions([i for i in ids], preds, rule=rule)
    target = out or Path(tempfile.mkdtemp()) / "derived_demographics.jsonl"
    with open(target, "w", encoding="utf-8") as fh:
        for iid, g in sorted(labels.items()):
            if iid is not None:
                fh.write(json.dumps({"image_id": iid, "gender": g, "skin_tone": None}) + "\n")
    add_annotations(store, "demographics", target, name, replace=True)
    n_m = sum(1 for g in labels.values() if g == "male")
    console.print(f"derived gender for {len(labels):,} images ({n_m:,} male, "
                  f"{len(labels) - n_m:,} female) with rule '{rule}' -> '{name}'")


@ann_app.command("list")
def list_annotations(db: Path = DbOption):
    """List stored annotation sources."""
    store = open_store(db)
    table = Table("name", "kind", "images", "path", "added")
    for row in store.sql("SELECT name, kind, n_images, path, added_at FROM annotation_sources "
                         "ORDER BY added_at"):
        table.add_row(row[0], row[1], f"{row[2]:,}", row[3] or "", str(row[4])[:19])
    console.print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(ann_app, name="annotations")
