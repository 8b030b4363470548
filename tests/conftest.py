"""Shared fixtures: the real data in ../shared (skipped with a reason when absent)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

import tempfile

REPO = Path(__file__).resolve().parents[1]
if REPO.name == "mutants" and "CAPAUDIT_SHARED" not in os.environ:
    # mutmut runs the tests in its copy of the repo, <repo>/mutants (docs/testing.md); every
    # test module that finds ../shared by itself reads this variable first
    os.environ["CAPAUDIT_SHARED"] = str(REPO.parent.parent / "shared")
SHARED = Path(os.environ.get("CAPAUDIT_SHARED", REPO.parent / "shared"))
# the judge's response cache (and a memory store's work folders) go to the user cache dir:
# one for the whole test session, never the user's own ~/.cache/capaudit
if "CAPAUDIT_CACHE_DIR" not in os.environ:
    os.environ["CAPAUDIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="capaudit-test-cache-")
# hypothesis keeps its example database and caches in ./.hypothesis by default: the suite
# writes nothing into the checkout, so they go to a folder of this session
if "HYPOTHESIS_STORAGE_DIRECTORY" not in os.environ:
    os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = tempfile.mkdtemp(prefix="capaudit-hypothesis-")

# a suite started in the background by a shell without job control (`pytest ... &` in a script,
# some CI runners) inherits SIGINT ignored, and so does every process it starts: the Ctrl-C
# tests then wait out their deadlines (10 minutes for test_remote_storage's) instead of
# testing Ctrl-C. A terminal's Ctrl-C is what they stand for: give it back.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


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


@pytest.fixture
def torch_threads():
    """torch's intra-op threads as ``audit lic`` sets them (``cpu_threads``: the cores the
    1-minute load leaves idle, at least one), restored after the test. torch's OpenMP threads
    spin at every barrier: two of them on two busy cores trained the small LSTM of
    ``test_lic_lstm`` ~10x slower than one (32 s against 3.3 s at load 4), and the real-OSCAR
    training took 9 minutes of a 40-minute suite."""
    torch = pytest.importorskip("torch", reason="torch (the ml extra) is not installed")
    from capaudit.audit.lic.runner import cpu_threads

    before = torch.get_num_threads()
    torch.set_num_threads(cpu_threads()[0])
    yield torch.get_num_threads()
    torch.set_num_threads(before)
