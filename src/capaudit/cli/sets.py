"""``capaudit sets``: register, list, inspect, remove and export caption sets."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from capaudit.cli.common import DbOption, console, esc, open_store, progress

sets_app = typer.Typer(no_args_is_help=True, help="Register and inspect caption sets.")


def _formats_help() -> str:
    """Every format ``sets add`` reads, from the readers' registry (so a new reader is listed)."""
    from capaudit.io.readers import READERS

    return (f"Caption file format: {', '.join(READERS.known())}, a plugin's format, or auto "
            "(sniffed from the file); docs/formats.md")


@sets_app.command("add")
def add(name: str = typer.Argument(..., help="Name for the set"),
        path: str = typer.Argument(..., help="Caption file or folder: a path or a URL "
                                   "(s3://, gs://, hf://, https://)"),
        fmt: str = typer.Option("auto", "--format", "-f", help=_formats_help()),
        id_col: str = typer.Option(None, "--id-col", help="Image id column (tabular formats)"),
        caption_col: str = typer.Option(None, "--caption-col", help="Caption column"),
        replace: bool = typer.Option(False, "--replace", help="Overwrite a set of that name"),
        namespace: str = typer.Option(None, "--namespace", help="Dataset the image ids belong "
                                      "to: coco2014, coco2017, nocaps, flickr30k, text or a "
                                      "name of yours (default: inferred only from unambiguous "
                                      "evidence such as COCO_val2014_ names)"),
        split: str = typer.Option(None, "--split", help="karpathy: train, val, test, "
                                  "restval; hf: the split of a dataset with several (PATH may "
                                  "be a Hub id in the local cache, with --format hf)"),
        turns: str = typer.Option(None, "--turns", help="llava/sharegpt: which assistant turns "
                                  "become captions: first (default), all or join"),
        where: str = typer.Option(None, "--where", help="Keep the records for which this "
                                  "DuckDB SQL expression over their fields is true, e.g. "
                                  "\"type = 'detail'\" (text in single quotes); every "
                                  "record format but coco, chair, flickr-token, webdataset and hf"),
        skip_no_image: bool = typer.Option(False, "--skip-no-image", help="Skip records "
                                           "without an image (counted) instead of refusing"),
        db: Path = DbOption):
    """Register a caption file as a named set (adding the same file again is a no-op)."""
    from capaudit.audit.annotation_coverage import ids_label
    from capaudit.core.storage.urls import name_of
    from capaudit.io.ingest import add_caption_set, answers_warning
    from capaudit.store.captions import has_image_ids

    store = open_store(db, create=True)
    with progress(transient=True) as bar:
        task = bar.add_task(f"ingesting {name_of(path)}", total=None)
        result = add_caption_set(store, name, path, fmt, replace=replace, id_col=id_col,
                                 caption_col=caption_col, namespace=namespace,
                                 on_batch=lambda n: bar.advance(task, n), split=split,
                                 turns=turns, where=where,
                                 skip_no_image=skip_no_image or None)
    info = result.info
    verb = "added" if result.added else "already present (same file), nothing to do:"
    # as `sets show` and the audit say it: text keys (TextCaps' 011e7e629fb9ae7b, a URL) are
    # not "unassigned" numbers waiting for an audit; nothing ever joins them
    ids = ids_label(info.namespace, has_image_ids(store, info.set_id))
    console.print(f"{verb} [bold]{esc(info.name)}[/]: {info.n_captions:,} captions of "
                  f"{info.n_images:,} images ({esc(info.format)}; ids: {esc(ids)})",
                  markup=True)
    skipped = (info.meta or {}).get("skipped_no_image")
    if skipped:
        console.print(f"skipped {skipped:,} records without an image")
    _print_notes(info.meta)
    if (warning := answers_warning(info.meta)) is not None:
        console.print(warning)


def _print_notes(meta: dict | None) -> None:
    """What ``sets add`` noticed about the ids (another integer id column, COCO file names
    proposing a namespace): printed by ``sets add`` and ``sets show``."""
    for hint in ((meta or {}).get(k) for k in ("id_hint", "namespace_hint")):
        if hint:
            console.print(f"note: {esc(hint)}", markup=True)


