"""Every layout reads and writes today exactly as it did before its readers and writers were
made one (issue #44, move 2): ingest, export (every layout, ``--to original`` included),
audit and filter shards, and image shards, on the shared caption files, hash to the sha256
digests in ``tests/layout_digests.json`` (see ``tests/layout_digests.py`` for what is hashed
and how to regenerate). About 15 CPU-seconds.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import layout_digests as ld  # noqa: E402

pytestmark = pytest.mark.skipif(not (ld.fd.SHARED / "data").is_dir(),
                                reason=f"shared data not found at {ld.fd.SHARED} "
                                       "(set CAPAUDIT_SHARED)")
pytest.importorskip("spacy")
KNOWN = json.loads(ld.DIGESTS.read_text())


@pytest.fixture(scope="module")
def digests():
    with tempfile.TemporaryDirectory() as tmp:
        out = ld.ingest_and_export(Path(tmp))
        out.update(ld.shards(Path(tmp)))
    with tempfile.TemporaryDirectory() as tmp:
        out.update(ld.image_shards(Path(tmp)))
    return out


@pytest.mark.parametrize("key", sorted(KNOWN))
def test_layout_outputs_match_the_digests(digests, key):
    assert digests[key] == KNOWN[key]


def test_every_path_is_digested(digests):
    assert set(digests) == set(KNOWN)
