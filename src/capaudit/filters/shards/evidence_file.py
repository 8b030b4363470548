"""The evidence of a sharded run, written once by the driver in columnar form, read once per
worker.

Why a file: the evidence comes from a file or from the store's annotation tables, and a
worker (a local process or a Ray task) cannot open the store the driver holds. It is written
once as the arrays a worker looks images up in (sorted image ids, CSR offsets into name
codes, a score per code for a detector; an ``.npz`` read with ``allow_pickle=False``), named
by the sha256 of those arrays, and each worker maps it into a :class:`ColumnarSupport`
(~30 bytes per image; a dict of dicts held ~400) once, for every shard it filters.

An evidence *file* is converted in a short-lived child process: parsing a 1.2M-image file
has a transient peak of a few hundred MB that would otherwise stay in the driver's heap (a
Python process rarely gives freed memory back) for the whole run. A file of up to
:data:`IN_DRIVER_BYTES` is converted in the driver itself: the child's interpreter and imports
(numpy, pyarrow: ~0.4 CPU-s and ~150 MB of its own) cost more than such a file's parse
(COCO's CHAIR ground truth, 8 MB: ~0.2 CPU-s, ~30 MB the run's heap then reuses).
"""

from __future__ import annotations

import hashlib

from capaudit.core.columnar import SortedIdRows

__all__ = ["ColumnarSupport", "write_evidence", "read_evidence", "convert_here",
           "convert_in_child", "run_evidence", "IN_DRIVER_BYTES"]

_ARRAYS = ("ids", "offsets", "codes", "scores", "names")
#: every array a file may hold: counts only an instances JSON's (none: as before counts existed)
_STORED = (*_ARRAYS, "counts")
#: evidence files up to this size are converted in the driver (see the module docstring)
IN_DRIVER_BYTES = 32 << 20


class ColumnarSupport(SortedIdRows):
    """``{image_id: {name: support}}`` held as arrays; a lookup builds the one small dict
    the filter reads (support 1.0 for annotations, the detector's score otherwise)."""

    def __init__(self, ids, offsets, codes, names, scores=None, counts=None):
        self.ids, self.offsets, self.codes = ids, offsets, codes
        self.scores = scores
        self.counts = counts   # an instance count per code (-1: none exact), or None
        self._names = [str(n) for n in names]

    def __getitem__(self, key) -> dict[str, float]:
        i = self._pos(key)
        if i < 0:
            raise KeyError(key)
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        names = self._names
        if self.counts is not None:   # a COCO instances JSON's (:mod:`..instance_counts`)
            from capaudit.filters.instance_counts import Counted

            cats = [names[c] for c in self.codes[a:b].tolist()]
            return Counted(dict.fromkeys(cats, 1.0), {
                k: n for k, n in zip(cats, self.counts[a:b].tolist()) if n >= 0})
        if self.scores is None:
            return dict.fromkeys((names[c] for c in self.codes[a:b].tolist()), 1.0)
        return {names[c]: s for c, s in zip(self.codes[a:b].tolist(),
                                             self.scores[a:b].tolist())}

    def names(self) -> set[str]:
        return set(self._names)


def _arrays(evidence) -> dict:
    """The CSR arrays of an evidence mapping (columnar sets as they are, no dict per image)."""
    import numpy as np

    sets = getattr(evidence, "sets", None)
    if sets is not None and hasattr(sets, "offsets"):
        return {"ids": sets.ids, "offsets": sets.offsets, "codes": sets.codes.astype(np.int32),
                "scores": np.zeros(0), "names": np.array(sets.names, dtype=str)}
    names = sorted({n for iid in evidence for n in (evidence.get(iid) or {})})
    code = {n: i for i, n in enumerate(names)}
    ids, offsets, codes, scores, counts = sorted(evidence), [0], [], [], []
    exact = getattr(evidence, "counts", None) is not None   # instance counts go along
    for iid in ids:
        support = evidence.get(iid) or {}
        for name in sorted(support):
            codes.append(code[name])
            scores.append(float(support[name]))
            if exact:
                counts.append(support.counts.get(name, -1))
        offsets.append(len(codes))
    out = {"ids": np.array(ids, np.int64), "offsets": np.array(offsets, np.int64),
           "codes": np.array(codes, np.int32), "scores": np.array(scores, np.float64),
           "names": np.array(names, dtype=str)}
    if exact:
        out["counts"] = np.array(counts, np.int64)
    return out


def _digest(arrays: dict) -> str:
    h = hashlib.sha256()
    for key in _STORED:
        if key in arrays:
            h.update(key.encode() + str(arrays[key].dtype).encode() + arrays[key].tobytes())
    return h.hexdigest()