@sets_app.command("list")
def list_sets(db: Path = DbOption):
    """List the registered caption sets."""
    from capaudit.core.storage.urls import name_of

    store = open_store(db, read_only=True, sandbox=True)
    table = Table()
    for col in ("name", "format", "ids", "captions", "images", "parent", "source file"):
        # names wrap instead of being cut with "…" in a narrow terminal; the source's full
        # path is in `sets show`
        table.add_column(col, overflow="fold",
                         justify="right" if col in ("captions", "images") else "left")
    from capaudit.audit.annotation_coverage import ids_label
    from capaudit.store.captions import has_image_ids

    for s in store.list_sets():
        numeric = s.namespace is not None or has_image_ids(store, s.set_id)
        table.add_row(s.name, s.format or "", ids_label(s.namespace, numeric),
                      f"{s.n_captions:,}", f"{s.n_images:,}", s.parent or "",
                      name_of(s.source_path) if s.source_path else "")
    console.print(table)


def set_summary(store, name: str, samples: int = 5) -> dict:
    """Rows, images, captions per image and sample captions of a set."""
    from capaudit.store.captions import sample_captions, set_stats

    info = store.get_set(name)
    stats = set_stats(store, info.set_id)
    rows = sample_captions(store, info.set_id, samples)
    return {"info": info, "rows": stats[0], "images": stats[1], "with_coco_id": stats[2],
            "captions_per_image": stats[0] / stats[1] if stats[1] else 0.0,
            "mean_chars": stats[3] or 0.0, "samples": rows}


@sets_app.command("show")
def show(name: str, samples: int = typer.Option(5, help="Sample captions to print"),
         db: Path = DbOption):
    """Rows, images, captions per image and sample captions of a set (the --out of a filter
    run --shards run: the run and its validations)."""
    store = open_store(db, read_only=True, sandbox=True)
    if store.find_set(name) is None and _show_sharded_run(store, name):
        return
    s = set_summary(store, name, samples)
    info = s["info"]
    console.print(f"[bold]{esc(info.name)}[/] ({esc(info.format)}) from "
                  f"{esc(str(info.source_path))}", markup=True)
    from capaudit.audit.annotation_coverage import ids_label

    ids = ids_label(info.namespace, bool(s["with_coco_id"]))
    ids += {"unassigned": " (bare numbers: joined only if an audit finds them annotated)",
            "none": " (text or row keys: never joined with annotations)"}.get(ids, "")
    console.print(f"sha256 {info.sha256}  parent {info.parent or '-'}  ids {ids}")
    given = {k: v for k, v in (info.options or {}).items() if v is not None}
    if given:   # how the file was read (--split test, --turns all, ...): part of what the set is
        console.print("options " + esc("  ".join(f"{k}={v}" for k, v in given.items())),
                      markup=True)
    from capaudit.io.ingest import answers_warning

    if (warning := answers_warning(info.meta)) is not None:
        console.print(warning)
    from capaudit.report.file_scores import summary_line

    if (scores := summary_line(info.meta)) is not None:   # CHAIR's output: its own scores
        console.print(esc(scores), markup=True)
    _print_notes(info.meta)
    console.print(f"rows {s['rows']:,}  images {s['images']:,}  captions/image "
                  f"{s['captions_per_image']:.2f}  with an integer id {s['with_coco_id']:,}  "
                  f"mean chars {s['mean_chars']:.1f}")
    from capaudit.report.card_parts import validation_lines
    from capaudit.store.validations import validations_of

    for line in validation_lines(validations_of(store, info.name)):   # filter validate
        console.print(esc(line[2:]), markup=True)
    table = Table("image", "caption")
    for key, cap in s["samples"]:
        table.add_row(key, cap)
    console.print(table)


def _show_sharded_run(store, name: str) -> bool:
    """``sets show DST`` of a ``filter run --shards ... --out DST`` run (no set: its output is
    files): the run, and its validations (``filter validate --set DST``) with their n and
    status, where a set's would be shown. False when ``name`` is no such run either."""
    from capaudit.filters.logs import sharded_run
    from capaudit.report.card_parts import validation_lines
    from capaudit.store.validations import validations_of

    info = sharded_run(store, name)
    if info is None:
        return False
    console.print(f"[bold]{esc(info['set_name'])}[/]: output of filter run --shards "
                  f"(filter {esc(info['filter'])} of {esc(str(info['parent']))}; logs "
                  f"{esc(str(info['config'].get('log_dir')))}); not a set", markup=True)
    lines = validation_lines(validations_of(store, info["set_name"]))
    for line in lines or ["- not validated (capaudit filter validate LABELS --set DST)"]:
        console.print(esc(line[2:]), markup=True)
    return True


