"""The audit configuration: one typed :class:`AuditConfig` for every audit command.

Why it exists: the audit settings used to travel as an untyped ``cfg`` dict
through the runner, the engine, the report, the leaderboard, the shards and
the CLI, with two ``DEFAULTS`` dicts (``audit run`` and ``audit leaderboard``)
that nearly duplicated each other. Here every setting is declared once, with
its type, default and meaning; the configuration is resolved once at the entry
point (a CLI command or an API call: CLI > YAML > defaults, :meth:`resolve`)
and passed down.

An :class:`AuditConfig` is also a read-only mapping of its settings
(``cfg["mode"]``, ``cfg.get("seed")``, ``{**cfg, "run_id": 3}``, ``dict(cfg)``),
so it is stored in run rows and provenance files as the dict always was. The
plain functions (``run_audit``, ``compare_and_report``, ``run_leaderboard``,
``run_sharded``, ...) accept one or a plain mapping (:meth:`of`).

Numbers are range-checked here, where the CLI, the YAML and the API all pass
(:data:`RANGES`; ``--n-boot 99999999999999999999`` once allocated 18 GB); other values
are not coerced: the code that uses a setting checks it (``--long-text``, metric names,
profiles, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterator

from capaudit.core.ranges import N_BOOT_MAX, SEED_MAX, check_number
from capaudit.errors import InputError

__all__ = ["AuditConfig", "LOTUS_KEY"]

LOTUS_KEY = "_lotus"  # the run's prepared LOTUS options (capaudit.metrics.features.inputs.prepare)


@dataclass(eq=False)
class AuditConfig(Mapping):
    """The resolved settings of one audit (``audit run / compare / disparity / leaderboard``,
    the Python API); ``configs/audit.yaml`` documents the ``audit:`` section."""

    # what is computed
    # a list or a comma string; None = every default metric (leaderboard: every GCE and LOTUS one)
    metrics: list[str] | str | None = None
    mode: str = "reference"         # CHAIR parsing: reference, corrected, or a --lexicon mode
    corrected: bool = False         # also corrected-mode CHAIR and recall, beside reference
    # bootstrap and execution
    n_boot: int = 1000              # bootstrap resamples over images
    bootstrap: str = "auto"         # exact (grouped where cheaper) below POISSON_MIN_UNITS, Poisson above
    seed: int = 0
    workers: int = 2                # processes for building per-caption records
    chunk_size: int | None = None   # captions analysed at a time (None = the runner's STREAM_CHUNK)
    min_images: int = 10            # recall disparity: images per gender a category needs
    # annotations (None = the ones stored with `capaudit annotations add`)
    instances: str | None = None
    chair_gt: str | None = None
    demographics: str | None = None
    min_coverage: float = 0.5       # stop when fewer of a set's images are annotated (annotation_coverage)
    allow_partial: bool = False     # audit partially annotated sets on their annotated images
    min_n: int = 30                 # images a value needs to be ranked (fewer: status too-few)
    # LIC
    lic: bool = False               # also train LIC leakage classifiers (slow: ~2.5-3 min per LSTM seed)
    lic_reference: str | None = None  # human caption set for LIC_D (and LIC = LIC_M - LIC_D)
    lic_seeds: int = 10             # first N of the reference seeds
    lic_classifier: str = "lstm"    # lstm (reference) or transformer
    lic_epochs: int | None = None   # None = the classifier's reference default
    # audit compare
    disparity: list[str] | str | None = None  # also gaps by "gender", "skin_tone" (list or comma string)
    # LOTUS inputs
    reference: str | None = None    # noun/verb coverage: the human caption set
    clip_model: str | None = None   # CLIP metrics: a local transformers CLIPModel folder
    images: str | None = None       # ... and the folder of the set's images
    long_text: str = "truncate"     # captions over the CLIP text positions: truncate (counted) or chunk
    nsfw_lexicon: str | None = None  # NSFW words: a lexicon file (None = the packaged, context-marked one)
    # outputs
    details: bool = True            # per-caption rows in caption_details (off: metrics only)
    # audit leaderboard
    profile: str | None = None      # None = every profile of the catalogue
    profiles_file: str | None = None  # None = configs/profiles.yaml
    worst: int = 20                 # worst captions listed per set on the page
    intersections: bool = False     # also every metric on gender x skin-tone cells (with n)
    # not a setting: the run's LOTUS options, attached by prepare() (mapping key "_lotus")
    lotus: Any = field(default=None, repr=False)

    def __post_init__(self):
        for key, (lo, hi, integer, optional) in RANGES.items():
            check_number(key, getattr(self, key), lo, hi, integer=integer, optional=optional,
                         flag="--" + key.replace("_", "-"))
        for f in fields(self):
            _check_type(f.name, f.type, getattr(self, f.name))
        for key in ("metrics", "disparity"):
            _check_names(key, getattr(self, key))

    # -- the read-only mapping of the settings (plus "_lotus" once prepared) --

    def __getitem__(self, key: str) -> Any:
        if key == LOTUS_KEY and self.lotus is not None:
            return self.lotus
        if key not in _KEYS:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        yield from _KEYS
        if self.lotus is not None:
            yield LOTUS_KEY

    def __len__(self) -> int:
        return len(_KEYS) + (self.lotus is not None)

    def __repr__(self) -> str:
        changed = ", ".join(f"{k}={self[k]!r}" for k in _KEYS if self[k] != _DEFAULTS[k])
        return f"AuditConfig({changed})"

    # -- construction --

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Every setting with its default, as a plain dict (``DEFAULTS`` of the runners)."""
        return dict(_DEFAULTS)

    @classmethod
    def of(cls, cfg: Mapping[str, Any] | None = None) -> AuditConfig:
        """``cfg`` as an :class:`AuditConfig`: one is returned as is; a plain mapping (settings
        left out keep their defaults) is checked for unknown keys; ``None`` gives the defaults."""
        if isinstance(cfg, cls):
            return cfg
        values = dict(cfg or {})
        check_keys(values)
        lotus = values.pop(LOTUS_KEY, None)
        return cls(**values, lotus=lotus)

    @classmethod
    def resolve(cls, yaml_path: str | Path | None = None, cli: Mapping[str, Any] | None = None,
                section: str = "audit") -> AuditConfig:
        """CLI values (``None`` = not given) > the YAML file's ``section`` > defaults, as
        :func:`capaudit.core.config.resolve` merges them (an unknown YAML key is one line
        with a did-you-mean)."""
        from capaudit.core.config import resolve

        check_keys(cli or {})
        return cls.of(resolve(_DEFAULTS, yaml_path, cli, section=section))


