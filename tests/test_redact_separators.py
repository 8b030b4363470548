"""A URL's secret query parameter masked in a one-line error keeps the separator that follows
it: ``URL?token=X: no such file`` reads ``URL?token=[redacted]: no such file``, and
``URL?token=X, row 1: ...`` keeps its ``, row 1`` (the mask once ate the ``:`` or ``,``, so
the line read ``...[redacted] no such file``). The secret itself never shows."""

from __future__ import annotations

import pytest

from capaudit.core.redact import redact


@pytest.mark.parametrize("tail", [": no such file or object (fix: check the path)",
                                  ", row 1: not valid UTF-8", ": no rows (an empty file)"])
def test_a_masked_query_token_keeps_the_separator_after_it(tail):
    url = "https://alice:pw123@h.example/el.jsonl?token=TOKSECRET&sig=SIGSECRET"
    out = redact(url + tail)
    assert out == ("https://[redacted]@h.example/el.jsonl?token=[redacted]&sig=[redacted]"
                   + tail)


def test_a_secret_with_a_colon_or_comma_inside_is_masked_whole():
    out = redact("https://h/x?token=ab:cd,ef&key=k:1: not found")
    assert out == "https://h/x?token=[redacted]&key=[redacted]: not found"


def test_a_missing_annotation_url_names_it_masked_with_its_separator(tmp_path, capsys):
    from capaudit.cli.main import main

    (tmp_path / "a.jsonl").write_text('{"image_id": 1, "caption": "a horse"}\n')
    rc = main(["audit", "capability", str(tmp_path / "a.jsonl"), "--annotations",
               "memory://i5h/none.jsonl?token=TOKSECRET", "--judge-url",
               "http://127.0.0.1:9/v1", "--judge-model", "j", "--db",
               str(tmp_path / "s.duckdb")])
    err = capsys.readouterr().err
    assert rc == 2 and "TOKSECRET" not in err
    assert "memory://i5h/none.jsonl?token=[redacted]: no such file" in err, err
