"""Write ``report.md`` and ``report.html`` (plots embedded) for a comparison.

Files are written to temporary names and renamed into place; the resolved
configuration, seed and package versions go to ``provenance.json`` beside
them.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from capaudit.audit.metrics.spec import arrow, description, label
from capaudit.audit.report.plots import disparity_plot, tradeoff_plots

def _md_table(cmp) -> str:
    from capaudit.audit.compare import fmt_value

    head = "| set | " + " | ".join(label(m) + arrow(m) for m in cmp.metrics) + " |"
    lines = [head, "|---|" + "---:|" * len(cmp.metrics)]
    for n in cmp.names:
        cells = []
        for m in cmp.metrics:
            text = fmt_value(m, cmp.results[n].results.get(m))
            if cmp.best.get(m) == n:
                text = f"**{text}** (best)"
            elif cmp.worst.get(m) == n:
                text = f"_{text}_ (worst)"
            cells.append(text)
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_report(cmp, out: Path, cfg: dict) -> Path:
    from capaudit.core.config import write_provenance

    out.mkdir(parents=True, exist_ok=True)
    plots = tradeoff_plots(cmp, out)
    disp = disparity_plot(cmp, out)
    md = ["# capaudit compare report", "",
          f"Sets: {', '.join(cmp.names)}. Mode: {cfg.get('mode')}; bootstrap: "
          f"{cfg.get('n_boot')} resamples over images, seed {cfg.get('seed')}."
          + (f" Stored as run {cmp.run_id}." if cmp.run_id else ""), "",
          "## Metrics", "", _md_table(cmp), "",
          "Best and worst per metric are marked; length is descriptive only.", ""]
    md += [f"- **{m}**: {description(m)}" for m in cmp.metrics if description(m)]
    skipped = [(n, m, r.skipped) for n in cmp.names for m, r in cmp.results[n].results.items()
               if r.skipped]
    if skipped:
        md += ["", "Not computed:"] + [f"- {n} / {m}: {why}" for n, m, why in skipped]
    if getattr(cmp, "parent_costs", None):
        from capaudit.audit.compare import fmt_cost
        md += ["", "## What filtering cost", ""] + [f"- {fmt_cost(r)}" for r in cmp.parent_costs]
    for up, down, rows in getattr(cmp, "amplifications", []):
        from capaudit.audit.amplification import to_markdown
        md += ["", to_markdown(rows, up, down)]
    if plots:
        md += ["", "## Bias and hallucination against recall", ""]
        for p in plots:
            r2 = f" (slope {p['slope']:.3f}, R² = {p['r2']:.2f}, {p['n']} sets)" if "r2" in p else ""
            md += [f"![{p['metric']} vs recall]({p['file']})", f"{p['metric']} vs recall{r2}", ""]
    if disp:
        md += ["## Recall difference by category (man − woman)", "",
               f"![recall difference]({disp['file']})", "",
               "| category | " + " | ".join(disp["series"]) + " |",
               "|---|" + "---:|" * len(disp["series"])]
        for i, c in enumerate(disp["categories"]):
            md.append(f"| {c} | " + " | ".join(
                "-" if v[i] != v[i] else f"{v[i]:+.1f}" for v in disp["series"].values()) + " |")
    if getattr(cmp, "disparities", None):
        from capaudit.audit.disparity import disparity_markdown
        table = disparity_markdown(cmp.disparities)
        if table:
            md += ["", "## Gaps between groups of images", "",
                   "Each metric on each group's images (labels from the demographics), "
                   "first group minus second, 95% bootstrap interval; vocabulary on equal "
                   "numbers of images (`capaudit audit disparity` for the per-group values).",
                   ""] + table
    sources = getattr(cmp.annotations, "sources", {})
    if sources:
        md += ["", "## Annotations", ""] + [f"- {k}: `{v}`" for k, v in sources.items()]
    md_text = "\n".join(md) + "\n"
    _atomic_write(out / "report.md", md_text)
    _atomic_write(out / "report.html", _html(md_text, out))
    write_provenance(out / "provenance.json", cfg, cfg.get("seed"))
    (out / "metrics.json").write_text(json.dumps(
        {"sets": {n: cmp.results[n].to_dict() for n in cmp.names}}, indent=2))
    return out / "report.md"


def _html(md_text: str, out: Path) -> str:
    """A small self-contained HTML rendering (tables, headings, embedded PNGs)."""
    body, in_table = [], False
    for line in md_text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if set("".join(cells)) <= set("-:"):
                continue
            tag = "th" if not in_table else "td"
            if not in_table:
                body.append("<table>")
                in_table = True
            body.append("<tr>" + "".join(f"<{tag}>{_inline(c)}</{tag}>" for c in cells) + "</tr>")
            continue
        if in_table:
            body.append("</table>")
            in_table = False
        if line.startswith("!["):
            src = line[line.index("(") + 1:line.rindex(")")]
            data = base64.b64encode((out / src).read_bytes()).decode()
            body.append(f'<p><img src="data:image/png;base64,{data}" alt="{html.escape(src)}"></p>')
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{html.escape(line.lstrip('# '))}</h{level}>")
        elif line.startswith("- "):
            body.append(f"<li>{_inline(line[2:])}</li>")
        elif line.strip():
            body.append(f"<p>{_inline(line)}</p>")
    if in_table:
        body.append("</table>")
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;"
             "text-align:right}td:first-child{text-align:left}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>capaudit report</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>")


def _inline(text: str) -> str:
    import re

    t = html.escape(text)
    t = re.sub(r"\*\*(.+?)\*\*", r"<b style='color:green'>\1</b>", t)
    t = re.sub(r"_(\S.*?\S|\S)_ \(worst\)", r"<i style='color:#b00'>\1</i> (worst)", t)
    t = re.sub(r"`(.+?)`", r"<code>\1</code>", t)
    return t
