"""How ``filter run --shards`` lists its input (:mod:`capaudit.io.shard_files`): webdataset's
brace lists, folders, globs; each shard with the name its output takes."""

from __future__ import annotations

import pytest

from capaudit.errors import InputError
from capaudit.core.storage.urls import expand_braces
from capaudit.io.shard_files import list_shard_entries


def list_shards(spec: str) -> list[tuple[str, str]]:
    """``(location, name relative to the listing's root)`` of every shard of ``spec``."""
    return [(loc, rel) for loc, rel, _, _ in list_shard_entries(spec)[0]]


def test_brace_lists_expand_as_webdataset_writes_them():
    assert expand_braces("s-{000..002}.tar") == ["s-000.tar", "s-001.tar", "s-002.tar"]
    assert expand_braces("s-{8..11}.tar") == ["s-8.tar", "s-9.tar", "s-10.tar", "s-11.tar"]
    assert expand_braces("{a,b}/x-{0..1}.tar") == ["a/x-0.tar", "a/x-1.tar", "b/x-0.tar",
                                                    "b/x-1.tar"]
    assert expand_braces("plain.tar") == ["plain.tar"]
    with pytest.raises(InputError, match="over 1,000,000"):
        expand_braces("s-{0..9999999}.tar")


def test_listing_names_each_shard_relative_to_its_root(tmp_path):
    for rel in ("a/s-0.tar", "a/s-1.tar", "b/s-0.parquet", "b/notes.txt", "c.jsonl",
                ".hidden.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"x")
    names = [rel for _, rel in list_shards(str(tmp_path))]
    assert names == ["a/s-0.tar", "a/s-1.tar", "b/s-0.parquet", "c.jsonl"]
    assert [rel for _, rel in list_shards(str(tmp_path / "a" / "s-{0..1}.tar"))] == \
        ["s-0.tar", "s-1.tar"]
    assert [rel for _, rel in list_shards(str(tmp_path / "*" / "s-0.*"))] == \
        ["a/s-0.tar", "b/s-0.parquet"]
    assert list_shards(str(tmp_path / "c.jsonl")) == [(str(tmp_path / "c.jsonl"), "c.jsonl")]
    with pytest.raises(InputError, match="1 shard\\(s\\) of the brace list are missing"):
        list_shards(str(tmp_path / "a" / "s-{0..2}.tar"))
    with pytest.raises(InputError, match="no shards here"):
        list_shards(str(tmp_path / "b" / "*.txt"))
