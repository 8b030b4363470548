"""The leaderboard as Markdown tables (``audit leaderboard --markdown OUT``, docs/lotus.md).

Set names are text, never markup: HTML in them is escaped."""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["leaderboard_markdown"]


def _v(x, ci=None) -> str:
    if x is None:
        return "–"
    s = f"{x:.2f}"
    if ci and ci[0] is not None:
        s += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return s


def leaderboard_markdown(payload: Mapping[str, Any]) -> str:
    lb = payload["leaderboard"]
    sets, cols = lb["sets"], lb["columns"]
    out: list[str] = []
    plain = [j for j, c in enumerate(cols) if not c.get("by")]
    out += ["| metric | criterion | " + " | ".join(sets) + " |",
            "|---|---|" + "---:|" * len(sets)]
    for j in plain:
        c = cols[j]
        arrow = "↑" if c["higher_is_better"] else "↓"
        out.append(f"| {c['name']} {arrow} | {c['criterion']} | " + " | ".join(
            _v(lb["values"][i][j], lb["ci"][i][j]) for i in range(len(sets))) + " |")
    gaps = [j for j, c in enumerate(cols) if c.get("by")]
    if gaps:
        out += ["", "Gaps (group a − group b, signed, 95% interval; the N-avg uses |gap|):", "",
                "| gap | " + " | ".join(sets) + " |", "|---|" + "---:|" * len(sets)]
        for j in gaps:
            c = cols[j]
            cells = []
            for s in sets:
                info = lb["groups"].get(s, {}).get(c["name"])
                cells.append("–" if not info else _v(info["signed_gap"], info.get("signed_ci")))
            out.append(f"| {c['metric']} ({c['by']}) | " + " | ".join(cells) + " |")
    out += ["", "| profile | " + " | ".join(sets) + " |", "|---|" + "---:|" * len(sets)]
    for p, r in lb["profiles"].items():
        ri, fs = r.get("rank_interval"), r.get("first_share")
        out.append(f"| {p} | " + " | ".join(
            f"#{r['rank'][i]} ({r['score'][i]:.3f})"
            + (f" [{ri[i][0]}–{ri[i][1]}]" if ri else "")
            + (f" {100 * fs[i]:.0f}% first" if fs else "") for i in range(len(sets))) + " |")
    if lb.get("notes"):
        out += [""] + [f"- {n}" for n in lb["notes"]]
    from capaudit.core.names import escape_markdown_html

    return escape_markdown_html("\n".join(out) + "\n")
