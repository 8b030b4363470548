"""``capaudit audit``: run, compare, words, card (and lic / amplification from their modules)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import List, Optional

import typer

from capaudit.cli import options as opt
from capaudit.cli.common import (DbOption, audit_config, console, esc, open_store, progress,
                                 refuse_shard_options)
from capaudit.cli.options import annotation_cli, lotus_cli
from capaudit.errors import InputError

audit_app = typer.Typer(no_args_is_help=True, help="Audit caption sets: bias and hallucination.")


class _AuditProgress:
    """A rich bar per target, advanced chunk by chunk (files of unknown size: a spinner)."""

    def __init__(self):
        self.bar, self.tasks = progress(), {}

    def __enter__(self):
        self.bar.__enter__()
        return {"on_target": self.on_target, "on_progress": self.on_progress}

    def __exit__(self, *exc):
        return self.bar.__exit__(*exc)

    def on_target(self, t) -> None:
        self.tasks[t.name] = self.bar.add_task(f"auditing {t.name}", total=t.n)

    def on_progress(self, t, n: int) -> None:
        self.bar.advance(self.tasks[t.name], n)


@audit_app.command("run")
def run(targets: List[str] = typer.Argument(None, help="Registered set names or caption files"),
        instances: Path = opt.Instances, chair_gt: Path = opt.ChairGT,
        demographics: Path = opt.Demographics, metrics: str = opt.Metrics, mode: str = opt.Mode,
        corrected: bool = opt.Corrected, n_boot: int = opt.NBoot, seed: int = opt.Seed,
        workers: int = opt.Workers, min_images: int = opt.MinImages,
        json_out: str = typer.Option(None, "--json", help="Write results as JSON (a path "
                                     "or a URL: s3://, gs://)"),
        reference: str = opt.Reference, clip_model: str = opt.ClipModel,
        images: Path = opt.Images, long_text: str = opt.LongText,
        nsfw_lexicon: Path = opt.NsfwLexicon,
        allow_partial: bool = opt.AllowPartial, min_coverage: float = opt.MinCoverage,
        min_n: int = opt.MinN, lic: bool = opt.Lic, lic_reference: str = opt.LicReference,
        lic_seeds: int = opt.LicSeeds, lic_classifier: str = opt.LicClassifier,
        lic_epochs: int = opt.LicEpochs,
        lexicon: Path = typer.Option(None, "--lexicon", help="Object categories and synonyms "
                                     "(chair_synonyms.txt format) instead of COCO's 80"),
        shards: str = typer.Option(None, "--shards", help="Audit a sharded set instead: a folder, "
                                   "glob, brace list (shard-{00000..00099}.tar) or .txt list "
                                   "of .tar / .parquet / HF .arrow shards; a path or a URL "
                                   "(s3://, gs://, hf://, https://)"),
        executor: str = opt.Executor, address: str = opt.RayAddress,
        name: str = typer.Option(None, "--name", help="--shards: set name (folder name)"),
        skip_bad: bool = opt.SkipBadShards,
        work_dir: str = typer.Option(None, "--work-dir", help="--shards: per-shard states and "
                                     "markers (default: STORE.work/NAME.audit-work; a URL such "
                                     "as s3://BUCKET/PREFIX on a Ray cluster without a shared "
                                     "disk); a rerun resumes; removed after success"),
        keep_work: bool = opt.KeepWork, config: Path = opt.Config, db: Path = DbOption):
    """Audit each target; print and store every metric with n and a 95% interval."""
    from capaudit.audit.runner import run_audit
    from capaudit.executors.base import check_address, check_executor

    check_executor(executor, None)   # an unknown executor is named first
    if targets and not shards:   # no cluster to name: "add --executor ray" would fail next
        _refuse_shard_options(executor, address, skip_bad, work_dir, keep_work, name)
    check_address(executor, address)

    cfg = audit_config(config, metrics=metrics, mode=mode, corrected=corrected, n_boot=n_boot,
                       seed=seed, workers=workers, min_images=min_images,
                       allow_partial=allow_partial, min_coverage=min_coverage, min_n=min_n,
                       lic=lic,
                       lic_reference=lic_reference, lic_seeds=lic_seeds,
                       lic_classifier=lic_classifier, lic_epochs=lic_epochs,
                       **lotus_cli(reference, clip_model, images, long_text, nsfw_lexicon),
                       **annotation_cli(instances, chair_gt, demographics))
    if lexicon:
        from capaudit.text.objects import user_lexicon_mode

        mode = user_lexicon_mode(lexicon, cfg.mode, bool(cfg.corrected))
        cfg = dataclasses.replace(cfg, mode=mode)
    if shards or not targets:
        from capaudit.cli.audit_shards import run_shards

        if not shards or targets:
            raise InputError("give either set names / caption files or --shards",
                             fix="capaudit audit run SET ... or capaudit audit run --shards DIR")
        return run_shards(shards, name, cfg, executor, address, skip_bad, work_dir, json_out, db,
                          keep_work)
    store = open_store(db, create=True)  # caption files given as targets are registered
    if json_out:   # a link, the store or a source as --json: refused before the audit runs
        from capaudit.core.safe_write import check_file_target

        check_file_target(json_out)
    with _AuditProgress() as hooks:
        results = run_audit(store, targets, cfg, **hooks, only_needed=True)
    run_id = results.get("_run_id")
    from capaudit.report.file_scores import file_scores

    own = file_scores(store, run_id, results)   # a CHAIR output's own scores, beside ours
    if json_out:
        _write_json(store, results, json_out, cfg, run_id, own)
    _print_results(results, int(cfg.get("min_n") or 30))
    for line in (line for got in own.values() for line in got["lines"]):
        console.print(esc(line), markup=True)
    console.print(f"stored as run {run_id} in {store.path}"
                  + (f"; JSON: {json_out}" if json_out else ""))


def _write_json(store, results: dict, json_out: str, cfg, run_id, own: dict) -> None:
    """The results as JSON (``file_scores``: a CHAIR output's own scores beside capaudit's),
    provenance beside it (settings, seed, the annotations' sha256)."""
    from capaudit.audit.runner import results_json
    from capaudit.core.config import write_json
    from capaudit.io.annotation_store import annotation_provenance

    ann = annotation_provenance(store, getattr(results.get("_annotations"), "sources", {}))
    write_json(json_out, {**results_json(results), **({"file_scores": own} if own else {})},
               {**cfg, "run_id": run_id, "annotations": ann}, cfg.seed)


def _print_results(results: dict, min_n: int = 30) -> None:
    """Each set's annotation coverage, then the compare table of its metrics (ranked when
    there are several sets) and the categories behind recall disparity."""
    from capaudit.cli.compare_view import print_compare
    from capaudit.report.compare import Comparison, ordered, rank

    names = [n for n in results if not n.startswith("_")]
    for n in names:  # how much of each set the annotations cover, before any number
        console.print(results[n].meta["coverage"]["line"])
    metrics_seen = ordered(m for n in names for m in results[n].results)
    cmp = Comparison(names, metrics_seen, {n: results[n] for n in names},
                     annotations=results.get("_annotations"), min_n=min_n)
    if len(names) > 1:
        rank(cmp)
    print_compare(cmp)
    if "recall_disparity" in metrics_seen:
        for n in names:
            r = results[n].results["recall_disparity"]
            if not r.skipped:
                console.print(f"{n}: recall disparity over m = {r.extra.get('m')} categories")


@audit_app.command("compare")
def compare(sets: List[str] = typer.Argument(..., help="Two or more sets (or caption files)"),
            report: str = typer.Option("report", "--report",
                                       help="Report folder (its report files are replaced; a "
                                            "path or a URL: s3://, gs://)"),
            instances: Path = opt.Instances, chair_gt: Path = opt.ChairGT,
            demographics: Path = opt.Demographics,
            metrics: str = opt.Metrics, n_boot: int = opt.NBoot, seed: int = opt.Seed,
            corrected: bool = opt.Corrected,
            lic: bool = opt.Lic, lic_reference: str = opt.LicReference,
            lic_seeds: int = opt.LicSeeds, lic_classifier: str = opt.LicClassifier,
            lic_epochs: int = opt.LicEpochs,
            disparity: str = typer.Option(None, "--disparity",
                                          help="Also the gaps between groups of images: "
                                               "gender, skin_tone or gender,skin_tone"),
            same_images: bool = typer.Option(
                None, "--same-images/--all-images",
                help="Score every set on the images all sets share (default when they "
                     "share any) or each on all its own images (vocabulary then on equal "
                     "numbers of captions)"),
            allow_partial: bool = opt.AllowPartial, min_n: int = opt.MinN,
            min_images: int = opt.MinImages,
            config: Path = opt.Config, db: Path = DbOption):
    """Side-by-side table and report.md + report.html with plots.

    Sets are scored on the images they share; best/worst are marked only where
    the 95% intervals do not overlap; a filtered set is scored on its parent's
    images. LIC is computed with --lic only.
    """
    from capaudit.report.compare import compare_and_report
    from capaudit.cli.compare_view import print_compare

    cfg = audit_config(config, metrics=metrics, n_boot=n_boot, seed=seed, corrected=corrected,
                       lic=lic, lic_reference=lic_reference, lic_seeds=lic_seeds,
                       lic_classifier=lic_classifier, lic_epochs=lic_epochs, disparity=disparity,
                       allow_partial=allow_partial, min_n=min_n, min_images=min_images,
                       **annotation_cli(instances, chair_gt, demographics))
    from capaudit.core.storage.folder import staged
    from capaudit.core.storage.urls import join, shown_url

    with _AuditProgress() as hooks, staged(report) as folder:   # a URL: built here, uploaded
        cmp = compare_and_report(open_store(db, create=True), sets, folder, cfg, same_images,
                                 **hooks)
    for n in cmp.names:  # how much of each set the annotations cover, before any number
        cov = getattr(cmp.results[n], "meta", {}).get("coverage")
        if cov:
            console.print(cov["line"])
    print_compare(cmp)
    console.print(f"report: {shown_url(join(report, 'report.md'))} and "
                  f"{shown_url(join(report, 'report.html'))}", markup=False)


@audit_app.command("words")
def words(target: str = typer.Argument(..., help="Set name or caption file"),
          chair_gt: Path = opt.ChairGT,
          image_id: List[int] = typer.Option(None, "--image-id", help="Only these images"),
          limit: int = typer.Option(20, "--limit", min=0, help="Captions to print (0 = all)"),
          mode: str = typer.Option("reference", "--mode", help="CHAIR parsing: reference (the "
                                   "reference code's word rules) or corrected"),
          json_out: Path = typer.Option(None, "--json", help="Write the reference-style JSON"),
          db: Path = DbOption):
    """The CHAIR words of each caption, as the reference script reports them."""
    from capaudit.audit.engine import chair_words
    from capaudit.io.targets import load_target
    from capaudit.io.annotation_store import resolve_annotations

    store = open_store(db, create=True)  # a caption file given as target is registered
    ann = resolve_annotations(store, chair_gt=chair_gt)
    if ann.chair_gt is None:
        raise InputError("no CHAIR ground truth", fix="pass --chair-gt or add it with "
                         "capaudit annotations add chair-gt FILE")
    t = load_target(store, target)
    pairs = [(i, c) for i, c in zip(t.image_ids, t.captions) if not image_id or i in image_id]
    if limit:
        pairs = pairs[:limit]
    out = chair_words([c for _, c in pairs], [i for i, _ in pairs], ann.chair_gt, mode=mode)
    if json_out:
        from capaudit.core.config import write_json

        write_json(json_out, {"sentences": out}, parents=False)
    for s in out:
        console.print(f"[bold]{esc(str(s['image_id']))}[/]: {esc(s['caption'])}", markup=True)
        console.print(f"  generated:    {s['mscoco_generated_words']}")
        console.print(f"  ground truth: {s['mscoco_gt_words']}")
        console.print(f"  hallucinated: {s['mscoco_hallucinated_words']}")


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


def register(app: typer.Typer) -> None:
    """Attach the audit sub-app; lic, amplification and disparity live in their own modules
    (import-light: torch and the like load only when a command runs)."""
    from capaudit.cli.audit_disparity import disparity_command
    from capaudit.cli.audit_leaderboard import leaderboard_command
    from capaudit.cli.audit_lic import lic_command
    from capaudit.cli.audit_metrics import metrics_command
    from capaudit.cli.downstream import amplification_command

    audit_app.command("lic")(lic_command)
    audit_app.command("amplification")(amplification_command)
    audit_app.command("disparity")(disparity_command)
    audit_app.command("metrics")(metrics_command)
    audit_app.command("leaderboard")(leaderboard_command)
    audit_app.command("card")(card_command)
    app.add_typer(audit_app, name="audit")


def _refuse_shard_options(executor, address, skip_bad, work_dir, keep_work, name) -> None:
    """``audit run SET`` given what only ``--shards`` reads: one line naming the first."""
    refuse_shard_options("a sharded audit", "drop it, or audit shards with --shards DIR",
                         executor=executor != "local", address=address is not None,
                         keep_work=keep_work, work_dir=work_dir, skip_bad_shards=skip_bad,
                         name=name is not None)
