"""CSV records as ``filter run --shards`` reads them back (:class:`capaudit.io.rewrite.
text_lines.CsvRewriter` over :mod:`capaudit.io.layouts.csv`): the same columns and ids as
``sets add`` (DuckDB) gives them."""

from __future__ import annotations

import io

import pytest

from capaudit.io.rewrite.base import ChangeLog
from capaudit.io.rewrite.formats import buffered, open_rewriter


def _places(path) -> list:
    with open(path, "rb") as fh:
        writer = open_rewriter("csv", {}, buffered(fh), io.BytesIO(), str(path), ChangeLog(None))
        return [(r.index, [(p.text, p.image_key, p.image_id) for p in r.places])
                for batch in writer.batches() for r in batch]


def test_a_bom_before_the_header_hides_no_column(tmp_path):
    path = tmp_path / "shard.csv"
    path.write_bytes("\ufeffimage_id,caption\n391895,a man\n".encode())
    assert _places(path) == [(-1, []), (0, [("a man", "391895", 391895)])]


def test_without_an_id_column_a_record_number_is_a_key_not_an_image_id(tmp_path):
    path = tmp_path / "shard.csv"
    path.write_text("caption,score\na man,1\na dog,2\n")
    assert _places(path) == [(-1, []), (0, [("a man", "0", None)]), (1, [("a dog", "1", None)])]


def _run(capsys, *args: str) -> tuple[int, str]:
    from capaudit.cli.main import main

    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().err.strip()


# val2017 image 139's first caption, a quote read as text mid-field, then row 4
_TSV = 'image_id\tcaption\n139\tA woman stands in the dining area at the table.\n' \
       '285\ta bear says "hi"\n'


def _refused_by_both(tmp_path, capsys, path, said: str) -> None:
    """``sets add`` and ``filter run --shards`` refuse ``path`` with the line ``said``, exit
    2, and store nothing."""
    db = str(tmp_path / "s.duckdb")
    code, err = _run(capsys, "sets", "add", "s", str(path), "--db", db)
    assert code == 2 and err.startswith(f"capaudit: error: {said}") and "\n" not in err, err
    code, err = _run(capsys, "filter", "run", "--shards", str(path), "--filter",
                     "gender-neutral", "--when", "always", "--out", str(tmp_path / "out"),
                     "--db", db)
    assert code == 2 and said in err, err
    from capaudit.store import Store

    with Store(db) as store:
        assert store.find_set("s") is None


@pytest.mark.parametrize("last", ['632\t"never closed\n', '632\t"never closed',
                                  '632\t"never\nclosed\n'], ids=["newline", "at-eof", "2-lines"])
def test_a_tsv_whose_last_quote_is_never_closed_is_refused_by_sets_add_and_shards(
        tmp_path, capsys, last):
    """DuckDB's sniffer read this .tsv with no quoting and ``sets add`` stored '"never closed'
    while ``filter run --shards`` refused it: both now say the same line, exit 2, store
    nothing."""
    path = tmp_path / "in" / "part.tsv"
    path.parent.mkdir()
    path.write_text(_TSV + last)
    said = f"{path}, row 4: malformed CSV (a quote this record opens is never closed) " \
           "(fix: close the quote this record opens;"
    _refused_by_both(tmp_path, capsys, path, said)


def test_a_tsv_whose_quotes_are_text_is_stored_as_before(tmp_path, capsys):
    """The same file closed by an unquoted row: the sniffer keeps the mid-field quotes."""
    path = tmp_path / "part.tsv"
    path.write_text(_TSV + "632\ta bed\n")
    db = str(tmp_path / "s.duckdb")
    assert _run(capsys, "sets", "add", "s", str(path), "--db", db)[0] == 0
    from capaudit.store import Store

    with Store(db) as store:
        caps = store.captions("s").column("caption").to_pylist()
    assert caps == ["A woman stands in the dining area at the table.", 'a bear says "hi"',
                    "a bed"]


def test_a_tsv_quote_left_open_before_more_than_2_mib_is_refused_by_sets_add_and_shards(
        tmp_path, capsys):
    """Python's csv reads the open quote on to the end of the file as one field and stops at
    its 2 MiB field limit (not at the end of data): ``sets add`` stored the quote as text
    while ``--shards`` refused row 3; both now say the same line, exit 2, store nothing."""
    from capaudit.io.layouts.csv import FIELD_LIMIT

    path = tmp_path / "in" / "part.tsv"
    path.parent.mkdir()
    rows = "".join(f"{i}\ta dog number {i} sits on a red mat\n" for i in range(3, 60_000))
    path.write_text('image_id\tcaption\n1\ta dog\n2\t"a cat on a mat\n' + rows)
    assert FIELD_LIMIT < path.stat().st_size < FIELD_LIMIT + (1 << 20)
    said = f"{path}, row 3: malformed CSV (field larger than field limit ({FIELD_LIMIT})) " \
           "(fix: close the quote this record opens;"
    _refused_by_both(tmp_path, capsys, path, said)
