"""``filter run --filter.KEY VALUE``: any filter's option (a plugin's too) from the command line,
typed from the filter's declared default, over the flag and the YAML ``filter:`` section."""

from __future__ import annotations

import json

import pytest

from capaudit.cli.main import main
from plugin_site import installed_plugin

PLUGIN = '''
"""Toy plugin filter: drops a sentence whose share of ``words`` exceeds ``threshold``."""
import re

from capaudit.filters.base import CaptionResult, Decision, Filter, SentenceScore


class ShareFilter(Filter):
    name = "word-share"
    defaults = {"threshold": 0.5, "words": "dog"}

    def score(self, doc):
        words = set(self.options["words"].split(","))
        out = []
        for i, s in enumerate(doc.sentences):
            toks = re.findall(r"[a-z]+", s.lower())
            out.append(SentenceScore(i, sum(t in words for t in toks) / max(len(toks), 1)))
        return out

    def decide(self, doc, scores):
        return CaptionResult(doc, [Decision(s.sentence_idx, "drop" if s.score >
                                            self.options["threshold"] else "keep",
                                            reason="share", score=s.score) for s in scores])
'''

# share of "dog" per sentence: c1 0.5 | 0.0, c2 0.667, c3 0.0, c4 0.125
# share of "cat" per sentence: c1 0.0 | 0.333, c2 0.333, c3 0.2, c4 0.125
CAPTIONS = [(1, "a dog. a red cat."), (2, "dog dog cat."), (3, "a cat on a mat."),
            (4, "the dog and the cat and a bird.")]


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """Install the toy filter as another package would: a module plus a dist-info whose
    entry point is in ``capaudit.filters``; the registry is restored afterwards."""
    from capaudit.filters.base import FILTERS

    with installed_plugin(tmp_path / "site", monkeypatch, FILTERS, "capaudit_toy_filter", PLUGIN,
                          "filters", {"word-share": "capaudit_toy_filter:ShareFilter"}):
        yield


@pytest.fixture
def db(tmp_path):
    src = tmp_path / "caps.jsonl"
    src.write_text("".join(json.dumps({"image_id": i, "caption": c}) + "\n" for i, c in CAPTIONS))
    path = str(tmp_path / "t.duckdb")
    assert main(["sets", "add", "caps", str(src), "--db", path]) == 0
    return path


def _captions(db, name):
    from capaudit.store import Store

    with Store(db) as st:
        return st.captions(name, columns="caption").column("caption").to_pylist()


def _config(db, name):
    from capaudit.filters.runner import filter_run_info
    from capaudit.store import Store

    with Store(db) as st:
        return filter_run_info(st, name)["config"]


def _run(db, *extra):
    return main(["filter", "run", "caps", "--filter", "word-share", "--out", "o", "--replace",
                 "--db", db, *extra])


def test_plugin_option_set_from_the_command_line(plugin, db):
    assert _run(db) == 0  # defaults: threshold 0.5, words dog; c2 (0.667) leaves
    assert _captions(db, "o") == ["a dog. a red cat.", "a cat on a mat.",
                                  "the dog and the cat and a bird."]
    assert _run(db, "--filter.threshold", "0.3") == 0  # c1's "a dog." (0.5) goes too
    assert _captions(db, "o") == ["a red cat.", "a cat on a mat.",
                                  "the dog and the cat and a bird."]
    assert _config(db, "o")["threshold"] == 0.3  # typed from the default (a float)
    assert _run(db, "--filter.threshold=0.1", "--filter.words", "cat") == 0
    assert _captions(db, "o") == ["a dog."]


def test_override_beats_the_yaml_section(plugin, db, tmp_path):
    cfg = tmp_path / "f.yaml"
    cfg.write_text("filter:\n  threshold: 0.1\n  words: cat\n")
    assert _run(db, "--config", str(cfg)) == 0
    assert _captions(db, "o") == ["a dog."]
    assert _run(db, "--config", str(cfg), "--filter.threshold", "0.25") == 0  # words: YAML's
    assert _captions(db, "o") == ["a dog.", "a cat on a mat.", "the dog and the cat and a bird."]
    assert _config(db, "o") == {"filter": "word-share", "version": "1", "threshold": 0.25,
                                "words": "cat"}


