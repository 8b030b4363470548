"""``shards build`` as a step of the runner (#44): the same bytes with 1 and 2 workers (and on
Ray), a second run writes nothing, a run SIGKILLed mid-build resumes to the bytes of a run
never killed, a changed image or caption rebuilds its shard alone, and an image that cannot
be read fails its shard in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from capaudit.enrich.shards_build import build_shards
from capaudit.errors import InputError
from capaudit.io.ingest import add_caption_set
from capaudit.store import Store
from test_enrich_fixtures import make_captions, make_images

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def images(tmp_path):
    """(folder of 24 COCO-named JPEGs, their caption table, the store)."""
    ids = make_images(tmp_path / "images", 24)
    db = tmp_path / "t.duckdb"
    with Store(db) as store:
        add_caption_set(store, "coco", make_captions(tmp_path / "caps.json", ids), "coco")
        table = store.captions("coco")
    return tmp_path / "images", table, db


def _files(folder: Path) -> dict[str, bytes]:
    """Every file's bytes but the manifest's, which counts what this run wrote."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.name != "manifest.json"}


def test_one_and_two_workers_write_the_same_bytes_and_a_rerun_writes_nothing(images, tmp_path):
    folder, table, _ = images
    one = build_shards(folder, table, tmp_path / "one", shard_size=5, set_name="coco")
    two = build_shards(folder, table, tmp_path / "two", shard_size=5, set_name="coco",
                       workers=2)
    assert one == two and (one["shards"], one["written"], one["samples"]) == (5, 5, 24)
    assert _files(tmp_path / "one") == _files(tmp_path / "two")   # markers too
    assert len(_files(tmp_path / "one")) == 5 * 3
    assert (tmp_path / "one" / "manifest.json").read_bytes() == \
        (tmp_path / "two" / "manifest.json").read_bytes()
    stamps = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "two").glob("*.tar")}
    again = build_shards(folder, table, tmp_path / "two", shard_size=5, set_name="coco",
                         workers=2)
    assert (again["written"], again["skipped_done"]) == (0, 5)
    assert stamps == {p.name: p.stat().st_mtime_ns for p in (tmp_path / "two").glob("*.tar")}
    assert _files(tmp_path / "one") == _files(tmp_path / "two")


def test_a_changed_image_or_caption_rebuilds_its_shard_alone(images, tmp_path):
    folder, table, _ = images
    build_shards(folder, table, tmp_path / "out", shard_size=5, set_name="coco")
    first = _files(tmp_path / "out")
    image = sorted(folder.iterdir())[7]                      # in shard 1
    image.write_bytes(sorted(folder.iterdir())[0].read_bytes())
    s = build_shards(folder, table, tmp_path / "out", shard_size=5, set_name="coco")
    assert (s["written"], s["skipped_done"]) == (1, 4)
    changed = _files(tmp_path / "out")
    assert {n for n in first if first[n] != changed[n]} == \
        {"shard-00001.tar", "shard-00001.parquet", "shard-00001.done.json"}
    caps = table.to_pylist()
    caps[-1]["caption"] = "another caption"                  # image 23: shard 4
    import pyarrow as pa

    s = build_shards(folder, pa.Table.from_pylist(caps, table.schema), tmp_path / "out",
                     shard_size=5, set_name="coco")
    assert (s["written"], s["skipped_done"]) == (1, 4)
    build_shards(folder, pa.Table.from_pylist(caps, table.schema), tmp_path / "fresh",
                 shard_size=5, set_name="coco")
    assert _files(tmp_path / "out") == _files(tmp_path / "fresh")


def test_sigkill_mid_build_then_resume_gives_the_bytes_of_an_unkilled_run(images, tmp_path):
    from capaudit.cli.main import main

    folder, _, db = images
    out = tmp_path / "out"
    cmd = ["shards", "build", "--images", str(folder), "--captions", "coco", "--shard-size",
           "1", "--db", str(db), "--out"]
    assert main([*cmd, str(tmp_path / "ref")]) == 0
    cmd.append(str(out))
    proc = subprocess.Popen([sys.executable, "-m", "capaudit.cli.main", *cmd], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(REPO / "src")},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        if len(list(out.glob("*.done.json"))) >= 3:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait()
    kept = len(list(out.glob("*.done.json")))
    assert proc.returncode == -signal.SIGKILL and 3 <= kept < 24   # killed mid-build
    assert not (out / "manifest.json").exists()
    assert main(cmd) == 0
    assert _files(out) == _files(tmp_path / "ref")
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["written"], manifest["skipped_done"]) == (24 - kept, kept)
    assert main(cmd) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["written"], manifest["skipped_done"]) == (0, 24)


def test_an_image_gone_before_its_shard_is_read_fails_in_one_line(images, tmp_path,
                                                                  monkeypatch):
    import capaudit.enrich.shards_build as sb

    folder, table, _ = images
    pair = sb._pair

    def pair_then_remove(*args):
        paired, unmatched = pair(*args)
        Path(paired[7][0]).unlink()                          # shard 1's third image
        return paired, unmatched

    monkeypatch.setattr(sb, "_pair", pair_then_remove)
    with pytest.raises(InputError, match=r"^shard shard-00001\.tar failed: .*COCO_val2014_0+"
                       r"1007\.jpg: cannot read or write this file .*\(fix: an image must "):
        build_shards(folder, table, tmp_path / "out", shard_size=5, set_name="coco")
    assert not (tmp_path / "out" / "shard-00001.tar").exists()
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.ray
def test_ray_writes_the_local_bytes(images, tmp_path):
    pytest.importorskip("ray")
    folder, table, _ = images
    build_shards(folder, table, tmp_path / "local", shard_size=5, set_name="coco")
    build_shards(folder, table, tmp_path / "ray", shard_size=5, set_name="coco",
                 executor="ray", workers=2)
    assert _files(tmp_path / "local") == _files(tmp_path / "ray")
