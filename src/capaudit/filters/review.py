"""Human review: export flagged captions for editors, merge their edits back.

**Export** (:func:`export_review`) writes one row per caption to review, as
CSV or JSONL (by the file's suffix): ``set``, ``row_idx``, ``image_id``,
``image_key``, ``source_sha256`` (SHA-256 of the caption as exported),
``caption``, ``reasons`` (why it is up for review), ``decision`` (empty;
the editor writes ``keep``, ``edit`` or ``drop``) and ``edited_caption``
(prefilled with the caption). Which captions: those of a filtered set whose
log has ``flag``/``revise`` rows (e.g. ``filter run --filter hallucination
--action flag``), or every caption with ``all_rows=True``.

**Import** (:func:`import_review`) reads the edited file back and builds a
new set from the exported one: a row whose ``decision`` is ``drop`` leaves
the set; ``edit`` (or an empty decision with a changed ``edited_caption``)
replaces the caption; anything else keeps it. A row is **refused** -- left
unchanged and listed -- when its ``source_sha256`` no longer matches the
caption now stored at that row (someone changed the set since export), when
the row does not exist, or when it names another set. Edits are logged per
sentence like every filter (the original and edited captions are split into
sentences and aligned with :class:`difflib.SequenceMatcher`: equal ->
``keep``, changed -> ``revise``, removed -> ``drop``), so sentences in =
kept + dropped holds here too.
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import json
from pathlib import Path
from typing import Iterable, Iterator, Mapping

from capaudit.errors import InputError
from capaudit.filters.base import CaptionDoc, CaptionResult, Decision, Filter
from capaudit.text.mentions import sentence_spans

__all__ = ["export_review", "import_review", "read_review_file", "caption_sha256", "ReviewImport",
           "REVIEW_COLUMNS"]

REVIEW_COLUMNS = ["set", "row_idx", "image_id", "image_key", "source_sha256", "caption",
                  "reasons", "decision", "edited_caption"]
DECISIONS = ("", "keep", "edit", "drop")

# A CSV cell starting with one of these is a formula to a spreadsheet: "=HYPERLINK(...)" in a
# caption must not run when the reviewer opens the file. Such text is written with a
# leading apostrophe (so is text that already starts with one, to keep the mapping
# reversible) and read back without it.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "'")


def csv_safe(value):
    """Neutralise a text cell for spreadsheets (undone by :func:`csv_unsafe`)."""
    return "'" + value if isinstance(value, str) and value.startswith(_FORMULA_START) else value


def csv_unsafe(value):
    if isinstance(value, str) and value.startswith("'") and value[1:].startswith(_FORMULA_START):
        return value[1:]
    return value


def caption_sha256(caption: str) -> str:
    return hashlib.sha256(caption.encode("utf-8")).hexdigest()


def _fmt(path: Path, fmt: str | None) -> str:
    fmt = (fmt or path.suffix.lstrip(".")).lower()
    if fmt not in ("csv", "jsonl"):
        raise InputError(f"unknown review file format '{fmt}'", path=path,
                         fix="use a .csv or .jsonl file (or --format csv|jsonl)")
    return fmt


def _review_rows(store, set_name: str, all_rows: bool) -> list[dict]:
    from capaudit.filters.logs import filter_run_info, read_log

    tbl = store.captions(set_name)
    cols = tbl.to_pydict()
    reasons: dict[int, list[str]] = {}
    if not all_rows:
        log = read_log(store, set_name, actions=("flag", "revise"))
        for new_row, reason in zip(log.column("new_row_idx").to_pylist(),
                                   log.column("reason").to_pylist()):
            if new_row is not None:
                reasons.setdefault(int(new_row), []).append(reason or "")
        if not reasons and log.num_rows == 0:
            if filter_run_info(store, set_name) is None:
                raise InputError(f"set '{set_name}' has no filter log to take flags from",
                                 fix="run a filter with --action flag into a new set and export "
                                     "that, or pass --all")
    rows = []
    for r, key, iid, cap in zip(cols["row_idx"], cols["image_key"], cols["image_id"],
                                cols["caption"]):
        if not all_rows and int(r) not in reasons:
            continue
        rows.append({"set": set_name, "row_idx": int(r), "image_id": iid, "image_key": key,
                     "source_sha256": caption_sha256(cap), "caption": cap,
                     "reasons": " | ".join(reasons.get(int(r), [])), "decision": "",
                     "edited_caption": cap})
    return rows


def export_review(store, set_name: str, path: str | Path, *, fmt: str | None = None,
                  all_rows: bool = False) -> int:
    """Write the captions to review; returns how many rows were written. ``set_name`` may
    also be the ``--out`` folder of a sharded run: its captions come from the shards' logs
    (:func:`capaudit.filters.logs.shard_review_rows`, with their shard, record and turn)."""
    path = Path(path)
    fmt = _fmt(path, fmt)
    columns, rows = REVIEW_COLUMNS, None
    if store.find_set(set_name) is None:
        from capaudit.filters.logs import shard_review_rows, sharded_run

        info = sharded_run(store, set_name)
        if info is not None:
            columns = REVIEW_COLUMNS + ["shard", "record", "turn"]
            rows = shard_review_rows(info, all_rows)
    if rows is None:
        rows = _review_rows(store, set_name, all_rows)
    from capaudit.core.safe_write import atomic_open

    n = 0
    with atomic_open(path, newline="" if fmt == "csv" else None, parents=True) as fh:
        w = csv.DictWriter(fh, fieldnames=columns) if fmt == "csv" else None
        if w is not None:
            w.writeheader()
        for r in rows:
            n += 1
            if w is not None:
                w.writerow({k: ("" if r[k] is None else csv_safe(r[k])) for k in columns})
            else:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    return n


def read_review_file(path: str | Path, fmt: str | None = None) -> list[tuple[int, dict]]:
    """``(file row, record)`` pairs with the required columns checked."""
    path = Path(path)
    if not path.exists():
        raise InputError("review file not found", path=path, fix="check the path")
    fmt = _fmt(path, fmt)
    if fmt == "csv":
        with open(path, newline="", encoding="utf-8-sig") as fh:
            recs = [(i, {k: csv_unsafe(v) for k, v in r.items()})
                    for i, r in enumerate(csv.DictReader(fh), start=2)]
    else:
        from capaudit.io.annotation_files import iter_jsonl

        recs = list(iter_jsonl(path))
    for row, rec in recs:
        for col in ("set", "row_idx", "source_sha256", "edited_caption"):
            if col not in rec:
                raise InputError(f"missing column '{col}'", path=path, row=row,
                                 fix="keep the columns written by review export")
        try:
            rec["row_idx"] = int(rec["row_idx"])
        except (TypeError, ValueError):
            raise InputError(f"row_idx {rec['row_idx']!r} is not an integer", path=path,
                             row=row) from None
        dec = (rec.get("decision") or "").strip().lower()
        if dec not in DECISIONS:
            raise InputError(f"unknown decision {rec.get('decision')!r}", path=path, row=row,
                             fix="use keep, edit, drop or leave it empty")
        rec["decision"] = dec
    return recs


class ReviewImport(Filter):
    """Apply reviewed edits (a filter in the runner's sense, so it is logged the same way)."""

    name = "review-import"
    version = "1"

    def __init__(self, edits: Mapping[int, dict] | None = None):
        super().__init__()
        self.edits = dict(edits or {})   # row_idx -> record

    def apply(self, docs: Iterable[CaptionDoc]) -> Iterator[CaptionResult]:
        for doc in docs:
            rec = self.edits.get(doc.row_idx)
            n = len(doc.spans)
            if rec is None:
                yield CaptionResult(doc, [Decision(i, "keep") for i in range(n)])
                continue
            dec = rec["decision"]
            edited = rec.get("edited_caption")
            edited = "" if edited is None else str(edited)
            if dec == "drop" or (dec in ("", "edit") and not edited.strip()):
                yield CaptionResult(doc, [Decision(i, "drop", "review: dropped by editor")
                                          for i in range(n)])
            elif dec == "keep" or edited == doc.caption:
                yield CaptionResult(doc, [Decision(i, "keep", "review: kept") for i in range(n)])
            else:
                yield CaptionResult(doc, _align(doc, edited), {"reviewed": True})

    def config(self) -> dict:
        return {"filter": self.name, "version": self.version, "rows": len(self.edits)}


def _align(doc: CaptionDoc, edited: str) -> list[Decision]:
    """Per-sentence decisions turning ``doc.caption`` into ``edited``."""
    old = [s.strip() for s in doc.sentences]
    spans = sentence_spans(edited) or [(0, len(edited))]
    new = [edited[a:b].strip() for a, b in spans]
    dec: list[Decision] = [Decision(k, "keep") for k in range(len(old))]
    before: dict[int, list[str]] = {}   # inserted sentences, attached to an original one
    after: dict[int, list[str]] = {}
    sm = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            for k in range(i1, i2):
                dec[k] = Decision(k, "keep", "review: unchanged")
        elif tag in ("replace", "delete"):
            for k in range(i1, i2):
                j = j1 + (k - i1)
                if tag == "replace" and j < j2:
                    dec[k] = Decision(k, "revise", "review: edited", revised=new[j])
                else:
                    dec[k] = Decision(k, "drop", "review: removed by editor")
            if tag == "replace" and j2 - j1 > i2 - i1:
                after.setdefault(i2 - 1, []).extend(new[j1 + (i2 - i1):j2])
        elif tag == "insert":
            if i1 == 0:
                before.setdefault(0, []).extend(new[j1:j2])
            else:
                after.setdefault(i1 - 1, []).extend(new[j1:j2])
    for k in set(before) | set(after):
        d = dec[k]
        cur = "" if d.action == "drop" else (d.revised if d.action == "revise" else old[k])
        text = " ".join(before.get(k, []) + ([cur] if cur else []) + after.get(k, []))
        dec[k] = Decision(k, "revise", "review: edited", revised=text)
    return dec


def import_review(store, set_name: str, path: str | Path, out: str, *, fmt: str | None = None,
                  replace: bool = False, strict: bool = False, run_id: int | None = None):
    """Merge reviewed edits into a new set ``out``; returns ``(SetInfo, summary, refused)``.

    ``refused`` lists ``(file row, row_idx, why)``; with ``strict`` any refusal is an error.
    """
    from capaudit.filters.runner import apply_filter, iter_docs, write_filtered_set

    recs = read_review_file(path, fmt)
    docs = list(iter_docs(store, set_name))
    by_row = {d.row_idx: d for d in docs}
    edits: dict[int, dict] = {}
    refused: list[tuple[int, int, str]] = []
    for row, rec in recs:
        r = rec["row_idx"]
        if rec["set"] != set_name:
            refused.append((row, r, f"exported from set '{rec['set']}', not '{set_name}'"))
        elif r not in by_row:
            refused.append((row, r, "no such row in the set"))
        elif caption_sha256(by_row[r].caption) != rec["source_sha256"]:
            refused.append((row, r, "source caption changed since export"))
        elif r in edits:
            refused.append((row, r, "row appears twice in the file"))
        else:
            edits[r] = rec
    if strict and refused:
        row, r, why = refused[0]
        raise InputError(f"{len(refused)} row(s) refused; first: row_idx {r}: {why}",
                         path=path, row=row, fix="re-export and redo those edits, or drop --strict")
    filt = ReviewImport(edits=edits)
    output = apply_filter(filt, docs)
    output.summary.extra["refused"] = [{"file_row": a, "row_idx": b, "why": c}
                                       for a, b, c in refused]
    output.summary.extra["review_file"] = str(path)
    info = write_filtered_set(store, set_name, out, output, filter_name=filt.name,
                              version=filt.version, config={**filt.config(), "file": str(path)},
                              run_id=run_id, replace=replace)
    return info, output.summary, refused
