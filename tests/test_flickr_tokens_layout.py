"""Flickr token files written back (``sets export --to original``) line for line as ``sets
add`` numbered them (:mod:`capaudit.io.layouts.flickr_tokens`)."""

from __future__ import annotations

import io

from capaudit.io.readers import get_reader
from capaudit.io.rewrite.base import ChangeLog
from capaudit.io.rewrite.formats import buffered, open_rewriter


def _write_back(path, changes: dict) -> tuple[bytes, dict]:
    out, log = io.BytesIO(), ChangeLog(None)
    with open(path, "rb") as fh:
        writer = open_rewriter("flickr-token", {}, buffered(fh), out, str(path), log)
        for batch in writer.batches():
            writer.write(batch, changes)
        writer.finish()
    return out.getvalue(), log.counts


def test_a_lone_carriage_return_in_a_caption_keeps_the_lines_the_reader_counted(tmp_path):
    path = tmp_path / "captions.token"
    path.write_bytes(b"1.jpg#0\tone\rstill one\n\n2.jpg#0\ttwo\r\n3.jpg#1\tthree")
    rows = [r for b in get_reader("flickr-token").read(path) for r in b.to_pylist()]
    assert [(r["caption"], r["meta"][:10]) for r in rows] == [
        ("one\rstill one", '{"src": 0,'), ("two", '{"src": 2,'), ("three", '{"src": 3,')]
    # the second caption revised, the third dropped: by the reader's meta.src
    data, counts = _write_back(path, {(2, None): "TWO", (3, None): None})
    # a revised line keeps its image and number and ends in "\n" (its "\r" is not kept)
    assert data == b"1.jpg#0\tone\rstill one\n\n2.jpg#0\tTWO\n"
    assert (counts["captions_revised"], counts["records_dropped"]) == (1, 1)
    assert _write_back(path, {})[0] == path.read_bytes()
