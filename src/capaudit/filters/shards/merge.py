"""The shards' summaries added into the run's: exact sums, no estimate.

Counts add (captions, sentences, actions, reasons, records, the images each shard saw and
those its evidence covered, the parse's and the review's counts); what every shard reports
alike (the evidence's kind, source, size and categories) is taken from the first; the
coverage share is recomputed from the sums; every number of critique-revise's calls and
judge counts adds; gender-balance's report is its corpus decision's, the same in every
shard, so the first's is the run's. So the run's summary of 7 shards is the one of
the single file they were cut from, as long as no image's captions straddle two shards
(an image counts once per shard, as in the sharded audit).
"""

from __future__ import annotations

from collections import Counter

__all__ = ["merge_summaries", "ADDITIVE", "SUMMED"]

# the nested counts of a hallucination filter's report that add across shards
ADDITIVE = {("evidence", "set_images"), ("evidence", "covered"),
            ("evidence", "captions_without_image_id"), ("review", "sentences"),
            ("parse", "non_visual_mentions"), ("parse", "non_visual_sentences"),
            ("parse", "modifier_mentions"), ("parse", "modifier_sentences"),
            ("records", "records_in"), ("records", "records_out"),
            ("records", "records_dropped")}
# a report's sections whose every number adds (critique-revise's calls and judge counts;
# a ``seconds`` is then the shards' summed time, not the run's wall time)
SUMMED = ("calls", "judge")
_TOP = ("captions_in", "captions_out", "sentences_in", "sentences_kept", "sentences_dropped")
_PER_SHARD = ("shard", "index", "status", "seconds", "output", "log", "error")


def merge_summaries(parts: list[dict]) -> dict:
    """One summary of ``parts`` (shard summaries, in shard order)."""
    if not parts:
        return {}
    out = {k: v for k, v in parts[0].items() if k not in _PER_SHARD}
    for key in _TOP:
        out[key] = sum(p.get(key, 0) for p in parts)
    for key in ("actions", "reasons"):
        total: Counter = Counter()
        for p in parts:
            total.update(p.get(key) or {})
        out[key] = dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))) \
            if key == "reasons" else {a: total[a] for a in (parts[0].get(key) or {})}
    for section, name in ADDITIVE:
        if isinstance(out.get(section), dict) and name in out[section]:
            out[section] = {**out[section],
                            name: sum((p.get(section) or {}).get(name, 0) for p in parts)}
    for section in SUMMED:
        if isinstance(out.get(section), dict):
            out[section] = {k: _sum(k, v, [p.get(section) or {} for p in parts])
                            for k, v in out[section].items()}
    ev = out.get("evidence")
    if isinstance(ev, dict) and "coverage" in ev:
        n = ev.get("set_images") or 0
        ev["coverage"] = round(ev["covered"] / n, 4) if n else None
    return out


def _sum(key: str, first, sections: list[dict]):
    """The shards' ``key`` added up where every shard has a number (else the first's)."""
    values = [s.get(key) for s in sections]
    if isinstance(first, bool) or not all(isinstance(v, (int, float)) and
                                          not isinstance(v, bool) for v in values):
        return first
    total = sum(values)
    return round(total, 6) if isinstance(total, float) else total
