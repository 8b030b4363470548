"""Shared fixtures: the real data in ../shared (skipped with a reason when absent)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CAPAUDIT_SHARED", REPO.parent / "shared"))
# the judge's response cache (and a memory store's work folders) go to the user cache dir:
# one for the whole test session, never the user's own ~/.cache/capaudit
if "CAPAUDIT_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["CAPAUDIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="capaudit-test-cache-")


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
