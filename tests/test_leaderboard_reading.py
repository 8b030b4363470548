"""What a reader of the leaderboard is shown (#34.5): NSFW hits with the entries behind them,
LDNOOBW phrases matched in context, ``--nsfw-lexicon``, ties where the rank intervals
overlap, the criteria a profile leaves out, intervals (or too-few) on the intersection
cells, one gap-bar scale per page, progress lines on stderr. On the published captioners'
COCO captions where the case came from them."""

from __future__ import annotations

import json
import re
import shutil

import numpy as np
import pytest

from capaudit.cli.main import main
from capaudit.leaderboard.board import SetEval, build_leaderboard
from capaudit.leaderboard.profiles import load_catalogue
from capaudit.leaderboard.ranking import tied_ranks
from capaudit.metrics.features.nsfw import NsfwMatcher, get_matcher
from lotus_boards import board_sets

CATS = ("chair_objects_trainval2014.jsonl", "instance_categories_val2014.jsonl",
        "demographics_val2014.jsonl")
MODELS = ("nic", "sat", "att2in", "updn", "oscar", "nic_plus")
GIRL_ON = re.compile(r"\bgirl on\b", re.I)    # the phrase, found without the matcher


def _captions(path) -> list[str]:
    return [json.loads(line)["caption"] for line in path.open()]


# ---- NSFW phrases in context -------------------------------------------------------------
def test_phrases_need_their_context_hand_made():
    m = get_matcher()
    assert m.scan("a man and a girl on the beach") == ([], ["girl on"])
    assert m.scan("a girl on girl scene") == (["girl on"], [])           # its marked context
    assert m.scan("a horse tied up to a post") == ([], ["tied up"])
    assert m.scan("a nude woman tied up") == (["nude", "tied up"], [])   # an unmarked entry
    assert m.scan("a big black dog")[0] == [] and m.hits("a nude statue") == ["nude"]
    plain = NsfwMatcher(["girl on", "tied up"])                          # no marks: LOTUS's way
    assert plain.scan("a girl on the beach") == (["girl on"], [])


def test_captioner_hits_were_all_innocent_phrases(shared):
    """Every NSFW hit in the six captioners' captions is "girl on" in a literal reading (read
    in benchmarks/nsfw_context.py): none is a hit now, each is set aside and counted."""
    m = get_matcher()
    for model in MODELS:
        caps = _captions(shared("data", "captioners", f"{model}_val2014_gender.jsonl"))
        scans = [m.scan(c) for c in caps]
        assert sum(1 for h, _ in scans if h) == 0, model
        assert sum(len(a) for _, a in scans) == sum(len(GIRL_ON.findall(c)) for c in caps)


def test_coco_reference_keeps_explicit_words_and_sets_aside_tied_up(shared):
    data = json.loads(shared("data", "coco2014", "captions_val2014_subset.json").read_text())
    caps = [a["caption"] for a in data["annotations"]]
    tied = [c for c in caps if re.search(r"\btied up\b", c, re.I)]
    assert len(tied) == 3
    m = get_matcher()
    assert all(m.scan(c) == ([], ["tied up"]) for c in tied)
    nude = [c for c in caps if re.search(r"\bnude\b", c, re.I)]
    assert nude and all("nude" in m.hits(c) for c in nude)


def test_packaged_lexicon_is_ldnoobw_with_marks(shared):
    src = [e.strip() for e in shared("lexicons", "ldnoobw_en.txt").read_text().splitlines()]
    plain = NsfwMatcher(src)
    assert get_matcher().phrases == plain.phrases and len(plain.phrases) == 403
    assert all(len(p) > 1 for p in get_matcher().context)   # only phrases are marked


