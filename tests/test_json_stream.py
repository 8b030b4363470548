"""The JSON array stream: exact pieces, every record's value, one-line errors naming the record."""

import io
import json

import pytest

from capaudit.errors import InputError
from capaudit.io.layouts.json import is_json_array, iter_array_pieces, iter_array_records

RECORDS = [{"id": i, "caption": "a \"quoted\" caf\u00e9 \\ " + "x" * (i % 37), "score": i / 4,
            "turns": [{"from": "gpt", "value": None}], "ok": i % 2 == 0} for i in range(300)]


@pytest.mark.parametrize("style", [{}, {"indent": 2}, {"indent": 4, "ensure_ascii": False},
                                   {"separators": (",", ":")}])
@pytest.mark.parametrize("chunk", [1, 5, 97, 1 << 20])
def test_pieces_give_back_the_file_byte_for_byte(style, chunk):
    raw = ("\ufeff" + json.dumps(RECORDS, **style) + "\n").encode("utf-8")
    pieces = list(iter_array_pieces(io.BytesIO(raw), "f.json", chunk_chars=chunk))
    assert "".join(p[2] for p in pieces).encode("utf-8") == raw
    records = [p for p in pieces if p[0] == "record"]
    assert [p[3] for p in records] == RECORDS
    assert [p[1] for p in records] == list(range(len(RECORDS)))
    # each record's text is exactly what json.dumps wrote for it (compact style only)
    if not style:
        assert [p[2] for p in records] == [json.dumps(r) for r in RECORDS]
    assert pieces[-1][:2] == ("gap", -1) and pieces[-1][2].endswith("]\n")


@pytest.mark.parametrize("text", ["[]", " [ ] \n", "[1, 2.5, -3e2]", "[true,false,null]",
                                  '["a", [1, [2]], {"k": {}}]', "[12345678901234567890]"])
@pytest.mark.parametrize("chunk", [1, 2, 3, 100])
def test_values_of_literals_and_nesting_match_json_loads(text, chunk):
    got = [v for _, v in iter_array_records(io.BytesIO(text.encode()), chunk_chars=chunk)]
    assert got == json.loads(text)


@pytest.mark.parametrize("raw, row, words", [
    (b'[{"a": 1}, {"a": 2', None, "ends early"),
    (b'[{"a": 1} {"a": 2}]', 2, "comma"),
    (b'[1,,2]', 2, "comma"),
    (b'[1, 2,]', 2, "trailing comma"),
    (b'{"a": [1]}', None, "not a JSON array"),
    (b'[1] [2]', None, "after the end"),
    (b'[{"a": tru}]', 1, "not valid JSON"),
    (b'[1, "\xff"]', None, "UTF-8"),
])
@pytest.mark.parametrize("chunk", [1, 4, 1 << 20])
def test_errors_are_one_line_naming_the_file_and_record(raw, row, words, chunk):
    with pytest.raises(InputError) as err:
        list(iter_array_records(io.BytesIO(raw), "caps.json", chunk_chars=chunk))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("caps.json") and words.lower() in msg.lower()
    if row is not None:
        assert f"row {row}" in msg


def test_deep_nesting_is_refused_by_record():
    raw = b'[1, ' + b"[" * 100_000 + b"]" * 100_000 + b"]"
    with pytest.raises(InputError, match="record 2 is nested too deeply"):
        list(iter_array_records(io.BytesIO(raw), "deep.json"))


def test_is_json_array_reads_the_head():
    assert is_json_array(b"\xef\xbb\xbf \n[{")
    assert not is_json_array(b'{"images": []}')
