"""``sets export --to original``: the source file back, in its own layout, for training.

A filtered (or revised) set is written back into the file it came from: every record
and field the caption set did not touch is kept as it was (JSONL lines byte for byte),
revised text goes in place, a caption whose every sentence was dropped removes its
record (or, in a multi-turn conversation, that assistant turn and the question before
it). A sidecar ``OUT.changes.jsonl`` lists each change (record, what, before, after).

Each caption knows its place in the source from ingestion: ``meta.src`` (record index,
0-based) and ``meta.turn`` (assistant turn), kept through filters (which copy the
parent's meta). The source file must be the one registered (same sha256), since the
indices refer to it. Layouts: LLaVA/ShareGPT4V ``conversations``, LLaVA QA
(``output``), ShareGPT ``messages``, CapsFusion/JSONL records (the caption column),
COCO captions JSON, Flickr ``.token`` lines. Exporting a set nobody changed gives the
source back (JSON-identical; byte-identical for JSONL and for JSON written the way
``json.dumps`` writes it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from capaudit.errors import InputError
from capaudit.io.readers.records import JOIN_SEP
from capaudit.store.captions import rows_with_meta

RECORD_FORMATS = ("sharegpt4v", "llava", "sharegpt", "capsfusion", "jsonl", "coco-results",
                  "json")
ORIGINAL_FORMATS = RECORD_FORMATS + ("coco", "flickr-token")


def root_set(store, name: str):
    """The registered file a set derives from (following ``parent`` through filters)."""
    info = store.get_set(name)
    seen = {info.name}
    while info.format == "filter" and info.parent:
        info = store.get_set(info.parent)
        if info.name in seen:
            break
        seen.add(info.name)
    return info


def _places(store, name: str) -> dict[tuple, str]:
    """``{(src, turn): caption}`` of a set, from each row's ``meta``."""
    out = {}
    for row_idx, meta, caption in rows_with_meta(store, store.get_set(name).set_id):
        m = json.loads(meta) if meta else {}
        if not isinstance(m, dict) or "src" not in m:
            raise InputError(f"caption row {row_idx} of '{name}' does not say which source "
                             "record it came from", fix="register the file again (sets add "
                             "--replace) and rerun the filter, then export")
        out[(m["src"], m.get("turn", m.get("sent")))] = caption
    return out


def _assistant(rec: dict, fmt: str) -> tuple[list, str, str] | None:
    """(turns list, speaker key, text key) of a conversation record, or None for flat ones."""
    for key, who, text in (("conversations", "from", "value"), ("messages", "role", "content")):
        if isinstance(rec.get(key), list):
            return rec[key], who, text
    return None


def _revise(rec: dict, fmt: str, cap_col: str | None, turn, text: str | None, log: list,
            idx: int) -> bool:
    """Put ``text`` (None: dropped) in place of caption ``turn``; False: drop the record."""
    conv = _assistant(rec, fmt)
    if conv is None:
        field = "output" if fmt == "llava" and "output" in rec else cap_col
        if text is None:
            log.append({"record": idx, "action": "dropped", "before": rec.get(field)})
            return False
        log.append({"record": idx, "action": "revised", "field": field,
                    "before": rec.get(field), "after": text})
        rec[field] = text
        return True
    turns, who, key = conv
    answer = {"gpt", "assistant"}
    positions = [i for i, t in enumerate(turns) if isinstance(t, dict) and t.get(who) in answer]
    if turn is None:  # --turns join: one caption for all turns
        if text is None:
            log.append({"record": idx, "action": "dropped"})
            return False
        parts = text.split(JOIN_SEP)
        if len(parts) != len(positions):
            raise InputError(f"record {idx + 1}: the joined caption was revised into "
                             f"{len(parts)} parts for {len(positions)} turns",
                             fix="register the file with --turns all to write turns back")
        for p, part in zip(positions, parts):
            if turns[p][key] != part:
                log.append({"record": idx, "action": "revised", "turn": positions.index(p),
                            "before": turns[p][key], "after": part})
                turns[p][key] = part
        return True
    pos = positions[turn]
    if text is None:
        log.append({"record": idx, "action": "turn dropped", "turn": turn,
                    "before": turns[pos][key]})
        turns[pos] = None
        if pos > 0 and isinstance(turns[pos - 1], dict) and turns[pos - 1].get(who) not in answer:
            turns[pos - 1] = None
        return True
    log.append({"record": idx, "action": "revised", "turn": turn, "before": turns[pos][key],
                "after": text})
    turns[pos][key] = text
    return True


