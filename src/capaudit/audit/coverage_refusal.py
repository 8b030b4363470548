"""The one-line refusals of the coverage guard: which join of ids is not believable, and why.

Apart from :mod:`capaudit.audit.annotation_coverage` (which counts) so that the audit, the
filter on a stored set and the filter over shards (:func:`hold`) say the same words for the
same case (issue 46: ``filter run`` asked to register a namespace for a set that had one):

- the set's ids are of a named dataset the annotations are not (a ``vizwiz`` set against
  ``coco2014`` ground truth): nothing can join, :func:`other_dataset` says so;
- the set's ids are unassigned (bare numbers) and the annotations are of a named dataset:
  a low share of matches is no evidence that they are that dataset's images, so
  ``--allow-partial`` does not join them; the line names the fix (declare the namespace);
- otherwise (a set of the annotations' own dataset, or annotations of no named dataset)
  the covered share is held to ``min_coverage`` and ``--allow-partial`` may pass it.
"""

from __future__ import annotations

from capaudit.errors import InputError
from capaudit.io.imageids import compatible

LABELS = {"instances": "instances", "chair_gt": "chair-gt", "demographics": "demographics",
          "detector": "detector", "references": "reference-caption"}
# detector, references: the hallucination filter's evidence only
FILTER_PARTIAL = "--allow-partial keeps the uncovered captions unjudged"


def is_foreign(set_ns: str | None, ann_ns: str | None) -> bool:
    """Whether a set of namespace ``set_ns`` and annotations of ``ann_ns`` are of two named
    datasets whose ids name different images."""
    return set_ns not in (None, "mixed") and not compatible(set_ns, ann_ns)


def other_dataset(kind: str, ann_ns: str | None, set_ns: str | None) -> str:
    """Why annotations of ``kind`` say nothing about a set of another dataset: the one
    sentence an audit's skipped metric and a refused filter both print."""
    return (f"the {LABELS[kind]} annotations are for {ann_ns}, another dataset than this "
            f"set's {set_ns}")


def is_unproven(cov, kind: str) -> bool:
    """Unassigned ids against annotations of a named dataset: only a believable share of
    matches (``min_coverage``) says they are that dataset's images; a few matches are ids
    that collide, so ``--allow-partial`` must not join them."""
    return cov.namespace is None and cov.namespaces.get(kind) is not None


def refusal(cov, kind: str, min_coverage: float,
            partial: str = "--allow-partial audits the covered images only") -> InputError:
    """The one line that stops a run whose ``kind`` covers too few of the target's images."""
    ns = cov.namespaces.get(kind)
    head = (f"only {cov.covered[kind]:,} of the {cov.n_images:,} images of '{cov.target}' "
            f"({100 * cov.share(kind):.1f}%, below {100 * min_coverage:.0f}%) have "
            f"{LABELS[kind]} annotations ({ns or 'namespace unknown'})")
    if is_unproven(cov, kind):
        return InputError(
            f"{head}: its ids are unassigned (bare numbers), and so few matches are no "
            f"evidence that they are {ns} images",
            fix=f"if they are {ns} images, say so: capaudit sets add {cov.target} FILE "
                f"--namespace {ns} --replace; if they are another dataset's, register that "
                "one (--namespace vizwiz, nocaps, ...) and give its annotations "
                "(--allow-partial never joins unassigned ids)")
    if cov.namespace in (None, "mixed"):
        return InputError(
            f"{head}: its ids are {cov.namespace or 'unassigned'} (bare numbers) and may "
            "name other images",
            fix="give annotations of the set's own dataset, or register it with sets add "
                f"--namespace NAME (nocaps, flickr30k, ...); {partial}")
    return InputError(f"{head}: they miss most of its {cov.namespace} images",
                      fix=f"give {LABELS[kind]} annotations of more of its images; {partial}")


def refuse_other_dataset(cov, kind: str, min_coverage: float) -> None:
    """A set of a known dataset (nocaps) that annotations of no named dataset cover too little:
    they are another dataset's; ``--allow-partial`` (other images' labels) is not offered."""
    if cov.namespace in (None, "mixed") or cov.namespaces.get(kind) is not None:
        return
    raise InputError(
        f"the {LABELS[kind]} annotations (their dataset not named) cover only "
        f"{cov.covered[kind]:,} of the {cov.n_images:,} images of the {cov.namespace} set "
        f"'{cov.target}' ({100 * cov.share(kind):.1f}%, below {100 * min_coverage:.0f}%): "
        f"they are annotations of another dataset",
        fix=f"give {LABELS[kind]} annotations of {cov.namespace} images (if these are, store "
            f"them with annotations add --namespace {cov.namespace})")


def hold(cov, kind: str, min_coverage: float, allow_partial: bool) -> None:
    """A filter's evidence (``kind``) on a set, held to the audit's rule: the set of another
    named dataset is told so (the audit's words); under ``min_coverage`` of its images, or
    none at all, the run stops unless ``allow_partial`` (uncovered captions kept unjudged),
    which never passes unassigned ids against a named dataset's evidence."""
    ns = cov.namespaces.get(kind)
    if is_foreign(cov.namespace, ns) and not allow_partial:
        raise InputError(f"'{cov.target}': {other_dataset(kind, ns, cov.namespace)}, so it "
                         f"covers none of its {cov.n_images:,} images",
                         fix=f"give {LABELS[kind]} evidence of {cov.namespace} images, or a "
                             "detector's output on them (--evidence detector --detections "
                             f"FILE); {FILTER_PARTIAL}")
    low = cov.covered[kind] == 0 or cov.share(kind) < min_coverage
    if low and (not allow_partial or is_unproven(cov, kind) and cov.covered[kind]):
        raise refusal(cov, kind, min_coverage, FILTER_PARTIAL)