def write_evidence(evidence, folder: str) -> tuple[str, str]:
    """Write ``evidence`` into ``folder``; returns ``(path, sha256 of its arrays)``."""
    import numpy as np

    from capaudit.core.storage import paths

    arrays = _arrays(evidence)
    digest = _digest(arrays)
    path = f"{folder}/evidence-{digest[:16]}.npz"
    if paths.file_size(path) is None:
        with paths.atomic_output(path) as fh:
            np.savez(fh, **arrays)
    return path, digest


def read_evidence(path: str, digest: str) -> ColumnarSupport:
    """The evidence :func:`write_evidence` wrote, checked against its sha256 (a file changed
    under the run stops it with one line)."""
    import numpy as np

    from capaudit.errors import InputError
    from capaudit.io import shard_files as files

    with files.open_input(path) as fh, np.load(fh, allow_pickle=False) as data:
        arrays = {key: data[key] for key in _STORED if key in data}
    if _digest(arrays) != digest:
        raise InputError("the run's evidence file changed", path=path,
                         fix="rerun: the driver writes it again")
    scores = arrays["scores"] if len(arrays["scores"]) else None
    return ColumnarSupport(arrays["ids"], arrays["offsets"], arrays["codes"], arrays["names"],
                           scores, arrays.get("counts"))


def _convert(kind: str, ref: str, folder: str, queue) -> None:
    """In the child: resolve the evidence file, write it, hand back (path, digest, source).
    Ctrl-C is the parent's to answer (the child dies with it)."""
    import signal

    from capaudit.errors import CapauditError

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        queue.put(("ok", *convert_here(kind, ref, folder)))
    except CapauditError as exc:
        queue.put(("error", str(exc)))


def _resolve(kind: str, ref: str, resolve):
    """The evidence file ``ref``; a URL streamed to a private temporary copy first (its
    loaders read paths; evidence is small beside a corpus), its source named by the URL (credentials masked): the run's key
    holds the source, and a temporary name would change it every run."""
    from capaudit.core.storage import paths

    with paths.as_local(ref) as (path, url):   # a copy keeps the object's name: its suffix
        if url is None:                         # picks the loader
            return resolve(kind, ref, None)
        evidence, _ = resolve(kind, path, None)
    return evidence, f"file:{url}"


def convert_here(kind: str, ref: str, folder: str) -> tuple[str, str, str]:
    """:func:`convert_in_child`'s conversion in this process, its one-line error raised as
    that function raises the child's."""
    from capaudit.errors import CapauditError
    from capaudit.filters.evidence import resolve_evidence

    try:
        evidence, source = _resolve(kind, ref, resolve_evidence)
        return (*write_evidence(evidence, folder), source)
    except CapauditError as exc:
        raise CapauditError(str(exc)) from None


def convert_in_child(kind: str, ref: str, folder: str) -> tuple[str, str, str]:
    """:func:`write_evidence` of the evidence file ``ref`` in a child process; its one-line
    error is raised here."""
    import multiprocessing as mp

    from capaudit.errors import CapauditError

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_convert, args=(kind, ref, folder, queue), daemon=True)
    child.start()
    import queue as queues

    try:
        while True:
            try:
                result = queue.get(timeout=1.0)
                break
            except queues.Empty:
                if not child.is_alive():   # killed (out of memory): one line, not a hang
                    raise CapauditError(f"reading the evidence {ref} stopped the process "
                                        f"that read it (exit {child.exitcode})") from None
    finally:
        child.join(5)
    if result[0] == "error":
        raise CapauditError(result[1])
    return result[1], result[2], result[3]


def run_evidence(store, kind: str, opts: dict, folder: str) -> dict:
    """The run's evidence, resolved as ``filter run SET`` resolves it, written in columnar
    form into the work folder: ``{kind, source, namespace, path, sha256}``. A file over
    :data:`IN_DRIVER_BYTES` is read in a child process (its parse's transient memory stays out
    of the driver), a smaller one here; a source stored with ``annotations add`` is read here,
    from the store's tables."""
    from capaudit.audit.annotation_coverage import source_namespace
    from capaudit.core.storage import paths
    from capaudit.filters.evidence import evidence_files, resolve_evidence

    ref = evidence_files(opts).get(kind)
    if ref is not None and paths.is_file(str(ref)):
        small = (paths.file_size(str(ref)) or 0) <= IN_DRIVER_BYTES
        path, digest, source = (convert_here if small else convert_in_child)(kind, str(ref),
                                                                             folder)
    else:
        evidence, source = resolve_evidence(kind, ref, store)
        path, digest = write_evidence(evidence, folder)
        del evidence
    return {"kind": kind, "source": source, "path": path, "sha256": digest,
            "namespace": source_namespace(store, source.removeprefix("file:"))}
