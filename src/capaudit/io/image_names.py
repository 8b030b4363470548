"""The file name a trainer needs for a set's image: what the exports write as LLaVA's
``"image"``, ShareGPT's ``"images"`` and COCO JSON's ``"file_name"``.

Why: a set keeps each image's key as its source gave it, often a bare id (``226988``).
LLaVA's and LLaMA-Factory's trainers open ``image_folder / record["image"]``; a file named
``226988`` is no file of COCO's. The name written, first that applies:

- the source's own file name, when the set was read from one: the key itself when it is a
  file name, path or URL (``COCO_val2014_000000226988.jpg``, ``coco/train2017/...``), or
  the name the source kept beside an id (``meta.file``: COCO JSON's ``images[].file_name``,
  Karpathy's ``filename``);
- ``coco2017``: COCO 2017's name for the id, ``000000226988.jpg`` (the same in train2017
  and val2017);
- ``coco2014``: the name says the split (``COCO_val2014_...`` or ``COCO_train2014_...``)
  and an id does not: the key is written, counted as unnamed, and the export says so;
- any other image: its key (a name of the set's own).
"""

from __future__ import annotations

import json
import re

__all__ = ["image_file_name"]

_FILE_LIKE = re.compile(r"(?:/|\.(?:jpe?g|png|gif|webp|bmp|tiff?)$)", re.IGNORECASE)


def _source_name(meta) -> str | None:
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            return None
    name = meta.get("file") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name.strip() else None


def image_file_name(key: str, image_id: int | None, namespace: str | None,
                    meta=None) -> tuple[str, bool]:
    """``(name to write, whether it names a file)`` for one image (``meta``: the caption's
    meta, a dict or its JSON text)."""
    if isinstance(key, str) and _FILE_LIKE.search(key):
        return key, True
    source = _source_name(meta)
    if source is not None:
        return source, True
    if image_id is not None and namespace == "coco2017":
        return f"{image_id:012d}.jpg", True
    return str(key), namespace not in ("coco2014", "coco")

