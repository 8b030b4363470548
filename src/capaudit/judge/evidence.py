"""What the judge sees besides the caption: the image, or (only when asked) reference captions.

Images come from ``--images DIR`` (COCO file names or the caption's image key,
as the critique filter finds them) or ``--shards DIR`` (webdataset shards
written by ``capaudit shards build``), keyed by image id. A VLM judge with an
image missing is refused before any call (one line naming the first missing
id), so no half-judged set is ever stored. ``reference-captions`` evidence is
for a text-only judge; every number it produces is labelled with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from capaudit.errors import InputError

__all__ = ["Captions", "load_captions", "Evidence", "build_evidence", "reference_evidence",
           "refuse_text_only"]


@dataclass
class Captions:
    name: str
    image_ids: list
    captions: list
    source: str


def load_captions(store, target: str, limit: int | None = None) -> Captions:
    """A registered set or a caption file (the audit's own target loader), first ``limit``."""
    from capaudit.io.targets import load_target

    t = load_target(store, target)
    ids, caps = list(t.image_ids), list(t.captions)
    if limit:
        ids, caps = ids[:limit], caps[:limit]
    return Captions(t.name, ids, caps, t.source)


def _shard_images(shards: str | Path, wanted: set) -> dict:
    from capaudit.io.image_shards import list_shards, read_shard

    out = {}
    for tar in list_shards(shards):
        for s in read_shard(tar):
            if s.image_id in wanted and s.image is not None:
                ext = (s.image_ext or "jpg").lower()
                out[s.image_id] = (s.image, "image/png" if ext == "png" else "image/jpeg")
    return out


@dataclass
class Evidence:
    kind: str                                   # image | reference-captions
    images: dict = field(default_factory=dict)  # image id -> (bytes, mime)
    references: dict = field(default_factory=dict)  # image id -> [captions]

    def image(self, image_id):
        return self.images.get(image_id) if self.kind == "image" else None

    def references_for(self, image_id) -> str:
        """The reference description of an image: its human captions joined."""
        return " ".join(r.strip() for r in self.references.get(image_id) or [])

    def text(self, image_id) -> str:
        """The evidence block of a prompt."""
        if self.kind == "image":
            return "Evidence: the attached image."
        refs = self.references.get(image_id) or []
        lines = "\n".join(f"- {r.strip()}" for r in refs) or "- (none)"
        return ("Evidence: you cannot see the image; judge only against these human "
                "descriptions of it (what they do not support counts as not supported):\n" + lines)


def group_references(store, reference: str) -> dict:
    ref = load_captions(store, reference)
    out: dict = {}
    for i, c in zip(ref.image_ids, ref.captions):
        out.setdefault(i, []).append(c)
    return out


def refuse_without_ids(image_ids: list, name: str | None = None) -> None:
    """Captions without an image id (named by a file name that is no COCO id): the evidence
    is found by image id, so such captions have none. Said as such: they were counted as
    "1 image(s) not found" whatever their number, with a fix to put images where they were."""
    rows = [r for r, i in enumerate(image_ids, 1) if i is None]
    if rows:
        of = f" of '{name}'" if name else ""
        raise InputError(f"{len(rows):,} caption(s){of} have no image id (first: caption "
                         f"{rows[0]}): a judge's evidence (images, references) is found by "
                         "image id",
                         fix="give each caption its image id (an image_id field, or a COCO "
                             "file name such as COCO_val2014_000000000042.jpg)")


def reference_evidence(store, reference: str | None, image_ids: list) -> Evidence:
    """The human captions of every image in ``image_ids`` (all must have one)."""
    if not reference:
        raise InputError("this metric needs the human captions of the same images",
                         fix="pass --reference SET")
    refuse_without_ids(image_ids)
    refs = group_references(store, reference)
    missing = sorted({i for i in image_ids if i is not None} - set(refs))
    if missing:
        raise InputError(f"{len(missing)} image(s) have no caption in the reference set "
                         f"'{reference}', first image id {missing[0]}",
                         fix="use a reference set covering the same images")
    return Evidence("reference-captions", references=refs)


def build_evidence(store, judge_cfg, image_ids: list, *, images: str | None = None,
                   shards: str | None = None, reference: str | None = None) -> Evidence:
    """Check and gather the evidence for ``image_ids`` (before any judge call)."""
    kind = judge_cfg.evidence
    refuse_without_ids(image_ids)
    wanted = {i for i in image_ids if i is not None}
    refs = reference_evidence(store, reference, image_ids).references if reference else {}
    if kind == "reference-captions":
        if not reference:
            raise InputError("--evidence reference-captions needs --reference SET (human captions)")
        return Evidence(kind, references=refs)
    if judge_cfg.backend == "transformers":
        raise InputError("the transformers judge is text-only and cannot see images",
                         fix="add --evidence reference-captions --reference SET, or use "
                             "--judge-backend openai with a VLM server")
    if images and shards:
        raise InputError("give either --images or --shards, not both")
    if shards:
        found = _shard_images(shards, wanted)
    elif images:
        from capaudit.text.mentions import CaptionDoc
        from capaudit.io.images import find_image

        found = {}
        for i in wanted:
            img = find_image(CaptionDoc(0, i, ""), images)
            if img is not None:
                found[i] = img
    else:
        raise InputError("a VLM judge needs the images",
                         fix="pass --images DIR or --shards DIR (or --evidence "
                             "reference-captions --reference SET for a text-only judge)")
    missing = sorted(wanted - set(found))
    if missing:
        raise InputError(f"{len(missing)} image(s) not found for the VLM judge, first "
                         f"image id {missing[0]}", path=images or shards,
                         fix="put the images there (COCO file names or <id>.jpg)")
    return Evidence(kind, images=found, references=refs)


def refuse_text_only(backend, images, name: str) -> None:
    """``--images`` for a text-only judge backend (``name``): one line before any call (else
    every sentence is judged without its image). The filters' one refusal of it."""
    if images and not getattr(backend, "accepts_images", True):
        raise InputError(f"the {name} judge is text-only and cannot see --images",
                         fix="drop --images (judge against the evidence), or use "
                             "--judge-backend openai with a VLM server")
