"""Annotation coverage: is joining this set's image ids with these annotations believable?

Ids join only within one namespace (:mod:`capaudit.io.imageids`). Bare numbers have no
namespace until an audit joins them, and this check decides whether that join is
believable: before any metric is computed it counts, per annotation kind, how many of
the set's images have that annotation. nocaps ids 0-4,499 joined with COCO val2014
instances find 320 "matches" (7%), Flickr30k names none: below ``min_coverage``
(default 50%) the audit stops with one line naming the fix, unless ``allow_partial``, which
never passes unassigned ids against a named dataset's annotations (the lines and that rule:
:mod:`capaudit.audit.coverage_refusal`).

Demographic labels exist for a subset of images by design (13,057 of 40,504 val2014
images), so their coverage is only held to the threshold when no complete annotation
(instances, CHAIR ground truth) has already shown the ids to be the dataset's.

Which kinds a metric reads is its spec's ``needs`` (:func:`capaudit.metrics.spec.annotation_kinds`),
for a plugin metric as for a built-in one: there is no second list to forget a metric in.
A kind that covers none of the set's images is dropped for that set, so the metrics that
need it say "skipped: no annotated images" instead of printing 0.00. Rows whose namespace
is known and differs from the annotations' (a ``flickr30k`` row against ``coco2014``
instances) never join: their image id is hidden from the metrics.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from capaudit.audit.coverage_refusal import (  # noqa: F401  (refusal: re-exported)
    LABELS,
    hold,
    is_foreign,
    is_unproven,
    other_dataset,
    refusal,
    refuse_other_dataset,
)
from capaudit.io.imageids import annotation_namespace, compatible
from capaudit.io.targets import target_images  # noqa: F401  (the guard's input; re-exported)

NO_IMAGES = "no annotated images"
COMPLETE_KINDS = ("instances", "chair_gt")     # every image of their split is annotated


@dataclass
class Coverage:
    """How many of a target's images each annotation kind covers."""

    target: str
    n_images: int
    namespace: str | None
    covered: dict[str, int] = field(default_factory=dict)        # kind -> images
    namespaces: dict[str, str | None] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)               # kinds covering nothing
    reasons: dict[str, str] = field(default_factory=dict)          # kind -> why dropped
    n_with_ids: int = 0            # images with an integer id (none: nothing can join)

    def share(self, kind: str) -> float:
        return self.covered[kind] / self.n_images if self.n_images else 0.0

    def share_of_ids(self, kind: str) -> float:
        """Share of the images with an id (the ones a value can join) that ``kind`` covers:
        the same in a single-file and a sharded audit, which count id-less captions apart."""
        return self.covered[kind] / self.n_with_ids if self.n_with_ids else 0.0

    def line(self) -> str:
        parts = [f"{LABELS[k]} {self.covered[k]:,} ({100 * self.share(k):.1f}%)"
                 for k in self.covered]
        ns = ids_label(self.namespace, bool(self.n_with_ids))
        return (f"{self.target}: {self.n_images:,} images (ids: {ns}); annotated: "
                + (", ".join(parts) if parts else "none needed"))


def ids_label(namespace: str | None, numeric: bool) -> str:
    """How a set's image ids are named everywhere (``sets add``, ``sets list``, ``sets
    show``, the coverage line): its namespace; ``unassigned`` for bare numbers with none
    (an audit joins them only where the annotations cover them); ``none`` for text or row
    keys, which never join. (``sets list`` said "unassigned" where ``sets add`` said "none"
    for the same set.)"""
    return namespace or ("unassigned" if numeric else "none")


def kind_ids(annotations, kind: str) -> set | None:
    """The image ids annotation ``kind`` covers, ``None`` when not loaded."""
    if kind == "demographics":
        ids = set(annotations.gender) | set(annotations.skin_tone)
        return ids or None
    value = getattr(annotations, kind)
    return None if value is None else set(value)


def _ids(annotations, kind: str, ids_of: dict | None) -> set | None:
    """:func:`kind_ids`, or the ones the caller already read (``ids_of``)."""
    return ids_of[kind] if ids_of and kind in ids_of else kind_ids(annotations, kind)


