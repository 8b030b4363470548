"""A judged set in chunks: judging (a metric's ``rows``) apart from arithmetic (its ``values``).

Why: a set's numbers (ratios, bootstrap intervals over images) need every caption, but its
verdicts do not: each caption's rows depend only on that caption, its image and its
references. So a metric judges a *chunk* of a set (``rows(judge, chunk, evidence, cfg)``: a
part) and computes the set's values from all its parts
(``values(set, parts, cfg, evidence_kind) -> (items, values, extra)``). ``compute`` is the
two over one part holding the whole set (:func:`computed`): one code path, chunked or not.

A chunk holds whole images (:func:`image_chunks`): every caption of an image in one chunk,
so what a metric shares per image (dcscore's reference description, judged once) stays in
one chunk. A part's rows carry the chunk's own caption indices; :func:`joined` turns them
into the set's and puts them back in the set's order by a stable sort (a caption's rows keep
their own order), :func:`per_caption` does the same for a per-caption list.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from capaudit.judge.stats import Judged

__all__ = ["image_chunks", "cut", "joined", "per_caption", "part", "computed", "folded"]


def image_chunks(image_ids: list, k: int) -> list[list[int]]:
    """At most ``k`` lists of caption indices, each a run of whole images (in the order the
    set first names them; a caption without an image id is an image of its own) holding
    about ``len(image_ids) / k`` captions, each list ascending."""
    groups: dict = {}
    for c, iid in enumerate(image_ids):
        groups.setdefault((0, c) if iid is None else (1, iid), []).append(c)
    out: list[list[int]] = [[]]
    taken = 0
    for caps in groups.values():
        if out[-1] and taken >= len(out) * len(image_ids) / k:
            out.append([])
        out[-1] += caps
        taken += len(caps)
    return [sorted(c) for c in out if c]


def cut(s, idx: list[int]):
    """The captions of ``s`` at ``idx`` (a chunk: the same set name and source)."""
    return replace(s, image_ids=[s.image_ids[i] for i in idx],
                   captions=[s.captions[i] for i in idx])


def joined(parts: list[dict], key: str = "rows") -> list[dict]:
    """The rows under ``key`` of every part, their ``caption_idx`` the set's, in the set's
    order (a stable sort: a caption's rows keep the order its part gave them)."""
    rows = [{**r, "caption_idx": p["idx"][r["caption_idx"]]} for p in parts for r in p[key]]
    return sorted(rows, key=lambda r: r["caption_idx"])


def per_caption(parts: list[dict], key: str, n: int) -> list:
    """A per-caption list of every part (``part[key][j]`` is its caption ``idx[j]``), as one
    list over the set's ``n`` captions."""
    out: list = [None] * n
    for p in parts:
        for c, v in zip(p["idx"], p[key]):
            out[c] = v
    return out


def folded(out: Judged, name: str, result: tuple) -> None:
    """A set's ``(items, values, extra)`` into ``out`` (extra: what goes beside the sets)."""
    items, values, extra = result
    out.items[name] = items
    if values is not None:
        out.values[name] = values
    out.extra.update(extra or {})


def part(rows: Callable, judge, s, idx, evidence, cfg, *read) -> dict:
    """A chunk judged: its caption indices in its set (``idx``; None: the whole set ``s``)
    and the metric's ``rows`` of it (``read``: the metric's own files,
    ``compute.read_inputs``, where it has them)."""
    return {"idx": list(range(len(s.image_ids))) if idx is None else list(idx),
            **rows(judge, s, evidence, cfg, *read)}


def computed(rows: Callable, values: Callable, judge, sets, evidence, cfg, *read) -> Judged:
    """A metric's ``compute``: each set judged as one chunk, then its values."""
    out = Judged()
    for s in sets:
        whole = part(rows, judge, s, None, evidence, cfg, *read)
        folded(out, s.name, values(s, [whole], cfg, judge.cfg.evidence, *read))
    return out
