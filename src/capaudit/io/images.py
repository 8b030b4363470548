"""Finding a caption's image on disk: its key as a path, or a COCO file name in a folder.

Why in ``io``: the critique-revise filter and every judged metric show the judge the
image of a caption (:func:`find_image`), and the CLIP metrics embed the image of an id
(:func:`image_file`); each pair of callers must find the same file for the same caption.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["find_image", "image_file"]


def find_image(doc, images: str | Path | None) -> tuple[bytes, str] | None:
    """Image bytes and MIME type for a caption (anything with ``image_key`` and ``image_id``,
    e.g. a :class:`~capaudit.text.mentions.CaptionDoc`): its image_key as a path, or a COCO
    file name in ``images``; ``None`` when no file is found."""
    cands: list[Path] = []
    if doc.image_key:
        p = Path(doc.image_key)
        cands.append(p)
        if images:
            cands.append(Path(images) / p.name)
    if images and doc.image_id is not None:
        d = Path(images)
        iid = int(doc.image_id)
        cands += [d / f"COCO_val2014_{iid:012d}.jpg", d / f"COCO_train2014_{iid:012d}.jpg",
                  d / f"{iid:012d}.jpg", d / f"{iid}.jpg"]
    for p in cands:
        if p.is_file():
            mime = "image/png" if p.suffix.lower() == ".png" else "image/jpeg"
            return p.read_bytes(), mime
    return None


def image_file(images_dir: Path, image_id: int) -> Path | None:
    """The image file of a COCO id in ``images_dir`` (COCO names, zero-padded or plain)."""
    for stem in (f"COCO_val2014_{image_id:012d}", f"COCO_train2014_{image_id:012d}",
                 f"{image_id:012d}", str(image_id)):
        for ext in (".jpg", ".jpeg", ".png"):
            p = images_dir / (stem + ext)
            if p.exists():
                return p
    return None