def source_namespace(store, source: str | None) -> str | None:
    """Namespace of an annotation source: the stored one's column, a file's name evidence."""
    if not source:
        return None
    if source.startswith("store:"):
        if store is None:
            return None
        from capaudit.store.annotations import source_namespace as stored_namespace

        return stored_namespace(store, source[len("store:"):])
    return annotation_namespace(Path(source).name)


def needed_kinds(metrics: list[str] | None) -> list[str]:
    """The annotation kinds ``metrics`` (default: the default audit) need, by their spec."""
    from capaudit.metrics.spec import annotation_kinds, default_metrics

    return annotation_kinds(metrics or default_metrics())


def measure(target: str, images, annotations, store=None,
            metrics: list[str] | None = None, by_ns: dict | None = None,
            ids_of: dict | None = None) -> Coverage:
    """``images``: distinct ``(image_key, image_id, namespace)`` of the target. ``by_ns`` (its
    :func:`ids_by_namespace`) and ``ids_of`` (``{kind: kind_ids}``) when already at hand."""
    cov, by_ns = _uncounted(target, list(images), by_ns)
    for kind in needed_kinds(metrics):
        ids = _ids(annotations, kind, ids_of)
        if ids is not None:
            _count(cov, by_ns, kind, ids, source_namespace(store, annotations.sources.get(kind)))
    return cov


def _uncounted(target: str, images: list, by_ns: dict | None = None) -> tuple[Coverage, dict]:
    """The target's coverage before any annotation is counted (its images, its namespace:
    the one its ids share, ``mixed`` or None), and its ids by namespace."""
    by_ns = ids_by_namespace(images) if by_ns is None else by_ns
    set_ns = next(iter(by_ns)) if len(by_ns) == 1 else ("mixed" if by_ns else None)
    return Coverage(target, len({iid if iid is not None else key for key, iid, _ in images}),
                    set_ns, n_with_ids=len(set().union(*by_ns.values()))), by_ns


def _count(cov: Coverage, by_ns: dict, kind: str, ids, ann_ns: str | None) -> None:
    """Record how many of the target's ids (of a namespace compatible with ``ann_ns``) ``ids``
    holds."""
    cov.namespaces[kind] = ann_ns
    cov.covered[kind] = len(set().union(*(group & ids for ns, group in by_ns.items()
                                          if compatible(ns, ann_ns))))


def guard_evidence(store, set_name: str, kind: str, ids, source: str | None,
                   min_coverage: float = 0.5, allow_partial: bool = False
                   ) -> tuple[Coverage, set]:
    """The audit's guard for a filter's evidence (``kind``: chair-gt, instances, detector) on
    a stored set: the audit's one line when it covers under ``min_coverage`` of the set's
    images (none at all: a filter that judges nothing is no filter), unless
    ``allow_partial`` (uncovered captions kept unjudged). Returns the coverage and the ids
    that must not join the evidence (rows of another namespace, as :func:`kept_ids`)."""
    # _uncounted and _count made in the store: no row per image in Python (1.2M: ~400 MB)
    n_images, n_ids, spaces = store.image_counts(set_name)
    cov = Coverage(set_name, n_images, spaces[0] if len(spaces) == 1 else
                   ("mixed" if spaces else None), n_with_ids=n_ids)
    label = kind.replace("-", "_")
    ann_ns = source_namespace(store, source)
    cov.namespaces[label] = ann_ns
    cov.covered[label] = sum(sum(map(ids.__contains__, c)) for c in store.image_id_chunks(
        set_name, [ns for ns in spaces if compatible(ns, ann_ns)]))
    hold(cov, label, min_coverage, allow_partial)
    foreign = [ns for ns in spaces if not compatible(ns, ann_ns)]
    return cov, {i for chunk in store.image_id_chunks(set_name, foreign) for i in chunk}


def ids_by_namespace(images) -> dict:
    """``{row namespace: its image ids}`` of ``(image_key, image_id, namespace)`` rows with an
    id: the namespace checks run once per namespace (a handful), not once per image."""
    out: dict = {}
    for _, iid, ns in images:
        if iid is not None:
            group = out.get(ns)
            if group is None:
                group = out[ns] = set()
            group.add(iid)
    return out


