"""The built-in filters' options, declared once: defaults per filter, type and help per option.

Each built-in filter class takes its ``defaults`` from :data:`DEFAULTS`, and
``capaudit filter run`` generates one ``--key-name`` flag per key of their union,
typed and explained by :data:`OPTIONS`. They live here, apart from the filter
modules, because the CLI reads them at start-up: importing the four filter
modules (their text, evidence and LLM helpers) would double ``capaudit --help``'s
start time. This module imports nothing of capaudit's.

A plugin filter declares ``defaults`` on its own class; its options are set with
``--filter.KEY VALUE`` (or the YAML ``filter:`` section), typed from those defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, NamedTuple

__all__ = ["DEFAULTS", "OPTIONS", "CHOSEN", "Chosen", "Option", "builtin_keys"]


class Option(NamedTuple):
    """How an option reads on the command line: the value's type (``bool`` makes a
    ``--key/--no-key`` switch) and its help text (None: no help, as before)."""

    type: type
    help: str | None = None


#: each built-in filter's options and their defaults (the class attribute ``defaults``)
DEFAULTS: Mapping[str, Mapping[str, Any]] = {
    "hallucination": {"evidence": None, "chair_gt": None, "instances": None,
                      "detections": None, "min_score": None, "action": "drop-sentence",
                      "object_mode": "corrected", "negation": True, "missing": "keep",
                      "non_visual": "keep", "min_coverage": 0.5, "allow_partial": False,
                      "references": None, "reference_col": None, "similarity": None,
                      "judge": None, "judge_backend": "openai",
                      "judge_url": "http://127.0.0.1:8000/v1", "judge_model": "judge",
                      "api_key_env": "OPENAI_API_KEY", "images": None, "concurrency": 4,
                      "timeout_s": 60.0, "max_calls": None, "max_cost": None},
    "gender-neutral": {"when": "unknown,contradicted", "demographics": None},
    "gender-balance": {"by": "overall", "demographics": None, "instances": None,
                       "chair_gt": None, "seed": 0, "tolerance": 0.05, "min_images": 10,
                       "object_mode": "reference"},
    "critique-revise": {"judge_backend": "openai", "judge_url": "http://127.0.0.1:8000/v1",
                        "judge_model": "judge", "reviser_backend": None,
                        "reviser_url": None, "reviser_model": None,
                        "api_key_env": "OPENAI_API_KEY", "images": None, "evidence": None,
                        "chair_gt": None, "instances": None, "detections": None,
                        "prompt_dir": None, "revise": True, "concurrency": 4,
                        "timeout_s": 60.0},
}

class Chosen(NamedTuple):
    """A default that follows from other options: ``key`` takes ``value`` when no one set
    ``key`` (CLI, YAML, ``--filter.KEY``, the Python API) and any of ``when`` is given; else
    the declared default. ``why`` is saved with the run's config and shown in its summary."""

    key: str
    value: Any
    when: tuple[str, ...]
    why: str


#: the defaults that follow from other options, per filter (applied by
#: :func:`capaudit.filters.options.filter_options`, the one place options get defaults)
CHOSEN: Mapping[str, tuple[Chosen, ...]] = {
    # reference texts can name any of the ~1,500 visual objects, not only COCO's 80, which
    # the CHAIR ground truth already names: in a COCO mode they would add almost nothing
    "hallucination": (Chosen("object_mode", "visual", ("references", "reference_col"),
                             "chosen because references were given (they judge objects "
                             "beyond COCO's 80; --object-mode corrected keeps COCO's)"),),
}

