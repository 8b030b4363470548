"""How ``filter run`` / ``filter log`` print a filter's summary: counts, actions, reasons, the
evidence and its coverage, whether the before/after CHAIR is independent, the review and
balance notes. Apart from :mod:`capaudit.cli.filters` so both paths (a set, a sharded
corpus) print the same lines."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table
from rich.text import Text

from capaudit.cli.common import console

__all__ = ["_print_summary"]


def _pct(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _print_independent(ind: dict, out: str, parent: str | None) -> None:
    """The before/after scores with the captions each rests on; when the filter emptied
    captions, the after-scores on the before-set's captions too (each emptied one counted
    empty), the values ``audit compare PARENT OUT`` shows: the difference named, not left
    for the reader to find (#46)."""
    b, a = ind["before"], ind["after"]
    console.print(Text(
        f"  scored with {ind['evidence']} from {ind['source']} ({ind['covered']:,} of "
        f"{ind['set_images']:,} images): CHAIR_s {_pct(b['chair_s'])} -> "
        f"{_pct(a['chair_s'])}, CHAIR_i {_pct(b['chair_i'])} -> {_pct(a['chair_i'])}, "
        f"mentions/caption {_pct(b['mentions_per_caption'])} -> "
        f"{_pct(a['mentions_per_caption'])}; on {b['captions']:,} -> {a['captions']:,} "
        "captions with evidence"))
    p = ind.get("on_parent")
    if p and p["emptied"]:
        console.print(Text(
            f"  {p['emptied']:,} of those {p['captions']:,} captions were emptied by the filter;"
            f" counted as empty captions, as audit compare {parent or 'PARENT'} {out} counts "
            f"them: CHAIR_s {_pct(b['chair_s'])} -> {_pct(p['chair_s'])}, mentions/caption "
            f"{_pct(b['mentions_per_caption'])} -> {_pct(p['mentions_per_caption'])} on "
            f"{p['captions']:,} captions"))


def _print_evidence(summary: dict, out: str, parent: str | None) -> None:
    """Which evidence judged the set, its coverage, what the parse spared, and whether the
    before/after CHAIR is independent of the filter (it is not under the same evidence)."""
    ev = summary.get("evidence")
    ind = summary.get("independent")
    if not isinstance(ev, dict):
        if ind:
            _print_independent(ind, out, parent)
        return
    n, c = ev.get("set_images") or 0, ev.get("covered") or 0
    cov = f"{c:,} of {n:,} images ({100 * c / n:.1f}%)" if n else "no images with an id"
    console.print(Text(f"  evidence: {ev['kind']} from {ev.get('source')}: covers {cov}"))
    cats = ev.get("categories")
    if cats:   # "79 of 80 COCO categories; missing: tennis racket"
        console.print(Text(f"  evidence categories: {cats['line']}"
                           + ("; a sentence naming a missing one is judged unsupported"
                              if cats.get("missing") else ""),
                           style="yellow" if cats.get("missing") else ""))
    if n and c / n < 0.5:
        console.print(Text(f"  warning: most images have no {ev['kind']} evidence; their "
                           "captions are kept unjudged (reason no-evidence)", style="yellow"))
    p = summary.get("parse") or {}
    if p:
        line = (f"  non-visual ({p.get('non_visual')}): {p.get('non_visual_mentions', 0):,} "
                f"mention(s), {p.get('non_visual_sentences', 0):,} sentence(s) spared")
        if p.get("modifiers"):
            line += (f"; modifiers: {p.get('modifier_mentions', 0):,} mention(s), "
                     f"{p.get('modifier_sentences', 0):,} sentence(s) spared")
        console.print(Text(line))
    j = summary.get("judge")
    if j:   # hallucination --judge: what it was asked and what it cost
        unanswered = sum(j.get(k, 0) for k in ("unparsed", "failed", "not-judged"))
        console.print(Text(
            f"  judge ({j['scope']}, {j['backend']} {j['model']}, id {j['judge_id']}): "
            f"{j['sentences']:,} sentence(s) asked in {j['questions']:,} question(s), "
            f"{j['calls']:,} call(s), {j['cache_hits']:,} from the cache: "
            f"{j['unsupported']:,} unsupported, {j['supported']:,} supported, "
            f"{unanswered:,} unanswered" + (f" ({j['stopped']})" if j.get("stopped") else ""),
            style="yellow" if unanswered else ""))
    if ind:
        _print_independent(ind, out, parent)
    if not ind or ind.get("circular"):
        other = "instances" if ev["kind"] == "chair-gt" else "chair-gt"
        console.print(Text(
            f"  circular: {out} was filtered with {ev['kind']}, so its CHAIR under that "
            f"{ev['kind']} measures the filter against itself (audit compare {parent or 'PARENT'}"
            f" {out} shows it 'circular'). Score it independently: "
            f"--score-evidence {other} (or a detector JSONL file)", style="yellow"))


def _print_summary(summary: dict, out: str, parent: str | None = None) -> None:
    console.print(f"[bold]{escape(summary['filter'])}[/] -> [bold]{escape(out)}[/]: captions "
                  f"{summary['captions_in']:,} in, {summary['captions_out']:,} out; sentences "
                  f"{summary['sentences_in']:,} in = {summary['sentences_kept']:,} kept + "
                  f"{summary['sentences_dropped']:,} dropped", markup=True)
    acts = summary.get("actions", {})
    console.print("  actions: " + ", ".join(f"{a} {n:,}" for a, n in acts.items() if n))
    if summary.get("reasons"):
        console.print("  reasons: " + ", ".join(f"{r} {n:,}"
                                                for r, n in list(summary["reasons"].items())[:6]))
    for why in (summary.get("chosen") or {}).values():   # "object mode visual: chosen ..."
        console.print(Text(f"  {why}"))
    _print_evidence(summary, out, parent)
    review = (summary.get("review") or {}).get("sentences")
    if review:
        console.print(Text(f"  review: {review:,} kept sentence(s) open with a referring word "
                           "(\"These ...\", \"It ...\") right after a dropped one; see filter log "
                           f"{out}, or capaudit review export {out}", style="yellow"))
    bal = summary.get("balance")
    if bal:
        b, a = bal["images_before"], bal["images_after"]
        console.print(f"  images man/woman: before {b['man']:,}/{b['woman']:,}, after "
                      f"{a['man']:,}/{a['woman']:,} (labels from {bal['labels_from']})")
    co = summary.get("cooccurrence")
    if co:
        # short headers, shares in %, names whole: seven columns fit 80 characters
        table = Table(title="co-occurrence: images of men / women with the object "
                            "(most skewed first)")
        table.add_column("object", no_wrap=True)
        for col in ("man", "woman", "man %", "man after", "woman after", "man % after"):
            table.add_column(col, justify="right")
        before, after = co["before"], co["after"]
        key = lambda o: -abs((before[o]["man_share"] or 0.5) - 0.5)  # noqa: E731
        share = lambda v: "-" if v is None else f"{100 * v:.1f}"  # noqa: E731
        for o in sorted(before, key=key)[:15]:
            b, a = before[o], after.get(o, {"man": 0, "woman": 0, "man_share": None})
            table.add_row(o, f"{b['man']:,}", f"{b['woman']:,}", share(b["man_share"]),
                          f"{a['man']:,}", f"{a['woman']:,}", share(a["man_share"]))
        console.print(table)
    refused = summary.get("refused")
    if refused:
        console.print(f"[yellow]refused {len(refused)} row(s)[/]:", markup=True)
        for r in refused[:10]:
            console.print(Text(f"  file row {r['file_row']}, row_idx {r['row_idx']}: {r['why']}"))
