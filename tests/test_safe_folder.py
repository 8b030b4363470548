"""Folder outputs (``core/safe_folder.py``): built aside and moved in; with ``overwrite`` only
files an earlier capaudit export listed in the folder's manifest are removed, and the
manifest is data from disk: a name in it that leaves the folder removes nothing."""

from __future__ import annotations

import json

import pytest

from capaudit.core.safe_folder import MANIFEST, folder_output
from capaudit.core.safe_write import write_text
from capaudit.errors import InputError


def _export(out, files: dict[str, str], **kw) -> None:
    with folder_output(out, **kw) as staging:
        for name, text in files.items():
            (staging / name).write_text(text)


def test_a_new_folder_gets_the_files_and_their_manifest(tmp_path):
    out = tmp_path / "out"
    _export(out, {"a.txt": "A", "b.txt": "B"})
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "a.txt", "b.txt"]
    assert {"a.txt", "b.txt"} <= set(_names_in(out / MANIFEST))
    assert [p.name for p in tmp_path.iterdir()] == ["out"]   # no staging folder left


def test_a_folder_with_files_is_refused_without_overwrite(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "mine.txt").write_text("user's")
    with pytest.raises(InputError, match="exists and has files"):
        _export(out, {"a.txt": "A"})
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


def test_overwrite_replaces_and_removes_only_capaudits_own_files(tmp_path):
    out = tmp_path / "out"
    _export(out, {"a.txt": "A1", "stale.txt": "S"})
    (out / "mine.txt").write_text("user's")
    _export(out, {"a.txt": "A2", "c.txt": "C"}, overwrite=True)
    # a.txt replaced, stale.txt (listed by the first export, not written again) removed,
    # mine.txt (never listed) kept
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "a.txt", "c.txt", "mine.txt"]
    assert (out / "a.txt").read_text() == "A2" and (out / "mine.txt").read_text() == "user's"


def _names_in(manifest) -> list[str]:
    """Every string in the manifest's JSON (its layout is the writer's business)."""
    def walk(v):
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            for k, x in v.items():
                yield k
                yield from walk(x)
        elif isinstance(v, list):
            for x in v:
                yield from walk(x)
    return list(walk(json.loads(manifest.read_text())))


HOSTILE = ["../victim.txt", "ABS", "sub/inner.txt", "..\\victim.txt", "..", "."]


def test_a_manifest_naming_files_outside_the_folder_removes_none_of_them(tmp_path):
    out = tmp_path / "out"
    # a real export's manifest, its names then swapped for names that leave the folder
    _export(out, {f"x{i}.txt": "x" for i in range(len(HOSTILE))})
    for i in range(len(HOSTILE)):
        (out / f"x{i}.txt").unlink()
    text = (out / MANIFEST).read_text()
    for i, name in enumerate(HOSTILE):
        name = str(tmp_path / "abs_victim.txt") if name == "ABS" else name
        assert f'"x{i}.txt"' in text
        text = text.replace(f'"x{i}.txt"', json.dumps(name))
    (out / MANIFEST).write_text(text)
    (out / "sub").mkdir()
    victims = [tmp_path / "victim.txt", tmp_path / "abs_victim.txt", out / "sub" / "inner.txt"]
    for v in victims:
        v.write_text("not capaudit's")
    with pytest.raises(InputError, match="manifest cannot be trusted: it records no checksums"):
        _export(out, {"a.txt": "A"}, overwrite=True)   # a name no export writes: forged
    for v in victims:
        assert v.read_text() == "not capaudit's", v
    assert not (out / "a.txt").exists()


