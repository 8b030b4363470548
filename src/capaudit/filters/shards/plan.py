"""The plan of a sharded filter run: its shards (a manifest listed once), their tasks, the
keys their markers carry, and the output's rules.

A task is one input shard; its output's name is the input's name relative to the listing's
root (datatrove's lesson: striding ``rank::world_size`` reassigns work when the list
changes), under DST, and its log is ``DST.log/NAME.log.parquet``. Its markers live in the
work folder, one sub-folder per configuration (:func:`run_key`), so configurations do not
evict each other, as in the sharded audit.

The output follows the one writer's rules (:mod:`capaudit.core.safe_write`): DST is a folder
(never a link, the working folder or the input's), and a file already at an output's name is
replaced only when capaudit wrote it: listed in DST's manifest by an earlier run, or claimed
in the work folder by this run before it was written (a killed run resumed).
"""

from __future__ import annotations

import os
from urllib.parse import quote

from capaudit.errors import InputError
from capaudit.core.storage import paths
from capaudit.core.storage.urls import join, on_disk, shown_url
from capaudit.io import shard_files as files

__all__ = ["shard_format", "run_key", "decided_key", "make_tasks", "check_out", "LOG_SUFFIX",
           "MANIFEST", "log_dir", "summary_path"]

LOG_SUFFIX = ".log.parquet"
CLAIMS = ".claims"                  # DST.log/.claims: outputs being written by a run
MANIFEST = ".capaudit-files.json"   # the files a run wrote (core/safe_folder's name)
_BY_SUFFIX = {".tar": "webdataset", ".parquet": "parquet-shard", ".csv": "csv", ".tsv": "csv"}


def log_dir(out: str) -> str:
    return out.rstrip("/\\") + ".log"


def summary_path(out: str) -> str:
    return out.rstrip("/\\") + ".summary.json"


def shard_format(path: str, fmt: str | None) -> str:
    """A shard's format: ``fmt`` when given, else by suffix (tar, parquet, CSV/TSV) or, for
    JSON/JSONL, by sniffing as ``sets add`` does; a JSON list of records no reader claims
    (COCO results: ``[{"image_id", "caption"}]``) is ``json-list``, flat records. A remote
    JSON shard is sniffed on a local copy of its head (never downloaded whole)."""
    fmt = (("parquet-shard" if fmt == "parquet" else fmt) if fmt and fmt != "auto" else
           _BY_SUFFIX.get(os.path.splitext(path)[1].lower()))
    if fmt == "csv" and not on_disk(path):
        raise InputError("a CSV/TSV shard is read from a local path only (its header is "
                         "sniffed from the file)", path=shown_url(path),
                         fix="copy the CSV shards to a local folder, or convert them to JSONL")
    if fmt:
        return fmt
    from pathlib import Path

    from capaudit.io.layouts.json import is_json_array
    from capaudit.io.readers.base import detect_format, read_head

    with paths.local_head(path) as local:
        try:
            return detect_format(Path(local))
        except InputError:
            if is_json_array(read_head(Path(local), 4096)):   # a JSON list of flat records
                return "json-list"
            raise


def run_key(filter_name: str, version: str, options: dict, evidence: dict, reader: dict,
            fmt: str | None) -> tuple[str, str]:
    """``(configuration hash, coverage-pass hash)``: what a shard's two markers are keyed by
    (with the input's sha256). A file option is keyed by the evidence's content, not its
    path: the same evidence moved is the same run."""
    from capaudit import __version__
    from capaudit.io.markers import config_hash

    ev = {"kind": evidence["kind"], "sha256": evidence["sha256"],
          "namespace": evidence.get("namespace"),
          **({"references": evidence["references_sha256"]}   # the images they name counted
             if evidence.get("references_sha256") else {})}
    col = {"reference_col": options["reference_col"]} if options.get("reference_col") else {}
    ids = config_hash({"evidence": ev, "reader": reader, "format": fmt, "capaudit": __version__,
                       **col})   # the coverage pass refuses the caption's own column
    cfg = config_hash({"filter": filter_name, "version": version, "options": options,
                       "evidence": {**ev, "source": evidence["source"]}, "reader": reader,
                       "format": fmt, "capaudit": __version__})
    return cfg, ids


