"""``shards build``: images paired with a caption set, written as webdataset shards (the
unit of work of ``enrich`` and ``annotations detect``) by the runner (:mod:`capaudit.runner`).

Why a step: each shard is a task (its tar, index and marker written whole by
:func:`capaudit.io.image_shards.write_shard`) on local processes or Ray, bytes the same
whatever the workers; a shard whose marker holds this configuration over the same images
and captions is kept, so a killed build resumes.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from capaudit.core.storage.paths import clean_tmp, write_whole
from capaudit.errors import InputError
from capaudit.io.image_shards import Sample, read_manifest, write_shard
from capaudit.io.imageids import parse_image_id
from capaudit.io.layouts.tar import IMAGE_EXTS
from capaudit.io.markers import MARKER_SUFFIX, config_hash, matches, read_marker
from capaudit.runner.step import Step

__all__ = ["build_shards", "BuildStep", "build_shard"]


@dataclass(frozen=True)
class BuildTask:
    out_dir: str
    name: str            # shard-NNNNN.tar
    cfg_hash: str
    images: tuple        # (path, image id, captions, namespace) per image, in shard order
    input: dict          # the images' and captions' identity, kept in the marker


def build_shard(task: BuildTask) -> dict:
    """Write one shard (its images read one at a time); a file that cannot be read or
    written, or an image that is no image, fails it in one line."""
    samples = (Sample(key=_key(p, iid), image_id=iid,
                      image=_image_bytes(p), image_ext=Path(p).suffix.lower().lstrip("."),
                      captions=list(caps),
                      meta={"file_name": Path(p).name, **({"namespace": ns} if ns else {})})
               for p, iid, caps, ns in task.images)
    try:
        counts = write_shard(Path(task.out_dir), task.name, samples, task.cfg_hash,
                             {"input": task.input})
    except OSError as exc:
        return {"shard": task.name, "status": "failed", "error": str(InputError(
            f"cannot read or write this file ({exc.strerror or exc})", path=exc.filename,
            fix="an image must be readable and --out writable"))}
    except InputError as exc:
        return {"shard": task.name, "status": "failed", "error": str(exc)}
    return {"shard": task.name, "status": "done", **counts}


def _image_bytes(path: str) -> bytes:
    """The image's bytes, once PIL has recognised them as an image (its header parsed and
    ``verify`` passed, nothing decoded): a file of other bytes under an image's name would
    reach every reader of the shard (detect, enrich, the judge) as a broken sample."""
    from PIL import Image, UnidentifiedImageError

    data = Path(path).read_bytes()
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.verify()
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise InputError(f"not an image that can be read ({exc})", path=path,
                         fix="replace or remove this file from --images") from None
    return data


def _identity(chunk: list) -> dict:
    """What a marker records of its shard's input: a hash of the images' names, sizes and
    modification times with their captions and namespaces, and their bytes in all (none for
    an image gone: the shard is redone, and its task names the image)."""
    try:
        stats = [Path(p).stat() for p, *_ in chunk]
    except OSError:
        return {}
    text = json.dumps([[Path(p).name, st.st_size, st.st_mtime_ns, caps, ns]
                       for (p, _, caps, ns), st in zip(chunk, stats)])
    return {"checksum": hashlib.sha256(text.encode()).hexdigest(),
            "size": sum(st.st_size for st in stats)}


class BuildStep(Step):
    """A task per shard not yet done (:func:`build_shard`); the merge writes the manifest.
    No work folder held: a lock file would be one more file in the user's shard folder."""

    passes = (build_shard,)

    def __init__(self, images_dir: Path, captions: pa.Table, out_dir: Path, shard_size: int,
                 set_name: str):
        if not images_dir.is_dir():
            raise InputError("not a folder of images", path=images_dir, fix="pass --images DIR")
        if shard_size < 1:
            raise InputError("--shard-size must be at least 1")
        self.paired, self.unmatched = _pair(images_dir, captions, set_name)
        self.out_dir, self.shard_size, self.set_name = out_dir, shard_size, set_name
        self.key = config_hash({"set": set_name, "shard_size": shard_size,
                                "files": [Path(p).name for p, *_ in self.paired]})
        self.shared = ((str(images_dir), "image folder", "--images"),
                       (str(out_dir), "shard folder", "--out"))

    def plan(self, root: str, workers: int) -> list[BuildTask]:
        try:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:   # a file of that name, a folder we may not write in
            raise InputError(f"cannot make the output folder ({exc.strerror or exc})",
                             path=self.out_dir, fix="pass --out a new or existing folder "
                                                    "you can write in") from None
        self.names, todo, markers = [], [], {}
        for start in range(0, len(self.paired), self.shard_size):
            chunk = self.paired[start:start + self.shard_size]
            name = f"shard-{start // self.shard_size:05d}.tar"
            self.names.append(name)
            fp, markers[name] = _identity(chunk), read_marker(self.out_dir, name)
            if not (matches(markers[name], self.key, fp)
                    and (self.out_dir / name).is_file()):
                todo.append(BuildTask(str(self.out_dir), name, self.key, tuple(chunk), fp))
        _refuse_foreign(self.out_dir, todo, markers)
        clean_tmp(str(self.out_dir), ["manifest.json", *(  # what killed writers left of ours
            n[:-len(".tar")] + ext for n in self.names for ext in (".tar", ".parquet",
                                                                   MARKER_SUFFIX))])
        return todo

    def merge(self, tasks: list[BuildTask], results: list[dict[int, dict]]) -> dict:
        summary = {"shards": len(self.names), "written": len(tasks),
                   "skipped_done": len(self.names) - len(tasks), "samples": len(self.paired),
                   "unmatched_images": self.unmatched, "config_hash": self.key,
                   "removed_stale": len(_remove_stale(self.out_dir, len(self.names)))}
        write_whole(self.out_dir / "manifest.json", json.dumps(
            {"captions_set": self.set_name, "shard_size": self.shard_size, **summary},
            sort_keys=True, indent=1).encode())
        return summary


