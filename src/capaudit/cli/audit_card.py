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
        out: Path = typer.Option(..., "--out", help="The card to write or merge into "
                                 "(markdown with YAML metadata), e.g. README.md of the dataset"),
        disparity: Optional[str] = typer.Option("gender", "--disparity",
                                                help="Gaps by group: gender, skin_tone, "
                                                     "gender,skin_tone or none"),
        instances: Optional[Path] = opt.Instances, chair_gt: Optional[Path] = opt.ChairGT,
        demographics: Optional[Path] = opt.Demographics, metrics: Optional[str] = opt.Metrics,
        n_boot: Optional[int] = opt.NBoot, seed: Optional[int] = opt.Seed,
        allow_partial: Optional[bool] = opt.AllowPartial, min_n: Optional[int] = opt.MinN,
        license: Optional[str] = typer.Option(None, "--license", help="The data's license "
                                              "(a Hub id such as cc-by-4.0), for a card "
                                              "that has none; an existing one is kept"),
        config: Optional[Path] = opt.Config, db: Path = DbOption) -> None:
    """Write the audit into a Hugging Face dataset card: merged into the card at --out (its
    metadata and text kept, capaudit's section between markers replaced on a rerun), every
    metric with n, interval and status, the annotations by sha256, what each filter
    removed, the independent score of a circular value, provenance without local paths."""
    from capaudit.report.card_file import audit_card

    cfg = audit_config(config, metrics=metrics, n_boot=n_boot, seed=seed,
                       allow_partial=allow_partial, min_n=min_n,
                       disparity=None if (disparity or "none") == "none" else disparity,
                       **annotation_cli(instances, chair_gt, demographics))
    store = open_store(db, create=True)
    cmp, said = audit_card(store, sets, out, cfg, license=license)
    console.print(f"card: {out} ({len(cmp.names)} set(s), {len(cmp.metrics)} metrics)")
    for line in said:
        console.print(line, style="yellow")
