"""Audit targets: a registered set name or a caption file, read whole or in batches.

A target is a registered set name or a caption file (format sniffed; it is
read, not registered, and named by its file stem). :func:`resolve_target`
reads nothing yet (the streaming audit pulls batches), :func:`load_target`
reads everything (LIC and disparity need each image's captions together).
Kept apart from :mod:`capaudit.audit.runner` so LIC, disparity and the CLI can
load targets without importing the runner (and the runner can import them).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Callable, Iterator

from capaudit.core.storage.paths import kept_local
from capaudit.errors import InputError
from capaudit.io.imageids import file_evidence, image_units, infer_namespace, is_digit_key

__all__ = ["Target", "StreamTarget", "resolve_target", "load_target", "target_images"]


@dataclass
class Target:
    name: str
    image_ids: list
    captions: list
    source: str


@dataclass
class StreamTarget:
    """A target read in batches: ``rows()`` gives a fresh ``(image_id, caption)`` iterator."""

    name: str
    source: str
    spec: str                      # what the user gave (set name or path), for load_target
    rows: Callable[[], Iterator[tuple]]
    n: int | None = None           # captions, when known before reading (registered sets)
    batches: Callable[[], Iterator] | None = None  # a caption file's reader batches, replayable
    padded_from: str | None = None  # the parent set whose images pad it (audit compare)
    images: list | None = None     # a file's distinct images, once read (target_images)
    reader: object | None = None   # a caption file's reader: what it kept as it read (own_scores)

    @property
    def captions(self) -> range:
        """Sized stand-in for ``Target.captions`` (``len`` only: the captions are not held)."""
        return range(self.n or 0)


def batch_units(batch) -> list:
    """A batch's bootstrap units: the image id, else the unit of the image key (an image
    named by text is one image, :func:`~capaudit.io.imageids.image_units`)."""
    ids = batch.column("image_id")
    if ids.null_count == 0:
        return ids.to_pylist()
    return image_units(ids.to_pylist(), batch.column("image_key").to_pylist())


def _batches_rows(batches) -> Iterator[tuple]:
    for batch in batches:
        yield from zip(batch_units(batch), batch.column("caption").to_pylist())


def resolve_target(store, target: str) -> StreamTarget:
    """Like :func:`load_target` (same checks and names) but reads nothing yet."""
    if store is not None:
        info = store.find_set(target)
        if info is not None:   # the stored name (one Unicode form), not the typed one
            name = info.name
            return StreamTarget(name, f"set:{name}", name,
                                lambda: _batches_rows(store.iter_captions(name)), info.n_captions)
    copy, url = kept_local(target)
    if copy is not None:
        return _named_by_url(lambda: resolve_target(None, str(copy)), target, url, copy)
    path = _target_path(store, target)
    from capaudit.io.ingest import check_captions
    from capaudit.io.readers import detect_format, get_reader

    batches = ReplayBatches(get_reader(detect_format(path)), path)

    def rows() -> Iterator[tuple]:
        row = 0
        for batch in batches():
            caps = batch.column("caption").to_pylist()
            check_captions(caps, path, row)
            row += batch.num_rows
            yield from zip(batch_units(batch), caps)

    return StreamTarget(_file_name(path), str(path), target, rows, batches=batches,
                        reader=batches.reader)


def own_scores(target: StreamTarget) -> tuple[dict, list] | None:
    """A caption file's own scores as its reader kept them while the audit read it (CHAIR's
    output: the set's meta with the file's overall scores, and each row's CHAIRs in row
    order), so they are never parsed a second time; None for a stored set or a file without
    scores of its own."""
    meta = getattr(target.reader, "set_meta", None)
    chairs = getattr(target.reader, "caption_chairs", None)
    return None if meta is None or chairs is None else (meta, chairs)


REPLAY_BYTES = 8 << 20  # a file read whole under this is held for the next pass, not re-read


class ReplayBatches:
    """A caption file's batches, read once and replayed when small: the coverage pass and
    the audit both read the file, and a second parse was ~7% of a 40k CHAIR audit. Past
    ``REPLAY_BYTES`` nothing is held (memory stays flat in caption count) and each call
    reads the file again.

    Replayed once, each batch let go as it is handed on: held to the end (and at 32 MB),
    a 200k-caption file's batches stayed alive through the audit and its bootstrap, ~45 MB
    of its peak that the 800k file (over the budget, read twice) did not have (#24). The
    pass after the replay reads the file again."""

    def __init__(self, reader, path: Path):
        self.reader, self.path, self.held = reader, path, None

    def __call__(self) -> Iterator:
        held, self.held = self.held, None
        if held is not None:
            held.reverse()
            while held:
                yield held.pop()
            return
        keep, size = [], 0
        for batch in self.reader.read(self.path):
            if keep is not None:
                size += batch.nbytes
                if size <= REPLAY_BYTES:
                    keep.append(batch)
                else:
                    keep = None
            yield batch
        self.held = keep


def _named_by_url(load, url: str, shown: str, copy: Path):
    """A caption file read from its local copy (``load()``), named and sourced by its URL;
    its errors, now or as it is read, name the URL too, never the copy."""
    from capaudit.core.storage.local_copy import naming_url, url_named
    from capaudit.core.storage.urls import name_of

    with naming_url(copy, shown):
        found = load()
    found.name, found.source = name_of(url).split(".")[0], shown
    if isinstance(found, StreamTarget):
        found.rows = url_named(found.rows, copy, shown)
        found.batches = found.batches and url_named(found.batches, copy, shown)
    return found


def _file_name(path: Path) -> str:
    return path.name.split(".")[0] if not path.is_dir() else path.name


def _target_path(store, target: str) -> Path:
    from capaudit.core.storage.urls import local_path

    path = local_path(target)   # a file:// URL: the local file it names
    if not path.exists():
        hint = "register it with capaudit sets add, or give a caption file"
        if store is not None:
            names = [s.name for s in store.list_sets()]
            import difflib
            close = difflib.get_close_matches(target, names, n=1)
            if close:
                hint = f"did you mean the set '{close[0]}'?"
        raise InputError(f"'{target}' is neither a registered set nor a file", fix=hint)
    return path


def load_target(store, target: str) -> Target:
    """A registered set, else a caption file read with the sniffed reader."""
    if store is not None and store.find_set(target) is not None:
        target = store.find_set(target).name   # the stored name (one Unicode form)
        tbl = store.captions(target, "image_id, caption")
        return Target(target, tbl.column("image_id").to_pylist(),
                      tbl.column("caption").to_pylist(), f"set:{target}")
    copy, url = kept_local(target)
    if copy is not None:
        return _named_by_url(lambda: load_target(None, str(copy)), target, url, copy)
    path = _target_path(store, target)
    from capaudit.io.ingest import check_batch
    from capaudit.io.readers import detect_format, get_reader

    reader = get_reader(detect_format(path))
    ids, caps, row = [], [], 0
    for batch in reader.read(path):
        check_batch(batch, path, row)
        row += batch.num_rows
        ids.extend(batch.column("image_id").to_pylist())
        caps.extend(batch.column("caption").to_pylist())
    return Target(_file_name(path), ids, caps, str(path))


def target_images(store, target) -> list[tuple]:
    """Distinct ``(image_key, image_id, namespace)`` of a registered set or a caption file:
    what the audit's coverage guard (:mod:`capaudit.audit.annotation_coverage`) counts."""
    if target.source.startswith("set:"):
        if target.padded_from:   # its dropped captions, empty, keep their parent's images
            return list(dict.fromkeys(store.set_images(target.spec)
                                      + store.set_images(target.padded_from)))
        return store.set_images(target.spec)
    if getattr(target, "images", None) is not None:   # read once for the file: the judge of
        return target.images       # its namespace (audit compare) and the coverage guard ask
    batches = getattr(target, "batches", None)
    reader = getattr(batches, "reader", None)  # a file's ReplayBatches keeps its reader
    if batches is None:
        from capaudit.io.readers import detect_format, get_reader

        path = Path(target.source)
        reader = get_reader(detect_format(path))
        batches = lambda: reader.read(path)
    seen: dict = {}    # image key -> (image id, namespace) of its first row
    for batch in batches():
        keys, ids = batch.column("image_key").to_pylist(), batch.column("image_id").to_pylist()
        named = "namespace" in batch.schema.names
        if not seen and not named:
            # the common file (no namespace column), in C: keys in order of first row, each
            # with its first row's id (the reversed dict's last write) (#24: a Python loop
            # over every row was a twentieth of a warm 40k-caption CHAIR audit)
            first = dict(zip(reversed(keys), reversed(ids)))
            order = dict.fromkeys(keys)
            seen = dict(zip(order, zip(map(first.__getitem__, order), repeat(None))))
            continue
        pairs = zip(ids, batch.column("namespace").to_pylist() if named else repeat(None))
        for key, pair in zip(keys, pairs):
            if key not in seen:
                seen[key] = pair
    # as `sets add` does: the reader's namespace (its file's evidence), else the key's own;
    # a bare number (most keys) is evidence of none: skip the pattern search
    if _bare_numbers(seen):
        rows = list(zip(seen, map(itemgetter(0), seen.values()), repeat(None)))
    else:
        rows = [(key, iid, ns if ns is not None or iid is None
                 else None if is_digit_key(key) else infer_namespace(key))
                for key, (iid, ns) in seen.items()]
    # and, as there, what the file itself names (a dataset column) when no key disagrees
    evidence = file_evidence(getattr(reader, "evidence_namespace", None),
                             (ns for _, _, ns in rows))
    if evidence:
        rows = [(key, iid, evidence) for key, iid, _ in rows]
    if isinstance(target, StreamTarget):
        target.images = rows
    return rows


def _bare_numbers(seen: dict) -> bool:
    """Every key a bare number and no row naming a namespace: no key is evidence of one."""
    try:
        return all(map(is_digit_key, seen)) and not any(ns for _, ns in seen.values())
    except TypeError:   # a key that is not text (None)
        return False