def _refuse_foreign(out_dir: Path, tasks: list[BuildTask], markers: dict) -> None:
    """Stop, before anything is written, where a file this build would replace is not one
    ``shards build`` wrote (the folder is the user's: nothing capaudit did not create is
    overwritten). A shard's files are ours beside a marker of ours naming that shard; with no
    marker (a build stopped between a shard's files), a tar and an index are ours when they
    hold exactly the samples this shard is to hold (``markers``: each shard's, as the plan
    read them). A ``manifest.json`` must be a build's."""
    taken = []
    for task in tasks:
        ours = _ours(markers[task.name], task.name)
        keys = [_key(p, iid) for p, iid, *_ in task.images]
        stem = task.name[:-len(".tar")]
        for name, held in ((task.name, _tar_keys), (stem + ".parquet", _index_keys),
                           (stem + MARKER_SUFFIX, None)):
            path = out_dir / name
            if not os.path.lexists(path):
                continue
            if path.is_symlink() or not path.is_file() or not ours and (
                    held is None or held(path) != keys):
                taken.append(name)
    manifest = out_dir / "manifest.json"
    if os.path.lexists(manifest):
        data = read_manifest(out_dir) if manifest.is_file() and not manifest.is_symlink() \
            else None
        if not (isinstance(data, dict) and {"captions_set", "config_hash"} <= data.keys()):
            taken.append(manifest.name)
    if taken:
        raise InputError(f"the output folder holds {taken[0]}, which shards build did not "
                         f"write ({len(taken)} such file(s)); nothing was written",
                         path=out_dir / taken[0],
                         fix="choose a new --out folder, or move those files away")


def _ours(marker, name: str) -> bool:
    """Whether a marker is one ``shards build`` wrote for shard ``name``."""
    return isinstance(marker, dict) and marker.get("shard") == name \
        and isinstance(marker.get("config_hash"), str)


