"""A blank caption is refused the same way on every path: the Python check the audit uses
(str.strip), pyarrow's utf8_trim_whitespace, and the SQL path's character list."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from capaudit.errors import InputError
from capaudit.io.ingest import _WHITESPACE, check_batch, check_captions


def test_str_strip_blanks_exactly_what_arrow_trims():
    cps = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    text = [chr(c) + chr(c) for c in cps]
    arrow = pc.utf8_length(pc.utf8_trim_whitespace(pa.array(text))).to_pylist()
    arrow_blank = {c for c, n in zip(cps, arrow) if n == 0}
    assert arrow_blank == {c for c, t in zip(cps, text) if not t.strip()}
    assert arrow_blank == set(map(ord, _WHITESPACE))  # nothing blank above U+3000
    assert {0x20, 0x09, 0xA0, 0x85, 0x1C, 0x2028, 0x3000} <= arrow_blank


@pytest.mark.parametrize("caps, row", [
    (["a dog", None, "a cat"], 12),
    (["a dog", "a cat", " \t\u3000\u2028 "], 13),
    (["", "a cat"], 11),
])
def test_blank_or_missing_caption_names_its_row(tmp_path, caps, row):
    for check in (lambda: check_captions(caps, tmp_path / "c.jsonl", 10),
                  lambda: check_batch(pa.record_batch({"caption": pa.array(caps, pa.string())}),
                                      tmp_path / "c.jsonl", 10)):
        with pytest.raises(InputError, match="empty or missing caption") as exc:
            check()
        assert exc.value.row == row


def test_captions_with_text_pass():
    check_captions(["a dog", " x ", "\u3000cat", "\x1cy"], "c.jsonl", 0)
    check_captions([], "c.jsonl", 0)
