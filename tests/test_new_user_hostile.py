"""A new user's hostile inputs to the day's new paths, through the CLI, each with the promised
outcome: one line naming the file (and row), exit 2, nothing of the user's overwritten.

- ``filter run --references FILE`` whose ids name none of the set's images: the run
  judged with no reference at all (saying references chose its object mode); with
  ``--evidence references`` too few images covered was a ``KeyError: 'references'``
  traceback (the coverage refusal had no label for the references evidence);
- ``shards build`` into a folder with files it did not write: they were overwritten
  (``shard-00000.tar``, ``manifest.json`` ...) or removed (any ``*.tmp-*``); an ``--out``
  that is a file was a ``FileExistsError`` traceback;
- ``filter run --shards`` on a CSV with latin-1 bytes, an over-long field or a ragged row:
  a ``UnicodeDecodeError`` traceback / a line without its row / read (sets add refuses it);
  a 200,000-character caption sets add stores was refused (Python csv's 128 KiB);
- a Flickr token file that starts with a BOM: its first image became another image
  (``\\ufeff1000092795.jpg``, no id) and the set's ids "mixed";
- a local executor's worker (``spawn`` hands it the parent's ``sys.argv``) took the CLI's
  start-up Ctrl-C handler and printed "interrupted, nothing stored" beside the parent's
  "finished shards are kept".
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from capaudit.cli.main import main

SRC = str(Path(__file__).resolve().parents[1] / "src")


def _cli(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().err


def _one_line(err: str) -> str:
    """The one line of ``err`` (a model's loading bar, where the vocabulary's cosines are
    computed for the first time, is no line of capaudit's)."""
    lines = [x for x in err.strip().splitlines() if not x.startswith("\rLoading weights")
             and not x.startswith("Loading weights")]
    assert len(lines) == 1 and lines[0].startswith("capaudit: error: "), err
    return lines[0]


def _val2017(shared, n: int) -> tuple[list[int], dict[int, list[str]]]:
    """The first ``n`` images of COCO val2017 (by id) and their human captions."""
    doc = json.loads(shared("data", "coco2017", "captions_val2017.json").read_text())
    caps: dict[int, list[str]] = {}
    for a in doc["annotations"]:
        caps.setdefault(a["image_id"], []).append(a["caption"].strip())
    ids = sorted(caps)[:n]
    return ids, {i: caps[i] for i in ids}


@pytest.mark.parametrize("shift, said", [
    (10**9, "the references name none of the 4 image ids of set 'hyp' (theirs are e.g. "
            "1000000139)"),
    (0, "only 1 of the 4 images of 'hyp' (25.0%, below 50%) have reference-caption "
        "annotations"),
], ids=["none", "one-of-four"])
def test_references_of_too_few_images_stop_in_one_line(shared, tmp_path, capsys, shift, said):
    """4 val2017 images (139, 285, 632, 724), each captioned by its first COCO caption; the
    references are the other captions of 139 alone, under its own id or 10^9 + 139."""
    ids, caps = _val2017(shared, 4)
    src = tmp_path / "hyp.jsonl"
    src.write_text("".join(json.dumps({"image_id": i, "caption": caps[i][0]}) + "\n"
                           for i in ids))
    refs = tmp_path / "refs.json"
    refs.write_text(json.dumps({
        "images": [{"id": shift + 139, "file_name": "x.jpg"}],
        "annotations": [{"id": k, "image_id": shift + 139, "caption": c}
                        for k, c in enumerate(caps[139][1:])]}))
    db = str(tmp_path / "s.duckdb")
    assert _cli(capsys, "sets", "add", "hyp", str(src), "--db", db)[0] == 0
    code, err = _cli(capsys, "filter", "run", "hyp", "--filter", "hallucination", "--action",
                     "flag", "--evidence", "references", "--references", str(refs),
                     "--out", "hyp_f", "--db", db)
    assert code == 2 and said in _one_line(err) and "Traceback" not in err
    from capaudit.store import Store

    with Store(db) as store:
        assert store.find_set("hyp_f") is None


@pytest.fixture
def built(shared, tmp_path, capsys):
    """6 JPEGs named by val2017 ids and a store holding their COCO captions (set 'v')."""
    from PIL import Image

    ids, caps = _val2017(shared, 6)
    (tmp_path / "img").mkdir()
    for k, i in enumerate(ids):
        Image.new("RGB", (16, 16), (40 * k, 90, 30)).save(tmp_path / "img" / f"{i:012d}.jpg")
    src = tmp_path / "caps.jsonl"
    src.write_text("".join(json.dumps({"image_id": i, "caption": c}) + "\n"
                           for i in ids for c in caps[i]))
    db = str(tmp_path / "s.duckdb")
    assert _cli(capsys, "sets", "add", "v", str(src), "--db", db)[0] == 0

    def build(out: Path):
        return _cli(capsys, "shards", "build", "--images", str(tmp_path / "img"), "--captions",
                    "v", "--out", str(out), "--shard-size", "2", "--db", db)
    return build


@pytest.mark.parametrize("name", ["shard-00000.tar", "shard-00001.parquet",
                                  "shard-00002.done.json", "manifest.json"])
def test_shards_build_leaves_files_it_did_not_write(built, tmp_path, name):
    """A user's file under a name the build writes (6 images, 3 shards of 2) stops the build
    before anything is written; a file of another name stays beside the shards."""
    out = tmp_path / "out"
    out.mkdir()
    (out / name).write_bytes(b"mine\n")
    (out / "notes.tmp-1").write_bytes(b"mine too\n")   # a *.tmp-* name, not a writer's
    code, err = built(out)
    assert code == 2 and f"holds {name}, which shards build did not write" in _one_line(err)
    assert sorted(p.name for p in out.iterdir()) == sorted([name, "notes.tmp-1"])
    assert (out / name).read_bytes() == b"mine\n"
    (out / name).unlink()
    assert built(out)[0] == 0
    assert (out / "notes.tmp-1").read_bytes() == b"mine too\n"
    assert len(list(out.glob("shard-*.tar"))) == 3


def test_shards_build_resumes_a_shard_stopped_before_its_marker(built, tmp_path):
    """A build stopped between a shard's tar and its marker left files with no marker: they
    hold exactly that shard's samples, so the rerun rewrites them (equal bytes); a tar of
    other samples under that name is the user's."""
    out = tmp_path / "out"
    assert built(out)[0] == 0
    first = {p.name: p.read_bytes() for p in out.iterdir()}
    (out / "shard-00001.done.json").unlink()
    (out / "manifest.json").unlink()
    assert built(out)[0] == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == {
        **first, "manifest.json": (out / "manifest.json").read_bytes()}
    (out / "shard-00001.done.json").unlink()
    (out / "shard-00001.tar").write_bytes(first["shard-00000.tar"])   # another shard's samples
    code, err = built(out)
    assert code == 2 and "holds shard-00001.tar" in _one_line(err)
    assert (out / "shard-00001.tar").read_bytes() == first["shard-00000.tar"]


def test_shards_build_out_that_is_a_file(built, tmp_path):
    out = tmp_path / "afile"
    out.write_bytes(b"x")
    code, err = built(out)
    assert code == 2 and "cannot make the output folder (File exists)" in _one_line(err)
    assert out.read_bytes() == b"x"


def _csv_shard(shared, tmp_path, tail: bytes) -> Path:
    """val2017's first 5 images' captions as ``image_id,caption`` (a header and 25 records,
    rows 2-26: no caption holds a newline), then ``tail`` as row 27."""
    ids, caps = _val2017(shared, 5)
    rows = [f'{i},"{c}"\n' for i in ids for c in caps[i]]
    assert len(rows) == 25 and not any("\n" in c or '"' in c for i in ids for c in caps[i])
    (tmp_path / "in").mkdir()
    path = tmp_path / "in" / "part.csv"
    path.write_bytes(("image_id,caption\n" + "".join(rows)).encode() + tail)
    return path


@pytest.mark.parametrize("tail, said", [
    (b'139,"caf\xe9 cr\xe8me"\n', "row 27: not valid UTF-8"),
    (b'139,"' + b"x" * 3_000_000 + b'"\n', "row 27: malformed CSV (field larger than field "
                                           "limit (2097152))"),
    (b'139,"a dog",extra,more\n', "row 27: 4 fields where the header has 2"),
    (b'139,"never closed\n', "row 27: malformed CSV (a quote this record opens is never "
                              "closed)"),
], ids=["latin-1", "3MB-field", "ragged", "unclosed-last"])
def test_csv_shard_that_cannot_be_read_names_its_row(shared, tmp_path, capsys, tail, said):
    """unclosed-last: --shards read 'never closed\\n' (Python csv, not strict); sets add
    stored '"never closed' and, sniffing no quoting, every other caption with its quotes."""
    path = _csv_shard(shared, tmp_path, tail)
    db = str(tmp_path / "s.duckdb")
    code, err = _cli(capsys, "filter", "run", "--shards", str(path), "--filter",
                     "gender-neutral", "--when", "always", "--out", str(tmp_path / "out"),
                     "--db", db)
    assert code == 2 and f"{path}, {said}" in _one_line(err)
    code, err = _cli(capsys, "sets", "add", "s", str(path), "--db", db)
    assert code == 2 and f"{path}, {said}" in _one_line(err)   # the same words as sets add


def test_csv_whose_only_quote_is_never_closed_is_refused_on_both_paths(shared, tmp_path,
                                                                     capsys):
    """val2017's first 5 images' 25 captions unquoted (commas dropped), then
    ``139,"never closed`` at the end: DuckDB's sniffer chose no quoting and sets add stored
    '"never closed'; --shards read 'never closed\\n'. Both now refuse it at row 27."""
    ids, caps = _val2017(shared, 5)
    path = tmp_path / "in" / "part.csv"
    path.parent.mkdir()
    path.write_text("image_id,caption\n" + "".join(f"{i},{c.replace(',', '')}\n" for i in ids
                                                    for c in caps[i]) + '139,"never closed\n')
    db = str(tmp_path / "s.duckdb")
    said = f"{path}, row 27: malformed CSV (a quote this record opens is never closed)"
    code, err = _cli(capsys, "sets", "add", "s", str(path), "--db", db)
    assert code == 2 and said in _one_line(err)
    code, err = _cli(capsys, "filter", "run", "--shards", str(path), "--filter",
                     "gender-neutral", "--when", "always", "--out", str(tmp_path / "out"),
                     "--db", db)
    assert code == 2 and said in _one_line(err)
    from capaudit.store import Store

    with Store(db) as store:
        assert store.find_set("s") is None


def test_csv_shard_reads_the_long_caption_sets_add_stores(shared, tmp_path, capsys):
    """A 200,000-character caption (over Python csv's 128 KiB, under DuckDB's 2 MiB line):
    both paths read all 26 captions; the long record is copied back as it was."""
    tail = b'139,"' + b"x" * 200_000 + b'"\n'
    path = _csv_shard(shared, tmp_path, tail)
    db = str(tmp_path / "s.duckdb")
    assert _cli(capsys, "sets", "add", "s", str(path), "--db", db)[0] == 0
    code, err = _cli(capsys, "filter", "run", "--shards", str(path), "--filter",
                     "gender-neutral", "--when", "always", "--out", str(tmp_path / "out"),
                     "--db", db)
    assert code == 0, err
    assert (tmp_path / "out" / "part.csv").read_bytes().endswith(b'"\n' + tail)
    from capaudit.store import Store

    with Store(db) as store:
        caps = store.captions("s").column("caption").to_pylist()
    assert len(caps) == 26 and max(map(len, caps)) == 200_000


def test_flickr_tokens_with_a_bom_keep_the_first_image(tmp_path, capsys):
    """Flickr30k's 1000092795.jpg, two of its captions; a BOM before the first line."""
    body = ("1000092795.jpg#0\tTwo young guys with shaggy hair look at their hands while "
            "hanging out in the yard .\n1000092795.jpg#1\tTwo young , White males are "
            "outside near many bushes .\n").encode()
    db = str(tmp_path / "s.duckdb")
    for name, data in (("plain", body), ("bom", b"\xef\xbb\xbf" + body)):
        (tmp_path / f"{name}.token").write_bytes(data)
        assert _cli(capsys, "sets", "add", name, str(tmp_path / f"{name}.token"), "--db",
                    db)[0] == 0
    from capaudit.store import Store

    with Store(db) as store:
        got = {n: sorted(set(zip(*store.captions(n, "image_key, image_id, namespace")
                                 .to_pydict().values()))) for n in ("plain", "bom")}
    assert got["bom"] == got["plain"] == [("1000092795", 1000092795, "flickr30k")]


@pytest.mark.parametrize("ignored", [True, False])
def test_cli_start_handler_leaves_an_ignored_sigint_ignored(ignored):
    """The CLI's start-up handler (one line, exit 130) is for the ``capaudit`` process; a
    process started with SIGINT ignored (the local executor's workers: ``spawn`` gives them
    the parent's argv) keeps ignoring it, so only the parent answers Ctrl-C."""
    code = ("import signal, sys; sys.argv = ['capaudit']; import capaudit.cli; "
            "h = signal.getsignal(signal.SIGINT); "
            "print('ignored' if h is signal.SIG_IGN else h.__name__)")
    pre = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignored else None
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         preexec_fn=pre, env=dict(os.environ, PYTHONPATH=SRC), check=True)
    assert out.stdout.strip() == ("ignored" if ignored else "interrupted_while_starting")


