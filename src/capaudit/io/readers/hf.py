"""A local Hugging Face ``datasets`` folder (``save_to_disk``), read with ``load_from_disk``."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pyarrow as pa

from capaudit.errors import InputError, require
from capaudit.io.readers.base import make_batch
from capaudit.io.readers.tabular import CAPTION_CANDIDATES, ID_CANDIDATES
from capaudit.io.imageids import parse_image_id
from capaudit.io.readers.base import CaptionReader


class HFDiskReader(CaptionReader):
    name = "hf"

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        return path.is_dir() and any((path / f).exists() for f in
                                     ("dataset_info.json", "state.json", "dataset_dict.json"))

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        datasets = require("datasets", "hf", "reading a datasets folder")
        try:
            ds = datasets.load_from_disk(str(path))
        except Exception as exc:  # datasets raises many types
            raise InputError(f"cannot load the datasets folder ({exc})", path=path) from None
        if isinstance(ds, datasets.DatasetDict):
            split = self.options.get("split") or next(iter(ds))
            ds = ds[split]
        cols = ds.column_names
        cap = self.caption_col or next((c for c in CAPTION_CANDIDATES if c in cols), None)
        if cap not in cols:
            raise InputError(f"no caption column (columns: {', '.join(cols)})", path=path,
                             fix="pass --caption-col")
        idc = self.id_col or next((c for c in ID_CANDIDATES if c in cols), None)
        if self.id_col and idc not in cols:
            raise InputError(f"no column '{idc}' (columns: {', '.join(cols)})", path=path,
                             fix="pass --id-col with an existing column")
        for start in range(0, len(ds), self.batch_size):
            chunk = ds[start:start + self.batch_size]
            caps = chunk[cap]
            raw_ids = chunk[idc] if idc else [str(i) for i in range(start, start + len(caps))]
            yield make_batch([str(k) for k in raw_ids], [parse_image_id(k) for k in raw_ids],
                             [c if isinstance(c, str) else None for c in caps])
