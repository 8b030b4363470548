"""The leaderboard as Markdown tables (``audit leaderboard --markdown OUT``, docs/lotus.md).

Set names are text, never markup: HTML in them is escaped."""

from __future__ import annotations

from typing import Any, Mapping

from capaudit.leaderboard.cells import cells_markdown, number_text
from capaudit.metrics.present import signed
from capaudit.metrics.spec import number_format

__all__ = ["leaderboard_markdown", "board_cell", "gap_info", "profiles_markdown"]


def gap_info(info: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A set's gap record, or None when the gap has no value (a group with no caption for
    which the metric is computed): shown as ``–`` with no interval or n, never ``+nan``."""
    g = (info or {}).get("signed_gap")
    return info if g is not None and g == g else None


def board_cell(lb: Mapping[str, Any], i: int, j: int) -> str:
    """Set ``i``'s value of column ``j`` of a board (:meth:`Leaderboard.to_dict`) as every view
    writes it: ``0.57 [0.10, 7.59] n=1,204``; a gap signed (``−0.57 [−0.90, −0.10] n=40``, n
    the smaller group's images), ``–`` when it has none."""
    c, n = lb["columns"][j], lb["n"][i][j]
    if not c.get("by"):
        return number_text(lb["values"][i][j], lb["ci"][i][j], n, number_format(c["metric"]))
    info = gap_info(lb["groups"].get(lb["sets"][i], {}).get(c["name"]))
    if not info:
        return "–"
    ci = info.get("signed_ci") or [None, None]
    return (signed(info["signed_gap"]) + (f" [{signed(ci[0])}, {signed(ci[1])}]"
                                          if ci[0] is not None else "") + f" n={n:,}")


def leaderboard_markdown(payload: Mapping[str, Any]) -> str:
    from capaudit.leaderboard.status import cell_tag

    lb = payload["leaderboard"]
    sets, cols = lb["sets"], lb["columns"]
    heads = " | ".join(s.replace("|", "\\|") for s in sets)   # a '|' in a name: one cell
    st = lb.get("status") or [[""] * len(cols) for _ in sets]
    why = lb.get("status_notes") or [[""] * len(cols) for _ in sets]

    behind = lb.get("cell_notes") or {}

    def tag(i: int, j: int) -> str:
        t = cell_tag(st[i][j], why[i][j])
        said = behind.get(sets[i], {}).get(cols[j]["name"])
        return (f" {t}" if t else "") + (f" ({said})" if said else "")
    out: list[str] = []
    plain = [j for j, c in enumerate(cols) if not c.get("by")]
    out += ["| metric | criterion | " + heads + " |",
            "|---|---|" + "---:|" * len(sets)]
    for j in plain:
        c = cols[j]
        arrow = "↑" if c["higher_is_better"] else "↓"
        left = "" if c.get("averaged", True) else " (not averaged)"
        out.append(f"| {c['name']} {arrow}{left} | {c['criterion']} | " + " | ".join(
            board_cell(lb, i, j) + tag(i, j) for i in range(len(sets))) + " |")
    gaps = [j for j, c in enumerate(cols) if c.get("by")]
    if gaps:
        out += ["", "Gaps (signed, the direction named; 95% interval; n = images of the smaller "
                "group; the N-avg uses |gap|):", "",
                "| gap | " + heads + " |", "|---|" + "---:|" * len(sets)]
        for j in gaps:
            c = cols[j]
            cells = [board_cell(lb, i, j) for i in range(len(sets))]
            cells = [t if t == "–" else t + tag(i, j) for i, t in enumerate(cells)]
            way = c.get("gap") or c["by"]
            out.append(f"| {c['metric']} ({way}) | " + " | ".join(cells) + " |")
    apart = (lb.get("meta") or {}).get("unranked")   # --all-images: no ranks to show
    out += ["", f"**{apart}**: each set's values on its own images; no profile ranks "
            "them."] if apart else profiles_markdown(lb["profiles"], sets)
    out += cells_markdown(lb.get("groups") or {}, sets)
    if lb.get("notes"):
        out += [""] + [f"- {n}" for n in lb["notes"] if n != apart]
    from capaudit.core.names import escape_markdown_html

    return escape_markdown_html("\n".join(out) + "\n")


def profiles_markdown(profiles: Mapping[str, Any], sets: list[str]) -> list[str]:
    """One row per profile: each set's rank (``=1``: tied, rank intervals overlap), N-avg, rank
    interval and share of first places; then the criteria each profile's ranking left out."""
    from capaudit.leaderboard.ranking import rank_label

    out = ["", "Ranks: `=k` marks sets tied at rank k (their 95% rank intervals overlap).", "",
           "| profile | " + " | ".join(s.replace("|", "\\|") for s in sets) + " |",
           "|---|" + "---:|" * len(sets)]
    for p, r in profiles.items():
        ri, fs = r.get("rank_interval"), r.get("first_share")
        out.append(f"| {p} | " + " | ".join(
            f"{rank_label(r, i)} ({r['score'][i]:.3f})"
            + (f" [{ri[i][0]}–{ri[i][1]}]" if ri else "")
            + (f" {100 * fs[i]:.0f}% first" if fs else "") for i in range(len(sets))) + " |")
    left = [(p, c, why) for p, r in profiles.items() for c, why in (r.get("left_out") or {}).items()]
    if left:
        out += ["", "Criteria left out of a ranking (weighted by the profile, no metric of "
                    "theirs on the board):", ""]
        out += [f"- {p}: **{c}** ({why})" for p, c, why in left]
    return out