# ---- the leaderboard on the captioners ----------------------------------------------------
def _board(shared, tmp_path, capsys, sets, name, *extra):
    coco = shared("data", "coco2014")
    out = tmp_path / f"{name}.json"
    capsys.readouterr()
    code = main(["audit", "leaderboard", *map(str, sets), "--metrics", "chair_s,nsfw_words",
                 "--chair-gt", str(coco / CATS[0]), "--instances", str(coco / CATS[1]),
                 "--demographics", str(coco / CATS[2]), "--n-boot", "50",
                 "--json", str(out), "--markdown", str(tmp_path / f"{name}.md"),
                 "--db", str(tmp_path / f"{name}.duckdb"), *extra])
    text = capsys.readouterr()
    assert code == 0, text.out + text.err
    return json.loads(out.read_text())["leaderboard"], (tmp_path / f"{name}.md").read_text(), text


def _row(md: str, head: str) -> list[str]:
    line = next(r for r in md.splitlines() if r.startswith(f"| {head} "))
    return [c.strip() for c in line.strip("|").split(" | ")]


@pytest.mark.slow
def test_nsfw_on_the_board_shows_its_entries_and_the_lexicon_option(shared, tmp_path, capsys):
    files = [shared("data", "captioners", f"{m}_val2014_gender.jsonl") for m in ("nic", "oscar")]
    n_girl = [sum(len(GIRL_ON.findall(c)) for c in _captions(f)) for f in files]
    assert n_girl == [2, 3]
    lb, md, _ = _board(shared, tmp_path, capsys, files, "ctx", "--profile", "accuracy-focused")
    j = next(j for j, c in enumerate(lb["columns"]) if c["name"] == "nsfw_words")
    assert [lb["values"][i][j] for i in range(2)] == [0.0, 0.0]
    row = _row(md, "nsfw_words ↓")
    assert "set aside, no context: girl on ×2" in row[2] and "girl on ×3" in row[3]
    # criteria the profile weights but the board has no metric of: named, with why
    left = lb["profiles"]["accuracy-focused"]["left_out"]
    assert list(left) == ["alignment"] and "clipscore" in left["alignment"]
    assert "accuracy-focused: **alignment** (clipscore" in md
    # the plain LDNOOBW list: every "girl on" counts again, as LOTUS counts it
    lb, md, _ = _board(shared, tmp_path, capsys, files, "plain", "--profile", "accuracy-focused",
                       "--nsfw-lexicon", str(shared("lexicons", "ldnoobw_en.txt")))
    n = len(_captions(files[0]))
    assert lb["values"][0][j] == pytest.approx(100 * 2 / n)
    assert "hits: girl on ×2" in _row(md, "nsfw_words ↓")[2]


