"""CHAIR's own output: the file the CHAIR code writes and hallucination papers release.

``{"sentences": [{"image_id", "caption", "metrics": {"CHAIRs", "CHAIRi", ...},
"mscoco_hallucinated_words", "mscoco_gt_words", "mscoco_generated_words",
"hallucination_idxs", "words"}, ...], "overall_metrics": {"CHAIRs", "CHAIRi", ...}}``:
what LisaAnne/Hallucination's ``chair.py`` writes (``json.dump``, its overall and
per-sentence metrics also BLEU, METEOR, CIDEr, SPICE) and Maxlinn/CHAIR-metric-standalone's
(``indent=2``, ``Recall``). One caption per sentence; its id is a COCO 2014 image id
(CHAIR's ground truth is COCO train2014 + val2014: the file is that evidence), so the set's
ids are ``coco2014``.

The file's own scores are kept, not recomputed: each caption's ``metrics`` in its meta
(``meta.chair``), the ``overall_metrics`` in the set's meta (``file_metrics``), so ``sets
show`` and ``audit run`` can put them beside capaudit's: released files were scored with
several CHAIR variants (another synonym list, singularizer or ground truth), and a reader
of the file needs to know whether the two agree. ``meta.src`` is the sentence's index, so
``sets export --to original`` writes the file back
(:class:`~capaudit.io.rewrite.json_records.ChairRewriter`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterator

import pyarrow as pa

from capaudit.errors import InputError
from capaudit.io.layouts.json import load_json_document
from capaudit.io.readers.base import CaptionReader
from capaudit.io.readers.coco import checked_records, id_caption_batches

__all__ = ["ChairOutputReader", "CHAIR_NAMESPACE"]

CHAIR_NAMESPACE = "coco2014"   # CHAIR's ground truth: COCO train2014 + val2014 images
_OPENING = re.compile(rb'^\{\s*"(?:sentences|overall_metrics)"\s*:')
_TAIL = 4096


class ChairOutputReader(CaptionReader):
    name = "chair"
    expects = ("a JSON object with 'sentences' ({image_id, caption} records) and "
               "'overall_metrics' (CHAIR's output)")

    @classmethod
    def sniff(cls, path: Path, head: bytes) -> bool:
        if path.is_dir() or not _OPENING.match(head.lstrip()):
            return False
        if not (b'"image_id"' in head and b'"caption"' in head):
            return False
        if b'"overall_metrics"' in head:
            return True
        with open(path, "rb") as fh:       # the overall metrics follow the sentences
            fh.seek(max(0, fh.seek(0, 2) - _TAIL))
            return b'"overall_metrics"' in fh.read()

    def read(self, path: Path) -> Iterator[pa.RecordBatch]:
        data = load_json_document(path)
        sentences = data.get("sentences") if isinstance(data, dict) else None
        if not isinstance(sentences, list):
            raise InputError("not a CHAIR output: no 'sentences' list", path=path,
                             fix="pass --format coco-results for a list of {image_id, caption}")
        overall = data.get("overall_metrics")
        if isinstance(overall, dict):
            self.set_meta = {"file_metrics": {"format": self.name, "overall": overall,
                                              "captions": len(sentences)}}
        # each row's own CHAIRs (None: none), in row order, kept as the rows are read: what
        # `audit run FILE` sets beside capaudit's per caption (report/file_scores.py) without
        # parsing the file a second time
        self.caption_chairs: list = []
        yield from id_caption_batches(self._rows(sentences, path, self.caption_chairs),
                                      CHAIR_NAMESPACE, self)

    @staticmethod
    def _rows(sentences: list, path: Path, chairs: list) -> Iterator[tuple]:
        for i, iid, sent in checked_records(sentences, "sentence", path):
            meta, own = {"src": i}, sent.get("metrics")
            if isinstance(own, dict):   # the file's own scores of the caption
                meta["chair"] = own
            chairs.append(own.get("CHAIRs") if isinstance(own, dict) else None)
            yield iid, sent["caption"], json.dumps(meta, ensure_ascii=False)
