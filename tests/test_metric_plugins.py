"""A third-party metric installed as a package with a ``capaudit.metrics`` entry point
appears in ``audit run``, ``audit compare`` (table and report), ``audit disparity`` and
``audit metrics`` without any edit to capaudit; the registry refuses duplicate names and
objects that are not metrics.

The "installed package" is a real ``.dist-info`` folder with ``entry_points.txt`` on
``sys.path`` (what pip writes), found by ``importlib.metadata`` like any installed plugin.
"""

from __future__ import annotations

import json
import re

import pytest

from capaudit.cli.main import main
from plugin_site import installed_plugin

PLUGIN = '''
"""Toy plugin: share of captions longer than 8 tokens."""
import pyarrow as pa
from capaudit.metrics.base import Estimate, Metric, ratio
from capaudit.metrics.state import UnitSums


class LongShare(Metric):
    name, label = "long_share", "Long %"
    description = "captions longer than 8 tokens (x100)"
    direction, criterion = -1, "complexity"
    not_by = {"skin_tone": "toy: not meaningful by skin tone"}
    details = {"is_long": pa.bool_()}

    def update(self, ctx):
        return UnitSums.of(ctx, ctx.records.n_tokens > 8, None)

    def finalize(self, state, units):
        stats = state.dense(units)
        return Estimate(stats, ratio(), int(stats[:, 1].sum()))

    def caption_details(self, ctx):
        return {"is_long": pa.array(ctx.records.n_tokens > 8)}


class NotAMetric:
    name = "not_a_metric"
'''

# 6, 10, 6, 6 and 4 tokens: one caption of five is long
CAPTIONS = [(1, "A man riding a horse."), (1, "A woman on a horse next to a dog."),
            (2, "A cat on a sofa."), (3, "Two dogs and a frisbee."), (4, "A red bus.")]


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """Install the toy plugin (module + dist-info with entry points) for this test only."""
    from capaudit.metrics import METRICS

    with installed_plugin(tmp_path / "site", monkeypatch, METRICS, "capaudit_toy_plugin", PLUGIN,
                          "metrics", {"long_share": "capaudit_toy_plugin:LongShare"}) as site:
        yield site


def _write(path, rows):
    path.write_text("".join(json.dumps({"image_id": i, "caption": c}) + "\n" for i, c in rows))
    return path


def test_plugin_metric_in_run_compare_metrics(plugin, tmp_path, capsys):
    a = _write(tmp_path / "a.jsonl", CAPTIONS)
    b = _write(tmp_path / "b.jsonl", [(i, c.replace(".", " in a big green field today."))
                                      for i, c in CAPTIONS])
    db = str(tmp_path / "p.duckdb")
    out = tmp_path / "r.json"
    assert main(["audit", "run", str(a), "--n-boot", "50", "--json", str(out), "--db", db]) == 0
    got = json.loads(out.read_text())["sets"]["a"]["long_share"]
    assert got["value"] == pytest.approx(20.0) and got["n"] == 5
    assert "Long %" in capsys.readouterr().out
    # its per-caption column is in caption_details
    from capaudit.store import Store
    with Store(db) as st:
        assert st.sql("SELECT row_idx, is_long FROM caption_details ORDER BY row_idx") == \
            [(0, False), (1, True), (2, False), (3, False), (4, False)]

    rep = tmp_path / "rep"
    # four images per set: under the default --min-n (30), shown with n, never ranked
    assert main(["audit", "compare", str(a), str(b), "--n-boot", "50", "--report", str(rep),
                 "--db", db]) == 0
    md = (rep / "report.md").read_text()
    assert "**20.00" not in md and re.search(r"\| 20\.00 \[[\d.]+, [\d.]+\] n=4 \(too-few\) \|", md)
    assert "Long % not ranked: a rests on 4 images, b rests on 4 images (under --min-n 30)" in md
    assert main(["audit", "compare", str(a), str(b), "--n-boot", "50", "--report", str(rep),
                 "--min-n", "4", "--db", db]) == 0
    md = (rep / "report.md").read_text()
    assert "Long % ↓" in md and "captions longer than 8 tokens" in md
    # b: every caption gets 6 more tokens -> all five are long: 100.00 in every resample, an
    # interval of no width, which "overlaps" nothing and so ranks nothing (#21)
    assert "**20.00" not in md and "_100.00" not in md
    assert "Long % not ranked: b has a zero-width interval" in md

    capsys.readouterr()
    spec = tmp_path / "m.json"
    assert main(["audit", "metrics", "--json", str(spec)]) == 0
    rows = {r["name"]: r for r in json.loads(spec.read_text())["metrics"]}
    assert rows["long_share"]["criterion"] == "complexity" and rows["long_share"]["direction"] == -1
    assert "long_share" in capsys.readouterr().out


def test_plugin_metric_in_disparity(plugin, tmp_path):
    from capaudit.audit.disparity import audit_disparity
    from capaudit.io.annotation_files import Annotations

    rows = CAPTIONS * 4
    ann = Annotations(gender={1: "male", 2: "female", 3: "female", 4: "male"},
                      skin_tone={1: "light", 2: "dark", 3: "dark", 4: "light"})
    ids, caps = [i for i, _ in rows], [c for _, c in rows]
    d = audit_disparity(ids, caps, ann, by="gender", metrics=["long_share"], n_boot=50, workers=1)
    r = d.results["long_share"]
    # male images 1 and 4: 1 long of 3 captions; female images 2 and 3: none of 2
    assert r["male"].value == pytest.approx(100 / 3) and r["female"].value == 0
    assert r["male-female"].value == pytest.approx(100 / 3)
    d = audit_disparity(ids, caps, ann, by="skin_tone", metrics=["long_share"], n_boot=50,
                        workers=1)
    assert d.results["long_share"]["light-dark"].skipped == "toy: not meaningful by skin tone"


def test_registry_refuses_duplicates_and_non_metrics(plugin):
    from capaudit.metrics import METRICS, Metric, register_metric
    from capaudit.core.registry import RegistryError

    class Vocab2(Metric):
        name, criterion = "vocab", "complexity"
    with pytest.raises(RegistryError, match="'vocab' is already registered"):
        register_metric(Vocab2)
    with pytest.raises(RegistryError, match="is not a capaudit.metrics.base.Metric"):
        METRICS.register("not_a_metric", "capaudit_toy_plugin:NotAMetric")
        METRICS.get("not_a_metric")

    class BadCriterion(Metric):
        name, criterion = "bad_criterion", "speed"
    with pytest.raises(RegistryError, match="criterion 'speed'"):
        register_metric(BadCriterion)
    assert "bad_criterion" not in METRICS


def test_plugin_import_error_is_one_line(tmp_path, monkeypatch, plugin):
    from capaudit.metrics import METRICS
    from capaudit.core.registry import RegistryError, rescan_plugins

    (plugin / "capaudit_toy_plugin-0.1.dist-info" / "entry_points.txt").write_text(
        "[capaudit.metrics]\nlong_share = capaudit_toy_plugin:LongShare\n"
        "broken = capaudit_missing_module:Thing\n")
    METRICS._plugins_loaded = False
    rescan_plugins()
    with pytest.raises(RegistryError, match="cannot import the plugin capaudit_missing_module"):
        METRICS.get("broken")


def test_metric_that_cannot_stream_is_one_line_exit_2(tmp_path, capsys):
    a = _write(tmp_path / "a.jsonl", CAPTIONS)
    code = main(["audit", "run", str(a), "--metrics", "vocab,lic", "--db", str(tmp_path / "x.duckdb")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1
    assert "metric 'lic' is not computed by the caption audit" in err and "--lic" in err
