"""The static leaderboard page: one folder, no server, works from ``file://``.

``index.html`` holds the leaderboard data as JSON in a ``<script>`` tag and the
page's script and style inline (``capaudit/data/page/``), so the folder can be
zipped, mailed or opened from disk. The script recomputes N-avg for the chosen
profile in the browser (the same min-max normalisation and criterion averages
as :mod:`capaudit.leaderboard.board`), so the profile selector re-ranks on the
page; the bootstrap rank intervals shown are those computed in Python for each
profile of the catalogue. ``worst_<n>.html`` lists each set's worst captions
(most hallucinated CHAIR objects, NSFW hits), linked from the table. All text
from captions and set names is inserted as text, never as markup.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from capaudit.core.safe_write import make_dirs, write_text

__all__ = ["write_page"]


def _asset(name: str) -> str:
    return resources.files("capaudit").joinpath(f"data/page/{name}").read_text("utf-8")


def _json_for_script(data: Any) -> str:
    text = json.dumps(data, default=str, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _clean(obj):
    """NaN -> None, recursively (JSON has no NaN)."""
    if isinstance(obj, float) and obj != obj:
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def _worst_page(name: str, rows: list[Mapping]) -> str:
    e = html.escape
    body = ["<table><tr><th>kind</th><th>image</th><th>row</th><th>count</th><th>words</th>"
            "<th>caption</th></tr>"]
    for r in rows:
        body.append(f"<tr><td>{e(r['kind'])}</td><td>{e(str(r['image_id']))}</td>"
                    f"<td>{r['row']}</td><td>{r['count']}</td>"
                    f"<td>{e(', '.join(r['words']))}</td><td>{e(r['caption'])}</td></tr>")
    body.append("</table>")
    return (f"<!doctype html><meta charset='utf-8'><title>worst captions: {e(name)}</title>"
            f"<style>{_asset('page.css')}</style><h1>Worst captions of {e(name)}</h1>"
            "<p>Most hallucinated CHAIR objects first, then captions with NSFW-list words. "
            "<a href='index.html'>back to the leaderboard</a></p>" + "".join(body))


def write_page(folder: str | Path, payload: Mapping[str, Any]) -> Path:
    """Write ``index.html`` and one worst-captions page per set into ``folder``."""
    folder = Path(folder)
    make_dirs(folder)
    data = _clean(dict(payload))
    sets = data["leaderboard"]["sets"]
    links = {}
    for k, name in enumerate(sets):
        page = f"worst_{k}.html"
        write_text(folder / page, _worst_page(name, data.get("worst", {}).get(name, [])))
        links[name] = page
    data["links"] = links
    index = ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
             "<title>capaudit leaderboard</title>"
             f"<style>{_asset('page.css')}</style></head><body>{_asset('page.html')}"
             f"<script id='data' type='application/json'>{_json_for_script(data)}</script>"
             f"<script>{_asset('page.js')}</script></body></html>")
    out = folder / "index.html"
    write_text(out, index)
    return out
