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
import re
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.io.imageids import infer_namespace, parse_image_id
from capaudit.io.readers.base import CaptionReader, file_line, make_batch

_LINE = re.compile(r"^([^\t#]+)#(\d+)\t(.*)$")


class FlickrTokenReader(CaptionReader):
    name = "flickr-token"
    expects = "lines 'IMAGE.jpg#N<TAB>caption'"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        line = (file_line(path, head) or b"").decode("utf-8", "replace").rstrip("\r")
        return _LINE.match(line) is not None

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        keys, ids, caps, metas, spaces = [], [], [], [], []
        with open(path, "rb") as fh:
            for row, raw in enumerate(fh, start=1):
                try:
                    line = raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError:
                    raise InputError("not valid UTF-8", path=path, row=row,
                                     fix="re-encode the file as UTF-8") from None
                if not line.strip():
                    continue
                m = _LINE.match(line)
                if not m:
                    raise InputError("line is not 'IMAGE.jpg#N<TAB>caption'", path=path,
                                     row=row, fix="one caption per line, tab after #N")
                name = m.group(1).strip()
                iid = parse_image_id(name)
                keys.append(name if iid is None else str(iid))
                ids.append(iid)
                caps.append(m.group(3))
                metas.append(json.dumps({"src": row - 1, "n": int(m.group(2)), "file": name}))
                # Flickr's own release, unless a name says otherwise (COCO_val2014_... lines)
                spaces.append(infer_namespace(name)
                              or ("flickr30k" if iid is not None else "flickr8k"))
                if len(keys) >= self.batch_size:
                    yield make_batch(keys, ids, caps, metas, spaces)
                    keys, ids, caps, metas, spaces = [], [], [], [], []
        if keys:
            yield make_batch(keys, ids, caps, metas, spaces)
