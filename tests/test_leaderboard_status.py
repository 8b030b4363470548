"""Every leaderboard value carries its status (#21), as the audit's do: ``too-few`` under
``--min-n`` images (shown, its column never ranked), ``partial`` with ``--allow-partial``;
the coverage guard runs before any metric. On real captioner output for COCO val2014."""

from __future__ import annotations

import contextlib
import json

import pytest

from capaudit.cli.main import main

CATS = ("chair_objects_trainval2014.jsonl", "instance_categories_val2014.jsonl",
        "demographics_val2014.jsonl")


def chromium():
    """Chromium's path and playwright's sync API, or skip (before any work) naming the fix."""
    import shutil

    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no chromium binary (Debian: apt-get install -y chromium)")
    return exe, pytest.importorskip("playwright.sync_api", reason="pip install playwright")


@contextlib.contextmanager
def open_page(browser, index, **page_options):
    """The leaderboard page ``index`` loaded in a headless Chromium (``browser``: what
    :func:`chromium` gave), its script done."""
    exe, sync_api = browser
    with sync_api.sync_playwright() as p:
        chrome = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        page = chrome.new_page(**page_options)
        page.goto(index.as_uri())
        page.wait_for_selector("body[data-ready='1']")
        yield page
        chrome.close()


def _head(shared, tmp_path, model: str, n: int) -> tuple:
    src = shared("data", "captioners", f"{model}_val2014_gender.jsonl")
    rows = [json.loads(line) for _, line in zip(range(n), src.open())]
    path = tmp_path / f"{model}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


def _board(shared, tmp_path, sets, name, capsys, *extra, demographics=True):
    coco = shared("data", "coco2014")
    out = tmp_path / f"{name}.json"
    capsys.readouterr()
    code = main(["audit", "leaderboard", *map(str, sets), "--metrics", "recall,chair_s",
                 "--chair-gt", str(coco / CATS[0]), "--instances", str(coco / CATS[1]),
                 *(["--demographics", str(coco / CATS[2])] if demographics else []),
                 "--profile", "overall", "--n-boot", "20", "--json", str(out),
                 "--markdown", str(tmp_path / f"{name}.md"),
                 "--db", str(tmp_path / f"{name}.duckdb"), *extra])
    text = capsys.readouterr()
    return code, (json.loads(out.read_text())["leaderboard"] if code == 0 else None), text


def _women(shared, rows) -> int:
    ids = {r["image_id"] for r in rows}
    return sum(1 for line in shared("data", "coco2014", CATS[2]).open()
               if (d := json.loads(line))["image_id"] in ids and d["gender"] == "female")


def test_gaps_on_too_few_images_are_shown_too_few_and_never_ranked(shared, tmp_path, capsys):
    (nic, nic_rows), (oscar, _) = (_head(shared, tmp_path, m, 400) for m in ("nic", "oscar"))
    women = _women(shared, nic_rows)          # 115 of the 400 images: the smaller group
    assert women < 200 < 400
    code, lb, text = _board(shared, tmp_path, [nic, oscar], "few", capsys, "--min-n", "200",
                            "--html", str(tmp_path / "page"))
    assert code == 0, text.out
    j = next(j for j, c in enumerate(lb["columns"]) if c["name"] == "gap:recall:gender")
    k = next(j for j, c in enumerate(lb["columns"]) if c["name"] == "recall")
    assert lb["n"][0][j] == women and lb["status"][0][j] == "too-few"
    assert lb["status_notes"][0][j] == f"too few: {women:,} images (under --min-n 200)"
    assert lb["status"][0][k] == "ok" and lb["n"][0][k] == 400
    assert lb["columns"][j]["averaged"] is False and lb["columns"][k]["averaged"] is True
    assert any(n.startswith("dropped from the average: gap:recall:gender (too few images, "
                           f"under --min-n 200: nic: {women:,}") for n in lb["notes"])
    md = (tmp_path / "few.md").read_text()
    row = next(r for r in md.splitlines() if r.startswith("| recall (male − female) |"))
    assert row.split(" | ")[1].endswith(f"n={women:,} too-few")
    plain = next(r for r in md.splitlines() if r.startswith("| recall ↑ |"))
    assert "too-few" not in plain
    flat = " ".join(text.out.split())
    assert "too-few" in flat and "dropped from the average: gap:recall:gender" in flat
    # nothing ranked on the gaps: the N-avg is the board's with no gap at all
    code, base, _ = _board(shared, tmp_path, [nic, oscar], "nogaps", capsys, "--min-n", "200",
                           demographics=False)
    assert code == 0
    assert lb["profiles"]["overall"]["score"] == pytest.approx(
        base["profiles"]["overall"]["score"])


