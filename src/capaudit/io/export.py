"""Export a caption set: JSONL, parquet, webdataset shards, training layouts, or its source.

- ``jsonl`` / ``parquet``: image id and caption; ``webdataset``: one sample per caption,
  its text in ``KEY.txt`` (what img2dataset writes and open_clip reads) beside ``KEY.json``;
- ``sharegpt4v`` / ``llava``: a JSON list of LLaVA ``conversations`` records, ``sharegpt``:
  the ``messages`` layout, each answer under the question it answered
  (:mod:`capaudit.io.export_conversations`); ``coco``: COCO captions JSON (integer ids
  only), ``hf``: a ``datasets`` folder;
- ``original``: the file the set came from, revised in place
  (:mod:`capaudit.io.export_original`).

Outputs go through :mod:`capaudit.core.safe_write`: written under a fresh temporary
name and renamed into place, so an interrupted export never leaves a truncated file that
looks complete, a link is never followed, and nothing capaudit did not write is removed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from capaudit.core.names import safe_file_name
from capaudit.errors import InputError
from capaudit.io.export_conversations import CONVERSATION_FORMATS, write_conversations
from capaudit.store import exports

FORMATS = ("original", "jsonl", "parquet", "webdataset", "sharegpt4v", "llava", "sharegpt",
           "coco", "hf")
SUFFIX = {"jsonl": ".jsonl", "parquet": ".parquet", "webdataset": "", "hf": "", "coco": ".json",
          "sharegpt4v": ".json", "llava": ".json", "sharegpt": ".json"}


def default_out(name: str, suffix: str) -> Path:
    """The output a set's name gives when no ``--out`` is given: its safe file-name form,
    in the working folder (a name like ``../x`` or ``/tmp/x`` never leaves it)."""
    return Path(safe_file_name(name) + suffix)


def export_set(store, name: str, to: str, out: str | Path | None = None, *,
               overwrite: bool = False, prompt: str | None = None,
               report: dict | None = None) -> Path:
    """Write set ``name`` as ``to``. A file output replaces a file of that name; a folder
    output (``webdataset``, ``hf``) must be new or empty unless ``overwrite``, which
    replaces only capaudit's own files in it. The store and the registered sources are
    never written over. ``prompt``: the question of an answer the set holds none for
    (conversation layouts); ``report`` (a dict) receives what such a layout wrote."""
    from capaudit.core.safe_folder import folder_output
    from capaudit.core.safe_write import atomic_open, atomic_path

    if to not in FORMATS:
        raise InputError(f"unknown export format '{to}'", fix=f"use --to {' | '.join(FORMATS)}")
    info = store.get_set(name)
    if to == "original":
        from capaudit.io.export_original import export_original, root_set

        src = Path(root_set(store, name).source_path or name)
        out = _checked(store, Path(out) if out else _unclaimed(default_out(
            name, "".join(src.suffixes[-1:])), overwrite), to)
        return export_original(store, name, out, report)[0]
    out = _checked(store, Path(out) if out else _unclaimed(default_out(name, SUFFIX[to]),
                                                           overwrite), to)
    if to in ("webdataset", "hf"):
        with folder_output(out, overwrite=overwrite) as tmp:
            if to == "hf":
                _export_layout(store, info, to, tmp)
            else:
                _write_shards(store, info, tmp)
        return out
    if to == "parquet":
        with store.bounded_cache(), atomic_path(out) as tmp:
            exports.copy_to_parquet(store, info.set_id, tmp)
        return out
    # the set is read whole: under the bulk writes' bound, DuckDB's buffer pool does not keep
    # every block it read (767 MB for 1.2M captions to JSONL)
    with store.bounded_cache(), atomic_open(out) as fh:
        if to == "jsonl":
            for batch in exports.caption_batches(store, info.set_id):
                for rec in batch.to_pylist():
                    line = {"image_id": rec["image_id"] if rec["image_id"] is not None
                            else rec["image_key"], "caption": rec["caption"]}
                    if rec["namespace"]:   # read back by sets add (a column of one value)
                        line["namespace"] = rec["namespace"]
                    fh.write(json.dumps(line, ensure_ascii=False) + "\n")
        elif to in CONVERSATION_FORMATS:
            from capaudit.io.export_original import root_set

            root_format = root_set(store, name).format
            written = write_conversations(
                fh, exports.caption_batches(store, info.set_id, meta=True), to, prompt=prompt,
                root_format=root_format)
            (report if report is not None else {}).update(written)
        else:
            _export_layout(store, info, to, fh, report)
    return out


def _unclaimed(out: Path, overwrite: bool) -> Path:
    """The default output ``out`` (no ``--out`` given), unless a file of that name is there
    that capaudit did not write (no provenance of ours beside it): a name the user did not
    choose never replaces their file (``--overwrite`` or ``--out`` says they mean it)."""
    ours = out.with_name(out.name + ".provenance.json")
    if out.is_file() and not ours.is_file() and not overwrite:
        raise InputError("a file of the default output name is already there, and capaudit "
                         "did not write it", path=out,
                         fix="name the output with --out, or pass --overwrite to replace it")
    return out


def _checked(store, out: Path, to: str) -> Path:
    """``out`` once it and the files written beside it (provenance, changes) are safe
    targets: refused before anything is written, so a refusal leaves no half export."""
    from capaudit.core.safe_write import check_file_target, check_folder_target

    if to in ("webdataset", "hf"):
        check_folder_target(out)
        refuse_protected(store, out)
        return out
    check_file_target(out)   # '.', '/' or a folder: refused before names are made from it
    beside = [out.with_name(out.name + ".provenance.json")] + \
        ([out.with_name(out.name + ".changes.jsonl")] if to == "original" else [])
    for path in (out, *beside):
        check_file_target(path)
    refuse_protected(store, out, *beside)
    return out


def refuse_protected(store, *outputs: str | Path) -> None:
    """Refuse an output that is the store (or its WAL) or a registered set's source file,
    also through another name (a hard link)."""
    protected = {}
    for p in (Path(store.path), Path(str(store.path) + ".wal")):
        protected[p] = "the store"
    for info in store.list_sets():
        if info.source_path and Path(info.source_path).is_file():
            protected[Path(info.source_path)] = f"the source file of set '{info.name}'"
    for out in outputs:
        out = Path(out)
        for p, what in protected.items():
            if out.resolve() == p.resolve() or (out.exists() and p.exists()
                                                and os.path.samefile(out, p)):
                raise InputError(f"the output is {what}; writing it would destroy it",
                                 path=out, fix="choose another --out")


WEBDATASET_LAYOUT = ("one sample per caption, 1,000 samples a shard: KEY.txt holds the caption "
                     "(where img2dataset writes it and open_clip-style loaders read it), "
                     "KEY.json the image's id, key and namespace and which of its captions "
                     "this is (caption_index of n_captions); an image's captions are samples KEY_c0, "
                     "KEY_c1, ...")


def _write_shards(store, info, folder: Path) -> None:
    """Webdataset shards (:data:`WEBDATASET_LAYOUT`): every caption reaches a trainer that
    reads ``.txt``; ``sets add`` reads the shards back to the same ids and captions."""
    from capaudit.io.layouts.tar import add_file, open_writer

    used: set[str] = set()
    samples = []
    for key, iid, caps, ns in exports.captions_by_image(store, info.set_id):
        for j, cap in enumerate(caps):
            name = _unique(_safe_key(key) + (f"_c{j}" if len(caps) > 1 else ""), used)
            meta = {"image_id": iid, "key": key, "caption_index": j, "n_captions": len(caps),
                    **({"namespace": ns} if ns else {})}
            samples.append((name, json.dumps(meta, ensure_ascii=False).encode(), cap.encode()))
    stem, shard_size = safe_file_name(info.name), 1000
    for s in range(0, len(samples), shard_size):
        with open_writer(folder / f"{stem}-{s // shard_size:05d}.tar") as tf:
            for name, meta, text in samples[s:s + shard_size]:
                for ext, data in (("txt", text), ("json", meta)):
                    add_file(tf, f"{name}.{ext}", data)


def _unique(name: str, used: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``...: two keys whose safe forms meet (``a/b``, ``a_b``)
    must not give two members of one name."""
    out, n = name, 1
    while out in used:
        n += 1
        out = f"{name}_{n}"
    used.add(out)
    return out


