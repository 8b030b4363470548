"""CLI: ``train-downstream``, ``caption`` and the ``audit amplification`` view.

Thin wrappers over :mod:`capaudit.train_downstream`. Training does not keep the
database open: DuckDB allows one writing process per file and a fine-tune runs
for hours, so the captions are read, the store is closed, and the run's resolved
config, seed and versions go to ``RUN/provenance.json`` beside the checkpoints.
``caption`` and ``audit amplification`` are short and are recorded as runs.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Optional

import typer

from capaudit.cli import options as opt
from capaudit.cli.common import (DbOption, console, err_console, keep_on_interrupt, open_store,
                                 progress, recorded_run)
from capaudit.errors import InputError


def train_downstream_command(
    set_name: str = typer.Argument(..., metavar="SET", help="Caption set to train on."),
    shards: Path = typer.Option(..., "--shards", help="Webdataset shards with the training images."),
    model: str = typer.Option(..., "--model", help="BLIP captioner folder (or hub name when online)."),
    out: Path = typer.Option(..., "--out", help="Run folder: checkpoints, log, final model."),
    epochs: Optional[int] = typer.Option(None, "--epochs", min=1, help="Epochs (default 5, as in the paper)."),
    lr: Optional[float] = typer.Option(None, "--lr", help="AdamW learning rate (default 1e-5)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", min=1, help="Micro-batch size (default 32)."),
    grad_accum: Optional[int] = typer.Option(None, "--grad-accum", help="Micro-batches per step (default 1)."),
    precision: Optional[str] = typer.Option(None, "--precision", help="auto, fp32, bf16 or fp16 (auto: bf16 on a GPU that has it; a CPU runs fp32 and says so)."),
    attention: Optional[str] = typer.Option(None, "--attention", help="auto, eager or sdpa (auto: sdpa on a GPU, eager on CPU)."),
    compile_model: Optional[bool] = typer.Option(None, "--compile/--no-compile", help="torch.compile the model (default: on a GPU, off on CPU)."),
    seed: Optional[int] = typer.Option(None, "--seed", min=0, max=2**32 - 1, help="Seed of init, data order, dropout (default 0)."),
    weight_decay: Optional[float] = typer.Option(None, "--weight-decay"),
    warmup_steps: Optional[int] = typer.Option(None, "--warmup-steps"),
    checkpoint_every: Optional[int] = typer.Option(None, "--checkpoint-every",
                                                   help="Steps between checkpoints (also every epoch)."),
    log_every: Optional[int] = typer.Option(None, "--log-every", help="Steps between log lines."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="Caption token cap (default 40)."),
    workers: Optional[int] = typer.Option(None, "--workers", min=-1, help="DataLoader workers (-1: auto)."),
    device: Optional[str] = typer.Option(None, "--device", help="auto, cpu, cuda or cuda:N."),
    config: Optional[Path] = typer.Option(None, "--config", help="YAML (section train_downstream)."),
    db: Optional[Path] = DbOption,
):
    """Fine-tune a BLIP captioner on the images of SHARDS paired with the captions of SET.

    Resumes from OUT/checkpoint.pt when present (same options required)."""
    from capaudit.core.config import resolve, write_provenance
    from capaudit.train_downstream.train import TrainConfig, runtime_plan, train_downstream

    cli = dict(epochs=epochs, lr=lr, batch_size=batch_size, grad_accum=grad_accum,
               precision=precision, attention=attention, compile=compile_model, seed=seed, weight_decay=weight_decay,
               warmup_steps=warmup_steps, checkpoint_every=checkpoint_every, log_every=log_every,
               max_tokens=max_tokens, workers=workers, device=device)
    # a YAML key TrainConfig lacks is refused by resolve (one line with a did-you-mean)
    cfg = TrainConfig(**resolve(asdict(TrainConfig()), config, cli, section="train_downstream"))
    for name in ("epochs", "batch_size", "grad_accum", "checkpoint_every", "log_every", "max_tokens"):
        if getattr(cfg, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} must be at least 1")
    with open_store(db, read_only=True) as store:
        table = store.captions(set_name, columns="image_id, caption")
    plan = runtime_plan(cfg)
    for note in plan.notes:
        err_console.print(f"note: {note}", markup=False, highlight=False)
    write_provenance(Path(out) / "provenance.json",
                     {**asdict(cfg), "set": set_name, "shards": str(shards), "model": model,
                      "out": str(out), "runtime": plan.as_dict()}, cfg.seed)
    with progress() as bar:
        task = bar.add_task(f"train {set_name}", total=None)

        def on_step(info: dict) -> None:
            bar.update(task, completed=info["step"], total=info["total_steps"])
            if "samples_per_s" in info:
                err_console.print(
                    f"step {info['step']}/{info['total_steps']} epoch {info['epoch']} "
                    f"loss {info['loss']:.4f} lr {info['lr']:.2e} "
                    f"{info['samples_per_s']:.1f} samples/s peak {info['peak_mem_mb']:.0f} MiB")

        try:
            summary = train_downstream(table.column("image_id").to_pylist(),
                                       table.column("caption").to_pylist(), shards, model, out,
                                       cfg, set_name=set_name, on_step=on_step)
        except KeyboardInterrupt:
            keep_on_interrupt(f"rerun the same command to resume from "
                              f"{Path(out) / 'checkpoint.pt'} (if a checkpoint was written)")
            raise
    if summary.get("already_done"):
        console.print(f"{out} is already complete ({summary['steps']} steps); nothing to do")
        return
    console.print(f"trained on {summary['pairs']} pairs ({summary['unmatched_captions']} captions "
                  f"without an image), {summary['steps']} steps on {summary['device']} "
                  f"[{summary['precision']}, {plan.attention} attention"
                  f"{', compiled' if plan.compile else ''}]; model: {Path(out) / 'model'}")


def caption_command(
    model: Path = typer.Option(..., "--model", help="A train-downstream run folder or model folder."),
    shards: Path = typer.Option(..., "--shards", help="Webdataset shards with the images to caption."),
    out: str = typer.Option(..., "--out", help="Name of the caption set to register."),
    beams: int = typer.Option(3, "--beams", help="Beam width (1 = greedy)."),
    max_length: int = typer.Option(20, "--max-length", help="Max tokens incl. the bos token."),
    min_length: int = typer.Option(5, "--min-length", min=0),
    batch_size: int = typer.Option(32, "--batch-size", min=1),
    device: str = typer.Option("auto", "--device"),
    precision: str = typer.Option("auto", "--precision", help="auto, fp32, bf16 or fp16."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Caption only the first N images."),
    replace: bool = typer.Option(False, "--replace", help="Replace a set of the same name."),
    db: Optional[Path] = DbOption,
):
    """Caption every image of SHARDS with MODEL and register the captions as set OUT."""
    from capaudit.train_downstream.caption import generate_captions, run_info

    with open_store(db, create=True) as store:
        if store.find_set(out) is not None and not replace:
            raise InputError(f"a caption set named '{out}' already exists",
                             fix="choose another --out or pass --replace")
        info = run_info(model)
        config = {"model": str(model), "shards": str(shards), "beams": beams,
                  "max_length": max_length, "min_length": min_length, "batch_size": batch_size,
                  "device": device, "precision": precision, "limit": limit,
                  "train_set": info.get("set")}
        with recorded_run(store, config, info.get("seed")) as run_id, progress() as bar:
            task = bar.add_task(f"caption -> {out}", total=None)
            table = generate_captions(model, shards, batch_size=batch_size, num_beams=beams,
                                      max_length=max_length, min_length=min_length,
                                      device=device, precision=precision, limit=limit,
                                      on_batch=lambda n: bar.advance(task, n))
            store.add_set_from_table(out, table, source=str(model), format="downstream",
                                     parent=info.get("set") or None, replace=replace,
                                     meta={**config, "run_id": run_id, "training": info})
    console.print(f"registered '{out}': {table.num_rows} captions from {model}")


def amplification_command(
    upstream: str = typer.Option(..., "--upstream", help="The training caption set."),
    downstream: str = typer.Option(..., "--downstream", help="The model's caption set."),
    instances: Optional[Path] = opt.Instances,
    chair_gt: Optional[Path] = opt.ChairGT,
    demographics: Optional[Path] = opt.Demographics,
    metrics: Optional[str] = opt.Metrics,
    report: Optional[Path] = typer.Option(None, "--report", help="Write the table as Markdown here."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the rows as JSON here."),
    db: Optional[Path] = DbOption,
):
    """Table 2 view: each metric's downstream minus upstream value, with a 95% interval.

    Uses the latest stored `audit run` results of each set; audits a set now when it has none or when annotation files are given (stored annotations otherwise)."""
    from rich.table import Table

    from capaudit.audit.amplification import amplification, stored_results, to_markdown
    from capaudit.core.config import write_json
    from capaudit.metrics.spec import number_format

    wanted = [m.strip() for m in metrics.split(",")] if metrics else None
    with open_store(db) as store:
        for name in (upstream, downstream):
            store.get_set(name)
        sides = {}
        for name in (upstream, downstream):
            stored = {} if (instances or chair_gt or demographics) else stored_results(store, name)
            # nothing stored (or annotation files given): audit now, with the given files or
            # the annotations registered in the store (capaudit annotations add)
            sides[name] = stored or _audit_now(store, name, instances, chair_gt, demographics,
                                               wanted)
        up, down = sides[upstream], sides[downstream]
        if wanted:
            up = {k: v for k, v in up.items() if k in wanted}
            down = {k: v for k, v in down.items() if k in wanted}
        rows = amplification(up, down)
        with recorded_run(store, {"upstream": upstream, "downstream": downstream,
                                  "metrics": wanted}, None) as run_id, store.transaction():
            for r in rows:
                if r.delta is not None:
                    store.write_metric(run_id, downstream, f"amplification.{r.metric}", r.delta,
                                       r.n_downstream, r.ci_low, r.ci_high, "all",
                                       {"upstream_set": upstream, **r.as_dict()})
    table = Table(title=f"Amplification: {downstream} - {upstream}")
    for col in ("metric", "upstream", "downstream", "delta", "95% CI", "method"):
        table.add_column(col, justify="left" if col in ("metric", "method") else "right",
                         no_wrap=col == "metric")
    for r in rows:  # as compare prints them: in the number format of the metric's spec
        fmt = number_format(r.metric)
        f = lambda x, fmt=fmt: "-" if x is None else fmt.format(x)  # noqa: E731
        ci = f"[{f(r.ci_low)}, {f(r.ci_high)}]" if r.ci_low is not None else "-"
        table.add_row(r.metric, f(r.upstream), f(r.downstream), f(r.delta), ci, r.method)
    console.print(table)
    if report:
        from capaudit.core.names import escape_markdown_html
        from capaudit.core.safe_write import write_text

        write_text(report, escape_markdown_html(to_markdown(rows, upstream, downstream)),
                   parents=True)
    if json_out:
        write_json(json_out, [r.as_dict() for r in rows])
    return rows


def _audit_now(store, name, instances, chair_gt, demographics, metrics):
    """Audit one set with the engine (imported here: heavy, and built by another module)."""
    from capaudit.audit.config import AuditConfig
    from capaudit.audit.runner import audit_target, load_target
    from capaudit.io.annotation_store import resolve_annotations

    annotations = resolve_annotations(store, instances, chair_gt, demographics)
    result = audit_target(load_target(store, name), annotations,
                          AuditConfig(metrics=metrics, workers=1))
    return {k: v for k, v in result.results.items() if not getattr(v, "skipped", None)}


def register(app: typer.Typer) -> None:
    """Top-level ``train-downstream`` and ``caption``; the lead attaches
    :func:`amplification_command` to the ``audit`` sub-app as ``amplification``."""
    app.command("train-downstream")(train_downstream_command)
    app.command("caption")(caption_command)
