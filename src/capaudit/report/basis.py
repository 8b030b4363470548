"""What each set of an ``audit compare`` is scored on: shared images, padding, equal sizes.

Why apart from :mod:`capaudit.report.compare`: deciding the basis (which
images, which captions, how many for size-dependent metrics) is a question of
the rows alone; ranking and flagging is a question of the results. Every
function here works on :class:`~capaudit.io.targets.StreamTarget` rows and
returns new targets, so the engine audits exactly the rows the basis names.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from capaudit.audit.id_join import check_datasets, other_datasets, set_info
from capaudit.audit.runner import StreamTarget, audit_stream_target
from capaudit.errors import InputError


@dataclass
class Basis:
    """What each set was scored on."""

    same_images: bool
    shared_images: int                    # images every compared set has
    images: dict[str, int]                # images scored, per set
    captions: dict[str, int]              # captions scored, per set (padding included)
    total_images: dict[str, int]
    total_captions: dict[str, int]
    on_parent: dict[str, str] = field(default_factory=dict)   # filtered set -> its parent
    dropped: dict[str, int] = field(default_factory=dict)     # filtered set -> empty captions
    equal_captions: int | None = None     # captions per set behind size-dependent metrics
    equal_metrics: list[str] = field(default_factory=list)
    datasets: dict[str, str] = field(default_factory=dict)   # set -> namespace, when they differ
    empty: dict[str, int] = field(default_factory=dict)      # filtered set -> empty captions scored

    def describe(self) -> list[str]:
        """One line per fact a reader needs before reading the numbers."""
        names = list(self.images)
        if self.same_images:
            lines = [f"compared on the {self.shared_images:,} images all {len(names)} sets share ("
                     + ", ".join(f"{n}: {self.total_images[n]:,}" for n in names)
                     + " images in all); --all-images scores each set on all its images"]
        else:
            why = ("the sets share no images" if not self.shared_images else
                   f"--all-images; they share {self.shared_images:,}")
            if self.datasets:
                why = f"--all-images; {other_datasets(self.datasets)}"
            lines = [(f"each set scored on all its own images ({why}): differences mix "
                      "captions and images")]
        for child, parent in self.on_parent.items():
            lines.append(f"{child} is scored on its parent {parent}'s images: each of the "
                         f"{self.dropped[child]:,} captions the "
                         "filter dropped counts as an empty caption")
        if self.equal_captions is not None:
            lines.append(f"{', '.join(self.equal_metrics)} on {self.equal_captions:,} captions "
                         "per set (seeded sample): it grows with the number of captions")
        return lines


def _counts(t: StreamTarget) -> tuple[Counter, int]:
    """Captions per image id, and captions without an image."""
    counts: Counter = Counter()
    none = 0
    for iid, _ in t.rows():
        if iid is None:
            none += 1
        else:
            counts[iid] += 1
    return counts, none


def _restrict(t: StreamTarget, keep: set | None, pad: Counter | None, n: int,
              parent: str | None = None) -> StreamTarget:
    """``t`` limited to the images in ``keep`` (None: all), padded with empty captions up to
    ``pad``'s count per image (a filtered set on its ``parent``'s images: the coverage guard
    then counts those images as the set's, so an empty caption keeps its image's id)."""
    if keep is None and pad is None:
        return StreamTarget(t.name, t.source, t.spec, t.rows, n, images=t.images,
                            reader=t.reader)

    def rows():
        seen: Counter = Counter()
        for iid, cap in t.rows():
            if keep is None or iid in keep:
                seen[iid] += 1
                yield iid, cap
        for iid, k in (pad or {}).items():
            if keep is None or iid in keep:
                for _ in range(k - seen[iid]):
                    yield iid, ""

    # a file's images: all of the file's, as the coverage guard counts them (not the kept)
    return StreamTarget(t.name, t.source, t.spec, rows, n, padded_from=parent, images=t.images,
                        reader=t.reader)


def set_format(store, t: StreamTarget) -> str | None:
    info = set_info(store, t)
    if info is not None:
        return info.format
    try:
        from pathlib import Path

        from capaudit.io.readers import detect_format
        return detect_format(Path(t.source))
    except Exception:  # noqa: BLE001 - a format we cannot tell is simply not human COCO
        return None


def plan_basis(store, resolved: list[StreamTarget], same_images: bool | None,
               min_coverage: float = 0.5, annotations=None
               ) -> tuple[list[StreamTarget], Basis]:
    """The targets restricted (and padded) as the comparison needs, and the basis. Sets of
    different datasets, or unassigned ids few of which match a named set's, are never joined
    on their ids: refused, or each on its own images (``--all-images``), their values then
    not ranked (:func:`check_datasets`)."""
    names = [t.name for t in resolved]
    counts = {t.name: _counts(t) for t in resolved}
    datasets = check_datasets(store, resolved, same_images is False, min_coverage,
                              "compare sets of one dataset; --all-images shows each set on "
                              "its own images, unranked", lambda t: set(counts[t.name][0]),
                              annotations)
    on_parent = {}
    for t in resolved:
        info = set_info(store, t)
        if info is not None and info.parent in names and info.format != "downstream":
            on_parent[t.name] = info.parent
    padded = {n: (counts[n][0] | counts[p][0]) if (p := on_parent.get(n)) else counts[n][0]
              for n in names}
    shared = set.intersection(*(set(c) for c in padded.values())) if padded and not datasets \
        else set()
    identical = all(set(c) == shared for c in padded.values())
    if same_images is None:
        same_images = bool(shared)
    if same_images and not shared:
        raise InputError("the compared sets share no images", fix="use --all-images to score "
                         "each set on its own images (differences then mix captions and images)")
    none_rows = any(counts[n][1] for n in names)   # captions without an image share nothing
    keep = shared if same_images and (not identical or none_rows) else None
    out, images, captions, empty = [], {}, {}, {}
    for t in resolved:
        c = padded[t.name]
        used = {i: k for i, k in c.items() if keep is None or i in keep}
        images[t.name] = len(used)
        captions[t.name] = sum(used.values()) + (0 if same_images else counts[t.name][1])
        if t.name in on_parent:   # of them, the parent's captions the filter dropped
            empty[t.name] = sum(used.values()) - sum(counts[t.name][0][i] for i in used)
        pad = counts[on_parent[t.name]][0] if t.name in on_parent else None
        out.append(_restrict(t, keep if same_images else None, pad, captions[t.name],
                             on_parent.get(t.name)))
    basis = Basis(same_images, len(shared), images, captions,
                  {n: len(counts[n][0]) for n in names},
                  {n: sum(counts[n][0].values()) + counts[n][1] for n in names}, on_parent,
                  {n: sum((counts[p][0] - counts[n][0]).values()) for n, p in on_parent.items()},
                  datasets=datasets, empty=empty)
    return out, basis


def _sample(t: StreamTarget, k: int, seed: int) -> StreamTarget:
    """``k`` of ``t``'s captions (seeded, without replacement, in their order)."""
    mask = np.zeros(t.n, bool)
    mask[np.random.default_rng(seed).choice(t.n, k, replace=False)] = True

    def rows():
        for j, row in enumerate(t.rows()):
            if mask[j]:
                yield row

    return StreamTarget(t.name, t.source, t.spec, rows, k, padded_from=t.padded_from,
                        reader=t.reader)


def size_dependent(metrics) -> list[str]:
    """Metrics whose value grows with the number of captions (vocabulary), by their spec."""
    from capaudit.metrics.spec import metric_spec

    return [m for m in metrics if (s := metric_spec(m)) is not None and s.size_dependent]


def equal_size(targets: list[StreamTarget], metrics: list[str], annotations, cfg: dict
               ) -> tuple[int | None, dict]:
    """``metrics`` of every set on the same number of captions: ``(k, {set: {metric:
    result}})``, or ``(None, {})`` when the sets already have equal counts."""
    k = min(t.n for t in targets)
    if not metrics or all(t.n == k for t in targets) or k == 0:
        return None, {}
    out = {}
    for i, t in enumerate(targets):
        seed = int(np.random.SeedSequence([int(cfg["seed"]), 7, i]).generate_state(1)[0])
        sub = t if t.n == k else _sample(t, k, seed)
        res = audit_stream_target(sub, annotations, {**cfg, "metrics": metrics})
        for r in res.results.values():
            r.extra = dict(r.extra, basis=f"{k} captions per set", captions=k)
        out[t.name] = res.results
    return k, out


