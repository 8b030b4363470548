"""Captions from webdataset tar shards (as img2dataset or ``capaudit shards build`` write them).

Samples are grouped by key (the file name without its extensions). A sample's
caption comes from ``KEY.txt`` or from ``KEY.json`` (``caption``, or a
``captions`` list giving one row per caption); its image id from the JSON's
``image_id``, else from the key. Images are not read here.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.core.ranges import env_number
from capaudit.io.imageids import (infer_namespace, is_digit_key, is_row_key, key_image_id,
                                  parse_image_id)
from capaudit.io.readers.base import CaptionReader, make_batch

if TYPE_CHECKING:
    import tarfile

IMAGE_EXTS = ("jpg", "jpeg", "png", "webp", "bmp")
TEXT_LIMIT_ENV, IMAGE_LIMIT_ENV = "CAPAUDIT_TAR_TEXT_LIMIT_MB", "CAPAUDIT_TAR_IMAGE_LIMIT_MB"
DEFAULT_TEXT_LIMIT_MB, DEFAULT_IMAGE_LIMIT_MB = 4, 128


def member_limits() -> tuple[int, int]:
    """(caption/JSON cap, image cap) in bytes: a 1.5 GB sparse member is never read."""
    caps = []
    for env, default in ((TEXT_LIMIT_ENV, DEFAULT_TEXT_LIMIT_MB),
                         (IMAGE_LIMIT_ENV, DEFAULT_IMAGE_LIMIT_MB)):
        # a size in MB: 1 byte to 1 TB (inf or nan would overflow int())
        caps.append(int(env_number(env, float(default), 1e-6, 1e6) * 1_000_000))
    return caps[0], caps[1]


def shard_paths(path: Path) -> list[Path]:
    if path.is_dir():
        shards = sorted(p for p in path.iterdir() if p.suffix == ".tar")
        if not shards:
            raise InputError("no .tar shards in this folder", path=path,
                             fix="point to a webdataset folder or a .tar file")
        return shards
    return [path]


def iter_samples(tar_path: Path, fileobj=None) -> Iterator[tuple[str, dict[str, bytes]]]:
    """Yield (key, {extension: bytes}) per sample, in tar order (``fileobj``: the tar opened
    by :func:`capaudit.core.storage.fs.open_input`, ``tar_path`` then only names it).

    The tar must be whole: a member cut short, an unreadable header, a
    missing end-of-archive marker or fewer samples than the shard's index
    declares raise :class:`InputError` naming the file (a tar cut at a member
    boundary otherwise reads as a complete, shorter one). Members larger than
    their cap (:func:`member_limits`) are refused before a byte is read.
    """
    import tarfile  # here, not at the top: every caption file's format sniff imports this module

    text_cap, image_cap = member_limits()
    try:
        tf = tarfile.open(tar_path, "r") if fileobj is None else \
            tarfile.open(fileobj=fileobj, mode="r")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise InputError(f"not a readable tar shard ({exc})", path=tar_path) from None
    current, files, n_members, n_samples = None, {}, 0, 0
    seen: set[str] = set()    # member names: a second member of a name is refused, never
    with tf:                  # read over the first (tar keeps both; extraction keeps one)
        members = iter(tf)
        while True:
            try:
                member = next(members, None)
            except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
                raise _broken(tar_path, n_members, exc) from None
            if member is None:
                break
            n_members += 1
            if not member.isfile():
                continue
            name = member.name.rsplit("/", 1)[-1]
            if "." not in name:
                continue
            if member.name in seen:
                raise InputError(f"member '{member.name}' appears twice in the tar: which one "
                                 "holds the sample is not known", path=tar_path,
                                 fix="rebuild the shard with one member per name")
            seen.add(member.name)
            key, ext = name.split(".", 1)
            prefix = member.name[: -len(name)]
            key = prefix + key
            if current is not None and key != current:
                n_samples += 1
                yield current, files
                files = {}
            current = key
            files[ext] = _read_member(tf, member, tar_path, text_cap, image_cap)
        _check_end(tf, tar_path, n_members)
        if current is not None:
            n_samples += 1
        if fileobj is None:   # an index beside a remote tar is not looked for
            _check_count(tar_path, n_samples)
        if current is not None:
            yield current, files


def _read_member(tf: tarfile.TarFile, member: tarfile.TarInfo, tar_path: Path,
                 text_cap: int, image_cap: int) -> bytes:
    import tarfile

    is_image = member.name.rsplit(".", 1)[-1].lower() in IMAGE_EXTS
    cap, env = (image_cap, IMAGE_LIMIT_ENV) if is_image else (text_cap, TEXT_LIMIT_ENV)
    if member.size > cap:
        raise InputError(f"member '{member.name}' is {member.size} bytes, over the "
                         f"{cap / 1e6:g} MB limit for {'image' if is_image else 'caption/JSON'}"
                         " members", path=tar_path,
                         fix=f"check the shard, or raise the limit with {env}=MB")
    try:
        data = tf.extractfile(member).read()
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise InputError(f"truncated or corrupt tar: member '{member.name}' cannot be read "
                         f"whole ({exc})", path=tar_path,
                         fix="rebuild or re-download the shard") from None
    if len(data) != member.size:
        raise InputError(f"truncated tar: member '{member.name}' is cut short "
                         f"({len(data)} of {member.size} bytes)", path=tar_path,
                         fix="rebuild or re-download the shard")
    return data


def _broken(tar_path: Path, n_members: int, exc: BaseException) -> InputError:
    return InputError(f"truncated or corrupt tar after {n_members} members ({exc})",
                      path=tar_path, fix="rebuild or re-download the shard")


def _check_end(tf: tarfile.TarFile, tar_path: Path, n_members: int) -> None:
    """The end-of-archive marker (two zero blocks) must follow the last member.

    ``tarfile`` stops silently at a cut or an unreadable header once past the
    first member; only the marker tells a whole tar from a cut one.
    """
    import tarfile

    try:
        tf.fileobj.seek(tf.offset)
        tail = tf.fileobj.read(2 * tarfile.BLOCKSIZE)
    except (OSError, EOFError, zlib.error) as exc:
        raise _broken(tar_path, n_members, exc) from None
    if len(tail) == 2 * tarfile.BLOCKSIZE and not tail.strip(b"\0"):
        return
    if tail[:tarfile.BLOCKSIZE].strip(b"\0") and len(tail) >= tarfile.BLOCKSIZE:
        why = f"corrupt tar: unreadable header at byte {tf.offset} after {n_members} members"
    else:
        why = (f"truncated tar: no end-of-archive marker after {n_members} members "
               f"(the file ends at byte {tf.offset + len(tail)})")
    raise InputError(why, path=tar_path, fix="rebuild or re-download the shard")


def declared_count(tar_path: Path) -> tuple[int, Path] | None:
    """Samples the shard declares beside its tar: capaudit's parquet index or img2dataset stats."""
    index = tar_path.with_suffix(".parquet")
    if index.is_file():
        import pyarrow.parquet as pq  # only here: every reader is loaded to sniff a format

        try:
            meta = pq.read_metadata(index)
            if {"key", "n_captions", "image_sha256"} <= set(meta.schema.names):
                return meta.num_rows, index
        except (OSError, pa.ArrowException):
            pass  # not capaudit's index (img2dataset writes one row per URL tried)
    stats = tar_path.with_name(tar_path.stem + "_stats.json")
    if stats.is_file():
        try:
            n = json.loads(stats.read_text(encoding="utf-8")).get("successes")
        except (OSError, ValueError, AttributeError):
            n = None
        if isinstance(n, int) and not isinstance(n, bool):
            return n, stats
    return None


