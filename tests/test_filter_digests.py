"""The hallucination filter decides today exactly as it did when the digests were taken
(issue #43): on the shared caption files, the filtered set's export, the filter log and the
run's counts hash to the sha256 digests in ``tests/filter_digests.json``, computed at the code
before the filter was made faster (see ``tests/filter_digests.py`` for what is hashed and how
to regenerate).

The default run covers the first 300 captions of each large file and the small files whole
(a few CPU-seconds per setting); ``CAPAUDIT_FULL_DIGESTS=1`` checks every file whole (some
minutes: run it after any change to the filter, the tokenizer or the parse).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import filter_digests as fd  # noqa: E402

pytestmark = pytest.mark.skipif(not (fd.SHARED / "data").is_dir(),
                                reason=f"shared data not found at {fd.SHARED} (set CAPAUDIT_SHARED)")
pytest.importorskip("spacy")

FULL = os.environ.get("CAPAUDIT_FULL_DIGESTS") == "1"
KNOWN = json.loads(fd.DIGESTS.read_text())
CASES = list(fd.cases("head")) + (list(fd.cases("full")) if FULL else [])


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_filter_outputs_match_the_digests(case, tmp_path):
    key, rel, namespace, partial, options, n = case
    got = fd.digest_file(tmp_path, rel, namespace, partial, options, n)
    assert got == KNOWN[key]


def test_the_digests_cover_every_shared_caption_file():
    """A caption file added to ../shared/data is added here too (its digests taken)."""
    data = fd.SHARED / "data"
    on_disk = {str(p.relative_to(data)) for p in data.glob("*/*.json*")
               if p.parent.name not in ("human_labels",)
               and not p.name.startswith(("chair_objects", "instance_categories",
                                          "demographics"))}
    assert on_disk == {f[0] for f in fd.FILES}
    assert all(f"full:default:{rel}" in KNOWN for rel in on_disk)