def test_shards_build_names_an_image_link_that_leads_nowhere(built, tmp_path):
    """The 4th of the 6 images (shard 1) replaced by a link to nothing: it was left out
    without a word (and counted nowhere); now its shard fails in one line naming it."""
    img = sorted((tmp_path / "img").iterdir())[3]
    img.unlink()
    img.symlink_to(tmp_path / "gone.jpg")
    out = tmp_path / "out"
    code, err = built(out)
    assert code == 2 and f"{img}: cannot read or write this file (No such file or " \
        "directory)" in _one_line(err)
    assert not (out / "shard-00001.tar").exists() and not (out / "manifest.json").exists()


@pytest.mark.parametrize("yaml_text, said", [
    ("filter:\n  reference_col: [references, refs]\n",
     "filter option reference_col is a list (['references', 'refs']), not one name"),
    ("filter:\n  references: {a: 1}\n", "filter option references is a dict ({'a': 1}), "
                                         "not one name"),
], ids=["col-list", "refs-dict"])
def test_reference_options_from_yaml_are_one_name(shared, tmp_path, capsys, yaml_text, said):
    """A YAML collection where a name goes: was a TypeError traceback (unhashable list)."""
    ids, caps = _val2017(shared, 2)
    (tmp_path / "in").mkdir()
    src = tmp_path / "in" / "hyp.jsonl"
    src.write_text("".join(json.dumps({"image_id": i, "caption": caps[i][0], "references":
                                       caps[i][1:]}) + "\n" for i in ids))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml_text)
    gt = str(shared("data", "coco2014", "chair_objects_trainval2014.jsonl"))
    db = str(tmp_path / "s.duckdb")
    assert _cli(capsys, "sets", "add", "hyp", str(src), "--db", db)[0] == 0
    common = ("--filter", "hallucination", "--action", "flag", "--chair-gt", gt, "--config",
              str(cfg), "--db", db)
    for args in (("hyp", "--out", "hyp_f"), ("--shards", str(tmp_path / "in"), "--out",
                                              str(tmp_path / "out"))):
        code, err = _cli(capsys, "filter", "run", *args, *common)
        assert code == 2 and said in _one_line(err) and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("line, said", [
    ("min_coverage: abc", "filter option min_coverage expects a number, got 'abc'"),
    ("similarity: [1]", "filter option similarity expects a number, got [1]"),
    ("negation: maybe", "filter option negation expects true or false, got 'maybe'"),
], ids=["number-text", "number-list", "bool-text"])
def test_typed_options_from_yaml(tmp_path, line, said):
    """A YAML value of a bool or number option that is neither: one line (min_coverage: abc
    and similarity: [1] were tracebacks, negation: maybe was read as true); a number or a
    boolean written as text reads as --filter.KEY reads it."""
    from capaudit.errors import InputError
    from capaudit.filters.options import filter_options

    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"filter:\n  {line}\n")
    with pytest.raises(InputError, match=re.escape(said)):
        filter_options("hallucination", {}, cfg)
    cfg.write_text("filter:\n  min_coverage: '0.3'\n  negation: 'no'\n  similarity: 1\n")
    got = filter_options("hallucination", {}, cfg)
    assert (got["min_coverage"], got["negation"], got["similarity"]) == (0.3, False, 1)