def test_coverage_guard_and_partial_values(shared, tmp_path, capsys):
    _, rows = _head(shared, tmp_path, "nic", 100)
    mixed = tmp_path / "mixed.jsonl"       # 100 COCO images, 300 ids no annotation has
    mixed.write_text("".join(json.dumps(r) + "\n" for r in rows) + "".join(
        json.dumps({"image_id": 900_000 + k, "caption": r["caption"]}) + "\n"
        for k, r in enumerate(rows * 3)))
    oscar, _ = _head(shared, tmp_path, "oscar", 400)
    code, _, text = _board(shared, tmp_path, [mixed, oscar], "stop", capsys, demographics=False)
    assert code == 2
    err = [line for line in text.err.splitlines() if line.strip()]
    assert len(err) == 1 and "only 100 of the 400 images of 'mixed'" in err[0], text.err
    # the file's ids are unassigned: --allow-partial joins them only once they are declared
    # COCO's (#46: a few matches are no evidence), so the set is registered with its namespace
    code, _, text = _board(shared, tmp_path, [mixed, oscar], "undeclared", capsys,
                           "--allow-partial", demographics=False)
    assert code == 2 and "no evidence that they are coco2014 images" in text.err
    for name in ("partial", "partial_few"):
        assert main(["sets", "add", "mixed", str(mixed), "--namespace", "coco2014",
                     "--db", str(tmp_path / f"{name}.duckdb")]) == 0
    code, lb, text = _board(shared, tmp_path, ["mixed", oscar], "partial", capsys,
                            "--allow-partial", demographics=False)
    assert code == 0, text.out
    k = next(j for j, c in enumerate(lb["columns"]) if c["name"] == "recall")
    assert lb["status"][0][k] == "partial" and lb["status"][1][k] == "ok"
    assert lb["status_notes"][0][k] == "partial: 100 of 400 images"
    assert lb["n"][0][k] == 100
    md = (tmp_path / "partial.md").read_text()
    row = next(r for r in md.splitlines() if r.startswith("| recall ↑ |"))
    assert row.split(" | ")[2].endswith("n=100 partial: 100 of 400 images")
    assert "partial: 100 of 400 images" in " ".join(text.out.split())
    # the same set with --min-n 150: too-few is the headline, the partial coverage still shown
    code, lb, text = _board(shared, tmp_path, ["mixed", oscar], "partial_few", capsys,
                            "--allow-partial", "--min-n", "150", demographics=False)
    assert code == 0, text.out
    assert lb["status"][0][k] == "too-few"
    md = (tmp_path / "partial_few.md").read_text()
    row = next(r for r in md.splitlines() if r.startswith("| recall ↑ (not averaged) |"))
    assert row.split(" | ")[2].endswith("n=100 partial: 100 of 400 images; too-few")