def _remove_stale(out_dir: Path, count: int) -> list[str]:
    """Remove the shards of an earlier, larger build beyond this build's ``count`` (a reader
    of the folder would take their samples for this build's): only ``shard-NNNNN`` files
    whose marker of ours names them, the marker last (a build stopped here finds it again);
    a tar or index with no marker of ours is the user's and stays. Returns the shards removed."""
    removed = []
    for marker_file in sorted(out_dir.glob("shard-*" + MARKER_SUFFIX)):
        stem = marker_file.name[:-len(MARKER_SUFFIX)]
        found = re.fullmatch(r"shard-(\d{5,})", stem)
        if not found or int(found.group(1)) < count or marker_file.is_symlink() or \
                not _ours(read_marker(out_dir, stem + ".tar"), stem + ".tar"):
            continue
        for path in (out_dir / (stem + ".tar"), out_dir / (stem + ".parquet"), marker_file):
            if path.is_file() and not path.is_symlink():
                path.unlink()
        removed.append(stem + ".tar")
    return removed


def _key(path: str, iid) -> str:
    """A sample's key in its shard: the image id in COCO's 12 digits, else the file's stem."""
    return f"{iid:012d}" if iid is not None else Path(path).stem


def _tar_keys(path: Path) -> list | None:
    """The sample keys of a tar as ``write_shard`` lays one out (an image, then its .json),
    or None when it is not such a tar."""
    import tarfile

    try:
        with tarfile.open(path) as tf:
            names = tf.getnames()
    except (OSError, tarfile.TarError):
        return None
    keys = [n.rsplit(".", 1)[0] for n in names[1::2]]
    laid = [x for k, n in zip(keys, names[::2]) for x in (n, f"{k}.json")]
    return keys if len(names) % 2 == 0 and names == laid else None


def _index_keys(path: Path) -> list | None:
    """The ``key`` column of a shard's parquet index, or None when it has none."""
    import pyarrow.parquet as pq

    try:
        return pq.read_table(path, columns=["key"]).column("key").to_pylist()
    except (OSError, pa.ArrowException, KeyError):
        return None


def _pair(images_dir: Path, captions: pa.Table, set_name: str) -> tuple[list, int]:
    """Each image with captions as (path, image id, captions, the set's namespace: read back,
    the ids keep their dataset), found by the id in its name, else its name or stem as a
    caption key; and how many images had none."""
    found: dict = {}   # image id (int) or key (str) -> (captions, the first one's namespace)
    spaces = captions.column("namespace").to_pylist() if "namespace" in \
        captions.column_names else [None] * captions.num_rows
    for key, iid, cap, ns in zip(captions.column("image_key").to_pylist(),
                                 captions.column("image_id").to_pylist(),
                                 captions.column("caption").to_pylist(), spaces):
        for k in (str(key),) if iid is None else (int(iid), str(key)):
            found.setdefault(k, ([], ns))[0].append(cap)
    files = sorted(p for p in images_dir.iterdir()
                   if (p.is_file() or p.is_symlink() and not p.exists())   # a dangling link
                   and p.suffix.lower().lstrip(".") in IMAGE_EXTS)          # fails its shard
    if not files:
        raise InputError("no images (.jpg/.png/...) in this folder", path=images_dir)
    paired = []
    for p in files:
        iid = parse_image_id(p.name)
        caps, ns = next((found[k] for k in (iid, p.name, p.stem) if k in found), (None, None))
        if caps:
            paired.append((str(p), iid, tuple(caps), ns))
    if not paired:
        raise InputError(f"no image in this folder matches a caption of set '{set_name}'",
                         path=images_dir, fix="name images by COCO file name or caption key")
    return paired, len(files) - len(paired)


def build_shards(images_dir: str | Path, captions: pa.Table, out_dir: str | Path, *,
                 shard_size: int = 1000, set_name: str = "", executor: str = "local",
                 workers: int = 1, address: str | None = None, on_shard=None,
                 on_start=None) -> dict:
    """Pair images (named by COCO file name or key) with captions and write the shards not
    yet done; returns the summary (images without a caption are counted, never silent)."""
    from capaudit.runner.run import run_step
    from capaudit.runner.step import RunOptions

    step = BuildStep(Path(images_dir), captions, Path(out_dir), shard_size, set_name)
    return run_step(step, RunOptions(executor, workers, address, on_shard=on_shard,
                                     on_start=on_start))
