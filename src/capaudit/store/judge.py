"""SQL of the judged metrics: judges, per-item verdicts, and their metric rows.

Why a function per write: a judged command stores its judge identity, every
verdict and every set-level number in ONE transaction (the caller's), so an interrupted or
refused run stores nothing, and a capped run stores exactly what it judged.
"""

from __future__ import annotations

import json
from typing import Mapping, Sequence

from capaudit.store.arrow_scan import ARROW, execute_on

__all__ = ["write_judged", "JUDGED_METRIC_NOTE"]

JUDGED_METRIC_NOTE = "judged; see judge_items for the verdicts"

_ITEM_COLS = ("caption_idx", "image_id", "kind", "unit_idx", "text", "status", "label",
              "score", "p_yes", "critique")


def write_judged(store, run_id: int, metric: str, set_name: str, ident: Mapping,
                 items: Sequence[Mapping], values: Mapping[str, Mapping],
                 extra: Mapping | None = None) -> None:
    """Store the judge, the verdicts and the metric rows (``values``: name -> value, n, CI, grp).

    Runs inside the caller's :meth:`Store.transaction` (with the run row), so a
    run is stored whole or not at all.
    """
    import pyarrow as pa

    con = store.con
    con.execute("INSERT OR REPLACE INTO judges VALUES (?, ?, ?, ?, ?, ?)",
                [ident["judge_id"], ident["backend"], ident["model"],
                 json.dumps(ident["params"], sort_keys=True),
                 json.dumps(ident["prompts"], sort_keys=True), ident["evidence"]])
    if items:
        cols = {c: [r.get(c) for r in items] for c in _ITEM_COLS}
        detail = [json.dumps({k: v for k, v in r.items() if k not in _ITEM_COLS},
                             default=str) for r in items]
        prompt = [ident["prompts"].get(r.get("prompt", ""), None) for r in items]
        tbl = pa.table({"caption_idx": pa.array(cols["caption_idx"], pa.int64()),
                        "image_id": pa.array(cols["image_id"], pa.int64()),
                        "kind": pa.array(cols["kind"], pa.string()),
                        "unit_idx": pa.array(cols["unit_idx"], pa.int32()),
                        "text": pa.array(cols["text"], pa.string()),
                        "status": pa.array(cols["status"], pa.string()),
                        "label": pa.array(cols["label"], pa.string()),
                        "score": pa.array(cols["score"], pa.float64()),
                        "p_yes": pa.array(cols["p_yes"], pa.float64()),
                        "critique": pa.array(cols["critique"], pa.string()),
                        "prompt_hash": pa.array(prompt, pa.string()),
                        "detail": pa.array(detail, pa.string())})
        execute_on(
            con, "INSERT INTO judge_items SELECT ?, ?, ?, ?, prompt_hash, ?, ?, ?, caption_idx, "
            "image_id, kind, unit_idx, text, status, label, score, p_yes, critique, "
            f"detail FROM {ARROW}", tbl,
            [run_id, ident["judge_id"], ident["model"], ident["backend"],
             ident["evidence"], metric, set_name])
    base = {"judge_id": ident["judge_id"], "judge_model": ident["model"],
            "judge_backend": ident["backend"], "evidence": ident["evidence"],
            "prompts": ident["prompts"], "params": ident["params"], "note": JUDGED_METRIC_NOTE,
            **dict(extra or {})}
    for name, v in values.items():
        store.write_metric(run_id, set_name, v.get("metric", name), v.get("value"), v.get("n"),
                           v.get("ci_low"), v.get("ci_high"), grp=v.get("grp", "all"),
                           extra={**base, **v.get("extra", {})})
