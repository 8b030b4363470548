"""``capaudit audit leaderboard``: LOTUS-style N-avg ranking of caption sets, with the page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from capaudit.cli.common import DbOption, console, open_store

# the LOTUS inputs, shared by audit run, audit disparity and audit leaderboard
ReferenceOpt = typer.Option(None, "--reference", help="Human caption set (noun/verb coverage)")
ClipModelOpt = typer.Option(None, "--clip-model", help="Local transformers CLIPModel folder "
                            "(no weights ship with capaudit)")
ImagesOpt = typer.Option(None, "--images", help="Folder of the images (CLIP metrics)")
LongTextOpt = typer.Option(None, "--long-text", help="Captions over the CLIP text positions: "
                           "truncate (default, counted) or chunk (sentence windows, averaged)")


def lotus_cli(reference, clip_model, images, long_text) -> dict:
    """The LOTUS options as config keys (None = not given)."""
    return dict(reference=reference, clip_model=clip_model,
                images=str(images) if images else None, long_text=long_text)


def leaderboard_command(
        targets: List[str] = typer.Argument(..., help="Two or more set names or caption files"),
        profile: Optional[str] = typer.Option(None, "--profile", help="Rank by this profile only "
                                              "(default: every profile in profiles.yaml)"),
        html: Optional[Path] = typer.Option(None, "--html", help="Write the leaderboard page here"),
        json_out: Optional[Path] = typer.Option(None, "--json", help="Write results as JSON"),
        markdown: Optional[Path] = typer.Option(None, "--markdown", help="Write the tables as "
                                                "Markdown"),
        reference: Optional[str] = ReferenceOpt, clip_model: Optional[str] = ClipModelOpt,
        images: Optional[Path] = ImagesOpt, long_text: Optional[str] = LongTextOpt,
        profiles_file: Optional[Path] = typer.Option(None, "--profiles",
                                                     help="Profiles YAML (configs/profiles.yaml)"),
        metrics: Optional[str] = typer.Option(None, "--metrics", help="Comma-separated names"),
        intersections: Optional[bool] = typer.Option(
            None, "--intersections/--no-intersections",
            help="Also each metric on gender x skin-tone cells, with the images per cell"),
        instances: Optional[Path] = typer.Option(None, "--instances", help="default: stored"),
        chair_gt: Optional[Path] = typer.Option(None, "--chair-gt", help="default: stored"),
        demographics: Optional[Path] = typer.Option(None, "--demographics",
                                                    help="default: stored"),
        n_boot: Optional[int] = typer.Option(None, "--n-boot", help="Bootstrap resamples (1000)"),
        seed: Optional[int] = typer.Option(None, "--seed"),
        workers: Optional[int] = typer.Option(None, "--workers"),
        config: Optional[Path] = typer.Option(None, "--config", help="YAML config"),
        db: Path = DbOption) -> None:
    """Every metric, bias gaps, criterion scores and profile rankings with bootstrap intervals."""
    from rich.table import Table

    from capaudit.core.config import provenance_beside, resolve
    from capaudit.leaderboard.runner import DEFAULTS, run_leaderboard

    cli = dict(profile=profile, **lotus_cli(reference, clip_model, images, long_text),
               profiles_file=str(profiles_file) if profiles_file else None, metrics=metrics,
               intersections=intersections,
               instances=str(instances) if instances else None,
               chair_gt=str(chair_gt) if chair_gt else None,
               demographics=str(demographics) if demographics else None, n_boot=n_boot,
               seed=seed, workers=workers)
    cfg = resolve(DEFAULTS, config, cli, section="leaderboard")
    store = open_store(db, create=True)  # results and caches are written
    with console.status("evaluating sets"):
        out = run_leaderboard(store, targets, cfg)
    lb = out["leaderboard"]
    for p, r in lb.profiles.items():
        table = Table(title=f"profile {p} (N-avg; rank 95% interval over "
                            f"{lb.meta['n_boot']} resamples)")
        for col in ("rank", "set", "N-avg", "rank interval", "first"):
            table.add_column(col, justify="left" if col == "set" else "right")
        for i in sorted(range(len(lb.sets)), key=lambda i: r["rank"][i]):
            ri = r.get("rank_interval")
            table.add_row(str(r["rank"][i]), lb.sets[i], f"{r['score'][i]:.3f}",
                          f"[{ri[i][0]}, {ri[i][1]}]" if ri else "-",
                          f"{100 * r['first_share'][i]:.0f}%" if r.get("first_share") else "-")
        console.print(table)
    for name, per in lb.groups.items():
        cells = per.get("intersections") or {}
        if cells:
            table = Table(title=f"{name}: gender x skin tone (images per cell)")
            heads = list(next(iter(cells.values())))
            for col in ["metric", *heads]:
                table.add_column(col, justify="left" if col == "metric" else "right")
            for metric, row in cells.items():
                table.add_row(metric, *[
                    "-" if row[h]["value"] is None else f"{row[h]['value']:.2f} (n={row[h]['images']})"
                    for h in heads])
            console.print(table)
    for note in lb.notes:
        console.print(f"note: {note}")  # the console prints data verbatim (no markup)
    payload = {"leaderboard": lb.to_dict(),
               "worst": {s.name: s.worst for s in out["sets"]}}
    if json_out:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
        provenance_beside(json_out, {**cfg, "run_id": out.get("_run_id")}, cfg.get("seed"))
    if markdown:
        from capaudit.leaderboard.markdown import leaderboard_markdown

        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(leaderboard_markdown(payload), encoding="utf-8")
        provenance_beside(markdown, {**cfg, "run_id": out.get("_run_id")}, cfg.get("seed"))
    if html:
        from capaudit.leaderboard.page import write_page

        index = write_page(html, payload)
        provenance_beside(index, {**cfg, "run_id": out.get("_run_id")}, cfg.get("seed"))
        console.print(f"page: {str(index)}")
    console.print(f"stored as run {out.get('_run_id')} in {str(store.path)}"
                  " (metrics.grp = 'leaderboard:PROFILE')")