@sets_app.command("remove")
def remove(name: str, db: Path = DbOption):
    """Remove a set and its captions."""
    store = open_store(db, external=False)   # plain SQL: no file, no Python table
    with store.transaction():
        store.delete_set(name)
    console.print(f"removed {name}")


@sets_app.command("export")
def export(name: str, to: str = typer.Option("jsonl", "--to", help="original (the source file "
                                             "back, revised in place, with OUT.changes.jsonl), "
                                             "jsonl, parquet, webdataset, sharegpt4v, llava, "
                                             "sharegpt, coco or hf"),
           out: str = typer.Option(None, "--out", "-o", help="Output file or folder (a path "
                                   "or a URL: s3://, gs://)"),
           overwrite: bool = typer.Option(False, "--overwrite", help="webdataset/hf: write "
                                          "into an existing folder with files in it, "
                                          "replacing only capaudit's own files there; "
                                          "without --out: replace a file of the default "
                                          "name that capaudit did not write"),
           prompt: str = typer.Option(None, "--prompt", help="llava/sharegpt4v/sharegpt: the "
                                      "question written for an answer the set holds none "
                                      "for (a set from a plain caption file; default: "
                                      "'Describe the image in detail.'); answers added from a "
                                      "conversation file keep their own"),
           db: Path = DbOption):
    """Export a set's captions (written to a temporary name, then renamed into place; the
    store, a registered source file and a link are never written over)."""
    from capaudit.core.storage.urls import on_disk
    from capaudit.io.export import export_with_provenance

    if out and not on_disk(out):
        with open_store(db, read_only=True) as store:
            return _export_remote(store, name, to, out, overwrite, prompt)
    written: dict = {}
    path = export_with_provenance(open_store(db, read_only=True), name, to, out,
                                  overwrite=overwrite, prompt=prompt, report=written)
    console.print(f"wrote {path}")
    if written.get("note"):
        console.print(written["note"])
    if to == "original":
        changes = path.with_name(path.name + ".changes.jsonl")
        import json

        from capaudit.io.export_original import TOKEN_DROP_WHY

        n_changes, n_lost, lost = 0, 0, []   # read line by line: 1.2M captions' listing
        with open(changes, encoding="utf-8") as fh:   # held whole was 438 MB
            for line in fh:
                n_changes += 1
                entry = json.loads(line) if TOKEN_DROP_WHY in line else {}
                if entry.get("why") == TOKEN_DROP_WHY:
                    n_lost += 1
                    if len(lost) < 10:
                        lost.append(entry["record"])
        console.print(f"{n_changes:,} changes listed in {changes}")
        if n_lost:
            console.print(f"{n_lost:,} records dropped: {TOKEN_DROP_WHY} (source records "
                          f"{', '.join(str(i + 1) for i in lost)}"
                          f"{', ...' if n_lost > 10 else ''}; listed in the changes file)")


def _export_remote(store, name: str, to: str, out: str, overwrite: bool,
                   prompt: str | None = None) -> None:
    """An export to object storage: built in a private temporary folder, then uploaded, each
    file whole (:func:`capaudit.core.storage.folder.staged`); a folder layout is refused over objects
    already there unless ``--overwrite`` (then objects of the same names are replaced)."""
    from capaudit.core.storage.folder import Folder, staged
    from capaudit.core.storage.urls import name_of, parent_of, shown_url
    from capaudit.errors import InputError
    from capaudit.io.export import export_with_provenance

    if to == "original":
        raise InputError("--to original writes the source file's layout beside a local copy",
                         path=shown_url(out), fix="export to a local path, then upload it")
    if to in ("webdataset", "hf") and Folder(out).names() and not overwrite:
        raise InputError("the output folder exists and has objects in it", path=shown_url(out),
                         fix="choose a new prefix, or pass --overwrite to replace objects of "
                             "the same names")
    with staged(parent_of(out)) as folder:
        export_with_provenance(store, name, to, str(folder / name_of(out)), overwrite=overwrite,
                               prompt=prompt)
    console.print(f"wrote {shown_url(out)}", markup=False)


def register(app: typer.Typer) -> None:
    app.add_typer(sets_app, name="sets")
