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

A caption file given instead of a stored set is judged alike: its namespace is what
``sets add`` would give it (:func:`target_namespace`: ``COCO_val2014_...jpg`` names are
``coco2014``, CHAIR's own output is ``coco2014``, a ``namespace`` column is taken at its word,
bare numbers are unassigned), and the fix it is given is to register it with the namespace
it really has (``sets add NAME FILE --namespace ...``).

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


def target_namespace(store, t) -> str | None:
    """A target's namespace: a stored set's, else what ``sets add`` would give the file
    (the reader's and the image keys' evidence, :func:`~capaudit.io.targets.target_images`,
    the rows the coverage guard counts); None: unassigned, ``mixed``: rows disagree."""
    if t.source.startswith("set:"):
        info = set_info(store, t)
        return info.namespace if info is not None else None
    from capaudit.io.imageids import set_namespace
    from capaudit.io.targets import target_images

    return set_namespace(ns for _, _, ns in target_images(store, t))


def target_ids(store, t) -> set:
    """A target's image units (an id, else its key's unit, as its captions name them), from
    the images the coverage guard reads (:func:`~capaudit.io.targets.target_images`: the
    set's distinct images in the store, a file's kept on it) instead of every caption."""
    from capaudit.io.imageids import image_units
    from capaudit.io.targets import target_images

    images = target_images(store, t)
    return set(image_units([i for _, i, _ in images], [k for k, _, _ in images])) - {None}


def _label(t) -> str:
    """How a line names a target: a stored set by its name, a file as the user gave it."""
    return t.name if t.source.startswith("set:") else t.spec


def set_datasets(spaces: dict[str, str | None]) -> dict[str, str]:
    """``{target: namespace}`` (``spaces``: each target's, :func:`target_namespace`) when two
    of the targets have known namespaces whose ids name different images (coco2014 and
    vizwiz: 139 equal ids, no equal image); else ``{}``."""
    from capaudit.io.imageids import compatible

    known = {n: ns for n, ns in spaces.items() if ns not in (None, "mixed")}
    values = list(known.values())
    if all(compatible(a, b) for a in values for b in values):
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


def _unproven(store, resolved: list, spaces: dict, ids_of, min_coverage: float,
              annotations) -> tuple[dict[str, str], list[str]]:
    """Sets or files of unassigned ids beside sets of a named dataset: equal ids are evidence
    of the same images only when most (``min_coverage``, the coverage guard's share) of the
    set's images are ids of the named sets or of that dataset's annotations (nic's 10,780
    val2014 images: all in COCO's instances; a VizWiz set's 100: 40 COCO ids by chance);
    ``annotations``: the audit's, or a call that reads them (only when needed);
    ``({target: namespace}, [why per target])``."""
    named = {_label(t): spaces[_label(t)] for t in resolved
             if spaces[_label(t)] not in (None, "mixed")}
    loose = [t for t in resolved if spaces[_label(t)] is None]
    if not named or not loose:
        return {}, []
    ns = next(iter(named.values()))
    annotations = annotations() if callable(annotations) else annotations
    known = set().union(*(ids_of(t) for t in resolved if _label(t) in named))
    if annotations is not None:
        known |= annotated_ids(store, annotations, ns)
    label = ", ".join(f"{n} ({v})" for n, v in named.items())
    out, why = {}, []
    for t in loose:
        own = ids_of(t)
        hit = len(own & known)
        if own and hit / len(own) < min_coverage:
            out[_label(t)] = UNASSIGNED
            why.append(f"only {hit:,} of the {len(own):,} images of '{_label(t)}' "
                       f"({100 * hit / len(own):.1f}%, below {100 * min_coverage:.0f}%) are "
                       f"images of {label} or its annotations: its ids are unassigned (bare "
                       "numbers), and so few matches are no evidence that they are the same "
                       "images")
    return ({**named, **out}, why) if out else ({}, [])


def _fix(resolved: list, datasets: dict[str, str], fix: str) -> str:
    """The refusal's fix: say what an unassigned set's ids are (``sets add ... --namespace``;
    ``--replace`` for a stored set; a file is registered so, then compared as a set)."""
    loose = [t for t in resolved if datasets.get(_label(t)) == UNASSIGNED]
    if not loose:
        return fix
    ns = next(ns for ns in datasets.values() if ns != UNASSIGNED)
    t = loose[0]
    if t.source.startswith("set:"):
        return (f"if they are {ns} images, say so: capaudit sets add {t.name} FILE "
                f"--namespace {ns} --replace; " + fix)
    return (f"register the file with the dataset of its images and compare the set: capaudit "
            f"sets add {t.name} {t.spec} --namespace {ns} if they are {ns} images, or "
            f"--namespace vizwiz, nocaps, ... if not; " + fix)


def check_datasets(store, resolved: list, apart_ok: bool, min_coverage: float,
                   fix: str, ids_of=None, annotations=None) -> dict[str, str]:
    """Sets or caption files whose ids are not shown to name the same images: two named
    datasets (:func:`set_datasets`), or unassigned ids beside a named dataset that few of them
    match. Refused in one line with ``fix`` unless ``apart_ok`` (each on its own images,
    unranked); returns ``{target: namespace}`` of those (``{}``: the ids may join; a file is
    named as the user gave it). ``audit compare`` and ``audit leaderboard`` both ask here."""
    spaces = {_label(t): target_namespace(store, t) for t in resolved}
    datasets = set_datasets(spaces)
    why: list[str] = []
    if not datasets:
        ids_of = ids_of or (lambda t: target_ids(store, t))
        datasets, why = _unproven(store, resolved, spaces, ids_of, min_coverage, annotations)
    if datasets and not apart_ok:
        raise InputError("; ".join(why) or other_datasets(datasets),
                         fix=_fix(resolved, datasets, fix))
    return datasets
