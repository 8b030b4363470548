"""``capaudit audit card``: the audit of one or more sets as a dataset-card section."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from capaudit.cli import options as opt
from capaudit.cli.common import DbOption, audit_config, console, open_store
from capaudit.cli.options import annotation_cli


def card_command(
        sets: List[str] = typer.Argument(..., help="Registered set names or caption files"),
        out: Path = typer.Option(..., "--out", help="The card to write (markdown with YAML "
                                 "metadata), e.g. README.md of the dataset"),
        disparity: Optional[str] = typer.Option("gender", "--disparity",
                                                help="Gaps by group: gender, skin_tone, "
                                                     "gender,skin_tone or none"),
        instances: Optional[Path] = opt.Instances, chair_gt: Optional[Path] = opt.ChairGT,
        demographics: Optional[Path] = opt.Demographics, metrics: Optional[str] = opt.Metrics,
        n_boot: Optional[int] = opt.NBoot, seed: Optional[int] = opt.Seed,
        allow_partial: Optional[bool] = opt.AllowPartial, min_n: Optional[int] = opt.MinN,
        config: Optional[Path] = opt.Config, db: Path = DbOption) -> None:
    """Write the audit as a Hugging Face dataset-card section: every metric with n, interval
    and status, the annotations and their coverage, gaps by group, filters, provenance."""
    from capaudit.core.config import current_command, package_versions
    from capaudit.report.card import dataset_card
    from capaudit.report.compare import compare_sets

    cfg = audit_config(config, metrics=metrics, n_boot=n_boot, seed=seed,
                       allow_partial=allow_partial, min_n=min_n,
                       disparity=None if (disparity or "none") == "none" else disparity,
                       **annotation_cli(instances, chair_gt, demographics))
    from capaudit.core.names import escape_markdown_html
    from capaudit.core.safe_write import check_file_target, write_text

    store = open_store(db, create=True)
    check_file_target(out)  # a link, the store or a source is refused before any work
    cmp = compare_sets(store, sets, cfg, same_images=False)
    text = dataset_card(cmp, store, cfg, package_versions(), current_command())
    write_text(out, escape_markdown_html(text), parents=True)
    console.print(f"card: {out} ({len(cmp.names)} set(s), {len(cmp.metrics)} metrics)")