def test_shards_build_removes_its_own_shards_beyond_a_smaller_rebuild(built, tmp_path, capsys):
    """6 images in 3 shards of 2, then the same --out rebuilt from 4 of them (2 shards): the
    old shard-00002's tar, index and marker (ours: its marker names it) were left, so the
    folder held 6 samples where the build holds 4. A user's shard-00003.tar (no marker of
    ours) stays untouched."""
    from capaudit.io.image_shards import list_shards, read_manifest, read_shard

    out = tmp_path / "out"
    assert built(out)[0] == 0
    (out / "shard-00003.tar").write_bytes(b"mine\n")
    for img in sorted((tmp_path / "img").iterdir())[4:]:
        img.unlink()
    capsys.readouterr()
    assert main(["shards", "build", "--images", str(tmp_path / "img"), "--captions", "v",
                 "--out", str(out), "--shard-size", "2", "--db", str(tmp_path / "s.duckdb")]) == 0
    said = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["manifest.json", "shard-00003.tar"] + [f"shard-0000{k}{ext}" for k in (0, 1)
                                               for ext in (".tar", ".parquet", ".done.json")])
    assert (out / "shard-00003.tar").read_bytes() == b"mine\n"
    manifest = read_manifest(out)
    assert (manifest["shards"], manifest["samples"], manifest["removed_stale"]) == (2, 4, 1)
    held = [s.key for t in list_shards(out) if t.name != "shard-00003.tar"
            for s in read_shard(t)]
    assert len(held) == manifest["samples"] == 4
    assert "1 older shard(s) of an earlier build removed" in " ".join(said.split())