def test_unknown_key_is_one_line_naming_the_options(plugin, db, capsys):
    assert _run(db, "--filter.treshold", "0.3") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "filter 'word-share' has no option 'treshold'" in err
    assert "did you mean --filter.threshold?" in err
    assert "--filter.threshold, --filter.words" in err


def test_bad_value_names_key_type_and_value(plugin, db, capsys):
    assert _run(db, "--filter.threshold", "high") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "--filter.threshold expects a number, got 'high'" in err


def test_a_mistyped_flag_is_still_refused(plugin, db, capsys):
    assert _run(db, "--treshold", "0.3") == 2
    assert "No such option" in capsys.readouterr().err
    assert _run(db, "--filter.threshold", "0.3", "stray") == 2
    assert "unexpected extra argument" in capsys.readouterr().err


def test_help_lists_the_builtin_flags_and_the_override_form(capsys):
    assert main(["filter", "run", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--action", "--evidence", "--chair-gt", "--min-score", "--no-negation",
                 "--non-visual", "--when", "--demographics", "--by", "--tolerance",
                 "--min-images", "--judge-backend", "--reviser-model", "--prompt-dir",
                 "--concurrency", "--no-revise", "--score-evidence", "--seed", "--config",
                 "--filter.KEY"):
        assert flag in out, flag


def test_builtin_option_both_ways_resolves_by_precedence(db, tmp_path):
    """hallucination on a detector file: action from the YAML < --action < --filter.action;
    --filter.non-visual (dashes) and --filter.min_score (typed float, default None)."""
    det = tmp_path / "det.jsonl"
    det.write_text("".join(json.dumps({"image_id": i, "label": "cat", "score": 0.9}) + "\n"
                           for i in range(1, 5)))
    cfg = tmp_path / "f.yaml"
    cfg.write_text("filter:\n  action: flag\n")
    base = ["filter", "run", "caps", "--filter", "hallucination", "--out", "h", "--replace",
            "--db", db, "--evidence", "detector", "--detections", str(det), "--config", str(cfg),
            "--filter.non-visual", "judge", "--object-mode", "reference"]
    assert main(base) == 0
    assert _config(db, "h")["action"] == "flag"
    assert len(_captions(db, "h")) == 4  # flagged captions are kept
    assert main([*base, "--action", "drop-caption"]) == 0
    assert _config(db, "h")["action"] == "drop-caption"
    assert main([*base, "--action", "drop-caption", "--filter.action", "drop-sentence",
                 "--filter.min_score", "0.8"]) == 0
    conf = _config(db, "h")
    assert conf["action"] == "drop-sentence" and conf["min_score"] == 0.8
    assert conf["non_visual"] == "judge"
    # only cats are detected (0.9 >= 0.8): sentences naming a dog or a bird go
    assert _captions(db, "h") == ["a red cat.", "a cat on a mat."]


def test_values_are_typed_from_the_default():
    from capaudit.errors import InputError
    from capaudit.filters.options import split_overrides, typed_overrides

    rest, pairs = split_overrides(["nic", "--filter.a-b=1", "--filter.on", "--out", "x",
                                   "--filter.neg", "-0.5", "--", "--filter.z", "1"])
    assert rest == ["nic", "--out", "x", "--", "--filter.z", "1"]
    assert pairs == [("a-b", "1"), ("on", "true"), ("neg", "-0.5")]
    defaults = {"a_b": 0, "on": False, "neg": 1.0, "path": None, "names": ["x"], "pair": (1, 2)}
    got = typed_overrides("f", defaults, [("a-b", "7"), ("on", "yes"), ("neg", "-0.5"),
                                          ("path", "null"), ("names", "a, b,"), ("pair", "3,4")])
    assert got == {"a_b": 7, "on": True, "neg": -0.5, "path": None, "names": ["a", "b"],
                   "pair": (3, 4)}
    assert typed_overrides("f", defaults, {"path": "none.txt"}) == {"path": "none.txt"}
    for key, raw, what in (("a_b", "1.5", "an integer"), ("on", "maybe", "true or false"),
                           ("pair", "3,x", "a comma list of an integer")):
        with pytest.raises(InputError, match=f"--filter.{key} expects {what}, got '{raw}'"):
            typed_overrides("f", defaults, {key: raw})
