"""``capaudit filter validate LABELS --set NEWSET``: the filter's decisions against human labels.

A thin wrapper over :func:`capaudit.filters.validate.runner.validate_filter`: parse, call,
print one table (each level's precision, recall and F1 with its n and interval, the
matching and the status). Registered on the ``filter`` group of :mod:`capaudit.cli.filters`.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table
from rich.text import Text

from capaudit.cli.common import DbOption, console, open_store
from capaudit.cli.filters import filter_app

__all__ = ["validate", "print_validation"]


def _cell(level: dict, key: str) -> str:
    value, ci = level.get(key), level.get("ci", {}).get(key) or [None, None]
    if value is None:
        return "n/a"
    n = {"precision": level.get("n_precision"), "recall": level.get("n_recall")}.get(
        key, level.get("n"))
    band = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci[0] is not None else ""
    return f"{value:.3f}{band} (n {n:,})"


def print_validation(result: dict) -> None:
    """The validation as the terminal shows it (every value with its n, interval, status)."""
    m = result["matching"]
    unmatched = ", ".join(f"{k} {v:,}" for k, v in m["unmatched"].items()) or "none"
    console.print(Text(f"{result['set']} ({result['filter']}, evidence {result['evidence']}) "
                       f"vs {result['labels']} ({result['layout']}): status "
                       f"{result['status']}"))
    console.print(Text(f"  matched {m['matched']:,} of {m['labelled_captions']:,} labelled "
                       f"captions ({m['records']:,} records); not matched: {unmatched}"))
    rep = m.get("repeats") or {}
    if rep.get("repeated_records") or rep.get("disagreeing"):
        console.print(Text(f"  repeated records {rep.get('repeated_records', 0):,}, of which "
                           f"disagreeing {rep.get('disagreeing', 0):,} (rows "
                           f"{rep.get('disagreeing_rows', [])})"))
    if m.get("sentence_not_in_caption"):
        console.print(Text(f"  label sentences not found in their caption: "
                           f"{m['sentence_not_in_caption']:,}"))
    table = Table("level", "precision", "recall", "F1", "tp", "fp", "fn", "tn", "images")
    for level in ("caption", "sentence"):
        if level in result:
            lv, c = result[level], result[level]["counts"]
            table.add_row(level, _cell(lv, "precision"), _cell(lv, "recall"), _cell(lv, "f1"),
                          *(f"{c[k]:,}" for k in ("tp", "fp", "fn", "tn")),
                          f"{lv['n_images']:,}")
    if table.rows:
        console.print(table)
    for level in ("caption", "sentence"):
        for key in ("by_reason", "by_evidence"):
            cells = (result.get(level) or {}).get(key) or {}
            if cells:
                console.print(Text(f"  {level} {key.replace('_', ' ')}: " + "; ".join(
                    f"{k} " + " ".join(f"{c} {v:,}" for c, v in cell.items() if v)
                    for k, cell in cells.items())))
    if "graded" in result:
        g = result["graded"]
        ci = g["ci"]["spearman"]
        rho = "n/a" if g["spearman"] is None else f"{g['spearman']:.3f}"
        band = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci[0] is not None else ""
        console.print(Text(f"  graded: Spearman(share removed, grade) {rho}{band} "
                           f"(n {g['n']:,} captions, {g['n_images']:,} images)"))
    if "disagreements" in result:
        console.print(Text(f"  disagreements: {result['disagreements']:,}"))


@filter_app.command("validate")
def validate(labels: Path = typer.Argument(..., metavar="LABELS", help="Human labels: JSONL, "
                                           "CSV or JSON (docs/formats.md)"),
             set_name: str = typer.Option(..., "--set", metavar="NEWSET",
                                          help="A set written by filter run (best with "
                                               "--action flag: every sentence kept and "
                                               "logged), or the --out DST of filter run "
                                               "--shards (its shard logs)"),
             layout: str = typer.Option(None, "--layout", help="caption-label, sentence-label, "
                                        "spans, tokens, yes-no, graded or faithscore (default: "
                                        "sniffed)"),
             conflicts: str = typer.Option(None, "--conflicts", help="Repeated captions with "
                                           "different labels: error, any (hallucinated if one "
                                           "says so) or skip (default: the layout's rule)"),
             allow_few: bool = typer.Option(False, "--allow-few", help="Store a validation "
                                            "with too few matched captions (status too-few)"),
             n_boot: int = typer.Option(1000, "--n-boot", min=0, help="Bootstrap resamples "
                                        "(of images)"),
             seed: int = typer.Option(0, "--seed", min=0, max=2**32 - 1),
             json_out: Path = typer.Option(None, "--json", help="Write the result as JSON"),
             disagreements: Path = typer.Option(None, "--disagreements",
                                                help="Write every disagreement (JSONL, or "
                                                     "CSV by suffix)"),
             db: Path = DbOption):
    """Compare a filter run's decisions with human hallucination labels: precision, recall
    and F1 per caption and per sentence, with bootstrap intervals over images."""
    from capaudit.core.config import provenance_beside
    from capaudit.filters.validate.runner import validate_filter

    result = validate_filter(open_store(db), labels, set_name, layout=layout,
                             conflicts=conflicts, allow_few=allow_few, n_boot=n_boot,
                             seed=seed, json_out=json_out, disagreements=disagreements)
    cfg = {"command": "filter validate", "labels": labels.name, "set": set_name,
           "layout": result["layout"], "n_boot": n_boot}
    for out in (json_out, disagreements):
        if out is not None:
            provenance_beside(out, cfg, seed)
    print_validation(result)


def register(app: typer.Typer) -> None:
    """The command sits on ``filter_app`` (registered by :mod:`capaudit.cli.filters`)."""