def test_a_failed_build_leaves_no_trace(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(RuntimeError, match="half way"):
        with folder_output(out) as staging:
            (staging / "a.txt").write_text("A")
            raise RuntimeError("half way")
    assert list(tmp_path.iterdir()) == []          # no output, no staging folder


def test_an_empty_existing_folder_is_filled(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _export(out, {"a.txt": "A"})
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "a.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize("planted", ["link", "folder"])
def test_a_link_or_folder_where_a_file_goes_is_refused(tmp_path, planted):
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    _export(out, {"keep.txt": "K"})
    victim.write_text("not capaudit's")
    if planted == "link":
        (out / "a.txt").symlink_to(victim)
    else:
        (out / "a.txt").mkdir()
    with pytest.raises(InputError, match="a link or a folder where capaudit writes"):
        _export(out, {"a.txt": "A"}, overwrite=True)
    assert victim.read_text() == "not capaudit's" and (out / "keep.txt").read_text() == "K"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_listed_name_that_is_now_a_link_is_not_removed(tmp_path):
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    _export(out, {"old.txt": "O"})
    (out / "old.txt").unlink()
    victim.write_text("not capaudit's")
    (out / "old.txt").symlink_to(victim)          # listed by the first export, now a link
    _export(out, {"a.txt": "A"}, overwrite=True)
    assert (out / "old.txt").is_symlink() and victim.read_text() == "not capaudit's"


def test_a_long_folder_name_builds_beside_it(tmp_path):
    # the staging folder's name is cut, so ".<name>.tmp-<pid>-<hex>" stays within 255 bytes
    out = tmp_path / ("x" * 240)
    _export(out, {"a.txt": "A"})
    assert (out / "a.txt").read_text() == "A"


def test_a_long_name_of_four_byte_characters_builds_beside_it(tmp_path):
    # 60 characters of 4 bytes: a legal 240-byte name; a cut at 120 *characters* kept all 240
    # bytes and the staging name passed 255 (the export failed); the cut counts bytes
    out = tmp_path / ("\U0001F600" * 60)
    _export(out, {"a.txt": "A"})
    assert (out / "a.txt").read_text() == "A"
    target = tmp_path / ("\U0001F600" * 60 + ".json")
    write_text(target, "{}")                      # the one file writer: the same cut
    assert target.read_text() == "{}" and sorted(p.name for p in tmp_path.iterdir()) == \
        sorted([out.name, target.name])


def test_a_manifest_without_a_file_list_removes_nothing(tmp_path):
    out = tmp_path / "out"
    _export(out, {"a.txt": "A"})
    (out / "mine.txt").write_text("user's")
    (out / MANIFEST).write_text(json.dumps({"written_by": "someone else"}))
    with pytest.raises(InputError, match="manifest cannot be trusted"):
        _export(out, {"b.txt": "B"}, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST, "a.txt", "mine.txt"]
    assert (out / "mine.txt").read_text() == "user's" and (out / "a.txt").read_text() == "A"


def test_a_listed_name_with_a_backslash_is_never_capaudits(tmp_path):
    # a Windows path separator: on POSIX a legal file name, but never one capaudit wrote
    out = tmp_path / "out"
    _export(out, {"x0.txt": "x"})
    (out / MANIFEST).write_text((out / MANIFEST).read_text().replace('"x0.txt"', '"a\\\\b.txt"'))
    (out / "a\\b.txt").write_text("user's")
    with pytest.raises(InputError, match="manifest cannot be trusted"):
        _export(out, {"c.txt": "C"}, overwrite=True)
    assert (out / "a\\b.txt").read_text() == "user's" and not (out / "c.txt").exists()


def test_the_refusal_names_the_file_and_the_fix(tmp_path):
    out = tmp_path / "out"
    _export(out, {"keep.txt": "K"})
    (out / "a.txt").mkdir()
    with pytest.raises(InputError) as err:
        _export(out, {"a.txt": "A"}, overwrite=True)
    msg = str(err.value)
    assert "the output folder has a link or a folder where capaudit writes its file" in msg
    assert str(out / "a.txt") in msg and msg.endswith("(fix: choose a new output folder)")


def test_the_output_folder_gets_the_default_permissions(tmp_path):
    import os
    import stat

    umask = os.umask(0)
    os.umask(umask)
    with folder_output(tmp_path / "out") as staging:
        assert stat.S_IMODE(staging.stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o777 & ~umask


def test_a_staging_name_already_taken_is_drawn_again(tmp_path, monkeypatch):
    import os

    from capaudit.core import safe_folder

    real, first = safe_folder.secrets.token_hex, iter(["aaaaaaaaaaaa"])
    monkeypatch.setattr(safe_folder.secrets, "token_hex", lambda n: next(first, None) or real(n))
    taken = tmp_path / f".out.tmp-{os.getpid()}-aaaaaaaaaaaa"
    taken.mkdir()
    (taken / "other.txt").write_text("another run's")
    _export(tmp_path / "out", {"a.txt": "A"})
    assert (tmp_path / "out" / "a.txt").read_text() == "A"
    assert (taken / "other.txt").read_text() == "another run's"   # left alone