def _check_count(tar_path: Path, n_samples: int) -> None:
    declared = declared_count(tar_path)
    if declared is not None and declared[0] != n_samples:
        raise InputError(f"the tar holds {n_samples} samples but {declared[1].name} declares "
                         f"{declared[0]}", path=tar_path,
                         fix="rebuild the shard (or remove a stale index beside it)")


def parse_sample(key: str, files: dict[str, bytes], shard: Path, row: int,
                 caption_key: str = "caption", strict: bool = True) -> tuple[dict, list]:
    """A sample's JSON metadata and captions (``captions`` list, ``caption``, or ``.txt``).

    ``strict`` (reading captions) refuses a sample without a caption or with a
    non-UTF-8 ``.txt``; shard readers that only need images pass ``False``.
    """
    meta: dict = {}
    if "json" in files:
        try:
            meta = json.loads(files["json"].decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise InputError(f"sample '{key}' has malformed JSON", path=shard, row=row) from None
        if not isinstance(meta, dict):
            raise InputError(f"sample '{key}' JSON is not an object", path=shard, row=row)
    if isinstance(meta.get("captions"), list):
        return meta, meta["captions"]
    if caption_key in meta:
        return meta, [meta[caption_key]]
    if "txt" in files:
        try:
            return meta, [files["txt"].decode("utf-8")]
        except UnicodeDecodeError:
            if strict:
                raise InputError(f"sample '{key}' caption is not UTF-8", path=shard,
                                 row=row) from None
            return meta, [files["txt"].decode("utf-8", errors="replace")]
    if strict:
        raise InputError(f"sample '{key}' has no caption (.txt or .json)", path=shard, row=row)
    return meta, []


class WebDatasetReader(CaptionReader):
    name = "webdataset"
    accepts = frozenset({"id_col", "caption_col"})   # the JSON's id field, its caption key

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        if path.is_dir():
            return any(p.suffix == ".tar" for p in path.iterdir())
        return path.suffix == ".tar"

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        cap_key = self.caption_col or "caption"
        keys, ids, caps, metas, spaces = [], [], [], [], []
        for shard in shard_paths(path):
            for row, (key, files) in enumerate(iter_samples(shard), start=1):
                meta, texts = parse_sample(key, files, shard, row, cap_key)
                iid, ns = sample_id(key, meta, self.id_col or "image_id")
                for text in texts:
                    keys.append(str(meta.get("key", key)) if iid is None else str(iid))
                    ids.append(iid)
                    caps.append(text if isinstance(text, str) else None)
                    metas.append(json.dumps({"shard": shard.name, "key": key}))
                    spaces.append(ns)
                if len(keys) >= self.batch_size:
                    yield make_batch(keys, ids, caps, metas, _spaces(spaces))
                    keys, ids, caps, metas, spaces = [], [], [], [], []
        if keys:
            yield make_batch(keys, ids, caps, metas, _spaces(spaces))


def sample_id(key: str, meta: dict, id_field: str) -> tuple[int | None, str | None]:
    """A sample's image id and the namespace its key is evidence for: the JSON's id field,
    else the key (``COCO_val2014_000000011340`` -> 11340, coco2014); an img2dataset row
    number is no image id (:func:`~capaudit.io.imageids.is_row_key`): the key stays text. A
    ``namespace`` in the JSON (``shards build`` writes its set's) is the sample's own."""
    if meta.get(id_field) is not None:
        iid = parse_image_id(meta[id_field])
        ns = meta.get("namespace")
        return iid, (ns if isinstance(ns, str) and ns and iid is not None else None)
    if is_row_key(key, meta):
        return None, None
    iid = key_image_id(key)
    return iid, (None if iid is None or is_digit_key(key) else infer_namespace(key))


def _spaces(spaces: list) -> list | None:
    """The batch's namespace column, or none when no key gave evidence."""
    return spaces if any(ns is not None for ns in spaces) else None