def _check_type(key: str, kind: str, value: Any) -> None:
    """One line when a YAML or API value has the wrong type (``metrics: 5``,
    ``mode: [[1]]``, ``lic: [[1]]``): they reached the code as tracebacks, or were taken
    as true."""
    import os
    import reprlib

    text = (str, os.PathLike)
    if kind == "bool":
        ok, want = isinstance(value, bool), "true or false"
    elif kind in ("str", "str | None"):
        ok, want = isinstance(value, text) or (value is None and "None" in kind), "a text"
    elif kind == "list[str] | str | None":
        ok = value is None or isinstance(value, str) or (
            isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value))
        want = "a list of names or a comma-separated text"
    else:
        return  # numbers: RANGES
    if not ok:
        flag = "--" + key.replace("_", "-")
        shown = reprlib.repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise InputError(f"{key} ({flag}) must be {want}, not {shown}",
                         fix=f"give {key} {want}")


def _check_names(key: str, value: Any) -> None:
    """A list of names given but naming none (``--metrics ''``, ``metrics: []``, ``' , '``)
    is refused: it was taken as "not given" and ran every metric."""
    if value is None:
        return
    names = value.split(",") if isinstance(value, str) else list(value)
    if not [n for n in names if str(n).strip()]:
        from capaudit.errors import UsageError

        flag = "--" + key.replace("_", "-")
        raise UsageError(f"{key} ({flag}) names nothing ({value!r})",
                         fix=f"name at least one, comma-separated, or leave {flag} out for "
                         "the default (list: capaudit audit metrics)")


def check_keys(values: Mapping[str, Any]) -> None:
    """One line naming the keys that are no audit setting (the API's ``**options``)."""
    unknown = sorted(str(k) for k in values if k not in _DEFAULTS and k != LOTUS_KEY)
    if unknown:
        raise InputError(f"unknown audit option(s) {', '.join(unknown)}",
                         fix=f"use {', '.join(sorted(_DEFAULTS))}")


# setting: (lowest, highest, whole number, may be None)
RANGES: dict[str, tuple] = {
    "n_boot": (0, N_BOOT_MAX, True, False), "seed": (0, SEED_MAX, True, False),
    "workers": (1, 1024, True, False), "chunk_size": (1, None, True, True),
    "min_images": (0, None, True, False), "min_coverage": (0.0, 1.0, False, False),
    "lic_seeds": (1, 10, True, False), "lic_epochs": (1, 10_000, True, True),
    "worst": (0, 100_000, True, False), "min_n": (0, None, True, False),
}

_KEYS: tuple[str, ...] = tuple(f.name for f in fields(AuditConfig) if f.name != "lotus")
_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(AuditConfig) if f.name != "lotus"}
