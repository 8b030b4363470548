"""Whether the ids of compared sets name the same images: the one rule of ``audit compare``
and ``audit leaderboard`` (issue 46, point 1).

Equal ids join only where the evidence says they are the same images:

- two sets of named datasets whose ids name different images (``coco2014`` beside
  ``vizwiz``: 557 VizWiz val ids are COCO val2014 ids, no image is both) never join;
- a stored set of unassigned ids (bare numbers) beside a named set joins only when most of its
  images (``min_coverage``, the share the annotation coverage guard asks) have an id of the
  named sets: a few equal ids are collisions, not evidence (the demo's ``nic`` and ``oscar``,
  unassigned, cover all 1,000 images of its ``coco2014`` set and still join);
- two unassigned sets join as before (the user's own ids, one source).

Refused in one line naming the sets, their namespaces and the fix, or, where the caller
allows it (``audit compare --all-images``), each set on its own images and nothing ranked.
"""

from __future__ import annotations

from capaudit.errors import InputError

UNASSIGNED = "unassigned"   # the namespace shown for a set of bare numbers


def set_info(store, t):
    """The stored set behind target ``t`` (None: a file)."""
    return store.find_set(t.spec) if store is not None and t.source.startswith("set:") else None


def other_datasets(datasets: dict[str, str]) -> str:
    """The one line saying why sets of different namespaces share no images (an
    ``unassigned`` set: why its ids are not taken for the named set's images)."""
    loose = [n for n, ns in datasets.items() if ns == UNASSIGNED]
    if loose:
        named = ", ".join(f"{n}: {ns}" for n, ns in datasets.items() if ns != UNASSIGNED)
        return (f"{', '.join(loose)}: ids unassigned (bare numbers), not shown to be the "
                f"images of {named}: an equal id may name another image")
    return ("the sets are images of different datasets ("
            + ", ".join(f"{n}: {ns}" for n, ns in datasets.items())
            + "): an id names another image in each, so they share no images")


def unranked_reason(datasets: dict[str, str]) -> str | None:
    """Why values of sets whose ids are not shown to be the same images are never ranked."""
    if not datasets:
        return None
    loose = [n for n, ns in datasets.items() if ns == UNASSIGNED]
    named = sorted({ns for ns in datasets.values() if ns != UNASSIGNED})
    if loose:
        return f"{', '.join(loose)}: ids unassigned, not shown to be {', '.join(named)} images"
    return f"the sets are images of different datasets ({', '.join(named)})"


def set_datasets(store, resolved: list) -> dict[str, str]:
    """``{set: namespace}`` when two of the sets have known namespaces whose ids name
    different images (coco2014 and vizwiz: 139 equal ids, no equal image); else ``{}``."""
    from capaudit.io.imageids import compatible

    known = {t.name: info.namespace for t in resolved
             if (info := set_info(store, t)) is not None and info.namespace not in (None, "mixed")}
    spaces = list(known.values())
    if all(compatible(a, b) for a in spaces for b in spaces):
        return {}
    return known


def annotated_ids(store, annotations, ns: str) -> set:
    """Image ids the instances / CHAIR ground truth of dataset ``ns`` (or one compatible)
    name: the coverage guard's evidence that bare numbers are ``ns`` images."""
    from capaudit.audit.annotation_coverage import kind_ids, source_namespace
    from capaudit.io.imageids import compatible

    out: set = set()
    for kind in ("instances", "chair_gt"):
        ann_ns = source_namespace(store, annotations.sources.get(kind))
        if ann_ns is not None and compatible(ann_ns, ns):
            out |= kind_ids(annotations, kind) or set()
    return out


def _unproven(store, resolved: list, ids_of, min_coverage: float, annotations
              ) -> tuple[dict[str, str], list[str]]:
    """Stored sets of unassigned ids beside sets of a named dataset: equal ids are evidence
    of the same images only when most (``min_coverage``, the coverage guard's share) of the
    set's images are ids of the named sets or of that dataset's annotations (nic's 10,780
    val2014 images: all in COCO's instances; a VizWiz set's 100: 40 COCO ids by chance);
    ``annotations``: the audit's, or a call that reads them (only when needed);
    ``({set: namespace}, [why per set])``."""
    infos = {t.name: set_info(store, t) for t in resolved}
    named = {n: i.namespace for n, i in infos.items()
             if i is not None and i.namespace not in (None, "mixed")}
    loose = [t for t in resolved if (i := infos[t.name]) is not None and i.namespace is None]
    if not named or not loose:
        return {}, []
    ns = next(iter(named.values()))
    annotations = annotations() if callable(annotations) else annotations
    known = set().union(*(ids_of(t) for t in resolved if t.name in named))
    if annotations is not None:
        known |= annotated_ids(store, annotations, ns)
    label = ", ".join(f"{n} ({v})" for n, v in named.items())
    out, why = {}, []
    for t in loose:
        own = ids_of(t)
        hit = len(own & known)
        if own and hit / len(own) < min_coverage:
            out[t.name] = UNASSIGNED
            why.append(f"only {hit:,} of the {len(own):,} images of '{t.name}' "
                       f"({100 * hit / len(own):.1f}%, below {100 * min_coverage:.0f}%) are "
                       f"images of {label} or its annotations: its ids are unassigned (bare "
                       "numbers), and so few matches are no evidence that they are the same "
                       "images")
    return ({**named, **out}, why) if out else ({}, [])


def check_datasets(store, resolved: list, apart_ok: bool, min_coverage: float,
                   fix: str, ids_of=None, annotations=None) -> dict[str, str]:
    """Sets whose ids are not shown to name the same images: two named datasets
    (:func:`set_datasets`), or unassigned ids beside a named dataset that few of them match.
    Refused in one line with ``fix`` unless ``apart_ok`` (each on its own images, unranked);
    returns ``{set: namespace}`` of those sets (``{}``: the ids may join). ``audit compare``
    and ``audit leaderboard`` both ask here."""
    datasets = set_datasets(store, resolved)
    why: list[str] = []
    if not datasets:
        ids_of = ids_of or (lambda t: {i for i, _ in t.rows() if i is not None})
        datasets, why = _unproven(store, resolved, ids_of, min_coverage, annotations)
    if datasets and not apart_ok:
        loose = [n for n, ns in datasets.items() if ns == UNASSIGNED]
        ns = next(ns for ns in datasets.values() if ns != UNASSIGNED)
        if loose:
            fix = (f"if they are {ns} images, say so: capaudit sets add {loose[0]} FILE "
                   f"--namespace {ns} --replace; " + fix)
        raise InputError("; ".join(why) or other_datasets(datasets), fix=fix)
    return datasets