def test_shards_build_names_an_image_that_is_no_image(built, tmp_path):
    """The 3rd of the 6 images (shard 1) holds bytes that are no JPEG: it was packed as it
    was; now its shard fails in one line naming it, and nothing of it is written."""
    img = sorted((tmp_path / "img").iterdir())[2]
    img.write_bytes(b"not a jpeg at all")
    out = tmp_path / "out"
    code, err = built(out)
    line = _one_line(err)
    assert code == 2 and f"{img}: not an image that can be read" in line
    assert "replace or remove this file" in line
    assert not (out / "shard-00001.tar").exists() and not (out / "manifest.json").exists()


def test_ray_address_where_nothing_listens_is_one_line(built, tmp_path, monkeypatch):
    """``--executor ray --address 127.0.0.1:1``: Ray retried its GCS connection for minutes
    (about 35 s an attempt, 20 attempts), printing its own warnings and no capaudit line.
    Now the address is probed first (a closed port refuses at once): one line naming the
    address and the fix, exit 2, and Ray is never started."""
    ray = pytest.importorskip("ray")

    def never(*a, **k):
        raise AssertionError("ray.init was called")
    monkeypatch.setattr(ray, "init", never)
    from capaudit.cli.main import main as cli_main

    out = tmp_path / "out"
    code = cli_main(["shards", "build", "--images", str(tmp_path / "img"), "--captions", "v",
                     "--out", str(out), "--shard-size", "2", "--db", str(tmp_path / "s.duckdb"),
                     "--executor", "ray", "--address", "127.0.0.1:1"])
    assert code == 2 and not (out / "manifest.json").exists()
    from capaudit.errors import InputError
    from capaudit.executors.ray import RayExecutor

    with pytest.raises(InputError, match=r"no Ray cluster answers at --address 127\.0\.0\.1:1 "
                                         r"\(nothing listens there: .*refused"):
        RayExecutor(2, "127.0.0.1:1")