@pytest.mark.browser
@pytest.mark.slow
def test_page_shows_each_status(shared, tmp_path, capsys):
    """The page writes too-few beside the gap resting on 115 women, as the Markdown does."""
    browser = chromium()
    sets = [_head(shared, tmp_path, m, 400)[0] for m in ("nic", "oscar")]
    code, _, text = _board(shared, tmp_path, sets, "page", capsys, "--min-n", "200",
                           "--html", str(tmp_path / "page"))
    assert code == 0, text.out
    with open_page(browser, tmp_path / "page" / "index.html",
                   viewport={"width": 1400, "height": 1000}) as page:
        gap_tags = page.eval_on_selector_all("#gaps .status", "ts => ts.map(t => t.textContent)")
        board_tags = page.eval_on_selector_all("#board .status", "ts => ts.length")
    assert gap_tags and set(gap_tags) == {"too-few"}
    assert board_tags == 0          # recall and CHAIR rest on 400 images each


@pytest.mark.browser
@pytest.mark.slow
def test_page_table_fits_1400px_set_pinned_values_in_their_format(shared, tmp_path, capsys):
    """Every default metric of three captioners on the page at 1,400 px: the values table
    fits (no horizontal scroll, the set column pinned should it ever need one), vocab is a
    whole count as everywhere else (739 [722, 757], not 739.0), and each gap is signed with
    its direction named."""
    browser = chromium()
    coco = shared("data", "coco2014")
    full = json.loads((coco / "captions_val2014_subset.json").read_text())
    nic = shared("data", "captioners", "nic_val2014_gender.jsonl")
    labelled = {json.loads(line)["image_id"] for line in nic.open()}
    ids = [im["id"] for im in full["images"] if im["id"] in labelled][:150]
    human = tmp_path / "coco.json"            # the reference (noun/verb columns): COCO JSON
    human.write_text(json.dumps({"images": [im for im in full["images"] if im["id"] in ids],
                                 "annotations": [a for a in full["annotations"]
                                                 if a["image_id"] in ids]}))
    sets = []
    for m in ("nic", "sat", "oscar"):
        src = shared("data", "captioners", f"{m}_val2014_gender.jsonl")
        sets.append(tmp_path / f"{m}.jsonl")
        sets[-1].write_text("".join(line for line in src.open()
                                    if json.loads(line)["image_id"] in ids))
    db = str(tmp_path / "p.duckdb")
    assert main(["sets", "add", "coco", str(human), "--db", db]) == 0
    capsys.readouterr()
    assert main(["audit", "leaderboard", *map(str, sets), "--reference", "coco",
                 "--chair-gt", str(coco / CATS[0]),
                 "--instances", str(coco / CATS[1]), "--demographics", str(coco / CATS[2]),
                 "--n-boot", "20", "--html", str(tmp_path / "page"), "--db", db]) == 0
    with open_page(browser, tmp_path / "page" / "index.html",
                   viewport={"width": 1400, "height": 1000}) as page:
        widths = page.eval_on_selector(".wrap", "w => [w.scrollWidth, w.clientWidth, "
                                       "document.documentElement.scrollWidth]")
        pinned = page.eval_on_selector("#board th.pin", "t => getComputedStyle(t).position")
        heads = page.eval_on_selector_all("#board thead th", "hs => hs.map(h => h.textContent)")
        k = heads.index("vocab ↑")
        vocab = page.eval_on_selector(f"#board tbody tr:first-child td:nth-child({k + 1})",
                                      "td => td.firstChild.textContent")
        gaps = page.eval_on_selector_all("#gaps tr td:first-child",
                                         "ts => ts.map(t => t.textContent)")
        first = page.eval_on_selector_all("#gaps tr td:nth-child(2)",
                                          "ts => ts.map(t => t.firstChild.textContent)")
    assert len(heads) == 5 + 13, heads          # every metric column (no CLIP model) is there
    assert widths[0] <= widths[1] and widths[2] <= 1400, widths
    assert pinned == "sticky"
    assert vocab.replace(",", "").isdigit(), vocab
    assert "recall (male − female)" in gaps and "chair_s (light − dark)" in gaps
    assert all(v[0] in "+−" for v in first if v != "–"), first