def check(cov: Coverage, min_coverage: float = 0.5, allow_partial: bool = False) -> None:
    """Stop (one line naming the fix) when a join is not believable; note kinds to drop."""
    complete_ok = any(k in cov.covered and cov.share(k) >= min_coverage for k in COMPLETE_KINDS)
    for kind, n in cov.covered.items():
        foreign = is_foreign(cov.namespace, cov.namespaces.get(kind))
        if n == 0 and (allow_partial or cov.n_with_ids == 0 or foreign
                       or kind == "demographics" and complete_ok):
            cov.dropped.append(kind)
            if foreign:
                cov.reasons[kind] = other_dataset(kind, cov.namespaces[kind], cov.namespace)
            continue
        # --allow-partial passes a partial join of ids known to be the annotations' (or of
        # annotations of no named dataset), never unassigned ids against a named dataset
        if (allow_partial and not is_unproven(cov, kind)) or cov.share(kind) >= min_coverage \
                or (kind == "demographics" and complete_ok):
            continue
        refuse_other_dataset(cov, kind, min_coverage)
        raise refusal(cov, kind, min_coverage)


def restrict(annotations, cov: Coverage):
    """The annotations with the kinds that cover nothing of this target removed."""
    if not cov.dropped:
        return annotations
    changes = {}
    for kind in cov.dropped:
        if kind == "demographics":
            changes.update(gender={}, skin_tone={})
        else:
            changes[kind] = None
            if kind == "instances":
                changes["instance_counts"] = None
    return dataclasses.replace(annotations, **changes)


def mark_skipped(results: dict, cov: Coverage) -> None:
    """Metrics whose annotation covers nothing: ``skipped: no annotated images``, not 0.00."""
    from capaudit.metrics import MetricResult

    from capaudit.metrics.spec import annotation_kinds

    for name in list(results):
        dropped = [k for k in annotation_kinds([name]) if k in cov.dropped]
        if dropped:
            why = next((cov.reasons[k] for k in dropped if k in cov.reasons), NO_IMAGES)
            results[name] = MetricResult(None, 0, extra={}, skipped=why)


def kept_ids(images, annotations, cov: Coverage, by_ns: dict | None = None,
             ids_of: dict | None = None) -> set | None:
    """Ids that may join: annotated by a kind kept, from rows of a compatible namespace, and
    never also the id of a row of another namespace. ``None``: every id may (nothing to hide).
    ``by_ns`` and ``ids_of`` as for :func:`measure`."""
    kinds = [k for k in cov.covered if k not in cov.dropped]
    if not kinds:
        return None
    ids = set().union(*(_ids(annotations, k, ids_of) for k in kinds))
    known = [cov.namespaces[k] for k in kinds if cov.namespaces[k]]
    keep, blocked, all_ids = set(), set(), set()
    for ns, group in (ids_by_namespace(images) if by_ns is None else by_ns).items():
        all_ids |= group
        if all(compatible(ns, a) for a in known):
            keep |= group & ids
        else:
            blocked |= group
    keep -= blocked
    return None if keep == all_ids else keep


def guarded_rows(rows, keep: set | None):
    """``rows()`` with the image id hidden where it may not join (:func:`kept_ids`): the
    image stays one image (one bootstrap unit, counted), under a unit key that joins no
    annotation (:func:`~capaudit.io.imageids.keyed_unit`)."""
    if keep is None:
        return rows
    from capaudit.io.imageids import ID_LIMIT, keyed_unit

    def hide(iid):
        return iid if iid is None or iid in keep or iid >= ID_LIMIT else keyed_unit(f"#{iid}")
    return lambda: ((hide(iid), cap) for iid, cap in rows())


def guard_target(store, target, annotations, metrics, cfg) -> Coverage:
    """The guard every command runs on a target before any metric (``audit run``, the
    leaderboard): measure its coverage, stop with one line when the join is not believable
    (``min_coverage``, ``allow_partial`` of ``cfg``), and hide the ids that may not join."""
    images = target_images(store, target)
    # each computed once for both passes: a second set of 123k ground-truth ids and a second
    # grouping of 40k images were a twentieth of a warm 40k-caption CHAIR audit (#24)
    by_ns = ids_by_namespace(images)
    ids_of = {kind: kind_ids(annotations, kind) for kind in needed_kinds(metrics)}
    cov = measure(target.name, images, annotations, store, metrics, by_ns, ids_of)
    check(cov, float(cfg.get("min_coverage", 0.5)), bool(cfg.get("allow_partial")))
    target.rows = guarded_rows(target.rows, kept_ids(images, annotations, cov, by_ns, ids_of))
    return cov