def decided_key(key: str, decided: dict) -> str:
    """The filter pass's key once a first pass decided ``decided`` for it (a corpus-level
    decision that changes redoes the shards it touches)."""
    if not decided:
        return key
    from capaudit.io.markers import config_hash

    return config_hash({"run": key, "decided": decided})


def make_tasks(shards: list[tuple], out: str, work_root: str, key: str, ids_key: str,
               common: dict) -> list[dict]:
    """One plain-dict task per shard (strings, numbers and the store's identity of the input:
    what a Ray task carries); ``shards``: ``(location, rel, size, identity)``. Its markers go
    in the work folder (made here when local), one folder per configuration."""
    logs = log_dir(out)
    work, ids_work = (paths.make_folder(join(work_root, name))
                      for name in (key, "coverage-" + ids_key))
    tasks = []
    for i, (path, rel, size, ident) in enumerate(shards):
        tasks.append({**common, "path": path, "rel": rel, "index": i, "size": size,
                      "identity": ident, "fmt": shard_format(path, common.get("fmt")),
                      "out_path": join(out, rel),
                      "log_rel": rel + LOG_SUFFIX, "log_path": join(logs, rel + LOG_SUFFIX),
                      "work": work, "ids_work": ids_work,
                      # beside the outputs, not in the (node-local) work folder: the driver
                      # reads it when a killed run resumes
                      "claim": join(logs, CLAIMS, quote(rel, safe="") + ".json"),
                      "cfg_hash": key, "ids_hash": ids_key})
    return tasks


def _manifest(folder: str) -> set[str]:
    data = paths.read_json(join(folder, MANIFEST)) or {}
    names = data.get("files", [])
    return {n for n in names if isinstance(n, str)} if isinstance(names, list) else set()


def check_out(out: str, tasks: list[dict], inputs: list[str]) -> None:
    """Refuse an output that would overwrite an input or a file capaudit did not write."""
    paths.check_out_folder(out)
    for folder in (out, log_dir(out)):
        if any(paths.inside(path, folder) for path in inputs):
            raise InputError("the output folder holds the input shards: cleaning would "
                             "write over them", path=shown_url(folder),
                             fix="choose a new --out")
    for folder, name_of in ((out, "rel"), (log_dir(out), "log_rel")):
        if paths.path_kind(folder) not in ("missing", "dir"):
            raise InputError("the output exists and is a file, not a folder",
                             path=shown_url(folder),
                             fix="choose a new --out")
        ours = _manifest(folder)
        for t in tasks:
            target = join(folder, t[name_of])
            kind = paths.path_kind(target)
            if kind in ("link", "dir"):
                raise InputError("a link or a folder is where a cleaned shard goes",
                                 path=shown_url(target), fix="choose a new --out")
            if kind == "file" and t[name_of] not in ours and \
                    paths.read_json(t["claim"]) is None:
                raise InputError("a file is already where a cleaned shard goes, and capaudit "
                                 "did not write it", path=shown_url(target),
                                 fix="choose a new --out, or move the file away")


def write_manifest(folder: str, names: list[str]) -> None:
    """Add ``names`` to the folder's manifest (what later runs may replace)."""
    files.write_json(join(folder, MANIFEST),
                     {"files": sorted(_manifest(folder) | set(names) | {MANIFEST})})


def drop_claims(out: str, tasks: list[dict]) -> None:
    """After the manifests list the outputs: the claims of ``tasks`` go (and their folder,
    once empty)."""
    for t in tasks:
        paths.remove_file(t["claim"])
    # claims of shards not finished (a skipped shard) stay for the next run
    paths.remove_empty_dir(join(log_dir(out), CLAIMS))