def _json_style(raw: bytes) -> dict:
    """Indent and escaping of a JSON document, so an untouched file comes back the same."""
    text = raw.decode("utf-8")
    indent = None
    lines = text.split("\n", 2)
    if len(lines) > 1 and lines[0].strip() in ("[", "{"):
        indent = len(lines[1]) - len(lines[1].lstrip(" "))
    return {"indent": indent or None, "ensure_ascii": not any(ord(c) > 127 for c in text),
            "end": "\n" if text.endswith("\n") else ""}


def export_original(store, name: str, out: Path) -> tuple[Path, Path]:
    """Write set ``name`` back into its source layout; returns (file, changes sidecar)."""
    root = root_set(store, name)
    if root.format not in ORIGINAL_FORMATS:
        raise InputError(f"'{name}' comes from a {root.format} file, which cannot be written "
                         "back in its own layout", fix=f"export with --to jsonl, parquet, "
                         f"sharegpt4v, llava or coco (original supports {', '.join(ORIGINAL_FORMATS)})")
    src = Path(root.source_path or "")
    from capaudit.io.ingest import fingerprint

    if not src.is_file() or fingerprint(src) != root.sha256:
        raise InputError(f"the source of '{root.name}' is missing or changed since it was "
                         "registered", path=src, fix="restore the file, or register it again")
    before, after = _places(store, root.name), _places(store, name)
    changed = {k: after.get(k) for k in before if after.get(k) != before[k]}
    by_record: dict = {}
    for (i, turn), text in changed.items():
        by_record.setdefault(i, []).append((turn, text))
    log: list = []
    raw = src.read_bytes()
    cap_col = (root.options or {}).get("caption_col")
    from capaudit.core.safe_write import atomic_open, check_file_target

    check_file_target(out.with_name(out.name + ".changes.jsonl"))  # refused before writing
    with atomic_open(out, "wb") as fh:
        _write_revised(fh, root, raw, by_record, cap_col, log)
    sidecar = out.with_name(out.name + ".changes.jsonl")
    with atomic_open(sidecar) as fh:
        for entry in sorted(log, key=lambda e: e["record"]):
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return out, sidecar


def _write_revised(fh, root, raw: bytes, by_record: dict, cap_col, log: list) -> None:
    """The source's bytes with the set's changes applied, in the source's own layout."""
    if root.format == "flickr-token":
        for i, line in enumerate(raw.decode("utf-8").splitlines(keepends=True)):
            if i in by_record:
                (_, text), = by_record[i]
                head, _, rest = line.partition("\t")
                log.append({"record": i, "action": "dropped" if text is None else "revised",
                            "before": rest.rstrip("\r\n"), "after": text})
                if text is None:
                    continue
                line = f"{head}\t{text}" + ("\n" if line.endswith("\n") else "")
            fh.write(line.encode("utf-8"))
    elif root.format == "coco":
        data = json.loads(raw)
        keep = []
        for i, ann in enumerate(data["annotations"]):
            if i in by_record and not _revise(ann, "jsonl", "caption", None,
                                              by_record[i][0][1], log, i):
                continue
            keep.append(ann)
        data["annotations"] = keep
        _write_json(fh, data, _json_style(raw))
    elif raw.lstrip().startswith(b"["):
        data = json.loads(raw)
        keep = [rec for i, rec in enumerate(data)
                if i not in by_record or _apply(rec, root, cap_col, by_record[i], log, i)]
        _write_json(fh, keep, _json_style(raw))
    else:  # JSONL: untouched lines byte for byte
        for i, line in enumerate(raw.splitlines(keepends=True)):
            if i in by_record:
                rec = json.loads(line)
                if not _apply(rec, root, cap_col, by_record[i], log, i):
                    continue
                line = json.dumps(rec, ensure_ascii=False).encode() + \
                    (b"\n" if line.endswith(b"\n") else b"")
            fh.write(line)


