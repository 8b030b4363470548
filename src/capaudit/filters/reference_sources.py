"""Where the reference texts come from: ``{image_id: [text, ...]}`` for the reference evidence.

* ``references=FILE``: a caption file in any layout ``sets add`` reads (COCO's captions
  JSON, JSONL, CSV, ...), read by the same reader, joined by image id (the same parsing of
  ids: COCO file names and integers);
* ``references=SET``: a stored set's captions (e.g. the parent of an enriched set);
* ``reference_col=NAME``: a field of each record of the filtered set's own source file (JSON
  list or JSONL; a string or a list of strings), joined by the record's image id.

A source that gives no text for any image is one line naming the file and the fix.
"""

from __future__ import annotations

from pathlib import Path

from capaudit.errors import InputError

__all__ = ["load_references", "references_from_file", "references_from_set",
           "references_from_column", "reference_texts", "unjoined", "caption_fields",
           "refuse_self_reference"]

ID_FIELDS = ("image_id", "id", "image", "key")


def reference_texts(value) -> list[str]:
    """The texts of one record's reference value: a string is one text, a list its strings;
    blank texts and anything else (a number, a mapping, a nested list, a list's non-string
    items) give none. The one reading of the set run's column and the shards' records."""
    texts = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [t for t in texts if isinstance(t, str) and t.strip()]


def caption_fields(caption_col: str | None) -> tuple[str, ...]:
    """The fields a record's caption is read from, in the readers' order: ``caption_col``
    when given, else every candidate name (worked out once per file, not per record)."""
    from capaudit.io.layouts.parquet import CAPTION_COLUMNS
    from capaudit.io.readers.columns import CAPTION_CANDIDATES

    return (caption_col,) if caption_col else tuple(dict.fromkeys(CAPTION_CANDIDATES +
                                                                  CAPTION_COLUMNS))


def refuse_self_reference(column: str, names: tuple[str, ...], has, path, row=None) -> None:
    """A reference column that is the caption's own (the first of the :func:`caption_fields`
    ``names`` the record ``has``, as the readers pick it) is one line: each caption would
    support itself, every sentence kept."""
    if column in names and column == next((c for c in names if has(c)), None):
        raise InputError(f"reference column '{column}' is the caption column: each caption "
                         "would support itself", path=path, row=row,
                         fix="name a reference column other than the caption's with "
                             "--reference-col, or pass --references FILE")


def _add(refs: dict, iid, text) -> None:
    if iid is not None and isinstance(text, str) and text.strip():
        refs.setdefault(int(iid), []).append(text)


def _by_image(batches) -> dict[int, list[str]]:
    """The captions of Arrow ``batches`` (``image_id``, ``caption``) by image id."""
    refs: dict[int, list[str]] = {}
    for batch in batches:
        cols = batch.select(["image_id", "caption"]).to_pydict()
        for iid, cap in zip(cols["image_id"], cols["caption"]):
            _add(refs, iid, cap)
    return refs


def references_from_file(path: Path) -> dict[int, list[str]]:
    """A caption file read by its ``sets add`` reader: its captions by image id."""
    from capaudit.io.readers.base import detect_format, get_reader

    return _by_image(get_reader(detect_format(path)).read(path))


def references_from_set(store, name: str) -> dict[int, list[str]]:
    """A stored set's captions by image id."""
    from capaudit.store.filter_log import caption_stream

    return _by_image(caption_stream(store, store.get_set(name).set_id, 8192))


def _records(path: Path):
    from capaudit.io.layouts.json import load_json_document, load_json_lines

    if path.suffix.lower() in (".jsonl", ".ndjson"):
        yield from load_json_lines(path)
        return
    doc = load_json_document(path)
    if not isinstance(doc, list):
        raise InputError("--reference-col reads a JSON list or JSONL of records", path=path,
                         fix="pass the references as --references FILE instead")
    yield from enumerate(doc, start=1)


def references_from_column(path: Path, column: str,
                           caption_col: str | None = None) -> dict[int, list[str]]:
    """Field ``column`` of each record (a string or a list of strings), by the record's id
    (never the record's caption field, ``caption_col`` or the one the reader picked)."""
    from capaudit.io.imageids import parse_image_id

    refs: dict[int, list[str]] = {}
    seen, names = False, caption_fields(caption_col)
    for row, rec in _records(path):
        if not isinstance(rec, dict):
            continue
        refuse_self_reference(column, names, lambda c: rec.get(c) is not None, path, row)
        value = rec.get(column)
        seen = seen or column in rec
        raw = next((rec[k] for k in ID_FIELDS if rec.get(k) is not None), None)
        iid = parse_image_id(raw) if raw is not None else None
        for text in reference_texts(value):
            _add(refs, iid, text)
    if not refs:
        what = "is empty in every record" if seen else "is in no record"
        raise InputError(f"reference column '{column}' {what}", path=path, row=1,
                         fix="name the field that holds the references (a string or a list "
                             "of strings) with --reference-col, or pass --references FILE")
    return refs


def unjoined(n_ids: int, whose: str, refs: dict, path) -> InputError:
    """The one line of references that name none of the ``n_ids`` image ids of ``whose``
    (a set, or a run's shards): else the run judged with no reference at all while saying
    that references chose its object mode."""
    return InputError(f"the references name none of the {n_ids:,} image ids of {whose} "
                      f"(theirs are e.g. {min(refs)})", path=path,
                      fix="pass references of the same images, joined by image id")


def _refuse_unjoined(store, set_name: str, refs: dict, path) -> None:
    ids = store.captions(set_name, "image_id").column("image_id").drop_null().unique()
    if not any(i in refs for i in ids.to_pylist()):
        raise unjoined(len(ids), f"set '{set_name}'", refs, path)


def load_references(references, reference_col, context) -> tuple[dict[int, list[str]], str]:
    """``({image_id: texts}, where they came from)`` for the filter's options."""
    store = context.store if context is not None else None
    refs: dict[int, list[str]] = {}
    where = []
    if reference_col:
        info = store.get_set(context.set_name) if store is not None and context.set_name \
            else None
        src = getattr(info, "source_path", None)
        if not src or not Path(src).is_file():
            raise InputError(f"--reference-col {reference_col} reads the set's source file, "
                             "which is not at hand", path=src,
                             fix="pass the references as --references FILE")
        for iid, texts in references_from_column(Path(src), reference_col,
                                                 info.options.get("caption_col")).items():
            refs.setdefault(iid, []).extend(texts)
        where.append(f"column:{reference_col}")
    if references:
        path = Path(str(references))
        if path.exists():
            got, label = references_from_file(path), f"references:file:{path}"
        elif store is not None and store.find_set(str(references)) is not None:
            got, label = references_from_set(store, str(references)), f"references:store:{references}"
        else:
            raise InputError("no such reference file or stored set", path=path,
                             fix="pass a caption file or a stored set name to --references")
        if not got:
            raise InputError("the references give no text for any image id", path=path,
                             row=1, fix="use a caption file with image ids")
        if store is not None and context.set_name:
            _refuse_unjoined(store, context.set_name, got, path)
        for iid, texts in got.items():
            refs.setdefault(iid, []).extend(texts)
        where.append(label)
    return refs, ";".join(where)