#: every option a built-in filter uses, in the order ``filter run --help`` lists them
OPTIONS: Mapping[str, Option] = {
    "action": Option(str, "drop-sentence, drop-caption or flag"),
    "evidence": Option(str, "chair-gt, instances, detector or references"),
    "chair_gt": Option(str, "CHAIR ground truth JSONL (or stored annotation source)"),
    "instances": Option(str, "Instance categories file (or stored source)"),
    "detections": Option(str, "Detector output JSONL"),
    "min_score": Option(float, "Detector score threshold"),
    "object_mode": Option(str, "corrected (hallucination's default: fewer false drops, "
                               "docs/filters.md), reference (the CHAIR code's readings) or "
                               "visual (hallucination: ~1,500 visual objects, not only COCO's; "
                               "the default with --references or --reference-col)"),
    "negation": Option(bool, "Skip negated mentions (default on)"),
    "missing": Option(str, "Images without evidence: keep/drop"),
    "non_visual": Option(str, "hallucination: mentions in generic or hypothetical clauses "
                              "('to protect people from sunlight'): keep (default: not "
                              "judged), flag (kept, marked for review) or judge (like any "
                              "mention, as CHAIR does)"),
    "min_coverage": Option(float, "hallucination: share of the set's images the evidence must "
                                  "cover, else the run stops (as audit run's --min-coverage)"),
    "allow_partial": Option(bool, "hallucination: filter a set the evidence covers only in "
                                  "part (uncovered captions kept unjudged)"),
    "references": Option(str, "hallucination: the images' reference captions, a caption file "
                              "(any layout sets add reads, joined by image id) or a stored "
                              "set; object mode visual unless --object-mode is given "
                              "(docs/filters.md)"),
    "reference_col": Option(str, "hallucination: the field of each record of the set's "
                                 "JSON/JSONL source holding its references (string or list); "
                                 "--shards: of each shard record (JSON, tar .json, parquet, "
                                 "CSV: a list as JSON text in the cell)"),
    "similarity": Option(float, "hallucination: MiniLM cosine at which a reference's object "
                                "supports a similar one (default 0.8; above 1: off)"),
    "judge": Option(str, "hallucination: ask an LLM/VLM judge (--judge-backend, --judge-url, "
                         "--judge-model) about the sentences the evidence leaves undecided: "
                         "undecided (an object no evidence judges) or kept (every sentence "
                         "it keeps); off by default, answers cached (docs/filters.md)"),
    "max_calls": Option(int, "hallucination --judge: stop asking after this many calls "
                             "(the rest stay undecided)"),
    "max_cost": Option(float, "hallucination --judge: stop asking before this cost (prices "
                              "in configs/judge.yaml)"),
    "when": Option(str, "unknown, contradicted, always (comma list)"),
    "demographics": Option(str, "Image gender labels: a file or a stored source name "
                                "(gender-neutral: the stored labels when omitted)"),
    "by": Option(str, "gender-balance: overall or object"),
    "tolerance": Option(float, "gender-balance per object: allowed distance of the man "
                               "share from 0.5"),
    "min_images": Option(int, "gender-balance: objects with fewer labelled images are "
                              "ignored"),
    "seed": Option(int),
    "judge_backend": Option(str, "LLM backend of the judge: openai (default) or "
                                 "transformers (a local model folder)"),
    "judge_url": Option(str, "OpenAI-compatible base URL"),
    "judge_model": Option(str, "Model name (openai) or folder (transformers)"),
    "reviser_backend": Option(str),
    "reviser_url": Option(str),
    "reviser_model": Option(str),
    "api_key_env": Option(str, "critique-revise, hallucination --judge: environment "
                               "variable holding the API key"),
    "timeout_s": Option(float, "critique-revise, hallucination --judge: seconds to wait for "
                               "one LLM reply"),
    "images": Option(Path, "Folder with the images (judge)"),
    "prompt_dir": Option(Path, "Folder with critique_*.txt"),
    "concurrency": Option(int, "Parallel judge calls"),
    "revise": Option(bool, "critique-revise: rewrite flagged sentences"),
}


def builtin_keys() -> list[str]:
    """The union of the built-in filters' option keys, in :data:`OPTIONS` order (a key
    missing there is listed last, as a plain string option)."""
    keys = {k for d in DEFAULTS.values() for k in d}
    return [k for k in OPTIONS if k in keys] + sorted(keys - set(OPTIONS))
