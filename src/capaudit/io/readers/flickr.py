"""Flickr30k / Flickr8k caption tokens: ``results_20130124.token``, ``Flickr8k.token.txt``.

One caption per line, ``IMAGE.jpg#N<TAB>caption``. The format is Flickr's own release,
so the namespace is Flickr's: all-digit names (``1000092795.jpg``) are Flickr30k ids,
Flickr8k names (``1000268201_693b08cb0e.jpg``) are kept as text keys. A name that is
evidence of another dataset (``COCO_val2014_000000011340.jpg#0``: COCO captions in Flickr's
layout) keeps that dataset's namespace. ``meta.src`` is
the line number (0-based) for writing the set back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from capaudit.io.imageids import infer_namespace, parse_image_id
from capaudit.io.layouts import flickr_tokens
from capaudit.io.readers.base import CaptionReader, file_line, row_batches


class FlickrTokenReader(CaptionReader):
    name = "flickr-token"
    expects = "lines 'IMAGE.jpg#N<TAB>caption'"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        line = (file_line(path, head) or b"").decode("utf-8", "replace").rstrip("\r")
        return flickr_tokens.LINE.match(line) is not None

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        with open(path, "rb") as fh:
            yield from row_batches(self._rows(fh, path), self)

    @staticmethod
    def _rows(fh, path: Path) -> Iterator[tuple]:
        for row, m in flickr_tokens.token_lines(fh, path):
            name = m.group(1).strip()
            iid = parse_image_id(name)
            meta = json.dumps({"src": row - 1, "n": int(m.group(2)), "file": name})
            # Flickr's own release, unless a name says otherwise (COCO_val2014_... lines)
            yield (name if iid is None else str(iid), iid, m.group(3), meta,
                   infer_namespace(name) or ("flickr30k" if iid is not None else "flickr8k"))
