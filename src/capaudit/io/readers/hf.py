"""A Hugging Face dataset: a local ``datasets`` folder (``save_to_disk``, read with
``load_from_disk``), or a Hub dataset id (``owner/name``) already in the local cache,
read with ``load_dataset`` (``HF_HUB_OFFLINE=1`` works: nothing is downloaded then)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pyarrow as pa

from capaudit.errors import InputError, require
from capaudit.io.imageids import parse_image_id
from capaudit.io.readers.base import CaptionReader, row_batches
from capaudit.io.readers.columns import (CAPTION_CANDIDATES, ID_CANDIDATES, missing_caption,
                                         refuse_row_numbers)


class HFDiskReader(CaptionReader):
    name = "hf"
    accepts = frozenset({"id_col", "caption_col", "split"})

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        return path.is_dir() and any((path / f).exists() for f in
                                     ("dataset_info.json", "state.json", "dataset_dict.json"))

    def load(self, path: Path):
        """The ``datasets.Dataset`` of ``path`` (a folder, or a Hub id when no such folder
        exists), of ``split`` when it holds several."""
        datasets = require("datasets", "hf", "reading a Hugging Face dataset")
        split = self.options.get("split")
        try:
            if path.exists():
                ds = datasets.load_from_disk(str(path))
            else:
                verbosity = datasets.logging.get_verbosity()
                datasets.logging.set_verbosity_error()   # not its "using the cached" notes
                try:
                    ds = datasets.load_dataset(str(path))    # every split: memory-mapped
                finally:
                    datasets.logging.set_verbosity(verbosity)
        except Exception as exc:  # datasets raises many types
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            what = "the datasets folder" if path.exists() else "the Hub dataset"
            fix = None if path.exists() else ("load it once with network access (it is then "
                                              "cached), or pass an existing folder")
            raise InputError(f"cannot load {what} ({first})", path=path, fix=fix) from None
        if isinstance(ds, datasets.DatasetDict):
            if split and split not in ds:
                raise InputError(f"no split '{split}' (splits: {', '.join(ds)})", path=path,
                                 fix="pass --split with one of them")
            if not split and len(ds) > 1:   # never one picked silently (train, of train+test)
                raise InputError(f"the dataset holds {len(ds)} splits ({', '.join(ds)})",
                                 path=path, fix="pass --split with one of them")
            ds = ds[split or next(iter(ds))]
        elif split:
            raise InputError(f"--split '{split}' given, but the dataset has no splits",
                             path=path, fix="drop --split")
        return ds

    def fingerprint(self, path: Path) -> str:
        """A Hub dataset's identity: id, split and the cached data's own fingerprint."""
        return f"hf:{path}:{self.options.get('split')}:{self.load(path)._fingerprint}"

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        ds = self.load(path)
        cols = ds.column_names
        cap = self.caption_col or next((c for c in CAPTION_CANDIDATES if c in cols), None)
        if cap not in cols:
            raise missing_caption(cols, ds.select(range(min(50, len(ds)))).to_list(),
                                  path=path, given=self.caption_col)
        idc = self.id_col or next((c for c in ID_CANDIDATES if c in cols), None)
        if self.id_col and idc not in cols:
            raise InputError(f"no column '{idc}' (columns: {', '.join(cols)})", path=path,
                             fix="pass --id-col with an existing column")
        if idc is None:    # never row numbers in silence for an id field of another name
            refuse_row_numbers(cols, cap, path=path)
        yield from row_batches(self._rows(ds, cap, idc), self)

    def _rows(self, ds, cap: str, idc: str | None) -> Iterator[tuple]:
        for start in range(0, len(ds), self.batch_size):
            chunk = ds[start:start + self.batch_size]
            caps = chunk[cap]
            raw_ids = chunk[idc] if idc else [str(i) for i in range(start, start + len(caps))]
            # capaudit's own --to hf export: each row's namespace, read back as it was written
            row_ns = chunk["namespace"] if "namespace" in ds.column_names else [None] * len(caps)
            for raw, value, ns in zip(raw_ids, caps, row_ns):
                # a list of captions per image (Flickr30k's Hub layout: ``caption`` holds 5):
                # one row each, same image; an empty list stays one missing caption
                for text in (value or [None]) if isinstance(value, list) else [value]:
                    yield (str(raw), parse_image_id(raw), text, None,
                           ns if isinstance(ns, str) and ns else None)
