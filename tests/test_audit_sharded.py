"""``audit run --shards``: 1 shard = 7 shards = a process pool = Ray, identical JSON; resume;
corrupt shards; the three shard layouts read alike."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from capaudit.audit.engine import audit_captions
from capaudit.audit.runner import DEFAULTS
from capaudit.audit.shards.run import run_sharded
from capaudit.errors import InputError
from capaudit.io.annotation_files import Annotations


def _rows(shared, n=3000):
    """Oscar's val2014 captions plus captions without an image id (their own units)."""
    path = shared("data", "captioners", "oscar_val2014_gender.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()[:n]]
    ids = [r["image_id"] for r in rows]
    caps = [r["caption"] for r in rows]
    for i in range(0, n, 10):  # every tenth caption: a web caption with a non-integer key
        ids[i] = f"uid-{i:05d}"
    return ids, caps


@pytest.fixture(scope="module")
def ann():
    from tests.conftest import shared_path
    return _annotations(shared_path)


def _annotations(shared):
    from capaudit.io.annotation_files import load_chair_gt, load_demographics, load_instances
    coco = shared("data", "coco2014")
    inst, _ = load_instances(coco / "instance_categories_val2014.jsonl")
    gender, skin = load_demographics(coco / "demographics_val2014.jsonl")
    return Annotations(instances=inst, chair_gt=load_chair_gt(coco / "chair_objects_trainval2014.jsonl"),
                       gender=gender, skin_tone=skin, sources={"instances": "coco"})


def _write_parquet(folder: Path, ids, caps, n_shards: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    step = -(-len(caps) // n_shards)
    for s in range(n_shards):
        sl = slice(s * step, (s + 1) * step)
        pq.write_table(pa.table({"key": [str(i) for i in ids[sl]], "caption": caps[sl]}),
                       folder / f"{s:05d}.parquet", row_group_size=500)
    return folder


def _cfg(**kw):
    return {**DEFAULTS, "n_boot": 200, "workers": 1, "chunk_size": 700, **kw}


def _json(res) -> str:
    return json.dumps(res.to_dict(), sort_keys=True)


@pytest.mark.slow
def test_one_shard_seven_shards_and_a_pool_give_the_same_json(shared, tmp_path, ann,
                                                             monkeypatch):
    monkeypatch.setenv("CAPAUDIT_WORKER_MB", "0")  # a pool, however small the shards
    ids, caps = _rows(shared, 2000)
    one = _write_parquet(tmp_path / "one", ids, caps, 1)
    seven = _write_parquet(tmp_path / "seven", ids, caps, 7)
    r1, s1 = run_sharded(str(one), _cfg(), ann, tmp_path / "w1")
    r7, s7 = run_sharded(str(seven / "*.parquet"), _cfg(), ann, tmp_path / "w7")
    rp, _ = run_sharded(str(seven), _cfg(), ann, tmp_path / "wp", workers=2)
    assert len(s1) == 1 and len(s7) == 7 and {s["status"] for s in s7} == {"done"}
    assert rp.meta["workers"] == 2
    assert _json(r1) == _json(r7) == _json(rp)
    assert r7.meta["n_captions"] == len(caps)
    # and equal to the in-memory audit of the same captions (ids parsed the same way)
    from capaudit.io.imageids import parse_image_id
    mem = audit_captions([parse_image_id(i) for i in ids], caps, ann, n_boot=200, workers=1,
                         config=_cfg())
    # the coverage guard and the statuses belong to the runner, not the engine: the same ones
    from capaudit.audit.annotation_coverage import Coverage
    from capaudit.audit.result_status import assign_status
    assign_status(mem.results, Coverage(**{k: v for k, v in r7.meta["coverage"].items()
                                           if k != "line"}), _cfg())
    assert _json(mem) == _json(r7)
    assert r7.results["chair_s"].n > 0 and r7.results["recall"].value is not None


@pytest.mark.ray
@pytest.mark.slow
def test_ray_with_two_workers_gives_the_same_json(shared, tmp_path, ann):
    pytest.importorskip("ray")
    ids, caps = _rows(shared, 1200)
    seven = _write_parquet(tmp_path / "seven", ids, caps, 7)
    local, _ = run_sharded(str(seven), _cfg(), ann, tmp_path / "wl")
    ray_res, _ = run_sharded(str(seven), _cfg(), ann, tmp_path / "wr", executor="ray", workers=2)
    assert _json(local) == _json(ray_res)


def test_resume_skips_done_shards_and_redoes_a_changed_one(shared, tmp_path, ann):
    ids, caps = _rows(shared, 1400)
    folder = _write_parquet(tmp_path / "s", ids, caps, 4)
    first, _ = run_sharded(str(folder), _cfg(), ann, tmp_path / "w")
    again, summ = run_sharded(str(folder), _cfg(), ann, tmp_path / "w")
    assert [s["status"] for s in summ] == ["resumed"] * 4
    assert _json(first) == _json(again)
    # another configuration is not served from the markers
    _, summ = run_sharded(str(folder), _cfg(mode="corrected"), ann, tmp_path / "w")
    assert [s["status"] for s in summ] == ["done"] * 4
    # a shard rewritten with other content is audited again
    pq.write_table(pa.table({"key": ["1"], "caption": ["a dog on a sofa"]}), folder / "00002.parquet")
    _, summ = run_sharded(str(folder), _cfg(), ann, tmp_path / "w")
    assert [s["status"] for s in summ] == ["resumed", "resumed", "done", "resumed"]


def test_corrupt_shard_stops_the_run_unless_skipped(shared, tmp_path, ann):
    ids, caps = _rows(shared, 600)
    folder = _write_parquet(tmp_path / "s", ids, caps, 3)
    (folder / "00001.parquet").write_bytes(b"PAR1 not really a parquet file")
    with pytest.raises(InputError, match=r"00001\.parquet.*--skip-bad-shards"):
        run_sharded(str(folder), _cfg(), Annotations(), tmp_path / "w")
    res, summ = run_sharded(str(folder), _cfg(), Annotations(), tmp_path / "w", skip_bad=True)
    assert [s["status"] for s in summ] == ["resumed", "failed", "done"]  # 2 never started
    assert res.meta["n_captions"] == 400


def test_tar_parquet_and_hf_arrow_shards_read_alike(tmp_path):
    from capaudit.io.caption_shards import iter_shard_rows

    rows = [("000000139", "A man rides a horse."), ("000000285", "Two dogs on a couch."),
            ("abc", "a red kite")]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:  # img2dataset layout: KEY.txt + KEY.json
        for key, cap in rows:
            for ext, data in (("txt", cap.encode()), ("json", json.dumps({"key": key}).encode())):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    (tmp_path / "00000.tar").write_bytes(buf.getvalue())
    table = pa.table({"key": [k for k, _ in rows], "text": [c for _, c in rows]})
    pq.write_table(table, tmp_path / "00000.parquet")
    with pa.OSFile(str(tmp_path / "data-00000-of-00001.arrow"), "wb") as sink:
        with pa.ipc.new_stream(sink, table.schema) as w:  # HF datasets save_to_disk layout
            w.write_table(table)
    # 9-digit zero-padded keys are img2dataset's row numbers, no image ids: a key with a
    # leading zero stays text unless it is COCO's 12-digit padding (#36.4)
    want = [(None, "A man rides a horse."), (None, "Two dogs on a couch."), (None, "a red kite")]
    for name in ("00000.tar", "00000.parquet", "data-00000-of-00001.arrow"):
        assert list(iter_shard_rows(tmp_path / name)) == want, name


def test_vocabulary_switches_to_a_sketch_the_json_says_so(shared, tmp_path, monkeypatch):
    """Past the cap the vocabulary is a HyperLogLog sketch: within 4 standard errors
    (4 x 0.81%) of the exact count, identical for 1 and 7 shards, and the JSON says which."""
    import capaudit.metrics.diversity as div

    ids, caps = _rows(shared, 2000)
    caps = [f"{c} tok{i} w{i * 7919 % 100003}" for i, c in enumerate(caps)]  # ~4.5k distinct
    one = _write_parquet(tmp_path / "one", ids, caps, 1)
    seven = _write_parquet(tmp_path / "seven", ids, caps, 7)
    cfg = _cfg(metrics="vocab,length")
    exact, _ = run_sharded(str(seven), cfg, Annotations(), tmp_path / "we")
    assert exact.to_dict()["vocab"]["distinct"] == "exact"
    monkeypatch.setattr(div, "VOCAB_EXACT_MAX", 300)  # every shard's chunks exceed it
    r1, _ = run_sharded(str(one), cfg, Annotations(), tmp_path / "w1")
    r7, _ = run_sharded(str(seven), cfg, Annotations(), tmp_path / "w7")
    assert _json(r1) == _json(r7)
    got, want = r7.to_dict()["vocab"], exact.results["vocab"].value
    assert got["distinct"] == "hll"
    assert abs(got["value"] / want - 1) < 4 * div.HLL_REL_ERROR
    lo, hi = got["ci"]
    assert lo < got["value"] < hi and abs((hi - lo) / got["value"] - 2 * 1.96 * div.HLL_REL_ERROR) < 1e-3
    assert r7.results["length"].value == exact.results["length"].value


# -- state files are never pickles ----------------------------------------------------
class _Payload:
    """Unpickling this writes ``target``: what a swapped state file could do."""

    def __init__(self, target: Path):
        self.target = str(target)

    def __reduce__(self):
        return (exec, (f"open({self.target!r}, 'w').write('pwned')",))


def _sharded_cli(folder: Path, tmp_path: Path, capsys, *extra: str):
    from capaudit.cli.main import main
    capsys.readouterr()
    code = main(["audit", "run", "--shards", str(folder), "--work-dir", str(tmp_path / "w"),
                 "--db", str(tmp_path / "r.duckdb"), "--metrics", "vocab,length", "--n-boot",
                 "50", "--keep-work", *extra])
    return code, capsys.readouterr().err


def _swap_state(tmp_path: Path, data: bytes) -> Path:
    """Replace shard 00000's state by ``data`` and fix its marker's sha256 to match (an
    attacker who edits the work directory can edit both)."""
    import hashlib
    (state,) = (tmp_path / "w").glob("*/00000.state.npz")
    marker = state.parent / "00000.done.json"
    state.write_bytes(data)
    m = json.loads(marker.read_text())
    m["state_sha256"] = hashlib.sha256(data).hexdigest()
    marker.write_text(json.dumps(m))
    return state


def test_a_pickled_or_corrupt_state_file_is_refused_in_one_line(shared, tmp_path, capsys):
    import pickle
    ids, caps = _rows(shared, 300)
    folder = _write_parquet(tmp_path / "s", ids, caps, 2)
    code, err = _sharded_cli(folder, tmp_path, capsys)
    assert code == 0, err
    (state,) = (tmp_path / "w").glob("*/00000.state.npz")
    assert state.read_bytes()[:2] == b"PK"  # a zip of .npy arrays, not a pickle
    # the payload is live: unpickling it does write its file ...
    control, target = tmp_path / "control", tmp_path / "pwned"
    pickle.loads(pickle.dumps(_Payload(control)))
    assert control.read_text() == "pwned"
    # ... but as a state file it is refused, one line naming the file and the fix, never run
    import numpy as np
    buf = io.BytesIO()
    np.save(buf, np.array([_Payload(target)], dtype=object), allow_pickle=True)
    for data in (pickle.dumps(_Payload(target)),                  # a bare pickle
                 buf.getvalue(),                                  # a pickle inside .npy
                 state.read_bytes()[:200]):                       # a truncated state
        _swap_state(tmp_path, data)
        code, err = _sharded_cli(folder, tmp_path, capsys)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
        assert "00000.state.npz" in lines[0] and "delete the work directory" in lines[0]
        assert not target.exists()


def test_a_plugin_state_that_cannot_be_saved_safely_stops_the_run(shared, tmp_path):
    import numpy as np

    from capaudit.metrics import METRICS, Metric, register_metric
    from capaudit.metrics.base import Estimate, ratio

    class Opaque:  # not a registered dataclass: no safe way to write it
        def __init__(self, n):
            self.n = n

        def merge(self, other):
            return Opaque(self.n + other.n)

    class OpaqueCount(Metric):
        name, label, description = "opaque_count_test", "Opaque", "toy"
        direction, criterion = 1, "complexity"

        def update(self, ctx):
            return Opaque(len(ctx.records))

        def finalize(self, state, units):
            return Estimate(np.zeros((units.n, 2)), ratio(), state.n)

    register_metric(OpaqueCount)
    try:
        ids, caps = _rows(shared, 200)
        folder = _write_parquet(tmp_path / "s", ids, caps, 2)
        for skip in (False, True):  # --skip-bad-shards does not hide it
            with pytest.raises(InputError, match=r"opaque_count_test cannot be saved safely.*"
                                                 r"register_state"):
                run_sharded(str(folder), _cfg(metrics=["opaque_count_test"]), Annotations(),
                            tmp_path / "w", skip_bad=skip)
    finally:
        METRICS._entries.pop("opaque_count_test", None)
