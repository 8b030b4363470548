"""The columnar read of a ``{image_id, NAMES: [...]}`` JSONL annotation file.

Why: COCO's CHAIR ground truth is 123,287 lines; one ``json.loads`` per line in a Python loop
took ~1.5 s of a 40k-caption audit, longer than the CHAIR metric itself. pyarrow's JSON
reader parses the same file in C++ into an ``image_id`` column and a list column, which
become a :class:`~capaudit.core.columnar.ColumnarSets` without a Python object per image.

Why a fallback and not a second set of messages: the columnar reader takes only the plain
shape, checked in full (every line one object with exactly ``image_id``, an integer id in
the range the row loader accepts, and ``NAMES``, a list of strings, no nulls, nothing else),
and answers ``None`` for any other file. The caller then runs its row loader
(:mod:`capaudit.io.annotation_files`), which is where every row is validated and where a bad
row gets its one-line error; a file this module accepts is one that loader accepts too, with
the same table (last line wins for a repeated image id, as a dict does).
"""

from __future__ import annotations

from pathlib import Path

from capaudit.core.columnar import ColumnarSets

__all__ = ["read_name_sets", "stream_name_sets"]

_MAX_ID = 10**18  # as parse_image_id: 0 <= id < 10**18


def read_name_sets(path: Path, names_field: str) -> ColumnarSets | None:
    """``{image_id: frozenset(names)}`` of a JSONL file in columnar form, or ``None`` when the
    file is not in the plain shape (see the module docstring: the row loader decides then)."""
    try:
        data = path.read_bytes()
        data.decode("utf-8")  # the row loader names the row of a bad byte
    except (OSError, UnicodeDecodeError):
        return None
    if data.startswith(b"\xef\xbb\xbf"):  # a BOM: json.loads refuses it, pyarrow would not
        return None
    table = _parse(data, names_field)
    if table is None or table.num_rows != sum(map(bool, map(bytes.strip, data.split(b"\n")))):
        return None  # a line holding two objects, or one object over several lines
    return _to_sets(table)