def _safe_key(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in str(key))


def _export_layout(store, info, to: str, tmp, report: dict | None = None) -> None:
    """COCO captions JSON written to the open file ``tmp``, or a ``datasets`` folder at the
    path ``tmp``: the set's caption, image key/id, namespace and the per-caption details of
    its latest audit (``audit_run_id``; only the caption columns when it was never
    audited)."""
    if to == "hf":
        from capaudit.errors import require

        datasets = require("datasets", "hf", "exporting a datasets folder")
        columns = exports.captions_with_details(store, info.set_id, info.name,
                                                exports.latest_audit_run(store, info.name))
        ds = datasets.Dataset.from_dict(columns.to_pydict())
        ds.save_to_disk(str(tmp))
        return
    rows = store.captions(info.name, "row_idx, image_key, image_id, caption, namespace, "
                                     "meta").to_pylist()
    bad = next((r for r in rows if r["image_id"] is None), None)   # to == "coco"
    if bad is not None:
        raise InputError(f"caption row {bad['row_idx']} has no integer image id "
                         f"('{bad['image_key']}'): COCO JSON needs one",
                         fix="export with --to jsonl or sharegpt4v instead")
    tmp.write(json.dumps(_coco_document(info, rows, report), ensure_ascii=False, indent=1))


def _coco_document(info, rows: list[dict], report: dict | None) -> dict:
    """COCO captions JSON of ``rows``: each image under its file name
    (:mod:`capaudit.io.image_names`), the set's namespace in ``info`` (read back by ``sets
    add``); ``report`` receives the note on images named by id only."""
    from capaudit.io.image_names import image_file_name
    from capaudit.io.imageids import set_namespace

    images, by_id = {}, 0
    for r in rows:
        if r["image_id"] not in images:
            images[r["image_id"]], named = image_file_name(r["image_key"], r["image_id"],
                                                           r["namespace"], r["meta"])
            by_id += not named
    ns = set_namespace(r["namespace"] for r in rows)
    if by_id and report is not None:
        report["note"] = (f"{by_id:,} coco2014 images named by their id: an id does not say "
                          "whether the file is COCO_train2014_ or COCO_val2014_ (the set was "
                          "not read from file names); map the ids to your image files")
    return {"info": {"description": f"caption set '{info.name}', exported by capaudit",
                     **({"namespace": ns} if ns and ns != "mixed" else {})},
            "images": [{"id": i, "file_name": k} for i, k in images.items()],
            "annotations": [{"id": n, "image_id": r["image_id"], "caption": r["caption"]}
                            for n, r in enumerate(rows)]}


def export_with_provenance(store, name: str, to: str, out: str | Path | None = None, *,
                           overwrite: bool = False, prompt: str | None = None,
                           report: dict | None = None) -> Path:
    """:func:`export_set`, then the set's provenance (sha256, source, size; for a
    conversation layout, how many answers kept their question and which prompt the others
    got) beside the output: the one path of ``capaudit sets export`` and
    :meth:`capaudit.api.AuditStore.export`. ``report`` (a dict) receives the same counts
    and the one-line ``note`` to show."""
    from capaudit.core.config import provenance_beside

    written: dict = {}
    path = export_set(store, name, to, out, overwrite=overwrite, prompt=prompt, report=written)
    info = store.get_set(name)
    record = {"set": name, "to": to, "sha256": info.sha256, "source": info.source_path,
              "n_captions": info.n_captions}
    if to == "webdataset":
        record["layout"] = WEBDATASET_LAYOUT
    if "answers" in written:
        from capaudit.io.export_conversations import export_note

        written["note"] = export_note(written)
        record["questions"] = written
    elif written.get("note"):   # --to original: what the file keeps and what it cannot
        record["note"] = written["note"]
    provenance_beside(path, record)
    if report is not None:
        report.update(written)
    return path