def test_a_lexicon_that_holds_nothing_is_one_line(shared, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("# only a comment\n\n")
    nic = shared("data", "captioners", "nic_val2014_gender.jsonl")
    capsys.readouterr()
    code = main(["audit", "run", str(nic), "--metrics", "nsfw_words", "--nsfw-lexicon",
                 str(empty), "--db", str(tmp_path / "x.duckdb")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "holds no entry" in err[0] and "empty.txt" in err[0]


# ---- ties ------------------------------------------------------------------------------------
def test_overlapping_rank_intervals_are_ties():
    assert tied_ranks([1, 2, 3, 4], [[1, 2], [1, 3], [3, 4], [5, 5]]) == [1, 1, 1, 4]
    assert tied_ranks([2, 1, 3], [[2, 2], [1, 1], [3, 3]]) == [2, 1, 3]
    sets, ann = board_sets()
    twin = SetEval("A2", sets[0].estimates, sets[0].skipped, sets[0].images, sets[0].n_units)
    lb = build_leaderboard(sets + [twin], load_catalogue(), ann, n_boot=200, seed=0,
                           profiles=["overall"])
    r = lb.profiles["overall"]
    a, a2 = 0, 3
    assert r["tied_rank"][a] == r["tied_rank"][a2]          # the same captions: never ordered
    tied = [n for n in lb.notes if n.startswith("profile overall: ") and "tied at rank" in n]
    assert len(tied) == 1 and {"A", "A2"} <= set(tied[0][17:tied[0].index(" tied")].split(", "))


# ---- intersections --------------------------------------------------------------------------
@pytest.mark.slow
def test_small_intersection_cells_carry_an_interval_or_too_few(shared, tmp_path, capsys):
    demo = {}
    for line in shared("data", "coco2014", CATS[2]).open():
        d = json.loads(line)
        demo[d["image_id"]] = (d["gender"], d["skin_tone"])
    paths = []
    for m in ("nic", "oscar"):
        lines = list(shared("data", "captioners", f"{m}_val2014_gender.jsonl").open())[:1000]
        paths.append(tmp_path / f"{m}.jsonl")
        paths[-1].write_text("".join(lines))
    ids = [json.loads(x)["image_id"] for x in paths[0].open()]
    fem_dark = sum(1 for i in set(ids) if demo.get(i) == ("female", "dark"))
    male_dark = sum(1 for i in set(ids) if demo.get(i) == ("male", "dark"))
    assert fem_dark < 30 <= male_dark
    lb, md, _ = _board(shared, tmp_path, capsys, paths, "cells", "--intersections",
                       "--profile", "overall")
    cells = lb["groups"]["nic"]["intersections"]["chair_s"]
    assert cells["female, dark"]["images"] == fem_dark
    assert cells["female, dark"]["status"] == "too-few"
    lo, hi = cells["male, dark"]["ci"]
    assert cells["male, dark"]["status"] == "ok" and lo <= cells["male, dark"]["value"] <= hi
    table = md[md.index("nic: gender × skin tone"):]         # nic's cells table
    row = _row(table, "chair_s")     # male light, male dark, female light, female dark
    assert row[4].endswith(f"n={fem_dark} too-few") and "[" in row[2]


# ---- progress ---------------------------------------------------------------------------------
def test_progress_lines_on_stderr_when_not_a_terminal(shared, tmp_path, capsys, monkeypatch):
    import capaudit.cli.audit_leaderboard as cli

    monkeypatch.setattr(cli, "QUIET_S", 0.0)
    paths = []
    for m in ("nic", "sat"):
        lines = list(shared("data", "captioners", f"{m}_val2014_gender.jsonl").open())[:300]
        paths.append(tmp_path / f"{m}.jsonl")
        paths[-1].write_text("".join(lines))
    _, _, text = _board(shared, tmp_path, capsys, paths, "progress", "--profile", "overall")
    lines = text.err.splitlines()
    assert "capaudit: [" in lines[0]
    assert any(line.endswith("nic: 300 captions evaluated") for line in lines)
    assert any("ranking: 50 resamples" in line for line in lines)
    assert "captions evaluated" not in text.out


# ---- the page -------------------------------------------------------------------------------
@pytest.mark.browser
@pytest.mark.slow
def test_page_ties_left_out_and_one_gap_scale(tmp_path):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no chromium binary (Debian: apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    from capaudit.leaderboard.page import write_page

    sets, ann = board_sets()
    twin = SetEval("A2", sets[0].estimates, sets[0].skipped, sets[0].images, sets[0].n_units)
    lb = build_leaderboard(sets + [twin], load_catalogue(), ann, n_boot=100, seed=0)
    index = write_page(tmp_path / "board", {"leaderboard": lb.to_dict(), "worst": {}})
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(index.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        page.select_option("#profile", "accuracy-focused")
        ranks = page.eval_on_selector_all("#board tbody tr", "rs => rs.map(r => "
                                          "[r.dataset.set, r.cells[0].textContent])")
        left = page.inner_text("#leftout")
        bars = page.eval_on_selector_all(
            "#gaps svg rect", "rs => rs.map(r => +r.getAttribute('width'))")
        browser.close()
    shown = dict(ranks)
    assert shown["A"] == shown["A2"] and shown["A"].startswith("=")
    assert "alignment" in left and "clipscore" in left
    gaps = [abs(lb.groups[s][c.name]["signed_gap"]) for c in lb.columns if c.by
            for s in lb.sets]
    ratios = [w / g for w, g in zip(bars, gaps) if g > 1e-9]
    assert len(ratios) > 3 and np.ptp(ratios) < 1e-6 * max(ratios)   # one scale for every bar