def _apply(rec: dict, root, cap_col, changes: list, log: list, idx: int) -> bool:
    """Apply a record's changes; False when the record goes (its only caption dropped)."""
    if root.format in ("capsfusion", "jsonl", "coco-results", "json") and not cap_col:
        from capaudit.io.readers import get_reader

        cands = get_reader(root.format).caption_candidates
        cap_col = next((c for c in cands if c in rec), None)
    conv = _assistant(rec, root.format)
    before_turns = list(conv[0]) if conv is not None else None
    alive = True
    # last turn first: dropping a turn leaves the positions of the earlier ones as they are
    for turn, text in sorted(changes, key=lambda c: -1 if c[0] is None else c[0], reverse=True):
        alive = _revise(rec, root.format, cap_col, turn, text, log, idx) and alive
    if conv is not None:
        turns, who, key = conv
        if not any(t.get(who) in ANSWER_ROLES for t in turns if isinstance(t, dict)):
            log.append({"record": idx, "action": "dropped", "why": "no answer left"})
            return False
        if not _keep_media_tokens(before_turns, turns, who, key, log, idx):
            return False
        turns[:] = [t for t in turns if t is not None]
    return alive


ANSWER_ROLES = ("gpt", "assistant")
QUESTION_ROLES = ("human", "user")
MEDIA_TOKEN = re.compile(r"<image>|<video>|<audio>")
_LEADING = re.compile(r"^(?:(?:<image>|<video>|<audio>)\s*)+")
_TRAILING = re.compile(r"(?:\s*(?:<image>|<video>|<audio>))+$")
TOKEN_DROP_WHY = "no question left to carry its <image> token"


def _keep_media_tokens(before: list, turns: list, who: str, key: str, log: list,
                       idx: int) -> bool:
    """Move the ``<image>`` tokens of dropped questions to the next kept question.

    Trainers match each image of a record to one ``<image>`` token in its text: a record
    that lost its token is refused (LLaVA counts them) or trained as text only. The
    tokens go to the next kept question (the nearest earlier one when none follows);
    False when no question is left, and the record is dropped and listed.
    """
    for p, (was, now) in enumerate(zip(before, turns)):
        if now is not None or not isinstance(was, dict) or was.get(who) not in QUESTION_ROLES:
            continue
        text = was.get(key)
        if not isinstance(text, str) or not MEDIA_TOKEN.search(text):
            continue
        kept = [q for q, t in enumerate(turns) if isinstance(t, dict)
                and t.get(who) in QUESTION_ROLES and isinstance(t.get(key), str)]
        target = next((q for q in kept if q > p), kept[-1] if kept else None)
        if target is None:
            log.append({"record": idx, "action": "dropped", "why": TOKEN_DROP_WHY,
                        "tokens": "".join(MEDIA_TOKEN.findall(text))})
            return False
        old = turns[target][key]
        turns[target][key] = _with_tokens_of(text, old)
        log.append({"record": idx, "action": "token moved",
                    "tokens": "".join(MEDIA_TOKEN.findall(text)), "before": old,
                    "after": turns[target][key]})
    return True


def _with_tokens_of(source: str, question: str) -> str:
    """``question`` carrying the media tokens of ``source``, placed where they stood there
    (LLaVA writes ``<image>\\nQ`` and ``Q\\n<image>``; tokens mid-text go in front)."""
    lead = _LEADING.match(source)
    trail = _TRAILING.search(source)
    head = lead.group(0) if lead else ""
    tail = trail.group(0) if trail and (not lead or trail.start() >= lead.end()) else ""
    middle = MEDIA_TOKEN.findall(source[len(head):len(source) - len(tail)])
    return head + ("".join(middle) + "\n" if middle else "") + question + tail


def _write_json(fh, data, style: dict) -> None:
    fh.write((json.dumps(data, indent=style["indent"], ensure_ascii=style["ensure_ascii"])
              + style["end"]).encode("utf-8"))
