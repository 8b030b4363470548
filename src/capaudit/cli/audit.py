"""``capaudit audit``: run, compare, words (and lic / amplification from their modules)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import List

import typer

from capaudit.cli.audit_leaderboard import (ClipModelOpt, ImagesOpt, LongTextOpt, ReferenceOpt,
                                             lotus_cli)
from capaudit.cli.common import DbOption, audit_config, console, esc, open_store

audit_app = typer.Typer(no_args_is_help=True, help="Audit caption sets: bias and hallucination.")

Instances = typer.Option(None, "--instances", help="COCO instances JSON or categories JSONL "
                         "(default: stored annotations)")
ChairGT = typer.Option(None, "--chair-gt", help="CHAIR ground truth JSONL (default: stored)")
Demographics = typer.Option(None, "--demographics", help="image gender/skin-tone JSONL or CSV "
                            "(default: stored)")
LicOpt = typer.Option(None, "--lic/--no-lic", help="Also train LIC leakage classifiers "
                      "(slow: per seed one LSTM, plus 5 with --lic-reference, each ~2.5-3 min on "
                      "6,000 captions on 2 idle cores, measured by benchmarks/bench_lic.py speed; "
                      "cached in the store)")
LicRef = typer.Option(None, "--lic-reference", help="Human caption set for LIC_D and LIC")
LicSeeds = typer.Option(None, "--lic-seeds", help="First N of the 10 reference seeds")
LicClf = typer.Option(None, "--lic-classifier", help="lstm (reference) or transformer")
LicEpochs = typer.Option(None, "--lic-epochs", help="Epochs (default: the reference's)")
Metrics = typer.Option(None, "--metrics", help="Comma-separated metric names (default: "
                       "every default metric; list: capaudit audit metrics)")
NBoot = typer.Option(None, "--n-boot", help="Bootstrap resamples (1000)")
Seed = typer.Option(None, "--seed", help="Seed of the bootstrap and of the samples (0)")
Corrected = typer.Option(None, "--corrected/--no-corrected",
                         help="Also report corrected-mode CHAIR and recall")
Config = typer.Option(None, "--config", help="YAML config (CLI > YAML > defaults); "
                      "see configs/audit.yaml")


class _AuditProgress:
    """A rich bar per target, advanced chunk by chunk (files of unknown size: a spinner)."""

    def __init__(self):
        from capaudit.cli.common import progress

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
        instances: Path = Instances, chair_gt: Path = ChairGT, demographics: Path = Demographics,
        metrics: str = Metrics,
        mode: str = typer.Option(None, "--mode", help="reference (default) or corrected"),
        corrected: bool = Corrected, n_boot: int = NBoot, seed: int = Seed,
        workers: int = typer.Option(None, "--workers", help="Processes (2)"),
        min_images: int = typer.Option(None, "--min-images", help="Recall disparity: images of "
                                       "men and of women a category needs (10)"),
        json_out: Path = typer.Option(None, "--json", help="Write results as JSON"),
        reference: str = ReferenceOpt, clip_model: str = ClipModelOpt, images: Path = ImagesOpt,
        long_text: str = LongTextOpt,
        allow_partial: bool = typer.Option(None, "--allow-partial/--no-allow-partial",
                                           help="Audit a set whose images are mostly not "
                                                "annotated, on its annotated images"),
        min_coverage: float = typer.Option(None, "--min-coverage", help="Share of a set's "
                                           "images that must be annotated (0.5)"),
        lic: bool = LicOpt, lic_reference: str = LicRef, lic_seeds: int = LicSeeds,
        lic_classifier: str = LicClf, lic_epochs: int = LicEpochs,
        lexicon: Path = typer.Option(None, "--lexicon", help="Object categories and synonyms "
                                     "(chair_synonyms.txt format) instead of COCO's 80"),
        shards: str = typer.Option(None, "--shards", help="Audit a sharded set instead: a folder "
                                   "or glob of .tar / .parquet / HF .arrow shards"),
        executor: str = typer.Option("local", "--executor", help="--shards: local or ray"),
        address: str = typer.Option(None, "--address", help="--shards: Ray cluster (auto)"),
        name: str = typer.Option(None, "--name", help="--shards: set name (folder name)"),
        skip_bad: bool = typer.Option(False, "--skip-bad-shards",
                                      help="--shards: report and skip unreadable shards"),
        work_dir: Path = typer.Option(None, "--work-dir", help="--shards: per-shard states and "
                                      "markers (NAME.audit-work); a rerun resumes"),
        config: Path = Config, db: Path = DbOption):
    """Audit each target; print and store every metric with n and a 95% interval."""
    from capaudit.report.compare import Comparison, ordered, rank
    from capaudit.audit.runner import run_audit, write_json
    from capaudit.cli.compare_view import print_compare

    cfg = audit_config(config, metrics=metrics, mode=mode, corrected=corrected, n_boot=n_boot, seed=seed,
               workers=workers, min_images=min_images, lic=lic, lic_reference=lic_reference,
               **lotus_cli(reference, clip_model, images, long_text),
               lic_seeds=lic_seeds, lic_classifier=lic_classifier, lic_epochs=lic_epochs,
               allow_partial=allow_partial, min_coverage=min_coverage,
               instances=str(instances) if instances else None,
               chair_gt=str(chair_gt) if chair_gt else None,
               demographics=str(demographics) if demographics else None)
    if lexicon:
        from capaudit.text.objects import user_lexicon_mode
        cfg["mode"] = user_lexicon_mode(lexicon, cfg["mode"], bool(cfg.get("corrected")))
    if shards or not targets:
        from capaudit.cli.audit_shards import run_shards
        from capaudit.errors import InputError

        if not shards or targets:
            raise InputError("give either set names / caption files or --shards",
                             fix="capaudit audit run SET ... or capaudit audit run --shards DIR")
        return run_shards(shards, name, cfg, executor, address, skip_bad, work_dir, json_out, db)
    store = open_store(db, create=True)  # caption files given as targets are registered
    with _AuditProgress() as hooks:
        results = run_audit(store, targets, cfg, **hooks)
    run_id = results.get("_run_id")
    if json_out:
        write_json(results, json_out)
        from capaudit.core.config import provenance_beside

        provenance_beside(json_out, {**cfg, "run_id": run_id}, cfg.get("seed"))
    names = [n for n in results if not n.startswith("_")]
    for n in names:  # how much of each set the annotations cover, before any number
        console.print(results[n].meta["coverage"]["line"])
    metrics_seen = ordered(m for n in names for m in results[n].results)
    cmp = Comparison(names, metrics_seen, {n: results[n] for n in names},
                     annotations=results.get("_annotations"))
    if len(names) > 1:
        rank(cmp)
    print_compare(cmp)
    if "recall_disparity" in metrics_seen:
        for n in names:
            r = results[n].results["recall_disparity"]
            if not r.skipped:
                console.print(f"{n}: recall disparity over m = {r.extra.get('m')} categories")
    console.print(f"stored as run {run_id} in {store.path}" + (f"; JSON: {json_out}" if json_out else ""))


@audit_app.command("compare")
def compare(sets: List[str] = typer.Argument(..., help="Two or more sets (or caption files)"),
            report: Path = typer.Option(Path("report"), "--report",
                                        help="Report folder (its report files are replaced)"),
            instances: Path = Instances, chair_gt: Path = ChairGT,
            demographics: Path = Demographics,
            metrics: str = Metrics, n_boot: int = NBoot, seed: int = Seed,
            corrected: bool = Corrected,
            lic: bool = LicOpt, lic_reference: str = LicRef, lic_seeds: int = LicSeeds,
            lic_classifier: str = LicClf, lic_epochs: int = LicEpochs,
            disparity: str = typer.Option(None, "--disparity",
                                          help="Also the gaps between groups of images: "
                                               "gender, skin_tone or gender,skin_tone"),
            same_images: bool = typer.Option(
                None, "--same-images/--all-images",
                help="Score every set on the images all sets share (default when they "
                     "share any) or each on all its own images (vocabulary then on equal "
                     "numbers of captions)"),
            allow_partial: bool = typer.Option(None, "--allow-partial/--no-allow-partial",
                                               help="Audit sets mostly not annotated, on "
                                                    "their annotated images"),
            config: Path = Config, db: Path = DbOption):
    """Side-by-side table and report.md + report.html with plots.

    Sets are scored on the images they share; best/worst are marked only where
    the 95% intervals do not overlap; a filtered set is scored on its parent's
    images. LIC is computed with --lic only.
    """
    from capaudit.report.compare import compare_and_report
    from capaudit.cli.compare_view import print_compare

    cfg = audit_config(config, metrics=metrics, n_boot=n_boot, seed=seed, corrected=corrected, lic=lic,
               lic_reference=lic_reference, lic_seeds=lic_seeds, lic_classifier=lic_classifier,
               lic_epochs=lic_epochs, disparity=disparity, allow_partial=allow_partial,
               instances=str(instances) if instances else None,
               chair_gt=str(chair_gt) if chair_gt else None,
               demographics=str(demographics) if demographics else None)
    with _AuditProgress() as hooks:
        cmp = compare_and_report(open_store(db, create=True), sets, report, cfg, same_images, **hooks)
    for n in cmp.names:  # how much of each set the annotations cover, before any number
        cov = getattr(cmp.results[n], "meta", {}).get("coverage")
        if cov:
            console.print(cov["line"])
    print_compare(cmp)
    console.print(f"report: {report / 'report.md'} and {report / 'report.html'}")


@audit_app.command("words")
def words(target: str = typer.Argument(..., help="Set name or caption file"),
          chair_gt: Path = ChairGT,
          image_id: List[int] = typer.Option(None, "--image-id", help="Only these images"),
          limit: int = typer.Option(20, "--limit", help="Captions to print (0 = all)"),
          mode: str = typer.Option("reference", "--mode", help="reference or corrected"),
          json_out: Path = typer.Option(None, "--json", help="Write the reference-style JSON"),
          db: Path = DbOption):
    """The CHAIR words of each caption, as the reference script reports them."""
    from capaudit.audit.engine import chair_words
    from capaudit.io.targets import load_target
    from capaudit.errors import InputError
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
        json_out.write_text(json.dumps({"sentences": out}, indent=2))
    for s in out:
        console.print(f"[bold]{esc(str(s['image_id']))}[/]: {esc(s['caption'])}", markup=True)
        console.print(f"  generated:    {s['mscoco_generated_words']}")
        console.print(f"  ground truth: {s['mscoco_gt_words']}")
        console.print(f"  hallucinated: {s['mscoco_hallucinated_words']}")


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
    app.add_typer(audit_app, name="audit")
