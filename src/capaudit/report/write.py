"""Write ``report.md`` and ``report.html`` (plots embedded) for a comparison.

Files are written to temporary names and renamed into place; the resolved
configuration, seed and package versions go to ``provenance.json`` beside
them.
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path

from capaudit.metrics.spec import description, direction, label
from capaudit.report.cells import cell, counts, fmt_cost, header, notes
from capaudit.report.plots import disparity_plot, fit_caption, tradeoff_plots


def _md_table(cmp) -> str:
    """The Table 1 view: one row per set, captions and images scored, every metric."""
    head = "| set | captions | images | " + " | ".join(header(m) for m in cmp.metrics) + " |"
    lines = [head, "|---|---:|---:|" + "---:|" * len(cmp.metrics)]
    for n in cmp.names:
        cells = []
        for m in cmp.metrics:
            text, mark = cell(cmp, n, m)
            cells.append({"best": f"**{text}** (best)", "worst": f"_{text}_ (worst)"}
                         .get(mark, text))
        name = n.replace("|", "\\|")   # a pipe in a set name must not split the row
        lines.append(f"| {name} | " + " | ".join(counts(cmp, n)) + " | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _category_table(disp: dict) -> list[str]:
    """The per-category recall differences: each with its 95% interval, or why it has none."""
    from capaudit.metrics.present import signed

    out = ["## Recall difference by category (man − woman)", "",
           f"![recall difference]({disp['file']})", "",
           "Each difference with its 95% interval over images (the audit's resamples); n/a "
           "says why (`audit compare --min-images N` changes the threshold).", "",
           "| category | " + " | ".join(disp["series"]) + " |",
           "|---|" + "---:|" * len(disp["series"])]
    for i, c in enumerate(disp["categories"]):
        cells = []
        for v in (s[i] for s in disp["series"].values()):
            if v["value"] is None:
                cells.append(v["why"])
                continue
            one = "{:.1f}"
            ci = f" [{signed(v['ci'][0], one)}, {signed(v['ci'][1], one)}]" if v["ci"] else ""
            cells.append(signed(v["value"], one) + ci + (f" ({v['why']})" if v["why"] else ""))
        out.append(f"| {c} | " + " | ".join(cells) + " |")
    return out


def _annotations_md(prov: dict, sources: dict) -> list[str]:
    """Each annotation named by what it is, its file's name and sha256 (``store:chair-gt``
    alone named nothing a reader could check); the full record is in provenance.json."""
    if not sources:
        return []
    out = ["", "## Annotations", ""]
    for kind, src in sources.items():
        p = prov.get(kind) or {}
        name = Path(str(p.get("path") or src)).name
        sha = f", sha256 `{p['sha256'][:16]}…`" if p.get("sha256") else ""
        stored = f" (stored as `{p['stored_as']}`)" if p.get("stored_as") else ""
        out.append(f"- {kind}: `{name}`{stored}{sha}")
    return out


def _descriptive(metrics) -> list[str]:
    plain = [label(m) for m in metrics if direction(m) == 0]
    return [f"Descriptive only (no best or worst): {', '.join(plain)}.", ""] if plain else []


def write_report(cmp, out: Path, cfg: dict) -> Path:
    from capaudit.core.config import write_provenance
    from capaudit.core.names import escape_markdown_html
    from capaudit.core.safe_write import check_file_target, make_dirs, write_text

    make_dirs(out)
    for own in ("report.md", "report.html", "metrics.json", "provenance.json"):
        check_file_target(out / own)   # a link planted there is refused before anything is written
    plots = tradeoff_plots(cmp, out)
    disp = disparity_plot(cmp, out)
    md = ["# capaudit compare report", "",
          f"Sets: {', '.join(cmp.names)}. Mode: {cfg.get('mode')}; bootstrap: "
          f"{cfg.get('n_boot')} resamples over images, seed {cfg.get('seed')}."
          + (f" Stored as run {cmp.run_id}." if cmp.run_id else ""), "",
          "## Metrics", "", _md_table(cmp), "",
          *_descriptive(cmp.metrics)]
    md += [f"- {line}" for line in notes(cmp)]
    md += ["", "Definitions:", ""]
    md += [f"- *{m}*: {description(m)}" for m in cmp.metrics if description(m)]
    if getattr(cmp, "parent_costs", None):
        md += ["", "## What filtering cost", ""] + [f"- {fmt_cost(r)}" for r in cmp.parent_costs]
    if getattr(cmp, "validations", None):
        from capaudit.report.card_parts import validation_lines
        md += ["", "## Filters against human labels", ""]
        md += [f"- {n}: {line[2:]}" for n, vs in cmp.validations.items()
               for line in validation_lines(vs)]
    for up, down, rows in getattr(cmp, "amplifications", []):
        from capaudit.audit.amplification import to_markdown
        md += ["", to_markdown(rows, up, down)]
    if plots:
        md += ["", "## Bias and hallucination against recall", ""]
        for p in plots:
            r2 = f" ({fit_caption(p)})"
            md += [f"![{p['metric']} vs recall]({p['file']})", f"{p['metric']} vs recall{r2}", ""]
    if disp:
        md += _category_table(disp)
    if getattr(cmp, "disparities", None):
        from capaudit.audit.disparity.tables import disparity_markdown
        table = disparity_markdown(cmp.disparities)
        if table:
            md += ["", "## Gaps between groups of images", "",
                   "Each metric on each group's images (labels from the demographics), "
                   "first group minus second, 95% bootstrap interval; vocabulary on equal "
                   "numbers of images (`capaudit audit disparity` for the per-group values).",
                   ""] + table
    md += _annotations_md(cfg.get("annotations") or {}, getattr(cmp.annotations, "sources", {}))
    md_text = "\n".join(md) + "\n"
    write_text(out / "report.md", escape_markdown_html(md_text))
    write_text(out / "report.html", _html(md_text, out))
    write_provenance(out / "provenance.json", cfg, cfg.get("seed"))
    basis = getattr(cmp, "basis", None)
    write_text(out / "metrics.json", json.dumps(
        {"sets": {n: cmp.results[n].to_dict() for n in cmp.names},
         "basis": None if basis is None else vars(basis),
         "best": cmp.best, "worst": cmp.worst,
         "flags": [{"set": n, "metric": m, "why": why} for (n, m), why in cmp.flags.items()]},
        indent=2))
    return out / "report.md"


def _html(md_text: str, out: Path) -> str:
    """A small self-contained HTML rendering (tables, headings, embedded PNGs)."""
    body, in_table = [], False
    for line in md_text.splitlines():
        if line.startswith("|"):
            cells = [c.strip().replace("\\|", "|")
                     for c in re.split(r"(?<!\\)\|", line.strip()[1:-1])]
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
             "text-align:right}td:first-child{text-align:left}"
             ".best{background:#d8f0d8;font-weight:bold}.worst{background:#f8dada;font-style:italic}"
             ".flag{color:#777}img{max-width:100%}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>capaudit report</title>"
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>")


def _inline(text: str) -> str:
    """Markdown emphasis to HTML. Best/worst cells get classes of their own (coloured
    backgrounds); plain bold and italics (definitions, notes) stay black."""
    import re

    t = html.escape(text)
    t = re.sub(r"\*\*(.+?)\*\* \(best\)", r"<span class='best'>\1 (best)</span>", t)
    t = re.sub(r"_(\S.*?\S|\S)_ \(worst\)", r"<span class='worst'>\1 (worst)</span>", t)
    t = re.sub(r"^(.*) \(by construction\)$", r"<span class='flag'>\1 (by construction)</span>", t)
    t = re.sub(r"^(.*) \((circular[^()]*)\)$", r"<span class='flag'>\1 (\2)</span>", t)
    t = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", t)
    t = re.sub(r"(?<![\w/])\*(\S.*?)\*", r"<i>\1</i>", t)
    t = re.sub(r"`(.+?)`", r"<code>\1</code>", t)
    return t
