"""What the record readers (LLaVA, ShareGPT, ShareGPT4V, Karpathy) share.

- :func:`load_records`: a JSON list or a JSONL file as ``(row, record)`` pairs, with
  one-line errors naming the row;
- :func:`parse_where`: the ``--where`` row filter (``type = 'detail' and split != train``),
  a deliberately small language (top-level field, ``=`` or ``!=``, a value; ``and``) that
  needs no SQL engine and cannot run code;
- :func:`pick_turns`: which assistant turns become captions (``--turns first|all|join``);
- :class:`RecordReader`: batching, and each caption's place in the source (``meta.src``
  record index, ``meta.turn``) so that ``sets export --to original`` can write the
  revised text back into the same record;
- records without an image are refused by row, or skipped and counted
  (``--skip-no-image``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Callable, Iterator

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.io.imageids import parse_image_id
from capaudit.io.readers.base import (
    CaptionReader,
    load_json_document,
    load_json_lines,
    make_batch,
    read_head,
)

TURNS = ("first", "all", "join")
JOIN_SEP = "\n\n"
_COND = re.compile(r"""^\s*([A-Za-z_][\w.]*)\s*(!=|=)\s*(?:'([^']*)'|"([^"]*)"|(\S+))\s*$""")


def load_records(path: Path) -> Iterator[tuple[int, object]]:
    """``(1-based row, record)`` from a JSON list or a JSONL file."""
    head = read_head(path, 1 << 12).lstrip()
    if head.startswith(b"["):
        data = load_json_document(path)
        yield from enumerate(data, start=1)
        return
    yield from load_json_lines(path)


def parse_where(expr: str | None) -> Callable[[dict], bool]:
    """``"type = 'detail' and split != 'train'"`` -> a predicate on a record."""
    if not expr or not expr.strip():
        return lambda rec: True
    conds = []
    for part in re.split(r"\s+and\s+", expr.strip(), flags=re.IGNORECASE):
        m = _COND.match(part)
        if not m:
            raise InputError(f"cannot read the --where condition '{part}'",
                             fix="write field = 'value' or field != 'value', joined by and")
        field, op, *vals = m.groups()
        value = next(v for v in vals if v is not None)
        conds.append((field, op == "=", value))

    def match(rec: dict) -> bool:
        for field, eq, value in conds:
            got = rec.get(field) if isinstance(rec, dict) else None
            if (got is not None and str(got) == value) != eq:
                return False
        return True
    return match


def pick_turns(texts: list, turns: str) -> list[tuple[int | None, str]]:
    """``(turn index, text)`` captions from a record's assistant texts."""
    if turns == "first":
        return [(0, texts[0])]
    if turns == "all":
        return list(enumerate(texts))
    return [(None, JOIN_SEP.join(t for t in texts if isinstance(t, str)))]


class RecordReader(CaptionReader):
    """A reader over records; subclasses implement :meth:`captions` for one record."""

    def __init__(self, *args, **options):
        super().__init__(*args, **options)
        self.turns = options.get("turns") or "first"
        if self.turns not in TURNS:
            raise InputError(f"unknown --turns '{self.turns}'", fix="use first, all or join")
        self.where = parse_where(options.get("where"))
        self.skip_no_image = bool(options.get("skip_no_image"))
        self.skipped_no_image = 0

    def captions(self, path: Path, row: int, rec) -> Iterator[tuple]:  # pragma: no cover
        """Yield ``(image key, caption, meta dict)`` for one record."""
        raise NotImplementedError

    def no_image(self, path: Path, row: int) -> None:
        """A record without an image: refused, or counted when the user asked to skip."""
        if not self.skip_no_image:
            raise InputError("record has no image (a text-only record)", path=path, row=row,
                             fix="pass --skip-no-image to skip such records (they are counted)")
        self.skipped_no_image += 1

    def rows(self, path: Path) -> Iterator[tuple]:
        for row, rec in load_records(path):
            if not isinstance(rec, dict):
                raise InputError("record is not a JSON object", path=path, row=row)
            if self.where(rec):
                yield from self.captions(path, row, rec)

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        yield from self.emit(self.rows(path))

    def emit(self, rows, namespace: str | None = None) -> Iterator[pa.RecordBatch]:
        keys, ids, caps, metas, size = [], [], [], [], 0
        for key, cap, meta in rows:
            keys.append(str(key))
            ids.append(parse_image_id(key))
            caps.append(cap if isinstance(cap, str) else None)
            metas.append(json.dumps(meta) if meta else None)
            size += len(cap) if isinstance(cap, str) else 0
            if self.full(len(keys), size):
                yield make_batch(keys, ids, caps, metas, namespace)
                keys, ids, caps, metas, size = [], [], [], [], 0
        if keys:
            yield make_batch(keys, ids, caps, metas, namespace)