def _parse(data: bytes, names_field: str):
    """The file as an Arrow table of exactly (image_id int64, names list<string>), no nulls;
    ``None`` when pyarrow cannot read it in that schema."""
    import pyarrow as pa
    import pyarrow.json as pj

    schema = pa.schema([("image_id", pa.int64()), (names_field, pa.list_(pa.string()))])
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")
    try:  # one thread: ~0.1 s either way on COCO, and a third less CPU on a busy machine
        table = pj.read_json(pa.BufferReader(data), read_options=pj.ReadOptions(use_threads=False),
                             parse_options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    ids, lists = (table.column(i).combine_chunks() for i in (0, 1))
    if not table.num_rows or ids.null_count or lists.null_count or lists.values.null_count:
        return None
    return pa.table({"image_id": ids, "names": lists})


def _to_sets(table) -> ColumnarSets | None:
    """Sorted unique ids (the last line of a repeated id wins), each image's names sorted and
    deduplicated, names dictionary-encoded."""
    import numpy as np

    from capaudit.core.arrays import to_numpy

    ids = to_numpy(table.column("image_id"))
    if ids.min() < 0 or ids.max() >= _MAX_ID:
        return None
    lists = table.column("names").combine_chunks()
    offsets = to_numpy(lists.offsets).astype(np.int64)
    encoded = lists.values.dictionary_encode()
    names = encoded.dictionary.to_pylist()
    order = sorted(range(len(names)), key=names.__getitem__)
    rank = np.empty(len(names), np.int64)
    rank[order] = np.arange(len(names))
    codes = rank[to_numpy(encoded.indices)] if len(names) else np.zeros(0, np.int64)
    # the last line of each image id: a stable sort by id, then the last of each run
    by_id = np.argsort(ids, kind="stable")
    sorted_ids = ids[by_id]
    last = np.ones(len(ids), bool)
    last[:-1] = sorted_ids[:-1] != sorted_ids[1:]
    rows, kept_ids = by_id[last], sorted_ids[last]
    lengths = np.diff(offsets)[rows]
    # the kept lines' names: (image, code) pairs, plus (image, -1) so an empty list keeps it
    start = np.repeat(offsets[rows] - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
    picked = codes[np.arange(int(lengths.sum())) + start]
    return ColumnarSets.from_pairs(np.concatenate([np.repeat(kept_ids, lengths), kept_ids]),
                                   np.concatenate([picked, np.full(len(kept_ids), -1)]),
                                   sorted(names))


def stream_name_sets(path: Path, names_field: str, block: int = 1 << 22) -> ColumnarSets | None:
    """:func:`read_name_sets` in bounded memory: the file is parsed block by block (pyarrow's
    streaming JSON reader) into arrays of ids and name codes, never held whole.

    Why a twin: a corpus's evidence can name an image per caption (1.2M lines); the whole-file
    read held the bytes, their lines and the parsed table at once (~630 MB at 1.2M lines).
    Accepted files are a subset of :func:`read_name_sets`' (the plain shape, each id once:
    with an id repeated the whole-file rule "last line wins" applies, so ``None`` here and the
    caller reads it the usual way), and give the same table."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.json as pj

    from capaudit.core.arrays import to_numpy

    if _blank_or_bom(path, block):
        return None
    schema = pa.schema([("image_id", pa.int64()), (names_field, pa.list_(pa.string()))])
    vocab: dict[str, int] = {}
    ids, widths, codes, rows = [], [], [], 0
    try:
        # the system allocator: what the blocks held goes back to the process's heap (the
        # default pool keeps it for Arrow alone), where the rest of the run reuses it
        reader = pj.open_json(str(path), read_options=pj.ReadOptions(use_threads=False,
                                                                     block_size=block),
                              parse_options=pj.ParseOptions(explicit_schema=schema,
                                                            unexpected_field_behavior="error"),
                              memory_pool=pa.system_memory_pool())
        for batch in reader:
            col, names = batch.column(0), batch.column(1)
            if col.null_count or names.null_count or names.values.null_count:
                return None
            encoded = names.values.dictionary_encode()
            local = np.array([vocab.setdefault(n, len(vocab))
                              for n in encoded.dictionary.to_pylist()], np.int64)
            ids.append(to_numpy(col).astype(np.int64))
            widths.append(np.diff(to_numpy(names.offsets).astype(np.int64)))
            codes.append(local[to_numpy(encoded.indices)] if len(local) else
                         np.zeros(0, np.int64))
            rows += batch.num_rows
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError):
        return None
    if not rows or rows != _lines(path, block):
        return None
    all_ids = np.concatenate(ids)
    if all_ids.min() < 0 or all_ids.max() >= _MAX_ID:
        return None
    order = np.argsort(all_ids, kind="stable")   # each id once: no two equal neighbours
    by_id = all_ids[order]
    if rows > 1 and (by_id[1:] == by_id[:-1]).any():
        return None
    names = sorted(vocab)
    rank = np.empty(len(vocab), np.int64)
    rank[[vocab[n] for n in names]] = np.arange(len(names))
    flat = np.concatenate(codes)
    return _csr(all_ids, np.concatenate(widths), rank[flat] if len(flat) else flat, names,
                order)


def _csr(ids, widths, codes, names: list[str], order) -> ColumnarSets:
    """Columnar sets of unique ``ids`` (file order; ``order`` sorts them), each with
    ``widths[i]`` name ``codes``: sorted by id, each image's codes sorted and deduplicated,
    one sort of one key (a few arrays the size of the codes, not of Python objects)."""
    import numpy as np

    position = np.empty(len(ids), np.int64)
    position[order] = np.arange(len(ids))
    key = np.repeat(position, widths) * (len(names) + 1) + codes
    key.sort()
    if len(key) > 1:
        key = key[np.concatenate(([True], key[1:] != key[:-1]))]
    image, code = np.divmod(key, len(names) + 1)
    offsets = np.zeros(len(ids) + 1, np.int64)
    np.cumsum(np.bincount(image, minlength=len(ids)), out=offsets[1:])
    return ColumnarSets(ids[order], offsets, code, names)


def _blank_or_bom(path: Path, block: int) -> bool:
    """A BOM, or bytes that are not UTF-8 (the row loader names the row of a bad byte)."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with open(path, "rb") as fh:
            first = True
            while chunk := fh.read(block):
                if first and chunk.startswith(b"\xef\xbb\xbf"):
                    return True
                first = False
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
    except (OSError, UnicodeDecodeError):
        return True
    return False


def _lines(path: Path, block: int) -> int:
    """Non-blank lines of the file (a line holding two objects makes more rows than lines)."""
    n, tail = 0, b""
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            parts = (tail + chunk).split(b"\n")
            tail = parts.pop()
            n += sum(map(bool, map(bytes.strip, parts)))
    return n + bool(tail.strip())
