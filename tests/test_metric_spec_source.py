"""The metric spec is the only source of what a metric needs, its order and its number
format (#21): a plugin metric that declares ``needs={"chair_gt"}`` is held to the coverage
check exactly like the built-in ``chair_s``; ``gender_word_recall`` like ``gender_error``;
a plugin's ``caption_details`` reading ``ctx.captions`` survives the empty context.

The plugin is installed as a real ``.dist-info`` with an entry point (as in
``test_metric_plugins.py``); the captions are real captioner output on val2014.
"""

from __future__ import annotations

import json

import pytest

from capaudit.cli.main import main
from plugin_site import installed_plugin

PLUGIN = '''
"""Plugin: CHAIR_s computed again by a third party, plus a per-caption column of text."""
import numpy as np
import pyarrow as pa
from capaudit.metrics.base import Estimate, Metric, ratio
from capaudit.metrics.state import UnitSums


class ChairAgain(Metric):
    name, label = "chair_again", "CHAIR again"
    description = "captions with a hallucinated object (x100), as a plugin"
    direction, criterion = -1, "alignment"
    needs = frozenset({"chair_gt"})

    def update(self, ctx):
        h = ctx.hallucinated
        flag = np.bincount(ctx.mention_caption[h], minlength=len(ctx.records)) > 0
        return UnitSums.of(ctx, flag.astype(np.float64), None, mask=ctx.has_image)

    def finalize(self, state, units):
        stats = state.dense(units)
        return Estimate(stats, ratio(), int(stats[:, 1].sum()))



class CaptionChars(Metric):
    name, label = "caption_chars", "Chars"
    description = "characters per caption, read from the caption texts"
    direction, criterion = 0, "complexity"
    details = {"n_chars": pa.int64()}

    def update(self, ctx):
        chars = np.array([len(c) for c in ctx.captions], np.float64)
        return UnitSums.of(ctx, chars, None)

    def finalize(self, state, units):
        stats = state.dense(units)
        return Estimate(stats, ratio(1.0), int(stats[:, 1].sum()))

    def caption_details(self, ctx):
        return {"n_chars": pa.array([len(c) for c in ctx.captions], pa.int64())}
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """Install the plugin (module + dist-info with entry points) for this test only."""
    from capaudit.metrics import METRICS

    with installed_plugin(tmp_path / "site", monkeypatch, METRICS, "capaudit_chair_plugin",
                          PLUGIN, "metrics",
                          {"chair_again": "capaudit_chair_plugin:ChairAgain",
                           "caption_chars": "capaudit_chair_plugin:CaptionChars"}) as site:
        yield site


def _thirty_percent(shared, path):
    """30 real nic captions of 30 gender-labelled val2014 images, then 70 captions of ids
    that no COCO annotation has (above every COCO id): 30% of the images are annotated."""
    rows = [json.loads(line) for _, line in
            zip(range(30), shared("data", "captioners", "nic_val2014_gender.jsonl").open())]
    rows += [{"image_id": 900_000 + i, "caption": "a man riding a horse on a beach ."}
             for i in range(70)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(args, capsys):
    capsys.readouterr()
    code = main(args)
    cap = capsys.readouterr()
    return code, cap.out, cap.err.strip()


def test_plugin_needing_chair_gt_stops_like_chair_s(plugin, shared, tmp_path, capsys):
    caps = _thirty_percent(shared, tmp_path / "part.jsonl")
    gt = str(shared("data", "coco2014", "chair_objects_trainval2014.jsonl"))
    errors = []
    for metric in ("chair_s", "chair_again"):
        code, out, err = _run(["audit", "run", str(caps), "--chair-gt", gt, "--metrics", metric,
                               "--db", str(tmp_path / f"{metric}.duckdb")], capsys)
        assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, (out, err)
        errors.append(err)
    assert "only 30 of the 100 images of 'part' (30.0%, below 50%) have chair-gt" in errors[0]
    assert errors[1] == errors[0]
    # --allow-partial: both on the 30 covered images only, the same value (the ids declared
    # COCO's: --allow-partial never joins unassigned ids, #46)
    got = {}
    for metric in ("chair_s", "chair_again"):
        js, db = tmp_path / f"{metric}.json", str(tmp_path / f"p_{metric}.duckdb")
        assert main(["sets", "add", "part", str(caps), "--namespace", "coco2014", "--db", db]) == 0
        code, out, err = _run(["audit", "run", "part", "--chair-gt", gt, "--metrics", metric,
                               "--allow-partial", "--json", str(js), "--n-boot", "20",
                               "--db", db], capsys)
        assert code == 0, err
        got[metric] = json.loads(js.read_text())["sets"]["part"][metric]
    assert got["chair_again"]["n"] == got["chair_s"]["n"] == 30
    assert got["chair_again"]["value"] == pytest.approx(got["chair_s"]["value"])


def test_gender_word_recall_stops_like_gender_error(shared, tmp_path, capsys):
    caps = _thirty_percent(shared, tmp_path / "part.jsonl")
    demo = str(shared("data", "coco2014", "demographics_val2014.jsonl"))
    errors = []
    for metric in ("gender_error", "gender_word_recall"):
        code, out, err = _run(["audit", "run", str(caps), "--demographics", demo, "--metrics",
                               metric, "--db", str(tmp_path / f"{metric}.duckdb")], capsys)
        assert code == 2 and len(err.splitlines()) == 1, (out, err)
        errors.append(err)
    assert "only 30 of the 100 images of 'part' (30.0%, below 50%) have demographics" in errors[0]
    assert errors[1] == errors[0]


def test_plugin_caption_details_on_the_empty_context(plugin, shared, tmp_path, capsys):
    """The engine builds the details schema from a context without captions: a plugin that
    reads ``ctx.captions`` sees an empty list there, not ``None``."""
    caps = _thirty_percent(shared, tmp_path / "part.jsonl")
    db, js = str(tmp_path / "d.duckdb"), tmp_path / "d.json"
    code, out, err = _run(["audit", "run", str(caps), "--metrics", "caption_chars",
                           "--n-boot", "20", "--json", str(js), "--db", db], capsys)
    assert code == 0, err
    texts = [json.loads(line)["caption"] for line in caps.open()]
    got = json.loads(js.read_text())["sets"]["part"]["caption_chars"]
    assert got["value"] == pytest.approx(sum(map(len, texts)) / 100) and got["n"] == 100
    from capaudit.store import Store
    with Store(db) as st:
        rows = st.sql("SELECT n_chars FROM caption_details ORDER BY row_idx")
    assert [r[0] for r in rows] == [len(t) for t in texts]


def test_order_and_number_format_come_from_the_spec(plugin):
    from capaudit.metrics.spec import number_format, ordered

    assert ordered(["chair_again", "lic", "chair_s_corrected", "vocab", "unknown", "lic_m",
                    "chair_s", "length"]) == ["vocab", "length", "chair_s", "chair_s_corrected",
                                              "lic_m", "lic", "chair_again", "unknown"]
    assert number_format("vocab") == "{:,.0f}" and number_format("chair_again") == "{:.2f}"


def test_state_types_on_the_spec_are_registered_with_the_metric():
    """A metric names its state dataclasses; registering it lets shard files hold them."""
    from dataclasses import dataclass

    import numpy as np

    from capaudit.audit.shards.state_io import STATE_TYPES, dumps_state, loads_state
    from capaudit.metrics import METRICS, Metric, register_metric

    @dataclass
    class Tally:
        counts: np.ndarray

    class Tallied(Metric):
        name, criterion, state_types = "tallied_test", "complexity", (Tally,)

    key = f"{Tally.__module__}.{Tally.__qualname__}"
    assert key not in STATE_TYPES
    register_metric(Tallied)
    try:
        back = loads_state(dumps_state({"acc": Tally(np.arange(3))}))
        assert isinstance(back["acc"], Tally) and back["acc"].counts.tolist() == [0, 1, 2]
    finally:
        METRICS._entries.pop("tallied_test", None)
        STATE_TYPES.pop(key, None)
