"""The evidence of a sharded run, written once by the driver in columnar form, read once per
worker.

Why a file: the evidence comes from a file or from the store's annotation tables, and a
worker (a local process or a Ray task) cannot open the store the driver holds. The driver
writes it once as parquet pairs ``(image_id, name, score)`` (an image with no names: one row
with a null name), named by the sha256 of its content; each worker reads it once into the
columnar mapping the filter looks images up in (:class:`~capaudit.filters.evidence.SupportSets`
over :class:`~capaudit.core.columnar.ColumnarSets` for annotations; per-image dicts for a
detector's scores), never a dict of dicts per shard.
"""

from __future__ import annotations

import hashlib

__all__ = ["write_evidence", "read_evidence", "evidence_digest"]


def _table(evidence):
    """The evidence as a table of ``(image_id, name, score)`` pairs (a null name: an image
    with none), built in numpy from columnar sets (no Python object per image)."""
    import numpy as np
    import pyarrow as pa

    sets = getattr(evidence, "sets", None)
    if sets is not None and hasattr(sets, "offsets"):
        lengths = np.diff(sets.offsets)
        empty = lengths == 0
        widths = np.where(empty, 1, lengths)
        ids = np.repeat(sets.ids, widths)
        codes = np.full(len(ids), -1, np.int64)
        codes[~np.repeat(empty, widths)] = sets.codes   # the CSR codes, image by image
        mask = codes < 0
        names = pa.DictionaryArray.from_arrays(pa.array(np.where(mask, 0, codes), pa.int32(),
                                                        mask=mask),
                                               pa.array(list(sets.names), pa.string()))
        return pa.table({"image_id": pa.array(ids, pa.int64()), "name": names,
                         "score": pa.array(np.ones(len(ids)), pa.float64(), mask=mask)})
    ids, names, scores = [], [], []
    for iid in sorted(evidence):
        support = evidence.get(iid) or {}
        for name in sorted(support) or [None]:
            ids.append(iid)
            names.append(name)
            scores.append(None if name is None else float(support[name]))
    return pa.table({"image_id": pa.array(ids, pa.int64()),
                     "name": pa.array(names, pa.string()).dictionary_encode(),
                     "score": pa.array(scores, pa.float64())})


def evidence_digest(table) -> str:
    """sha256 of the evidence's content (its pairs, as Arrow IPC), whatever file holds it."""
    import pyarrow as pa

    table = table.combine_chunks()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as out:
        out.write_table(table)
    return hashlib.sha256(sink.getvalue()).hexdigest()


def write_evidence(evidence, folder: str) -> tuple[str, str]:
    """Write ``evidence`` into ``folder``; returns ``(path, sha256 of its content)``."""
    import pyarrow.parquet as pq

    from capaudit.io import shard_files as files

    table = _table(evidence)
    digest = evidence_digest(table)
    path = f"{folder}/evidence-{digest[:16]}.parquet"
    if files.file_size(path) is None:
        with files.atomic_output(path) as fh:
            pq.write_table(table, fh)
    return path, digest


def read_evidence(path: str, digest: str):
    """The evidence mapping of a file :func:`write_evidence` wrote, checked against its
    sha256 (a file changed under the run stops it with one line)."""
    import numpy as np
    import pyarrow.parquet as pq

    from capaudit.core.arrays import to_numpy
    from capaudit.core.columnar import ColumnarSets
    from capaudit.errors import InputError
    from capaudit.filters.evidence import SupportSets

    from capaudit.io import shard_files as files

    with files.open_input(path) as fh:
        table = pq.read_table(fh, read_dictionary=["name"])
    if evidence_digest(table) != digest:
        raise InputError("the run's evidence file changed", path=path,
                         fix="rerun: the driver writes it again")
    ids = to_numpy(table.column("image_id"))
    scores = table.column("score").to_numpy(zero_copy_only=False)
    names = table.column("name").combine_chunks()
    codes = np.asarray(names.indices.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)
    vocab = names.dictionary.to_pylist()
    if np.any(~np.isnan(scores) & (scores != 1.0)):   # a detector's scores: per-image dicts
        out: dict = {}
        for iid, code, score in zip(ids.tolist(), codes.tolist(), scores.tolist()):
            support = out.setdefault(iid, {})
            if code >= 0:
                support[vocab[code]] = score
        return out
    order = sorted(range(len(vocab)), key=vocab.__getitem__)   # names sorted, codes remapped
    rank = np.empty(len(vocab), np.int64)
    rank[order] = np.arange(len(vocab))
    codes = np.where(codes >= 0, rank[np.maximum(codes, 0)] if len(vocab) else -1, -1)
    return SupportSets(ColumnarSets.from_pairs(ids, codes, sorted(vocab)))
