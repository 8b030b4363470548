"""The files a leaderboard run writes: JSON, Markdown, the page, each with its provenance.

Why apart from the CLI: ``capaudit audit leaderboard`` and
:meth:`capaudit.api.AuditStore.leaderboard` write the same files the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

__all__ = ["leaderboard_payload", "write_outputs"]


def leaderboard_payload(out: Mapping[str, Any]) -> dict:
    """What the JSON, the Markdown and the page hold: the board and each set's worst captions."""
    return {"leaderboard": out["leaderboard"].to_dict(),
            "worst": {s.name: s.worst for s in out["sets"]}}


def write_outputs(store, out: Mapping[str, Any], cfg: Mapping[str, Any],
                  json_out: str | Path | None = None, markdown: str | Path | None = None,
                  html: str | Path | None = None) -> Path | None:
    """The JSON, Markdown and HTML page asked for of a run's result ``out``, each with its
    provenance beside it (``cfg``, the run id, the annotations' identities: :func:`capaudit.
    io.annotation_store.annotation_provenance`); returns the page's ``index.html`` (None
    without ``html``)."""
    from capaudit.core.config import provenance_beside, write_json
    from capaudit.core.safe_write import write_text
    from capaudit.io.annotation_store import annotation_provenance

    if not (json_out or markdown or html):
        return None        # nothing asked: no payload, no hash of the annotation files
    payload = leaderboard_payload(out)
    config = {**cfg, "run_id": out.get("_run_id"),
              "annotations": annotation_provenance(store, out.get("annotations") or {})}

    if json_out:
        write_json(json_out, payload, config, config.get("seed"))
    if markdown:
        from capaudit.leaderboard.markdown import leaderboard_markdown

        write_text(markdown, leaderboard_markdown(payload), parents=True)
        provenance_beside(markdown, config, config.get("seed"))
    if not html:
        return None
    from capaudit.leaderboard.page import write_page

    index = write_page(html, payload)
    provenance_beside(index, config, config.get("seed"))
    return index
