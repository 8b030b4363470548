"""``capaudit audit lic``: LIC leakage of a caption set (and of human captions).

Kept import-light: torch and transformers are imported only when the command
runs. ``capaudit.cli.audit.register`` attaches it as ``audit lic``.
"""

from __future__ import annotations

from pathlib import Path

import typer

from capaudit.cli import options as opt
from capaudit.cli.common import DbOption, console, db_path, err_console, open_store


def _open(db: Path | None, no_cache: bool):
    """The one store of the command (labels, set names, the seed cache): writable for the
    cache; with --no-cache read-only, and none when the file does not exist."""
    if no_cache:
        return open_store(db, read_only=True) if db_path(db).exists() else None
    return open_store(db, create=True)


def lic_command(
    target: str = typer.Argument(..., help="Caption set: JSONL (image_id, caption), COCO JSON, or set name"),
    reference: str | None = typer.Option(None, "--reference", help="Human caption set of the "
                                         "same images (LIC_D and LIC)"),
    demographics: Path | None = opt.Demographics,
    classifier: str = typer.Option("lstm", "--classifier", help="lstm (reference) or transformer"),
    seeds: int = typer.Option(10, "--seeds", min=1, max=10, help="Use the first N reference seeds"),
    epochs: int | None = typer.Option(None, "--epochs", min=1, help="Default: 20 (lstm), 5 (transformer)"),
    attribute: str = typer.Option("gender", "--attribute", help="gender or skin_tone"),
    json_out: Path | None = typer.Option(None, "--json", help="Write the results as JSON here"),
    db: Path | None = DbOption,
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda"),
    align_vocab: bool = typer.Option(True, "--align-vocab/--no-align-vocab",
                                     help="Human words outside the model's vocabulary become <unk>"),
    model_path: Path | None = typer.Option(None, "--model-path", help="Transformer: local encoder directory"),
    max_length: int = typer.Option(64, "--max-length", help="Transformer: max word pieces"),
    no_cache: bool = typer.Option(False, "--no-cache", help="Train every seed even if cached"),
    threads: int | None = typer.Option(None, "--threads", min=1,
                                          help="CPU threads (default: the idle cores by load)"),
) -> None:
    """LIC leakage (Hirota et al. 2022): LIC_M, and with --reference LIC_D and LIC = LIC_M - LIC_D.

    Before training it says how many images take part (labelled images with a
    caption; with --reference only those that also have human captions) and
    estimates the time from short calibration runs; a bar shows the ETA.
    """
    from capaudit.audit.lic.runner import DEFAULT_SEEDS
    from capaudit.audit.lic.sets import lic_of_set

    options = {}
    if classifier == "transformer":
        options = {"max_length": max_length} | ({"model_path": model_path} if model_path else {})
    store = _open(db, no_cache)  # the one store: labels, set names and the seed cache
    try:
        name, res = lic_of_set(store, target, reference, demographics, attribute=attribute,
                               cache=not no_cache, classifier=classifier,
                               seeds=DEFAULT_SEEDS[:seeds], epochs=epochs, device=device,
                               align_vocab=align_vocab, classifier_options=options,
                               threads=threads, report=lambda line: err_console.print(line))
    finally:
        if store is not None:
            store.close()
    _print_lic(res, f"LIC ({classifier}, {attribute}) on {name}: {res['n_images']:,} images")
    if json_out is not None:
        payload = {"sets": {name: {k: res[k] for k in ("lic_m", "lic_d", "lic")} |
                            {"n_images": res["n_images"], "config": res["config"]}}}
        from capaudit.core.config import write_json

        write_json(json_out, payload, res["config"])


def _print_lic(res: dict, title: str) -> None:
    """LIC_M (LIC_D, LIC) per seed, then their mean and spread over the seeds."""
    from rich.table import Table

    keys = [k for k in ("lic_m", "lic_d", "lic") if res[k] is not None]
    table = Table(title=title)
    table.add_column("seed", justify="right")
    for k in keys:
        table.add_column(k.upper(), justify="right")
    for s in res["lic_m"]["seeds"]:
        table.add_row(str(s), *[f"{res[k]['seeds'][s]:.2f}" for k in keys])
    if len(res["lic_m"]["seeds"]) > 1:  # one seed has no spread: printing ± 0.00 would claim one
        table.add_row("mean ± std", *[f"{res[k]['value']:.2f} ± {res[k]['std']:.2f}" for k in keys],
                      style="bold")
    console.print(table)
    if len(res["lic_m"]["seeds"]) == 1:
        console.print("one seed: no spread over seeds (use --seeds 2 or more for a mean and its spread)")
