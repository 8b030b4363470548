"""Criteria and user profiles of the LOTUS leaderboard (``configs/profiles.yaml``).

Which metric feeds which criterion, which metrics are lower-is-better, and the
profiles (criterion weights). Looked up in this order: ``--profiles FILE``,
``./configs/profiles.yaml``, the copy packaged with capaudit
(``capaudit/data/profiles.yaml``, kept identical by a test).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Mapping

from capaudit.core.names import did_you_mean
from capaudit.errors import InputError

__all__ = ["Catalogue", "load_catalogue"]


@dataclass
class Catalogue:
    criteria: dict[str, list[str]]          # criterion -> metric names ("gap:..." / "gaps")
    include_unlisted: bool
    judge_slots: set[str]
    profiles: dict[str, dict[str, float]]   # profile -> {criterion: weight}
    source: str

    def weights(self, profile: str) -> dict[str, float]:
        if profile not in self.profiles:
            raise InputError(f"unknown profile '{profile}'", path=self.source, fix=did_you_mean(
                profile, self.profiles, f"choose one of: {', '.join(self.profiles)}"))
        return self.profiles[profile]


def _check(data: Mapping, source: str) -> Catalogue:
    if not isinstance(data, Mapping) or "criteria" not in data or "profiles" not in data:
        raise InputError("not a profiles file (needs 'criteria' and 'profiles')", path=source,
                         fix="start from configs/profiles.yaml")
    from capaudit.metrics.base import CRITERIA

    criteria = {str(k): [str(m) for m in (v or [])] for k, v in data["criteria"].items()}
    for k in criteria:
        if k not in CRITERIA:
            raise InputError(f"unknown criterion '{k}'", path=source,
                             fix=f"use one of: {', '.join(CRITERIA)}")
    criteria = {c: criteria.get(c, []) for c in CRITERIA}
    profiles: dict[str, dict[str, float]] = {}
    for name, weights in (data.get("profiles") or {}).items():
        if not isinstance(weights, Mapping) or not weights:
            raise InputError(f"profile '{name}' has no criterion weights", path=source,
                             fix="give weights like 'alignment: 1'")
        for crit, w in weights.items():
            if crit not in criteria:
                raise InputError(f"profile '{name}' weights an unknown criterion '{crit}'",
                                 path=source, fix=f"use one of: {', '.join(criteria)}")
            if isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0:
                raise InputError(f"profile '{name}': weight of '{crit}' must be a number >= 0",
                                 path=source, fix=f"e.g. {crit}: 1")
        if sum(weights.values()) <= 0:
            raise InputError(f"profile '{name}' has only zero weights", path=source,
                             fix="give at least one criterion a positive weight")
        profiles[str(name)] = {str(c): float(w) for c, w in weights.items()}
    return Catalogue(criteria, bool(data.get("include_unlisted", True)),
                     set(data.get("judge_slots") or ()), profiles, source)


def load_catalogue(path: str | Path | None = None) -> Catalogue:
    from capaudit.core.config import load_yaml

    if path is not None:
        return _check(load_yaml(path), str(path))
    local = Path("configs/profiles.yaml")
    if local.is_file():
        return _check(load_yaml(local), str(local))
    import yaml

    text = resources.files("capaudit").joinpath("data/profiles.yaml").read_text("utf-8")
    return _check(yaml.safe_load(text), "capaudit/data/profiles.yaml")
