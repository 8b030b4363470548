"""``capaudit audit leaderboard``: LOTUS-style N-avg ranking of caption sets, with the page."""

from __future__ import annotations

import time
from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from capaudit.cli import options as opt
from capaudit.cli.common import DbOption, audit_config, console, open_store
from capaudit.cli.options import annotation_cli, lotus_cli


def leaderboard_command(
        targets: List[str] = typer.Argument(..., help="Two or more set names or caption files"),
        profile: Optional[str] = typer.Option(None, "--profile", help="Rank by this profile only "
                                              "(default: every profile in profiles.yaml)"),
        html: Optional[Path] = typer.Option(None, "--html", help="Write the leaderboard page here"),
        json_out: Optional[Path] = typer.Option(None, "--json", help="Write results as JSON"),
        markdown: Optional[Path] = typer.Option(None, "--markdown", help="Write the tables as "
                                                "Markdown"),
        reference: Optional[str] = opt.Reference, clip_model: Optional[str] = opt.ClipModel,
        images: Optional[Path] = opt.Images, long_text: Optional[str] = opt.LongText,
        nsfw_lexicon: Optional[Path] = opt.NsfwLexicon,
        profiles_file: Optional[Path] = typer.Option(None, "--profiles",
                                                     help="Profiles YAML (configs/profiles.yaml)"),
        metrics: Optional[str] = opt.LeaderboardMetrics,
        intersections: Optional[bool] = typer.Option(
            None, "--intersections/--no-intersections",
            help="Also each metric on gender x skin-tone cells, with the images per cell"),
        instances: Optional[Path] = opt.Instances, chair_gt: Optional[Path] = opt.ChairGT,
        demographics: Optional[Path] = opt.Demographics, allow_partial: Optional[bool] =
        opt.AllowPartial, min_coverage: Optional[float] = opt.MinCoverage,
        min_n: Optional[int] = opt.MinN, n_boot: Optional[int] = opt.NBoot,
        all_images: bool = typer.Option(
            False, "--all-images", help="Each set's values on its own images, with n and "
            "status, and nothing ranked (sets of different datasets, refused without it)"),
        seed: Optional[int] = opt.Seed, workers: Optional[int] = opt.Workers,
        config: Optional[Path] = opt.LeaderboardConfig, db: Path = DbOption) -> None:
    """Every metric, bias gaps, criterion scores and profile rankings with bootstrap intervals."""
    from capaudit.leaderboard.outputs import write_outputs
    from capaudit.leaderboard.runner import run_leaderboard

    cfg = audit_config(config, section="leaderboard", profile=profile,
                       profiles_file=str(profiles_file) if profiles_file else None,
                       metrics=metrics, intersections=intersections, n_boot=n_boot, seed=seed,
                       allow_partial=allow_partial, min_coverage=min_coverage, min_n=min_n,
                       workers=workers, **lotus_cli(reference, clip_model, images, long_text, nsfw_lexicon),
                       **annotation_cli(instances, chair_gt, demographics))
    store = open_store(db, create=True)  # results and caches are written
    with _Progress() as say:
        out = run_leaderboard(store, targets, cfg, say, all_images)
    lb = out["leaderboard"]
    _print_values(lb)
    _print_profiles(lb)
    _print_intersections(lb)
    for note in lb.notes:   # not ranked: said under the values table
        if note != lb.meta.get("unranked"):
            console.print(f"note: {note}")  # the console prints data verbatim (no markup)
    index = write_outputs(store, out, cfg, json_out, markdown, html)
    if index is not None:
        console.print(f"page: {str(index)}")
    console.print(f"stored as run {out.get('_run_id')} in {str(store.path)}"
                  + ("" if lb.meta.get("unranked") else " (metrics.grp = 'leaderboard:PROFILE')"))


QUIET_S = 2.0


