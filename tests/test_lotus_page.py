"""The static leaderboard page: written safely, and working in a real headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from capaudit.leaderboard.board import build_leaderboard
from capaudit.leaderboard.page import write_page
from capaudit.leaderboard.profiles import load_catalogue
from lotus_boards import board_sets


def _page(tmp_path: Path) -> Path:
    sets, ann = board_sets()
    lb = build_leaderboard(sets, load_catalogue(), ann, n_boot=100, seed=0)
    return write_page(tmp_path / "board", {"leaderboard": lb.to_dict(),
                                           "worst": {s.name: s.worst for s in sets}})


def test_page_is_one_folder_with_escaped_text(tmp_path):
    index = _page(tmp_path)
    html = index.read_text()
    assert "</script> </script>" not in html and "<b>cat</b>" not in html  # caption text inert
    assert "http://" not in html.replace("http://www.w3.org/2000/svg", "")  # nothing remote
    tag = "<script id='data' type='application/json'>"
    start = html.index(tag) + len(tag)
    data = json.loads(html[start:html.index("</script>", start)])
    assert data["leaderboard"]["sets"] == ["A", "B", "C"]
    worst = (index.parent / data["links"]["A"]).read_text()
    assert "&lt;b&gt;cat&lt;/b&gt;" in worst and "<b>cat</b>" not in worst


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
@pytest.mark.slow
def test_page_in_headless_chromium(tmp_path):
    exe = _chromium()
    if exe is None:
        pytest.skip("no chromium binary (Debian: apt-get install -y chromium)")
    sync_api = pytest.importorskip("playwright.sync_api",
                                   reason="the playwright package drives chromium (pip install "
                                          "playwright; no browser download needed)")
    index = _page(tmp_path)
    shot = Path(os.environ.get("CAPAUDIT_SCREENSHOT_DIR", tmp_path)) / "leaderboard.png"
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(index.as_uri())
        page.wait_for_selector("body[data-ready='1']")

        def order():
            return page.eval_on_selector_all("#board tbody tr", "rs => rs.map(r => r.dataset.set)")

        page.select_option("#profile", "detail-oriented")
        assert order() == ["A", "B", "C"]                 # ranked by N-avg of the profile
        page.select_option("#profile", "risk-conscious")
        assert order()[0] == "C"                          # re-ranked on the page
        assert order() != ["A", "B", "C"]
        page.select_option("#profile", "detail-oriented")
        before = order()
        col = page.eval_on_selector_all("#board thead th", "hs => hs.map(h => h.textContent)")
        k = next(i for i, h in enumerate(col) if h.startswith("chair_s"))
        page.click(f"#board thead th:nth-child({k + 1})")  # sort by CHAIR_s, ascending
        after = order()
        assert after != before and after[0] == "C"
        page.click(f"#board thead th:nth-child({k + 1})")  # and descending
        assert order()[0] == "A"
        assert page.locator("#radars svg").count() == 3
        axes = page.eval_on_selector_all("#radars .card:first-child svg text",
                                         "ts => ts.map(t => t.textContent)")
        assert axes == ["descriptiveness", "complexity", "side effects", "bias"]
        crit = page.eval_on_selector_all("#criteria thead th", "hs => hs.map(h => h.textContent)")
        assert any(h.startswith("complexity") for h in crit)
        assert page.locator("#gaps svg rect").count() >= 3
        assert page.locator("#notes li").count() >= 1
        page.click("#board tbody tr:first-child a")       # link to the worst captions
        assert "Worst captions of" in page.content()
        page.go_back()
        page.wait_for_selector("body[data-ready='1']")
        shown = page.eval_on_selector("#profile", "s => s.value")
        assert order() == (["A", "B", "C"] if shown == "detail-oriented" else order())
        page.select_option("#profile", "overall")
        page.screenshot(path=str(shot), full_page=True)
        browser.close()
    assert not errors, errors
    assert shot.stat().st_size > 10_000
