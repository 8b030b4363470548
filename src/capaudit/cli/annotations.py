"""``capaudit annotations``: store instance categories, CHAIR ground truth, demographics."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from capaudit.cli.common import DbOption, console, open_store
from capaudit.core.safe_write import atomic_open

ann_app = typer.Typer(no_args_is_help=True, help="Store image annotations for audits.")

# the two commands that derive annotations from a set of human captions
HumanSet = typer.Argument(..., help="Registered set of human captions")
ReplaceSource = typer.Option(False, "--replace", help="Replace a stored source of that name "
                             "(else it is refused)")


@ann_app.command("add")
def add(kind: str = typer.Argument(..., help="instances, chair-gt or demographics"),
        path: str = typer.Argument(..., help="COCO instances JSON, or the JSONL/CSV forms (a "
                                   "path or a URL: s3://, gs://, hf://, https://)"),
        name: str = typer.Option(None, "--name", help="Source name (default: the kind)"),
        replace: bool = typer.Option(False, "--replace"),
        namespace: str = typer.Option(None, "--namespace", help="Dataset its image ids belong "
                                      "to (coco2014, coco2017, nocaps, flickr30k or a name of "
                                      "yours; default: from the file name, e.g. val2014)"),
        db: Path = DbOption):
    """Load an annotation file into the store (same file again: no-op)."""
    from capaudit.io.annotation_store import add_annotations

    store = open_store(db, create=True)
    src, n = add_annotations(store, kind, path, name, replace, namespace=namespace)
    console.print(f"{kind} annotations '{src}': {n:,} images" + _categories(store, kind, src))


def _categories(store, kind: str, source: str) -> str:
    """``"; 79 of 80 COCO categories; missing: tennis racket"`` for object annotations: a
    category the source never names is unsupported in every caption that mentions it."""
    if kind not in ("instances", "chair-gt"):
        return ""
    from capaudit.store.annotations import source_names
    from capaudit.text.category_coverage import category_coverage

    return "; " + category_coverage(source_names(store, kind, source)).line()


@ann_app.command("detect")
def detect(shards: str = typer.Option(..., "--shards", help="Webdataset folder or .tar"),
           name: str = typer.Option(..., "--name", help="Instance source name (--instances NAME)"),
           detector: str = typer.Option("ssd-mobilenet", "--detector",
                                        help="ssd-mobilenet or ultralytics"),
           weights: Path = typer.Option(None, "--detector-weights", help="ultralytics weights"),
           min_score: float = typer.Option(0.5, "--min-score", min=0.0, max=1.0),
           executor: str = typer.Option("local", "--executor", help="local or ray"),
           workers: int = typer.Option(1, "--workers", min=1),
           address: str = typer.Option(None, "--address"),
           work_dir: Path = typer.Option(None, "--work-dir", help="per-shard detections and "
                                         "markers (default: STORE.work/NAME.detect-work); a "
                                         "rerun resumes"),
           db: Path = DbOption):
    """Detect objects in every image of the shards and store them as instance evidence."""
    from capaudit.enrich.detect_annotations import run_detect_annotations
    from capaudit.executors.base import check_executor

    check_executor(executor, address)
    options = {"weights": str(weights)} if weights else {}
    src, n, prov = run_detect_annotations(open_store(db), shards, name, detector, options,
                                          min_score, work_dir, executor, workers, address)
    console.print(f"instances '{src}': {n:,} images detected by {prov['model_id']} "
                  f"(score >= {prov['min_score']}); use --instances {src}")


@ann_app.command("derive-demographics")
def derive(human_set: str = HumanSet,
           rule: str = typer.Option("all", "--rule", help="all or majority"),
           name: str = typer.Option("derived-demographics", "--name"),
           out: Path = typer.Option(None, "--out", help="Also write the labels as JSONL"),
           replace: bool = ReplaceSource,
           db: Path = DbOption):
    """Image gender from human captions: all (or most) captions use man words only -> male."""
    from capaudit.io.annotation_files import demographics_from_captions
    from capaudit.text.gender import predict_gender
    from capaudit.text.tokenize import tokenize

    store = open_store(db)
    tbl = store.captions(human_set)
    ids = tbl.column("image_id").to_pylist()
    preds = [predict_gender(tokenize(c)) for c in tbl.column("caption").to_pylist()]
    labels = demographics_from_captions([i for i in ids], preds, rule=rule)
    rows = ({"image_id": iid, "gender": g, "skin_tone": None}
            for iid, g in sorted(labels.items()) if iid is not None)
    _store_rows(store, "demographics", rows, out, "derived_demographics.jsonl", name, replace,
                human_set)
    n_m = sum(1 for g in labels.values() if g == "male")
    console.print(f"derived gender for {len(labels):,} images ({n_m:,} male, "
                  f"{len(labels) - n_m:,} female) with rule '{rule}' -> '{name}'")


@ann_app.command("build-chair-gt")
def build_chair_gt_cmd(human_set: str = HumanSet,
                       instances: Path = typer.Option(None, "--instances",
                                                      help="COCO instances JSON or categories JSONL "
                                                      "(default: stored instances)"),
                       name: str = typer.Option("chair-gt", "--name"),
                       out: Path = typer.Option(None, "--out", help="Also write it as JSONL"),
                       replace: bool = ReplaceSource,
                       db: Path = DbOption):
    """CHAIR ground truth as the reference builds it: instance categories ∪ caption objects."""
    from capaudit.io.annotation_store import resolve_annotations
    from capaudit.text.chair_gt import build_chair_gt

    store = open_store(db)
    ann = resolve_annotations(store, instances=instances)
    tbl = store.captions(human_set)
    gt = build_chair_gt(ann.instances, tbl.column("image_id").to_pylist(),
                        tbl.column("caption").to_pylist(), workers=2)
    rows = ({"image_id": iid, "objects": sorted(gt[iid])} for iid in sorted(gt))
    _store_rows(store, "chair-gt", rows, out, "chair_gt.jsonl", name, replace, human_set)
    console.print(f"CHAIR ground truth for {len(gt):,} images -> '{name}'"
                  + (f" and {out}" if out else ""))


def _store_rows(store, kind: str, rows, out: Path | None, temp_name: str, name: str,
                replace: bool, human_set: str) -> None:
    """Write ``rows`` as JSONL to ``out`` (not given: ``temp_name`` in a new temporary folder)
    and store them as source ``name``, in the image-id namespace of the human set they come
    from."""
    import json
    import tempfile

    from capaudit.io.annotation_store import add_annotations

    target = out or Path(tempfile.mkdtemp()) / temp_name
    with atomic_open(target) as fh:
        for rec in rows:
            fh.write(json.dumps(rec) + "\n")
    add_annotations(store, kind, target, name, replace=replace,
                    namespace=store.get_set(human_set).namespace)


@ann_app.command("list")
def list_annotations(db: Path = DbOption):
    """List stored annotation sources."""
    store = open_store(db, read_only=True, sandbox=True)
    table = Table("name", "kind", "images", "path", "added")
    from capaudit.store.annotations import list_sources

    for row in list_sources(store):
        table.add_row(row[0], row[1], f"{row[2]:,}", row[3] or "", str(row[4])[:19])
    console.print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(ann_app, name="annotations")
