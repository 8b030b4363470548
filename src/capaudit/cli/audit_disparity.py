"""``capaudit audit disparity``: every metric on woman/man (or light/dark) images, and the gap."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from capaudit.cli import options as opt
from capaudit.cli.common import DbOption, audit_config, console, open_store
from capaudit.cli.options import annotation_cli, lotus_cli


def _fmt(metric: str, r) -> str:
    """The compare table's text of a value (vocab a count), its interval on a second line."""
    from capaudit.report.cells import fmt_value

    if r.skipped or r.value is None:
        return "-"
    return fmt_value(metric, r).replace(" [", "\n[", 1)


def disparity_command(
        targets: List[str] = typer.Argument(..., help="Registered set names or caption files"),
        by: str = typer.Option("gender", "--by", help="gender (male - female) or skin_tone "
                               "(light - dark)"),
        instances: Optional[Path] = opt.Instances, chair_gt: Optional[Path] = opt.ChairGT,
        demographics: Optional[Path] = opt.Demographics, metrics: Optional[str] = opt.Metrics,
        mode: Optional[str] = opt.Mode, n_boot: Optional[int] = opt.NBoot,
        seed: Optional[int] = opt.Seed, workers: Optional[int] = opt.Workers,
        min_images: Optional[int] = opt.MinImages, min_n: Optional[int] = opt.MinN,
        json_out: Optional[Path] = typer.Option(None, "--json", help="Write results as JSON"),
        reference: Optional[str] = opt.Reference, clip_model: Optional[str] = opt.ClipModel,
        images: Optional[Path] = opt.Images, long_text: Optional[str] = opt.LongText,
        nsfw_lexicon: Optional[Path] = opt.NsfwLexicon,
        config: Optional[Path] = opt.Config, db: Path = DbOption) -> None:
    """Each metric on each group of images and the difference, with bootstrap intervals."""
    from rich.markup import escape
    from rich.table import Table

    from capaudit.audit.disparity import run_disparity
    from capaudit.core.config import write_json

    cfg = audit_config(config, metrics=metrics, mode=mode, n_boot=n_boot, seed=seed,
                       workers=workers, min_images=min_images, min_n=min_n,
                       **lotus_cli(reference, clip_model, images, long_text, nsfw_lexicon),
                       **annotation_cli(instances, chair_gt, demographics))
    store = open_store(db, create=True)  # caption files given as targets are registered
    with console.status(f"auditing by {by}"):
        out = run_disparity(store, targets, cfg, by=by)
    run_id = out.pop("_run_id", None)
    for name, d in out.items():
        a, b = d.groups
        table = Table(title=f"{name}: by {by} ({d.meta['captions'][a]:,} {a} / "
                            f"{d.meta['captions'][b]:,} {b} captions; 95% CI)")
        for col in ("metric", a, b, d.diff_key):
            table.add_column(col, justify="left" if col == "metric" else "right")
        for metric, per in d.results.items():
            table.add_row(metric, *(_fmt(metric, per[k]) for k in (a, b, d.diff_key)))
        console.print(table)
        for metric, per in d.results.items():
            if per[d.diff_key].skipped:
                console.print(f"[yellow]{escape(metric)}: {escape(per[d.diff_key].skipped)}[/]",
                              markup=True)
        if d.meta["unlabelled_captions"]:
            console.print(f"{d.meta['unlabelled_captions']:,} captions of images without a "
                          f"{by} label left out")
        sized = [m for m in d.results if d.results[m][a].extra.get("basis") == "equal images"]
        if sized:
            k = d.meta["images"]["equal images"][a]
            console.print(f"{', '.join(sized)} on {k:,} images per group (the larger group "
                          "subsampled: these grow with sample size)")
    if json_out:
        write_json(json_out, {"by": by, "sets": {n: {"metrics": d.to_dict(), "meta": d.meta}
                                                 for n, d in out.items()}},
                   {**cfg, "by": by, "run_id": run_id}, cfg.seed)
    console.print(f"stored as run {run_id} in {store.path} (metrics.grp = '{by}=...')"
                  + (f"; JSON: {json_out}" if json_out else ""))
