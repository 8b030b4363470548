"""The ``gender-neutral`` filter's step of ``filter run --shards`` (see :mod:`.steps`).

It decides caption by caption, so one pass: the driver loads the image labels as
``filter run SET`` does (a file, a stored source, the most recent stored one, the same
refusal without any) and writes them once in columnar form (:mod:`.evidence_file`, named by
their sha256, which keys the run); each worker maps them once and rewrites its shards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from capaudit.filters.gender import GenderNeutralFilter
from capaudit.filters.shards.steps import Driver as _Base

__all__ = ["Driver", "build", "begin", "Labels", "set_up_here"]

#: the options that name a file the driver reads (a URL is read from a local copy)
FILE_OPTIONS = ("demographics", "instances", "chair_gt")


class Labels(Mapping):
    """``{image_id: label}`` over a columnar ``{image_id: {label: 1.0}}`` (a worker's copy:
    ~30 bytes per image, not a dict's ~100); ``none``: the label of captions without an
    image id, where a decision gave them one."""

    def __init__(self, support, none: str | None = None):
        self.support, self.none = support, none

    def __getitem__(self, iid):
        if iid is None:
            if self.none is None:
                raise KeyError(iid)
            return self.none
        return next(iter(self.support[iid]))

    def __iter__(self):
        return iter(self.support)

    def __len__(self) -> int:
        return len(self.support)


def set_up_here(filt, store) -> None:
    """``filt.setup`` on the driver, with the store, as ``filter run SET`` sets it up: a file
    option given as a URL is read from a private local copy."""
    from capaudit.core.storage import paths
    from capaudit.core.storage.urls import on_disk
    from capaudit.filters.base import FilterContext

    with contextlib.ExitStack() as stack:
        for key in FILE_OPTIONS:
            ref = filt.options.get(key)
            if ref is not None and not on_disk(str(ref)):
                filt.options[key] = str(stack.enter_context(paths.as_local(str(ref)))[0])
        filt.setup(FilterContext(store))


def write_labels(labels: Mapping, root: str) -> tuple[str, str]:
    """``labels`` (int image ids) written once in columnar form: ``(path, sha256)``."""
    from capaudit.filters.shards.evidence_file import write_evidence

    return write_evidence({i: {g: 1.0} for i, g in labels.items() if i is not None}, root)


class Driver(_Base):
    """The labels loaded and written once."""

    def worker_options(self) -> dict:
        return {**self.opts, "demographics": None}   # the labels travel as a file

    def prepare(self, store, root: str) -> dict:
        from capaudit.core.storage.urls import shown_url

        filt = GenderNeutralFilter(**self.opts)
        set_up_here(filt, store)
        path, digest = write_labels(filt.labels, root)
        ref = self.opts.get("demographics")
        return {"kind": "demographics", "path": path, "sha256": digest, "namespace": None,
                "source": shown_url(str(ref)) if ref is not None else "store (most recent)"}


def build(task: dict):
    """The filter on the worker's copy of the labels."""
    from capaudit.filters.shards.task import worker_evidence

    return GenderNeutralFilter(labels=Labels(worker_evidence(task["evidence"])),
                               **task["options"])


def begin(filt) -> None:
    """Nothing counted across captions: nothing to reset."""
