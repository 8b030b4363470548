"""Which options each filter takes, resolved defaults < YAML (``filter`` section) < given.

Shared by ``capaudit filter run`` and :meth:`capaudit.api.AuditStore.filter`, so
both refuse an option a filter does not use with the same one-line error.
"""

from __future__ import annotations

from pathlib import Path

# options each filter understands (CLI name -> filter option); the rest are refused
_FILTER_OPTIONS = {
    "hallucination": {"action", "evidence", "chair_gt", "instances", "detections", "min_score",
                      "object_mode", "negation", "missing", "non_visual"},
    "gender-neutral": {"when", "demographics"},
    "gender-balance": {"by", "demographics", "instances", "chair_gt", "seed", "tolerance",
                       "min_images", "object_mode"},
    "critique-revise": {"judge_backend", "judge_url", "judge_model", "reviser_backend",
                        "reviser_url", "reviser_model", "images",
                        "evidence", "chair_gt", "instances", "detections", "prompt_dir",
                        "concurrency", "revise", "api_key_env"},
}


def filter_options(name: str, given: dict, yaml_path: Path | None = None) -> dict:
    """Resolve defaults < YAML (section ``filter``) < CLI for filter ``name``."""
    from capaudit.core.config import resolve
    from capaudit.errors import InputError
    from capaudit.filters.base import FILTERS

    cls = FILTERS.get(name)
    allowed = _FILTER_OPTIONS.get(name, set(cls.defaults))
    extra = sorted(k for k, v in given.items() if v is not None and k not in allowed)
    if extra:
        flags = ", ".join("--" + k.replace("_", "-") for k in extra)
        raise InputError(f"filter '{name}' does not use {flags}",
                         fix=f"its options: {', '.join('--' + k.replace('_', '-') for k in sorted(allowed))}")
    cfg = resolve(dict(cls.defaults), yaml_path, {k: v for k, v in given.items() if k in allowed},
                  section="filter")
    return {k: v for k, v in cfg.items() if k in cls.defaults}