class _Progress:
    """What the run is doing, on stderr: a spinner when stderr is a terminal, else one line
    per stage (``capaudit: [12 s] nic: 10,780 captions evaluated``), so a run whose output
    goes to a file or a pipe is not a minute of silence. The lines start after
    :data:`QUIET_S` seconds: a run that ends (or fails, with its one line) sooner says nothing
    more."""

    def __enter__(self):
        from capaudit.cli.common import err_console

        self.start, self.err = time.monotonic(), err_console
        self.status = err_console.status("evaluating sets") if err_console.is_terminal else None
        if self.status:
            self.status.__enter__()
        return self.say

    def say(self, text: str) -> None:
        if self.status:
            self.status.update(text)
        elif time.monotonic() - self.start >= QUIET_S:
            self.err.print(f"capaudit: [{time.monotonic() - self.start:.0f} s] {text}",
                           highlight=False, soft_wrap=True)

    def __exit__(self, *exc):
        if self.status:
            self.status.__exit__(*exc)
        return False


def _print_values(lb) -> None:
    """Every value of the board with its interval and n: one row per column, one column per
    set (a gap signed, its direction named), as the Markdown and the page show them."""
    from capaudit.leaderboard.markdown import board_cell

    board = lb.to_dict()
    apart = lb.meta.get("unranked")   # --all-images: each set on its own images, no ranks
    table = Table(title=f"leaderboard values{', each set on its own images' if apart else ''} "
                        "(95% interval; n = images)")
    table.add_column("metric", overflow="fold")
    for name in lb.sets:
        table.add_column(name, justify="right", overflow="fold")
    for j, c in enumerate(lb.columns):
        cells = [board_cell(board, i, j).replace(" [", "\n[").replace(" n=", "\nn=")
                 + _tag(lb, i, j) for i in range(len(lb.sets))]
        head = (f"{c.metric} ({c.gap})" if c.by else
                c.name + (" ↑" if c.higher_is_better else " ↓")) + ("" if c.averaged else " *")
        table.add_row(head, *cells)
    console.print(table)
    if apart:
        console.print(apart)
    elif not all(c.averaged for c in lb.columns):
        console.print("* shown, not averaged (see the notes)")


def _tag(lb, i: int, j: int) -> str:
    """A cell's caveat on its own line (too-few, partial: 20 of 100 images), as everywhere,
    then what stands behind the value (the NSFW entries matched, with their counts)."""
    from capaudit.leaderboard.status import cell_tag

    t = cell_tag(lb.status[i][j], lb.status_notes[i][j]) if lb.status else ""
    said = lb.cell_notes.get(lb.sets[i], {}).get(lb.columns[j].name)
    return (f"\n{t}" if t else "") + (f"\n{said}" if said else "")


def _print_profiles(lb) -> None:
    """One table per profile: rank (``=1``: tied, rank intervals overlap), N-avg, the rank's
    95% interval and how often first; the criteria the profile's ranking left out."""
    from capaudit.leaderboard.ranking import rank_label

    for p, r in lb.profiles.items():
        left = ", ".join(r.get("left_out") or {})
        table = Table(title=f"profile {p} (N-avg; rank 95% interval over "
                            f"{lb.meta['n_boot']} resamples; =k: tied)"
                            + (f"; left out: {left}" if left else ""))
        for col in ("rank", "set", "N-avg", "rank interval", "first"):
            table.add_column(col, justify="left" if col == "set" else "right")
        for i in sorted(range(len(lb.sets)), key=lambda i: r["rank"][i]):
            ri = r.get("rank_interval")
            table.add_row(rank_label(r, i), lb.sets[i], f"{r['score'][i]:.3f}",
                          f"[{ri[i][0]}, {ri[i][1]}]" if ri else "-",
                          f"{100 * r['first_share'][i]:.0f}%" if r.get("first_share") else "-")
        console.print(table)


def _print_intersections(lb) -> None:
    """``--intersections``: each set's metrics on the gender x skin-tone cells, each with its
    95% interval and images (too-few under --min-n)."""
    from capaudit.leaderboard.cells import cell_text
    from capaudit.metrics.spec import number_format

    for name, per in lb.groups.items():
        cells = per.get("intersections") or {}
        if cells:
            table = Table(title=f"{name}: gender x skin tone (95% interval; n = images)")
            heads = list(next(iter(cells.values())))
            for col in ["metric", *heads]:
                table.add_column(col, justify="left" if col == "metric" else "right")
            for metric, row in cells.items():
                table.add_row(metric, *[cell_text(row[h], number_format(metric))
                                        .replace(" [", "\n[").replace(" n=", "\nn=")
                                        .replace(" too-few", "\ntoo-few") for h in heads])
            console.print(table)
