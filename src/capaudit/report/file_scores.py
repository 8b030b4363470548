"""A caption file's own scores beside capaudit's: CHAIR's output read back (#46).

Why: a released CHAIR output carries the scores its authors computed (``overall_metrics``,
each sentence's ``metrics``; :mod:`capaudit.io.readers.chair`), and several released files
were scored with another CHAIR variant (a different synonym list, singularizer or ground
truth). A user holding such a file needs both numbers on one scale and to know whether
they agree: CHAIR's code writes fractions, capaudit writes CHAIR ×100, so the file's are
shown ×100; each value with the captions it rests on; where they differ, a note saying so
and how many captions the two judge otherwise.
"""

from __future__ import annotations

from typing import Callable, Mapping

__all__ = ["file_metrics", "summary_line", "beside_lines", "file_scores", "PAIRS"]

# the file's name -> capaudit's metric and label
PAIRS = (("CHAIRs", "chair_s", "CHAIR_s"), ("CHAIRi", "chair_i", "CHAIR_i"))
SCALE = 100.0      # CHAIR's code writes fractions; capaudit's CHAIR values are x 100
SHOWN = "{:.2f}"   # the precision both are compared at
VARIANT_NOTE = ("they differ: the file was likely scored with another CHAIR variant (its "
                "synonym list, singularizer or ground truth); capaudit's follows the reference "
                "code (docs/metrics.md)")


def file_metrics(meta: Mapping | None) -> dict | None:
    """The file's own scores a set was read with (``{"format", "overall", "captions"}``)."""
    got = (meta or {}).get("file_metrics")
    return got if isinstance(got, dict) and isinstance(got.get("overall"), dict) else None


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def summary_line(meta: Mapping | None) -> str | None:
    """``sets show``'s line: the file's own overall scores (x 100), or None."""
    got = file_metrics(meta)
    if got is None:
        return None
    shown = [f"{k} {SHOWN.format(v * SCALE)}" for k, raw in got["overall"].items()
             if (v := _number(raw)) is not None]
    return (f"the file's own scores ({got.get('format')} output, {got.get('captions', 0):,} "
            f"captions, x 100): {', '.join(shown) or 'none'}; `capaudit audit run` puts "
            "capaudit's beside them")


def beside_lines(name: str, meta: Mapping | None, results: Mapping,
                 agreement: tuple[int, int, list[int]] | None = None) -> list[str]:
    """``audit run``'s lines for set ``name``: "the file's CHAIR_s X, capaudit's Y" for each
    score both have, then the per-caption agreement and, where they differ, the note.
    ``results``: metric name -> :class:`~capaudit.metrics.estimate.MetricResult`;
    ``agreement``: :func:`capaudit.store.details.file_score_agreement`'s answer."""
    got = file_metrics(meta)
    if got is None:
        return []
    parts, differ = [], False
    for theirs_name, metric, label in PAIRS:
        theirs = _number(got["overall"].get(theirs_name))
        ours = results.get(metric)
        if theirs is None or ours is None:
            continue
        text = SHOWN.format(theirs * SCALE)
        if ours.skipped or ours.value is None:
            parts.append(f"{label}: file's {text}, capaudit's not computed "
                         f"({ours.skipped or 'no value'})")
            continue
        mine = SHOWN.format(ours.value)
        differ = differ or mine != text
        parts.append(f"{label}: file's {text}, capaudit's {mine} (n = {ours.n:,}, {ours.state})")
    if not parts:
        return []
    lines = [f"{name}: the file's own scores ({got.get('captions', 0):,} captions, x 100) "
             f"beside capaudit's: " + "; ".join(parts)]
    if agreement is not None and agreement[0]:
        n, other, rows = agreement
        lines.append(f"{name}: per caption, CHAIR_s agrees on {n - other:,} of {n:,}"
                     + (f"; judged otherwise: sentence {', '.join(str(r + 1) for r in rows)}"
                        + (", ..." if other > len(rows) else "") if other else ""))
        differ = differ or other > 0
    if differ:
        lines.append(f"{name}: {VARIANT_NOTE}")
    return lines


def file_scores(store, run_id: int | None, results: Mapping,
                whole: Callable[[str], bool] | None = None) -> dict[str, dict]:
    """Each audited set read with its file's own scores: ``{set: {"format", "captions",
    "overall", "agreement", "lines"}}``, ``lines`` as :func:`beside_lines` says them (the
    one source of ``audit run``'s lines, its ``--json`` and ``audit compare``'s notes).
    ``whole(set)``: False where capaudit scored only part of the set (``audit compare`` on
    shared images): the file's overall rests on other captions, so the two are not set side
    by side, and the per-caption agreement (by row) is not taken."""
    from capaudit.store.details import file_score_agreement

    out: dict[str, dict] = {}
    for name in (n for n in results if not n.startswith("_")):
        info = store.find_set(name) if store is not None else None
        # a file audited unregistered: its own scores as its reader kept them (audit/runner.py)
        meta, theirs = ((info.meta, None) if info is not None else
                        results[name].meta.get("own_scores") or (None, None))
        if theirs is not None:
            theirs = [_number(v) for v in theirs]
        got = file_metrics(meta)
        if got is None:
            continue
        res = results[name].results
        part = whole is not None and not whole(name)
        agreement = (file_score_agreement(store, run_id, name, info and info.set_id,
                                          theirs=theirs)
                     if run_id is not None and "chair_s" in res and not part else None)
        lines = beside_lines(name, meta, res, agreement) if not part else [
            f"{name}: {summary_line(meta).split('; ')[0]}, on all its captions; "
            "capaudit's here rest on the compared images only, so they are not set beside "
            f"them (capaudit audit run {_target(name, info, results[name].meta)} does)"]
        out[name] = {"format": got.get("format"), "captions": got.get("captions"),
                     "overall": got["overall"], "lines": lines,
                     "agreement": None if not agreement or not agreement[0] else {
                         "captions": agreement[0], "judged_otherwise": agreement[1],
                         "first_rows": [r + 1 for r in agreement[2]]}}
    return out



def _target(name: str, info, meta: Mapping) -> str:
    """What ``audit run`` audits the set as: its name where registered, else the file (or
    URL, redacted) it was read from: an unregistered file's name is no target."""
    import shlex

    from capaudit.core.redact import redact

    return name if info is not None else shlex.quote(redact(meta.get("source") or name))
