"""CSV records as ``filter run --shards`` reads them back (:class:`capaudit.io.rewrite.
text_lines.CsvRewriter` over :mod:`capaudit.io.layouts.csv`): the same columns and ids as
``sets add`` (DuckDB) gives them."""

from __future__ import annotations

import io

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
