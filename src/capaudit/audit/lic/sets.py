"""LIC of a registered set or caption file: its captions and labels, then :func:`run_lic`.

Why apart from the CLI: ``capaudit audit lic`` and :meth:`capaudit.api.AuditStore.lic`
read the same sets and labels the same way (the API had no LIC at all).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from capaudit.errors import InputError

__all__ = ["set_captions", "image_labels", "lic_of_set"]


def set_captions(store, target: str) -> tuple[str, dict[int, list[str]]]:
    """(name, image id -> captions) of a registered set or a caption file (any format)."""
    from capaudit.io.targets import load_target

    t = load_target(store, target)
    out: dict[int, list[str]] = {}
    for iid, cap in zip(t.image_ids, t.captions):
        if iid is not None:
            out.setdefault(int(iid), []).append(cap)
    if not out:
        raise InputError("no captions with a COCO image id", path=target,
                         fix="LIC joins captions to image labels by image id")
    return t.name, out


def image_labels(store, demographics: str | Path | None, attribute: str) -> dict:
    """Image id -> label of ``attribute``: from ``demographics``, else the most recent
    demographics stored with ``capaudit annotations add``."""
    from capaudit.io.annotation_files import load_demographics

    if demographics is not None:
        gender, skin = load_demographics(demographics)
    else:
        from capaudit.io.annotation_store import demographic_labels

        gender, skin, _ = demographic_labels(store) if store is not None else ({}, {}, None)
        if not gender and not skin:
            raise InputError("LIC needs image labels", fix="pass --demographics FILE or "
                             "store one with capaudit annotations add demographics FILE")
    return gender if attribute == "gender" else skin


def lic_of_set(store, target: str, reference: str | None = None,
               demographics: str | Path | None = None, *, attribute: str = "gender",
               cache: bool = True, report: Callable[[str], None] | None = None,
               **options: Any) -> tuple[str, dict]:
    """(set name, :func:`capaudit.audit.lic.runner.run_lic`'s result) for ``target``, with
    LIC_D against the human captions of ``reference`` when given. ``cache``: seeds trained
    before on the same captions, labels and settings are read from the store's cache.
    ``options``: ``classifier``, ``seeds``, ``epochs``, ``device``, ``align_vocab``,
    ``classifier_options``, ``threads``, ``progress`` (as :func:`run_lic`)."""
    from capaudit.audit.lic.results import StoreCache
    from capaudit.audit.lic.runner import run_lic

    if attribute not in ("gender", "skin_tone"):
        raise InputError(f"unknown attribute '{attribute}'", fix="use gender or skin_tone")
    labels = image_labels(store, demographics, attribute)
    name, caps = set_captions(store, target)
    human = set_captions(store, reference)[1] if reference is not None else None
    res = run_lic({i: c[0] for i, c in caps.items()}, labels, human, attribute=attribute,
                  cache=StoreCache(store) if cache and store is not None else None,
                  report=report, **options)
    return name, res
