"""The command-line options that several audit commands share, declared once.

``audit run``, ``compare``, ``disparity``, ``leaderboard``, ``lic`` and
``amplification`` take the same annotation, bootstrap, LOTUS and LIC options;
each is declared here with its help text, so a flag reads the same in every
``--help``. Their defaults are ``None`` (= not given): the value then comes from
the YAML ``--config`` or :class:`capaudit.audit.config.AuditConfig`, whose default
the help text names in parentheses. The options of a sharded run (``--executor``,
``--address``, ``--skip-bad-shards``, ``--keep-work``) have their own defaults.

Import-light (typer only): every command module imports this at CLI start-up.
"""

from __future__ import annotations

import typer

from capaudit.core.ranges import N_BOOT_MAX, SEED_MAX

__all__ = ["Instances", "ChairGT", "Demographics", "Metrics", "LeaderboardMetrics", "Mode",
           "Corrected", "NBoot", "Seed", "Workers", "MinImages", "AllowPartial", "MinCoverage", "MinN",
           "Config", "LeaderboardConfig", "Reference", "ClipModel", "Images", "LongText", "NsfwLexicon",
           "Lic", "LicReference", "LicSeeds", "LicClassifier", "LicEpochs", "Executor",
           "RayAddress", "SkipBadShards", "KeepWork", "lotus_cli", "annotation_cli"]

# annotations (default: the ones stored with `capaudit annotations add`)
Instances = typer.Option(None, "--instances", help="COCO instances JSON or categories JSONL "
                         "(default: stored annotations)")
ChairGT = typer.Option(None, "--chair-gt", help="CHAIR ground truth JSONL (default: stored)")
Demographics = typer.Option(None, "--demographics", help="image gender/skin-tone JSONL or CSV "
                            "(default: stored)")
AllowPartial = typer.Option(None, "--allow-partial/--no-allow-partial",
                            help="Audit a set whose images are mostly not annotated, on its "
                                 "annotated images")
MinCoverage = typer.Option(None, "--min-coverage", min=0.0, max=1.0, help="Share of a set's images that must be "
                           "annotated (0.5)")
MinN = typer.Option(None, "--min-n", help="Images a value needs to be ranked best/worst; "
                    "fewer: shown as too-few (30)")

# what is computed
Metrics = typer.Option(None, "--metrics", help="Comma-separated metric names (default: "
                       "every default metric; list: capaudit audit metrics)")
LeaderboardMetrics = typer.Option(None, "--metrics", help="Comma-separated metric names "
                                  "(default: every metric; list: capaudit audit metrics)")
Mode = typer.Option(None, "--mode", help="CHAIR parsing: reference (the reference code's "
                    "word rules) or corrected")
Corrected = typer.Option(None, "--corrected/--no-corrected",
                         help="Also report corrected-mode CHAIR and recall")
MinImages = typer.Option(None, "--min-images", min=0, help="Recall disparity: images of men and of "
                         "women a category needs (10)")

# bootstrap and execution
# ranges at parse time (a usage error before any work); AuditConfig checks them again for
# the YAML and the API (capaudit.core.ranges)
NBoot = typer.Option(None, "--n-boot", min=0, max=N_BOOT_MAX,
                     help="Bootstrap resamples (1000; 0 to 100,000)")
Seed = typer.Option(None, "--seed", min=0, max=SEED_MAX,
                    help="Seed of the bootstrap and of the samples (0; 0 to 2**32-1)")
Workers = typer.Option(None, "--workers", min=1, help="Processes, at most (2; fewer when the "
                       "load leaves fewer cores idle)")
Config = typer.Option(None, "--config", help="YAML config (CLI > YAML > defaults); "
                      "see configs/audit.yaml")
LeaderboardConfig = typer.Option(None, "--config", help="YAML config (CLI > YAML > defaults): "
                                 "its leaderboard section")

# the LOTUS inputs (audit run, disparity, leaderboard)
Reference = typer.Option(None, "--reference", help="Human caption set of the same images "
                         "(noun/verb coverage)")
ClipModel = typer.Option(None, "--clip-model", help="Local transformers CLIPModel folder "
                         "(no weights ship with capaudit)")
Images = typer.Option(None, "--images", help="Folder of the images (CLIP metrics)")
LongText = typer.Option(None, "--long-text", help="Captions over the CLIP text positions: "
                        "truncate (default, counted) or chunk (sentence windows, averaged)")
NsfwLexicon = typer.Option(None, "--nsfw-lexicon", help="NSFW words: a lexicon file, one word "
                           "or phrase a line, '~' marks a phrase that needs context (default: "
                           "the packaged LDNOOBW list with its context marks)")

# LIC within an audit (audit run, compare); `audit lic` has its own options
Lic = typer.Option(None, "--lic/--no-lic", help="Also train LIC leakage classifiers "
                   "(slow: per seed one LSTM, plus 5 with --lic-reference, each ~2.5-3 min on "
                   "6,000 captions on 2 idle cores, measured by benchmarks/bench_lic.py speed; "
                   "cached in the store)")
LicReference = typer.Option(None, "--lic-reference", help="Human caption set of the same "
                            "images (LIC_D and LIC)")
LicSeeds = typer.Option(None, "--lic-seeds", min=1, max=10, help="First N of the 10 reference seeds")
LicClassifier = typer.Option(None, "--lic-classifier", help="lstm (reference) or transformer")
LicEpochs = typer.Option(None, "--lic-epochs", min=1, help="Epochs (default: the reference's)")

# sharded runs (audit run --shards; filter run --shards reads the same): defaults as shown
Executor = typer.Option("local", "--executor", help="--shards: local or ray")
RayAddress = typer.Option(None, "--address", help="--shards: Ray cluster (auto)")
SkipBadShards = typer.Option(False, "--skip-bad-shards",
                             help="--shards: report and skip unreadable shards")
KeepWork = typer.Option(False, "--keep-work", help="--shards: keep the work folder after success")


def lotus_cli(reference, clip_model, images, long_text, nsfw_lexicon=None) -> dict:
    """The LOTUS options as config keys (None = not given)."""
    return dict(reference=reference, clip_model=clip_model,
                images=str(images) if images else None, long_text=long_text,
                nsfw_lexicon=str(nsfw_lexicon) if nsfw_lexicon else None)


def annotation_cli(instances, chair_gt, demographics) -> dict:
    """The annotation file options as config keys (None = not given: the stored ones)."""
    return dict(instances=str(instances) if instances else None,
                chair_gt=str(chair_gt) if chair_gt else None,
                demographics=str(demographics) if demographics else None)
