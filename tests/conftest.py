"""Shared fixtures: the real data in ../shared (skipped with a reason when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CAPAUDIT_SHARED", REPO.parent / "shared"))


def shared_path(*parts: str) -> Path:
    """Path under ../shared, or skip the test naming what is missing."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not available: {path} (set CAPAUDIT_SHARED)")
    return path


@pytest.fixture
def shared():
    return shared_path


@pytest.fixture
def store(tmp_path):
    from capaudit.store import Store

    s = Store(tmp_path / "test.duckdb")
    yield s
    s.close()
