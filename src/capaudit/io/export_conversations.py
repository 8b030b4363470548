"""Conversation layouts of an export: each answer under the question it answered.

Why: a LLaVA-Instruct file holds answers to questions ("What is the position of the
skateboard in the image?"). Writing every answer under one fixed "Describe the image in
detail." pairs answers with questions they did not answer, ready to train on. The
conversation readers keep each answer's question in the caption's meta (``q``, the turn
before it; :mod:`capaudit.io.readers.llava`), a filter carries it to the sets it derives,
and these writers put it back:

- ``llava`` / ``sharegpt4v``: a JSON array (what LLaVA's ``train.py`` loads with
  ``json.load``) of ``{"id", "image", "conversations": [{"from": "human", "value":
  QUESTION}, {"from": "gpt", "value": ANSWER}, ...], "namespace"}``; ``sharegpt``:
  ``{"messages": [{"role": "user", ...}, {"role": "assistant", ...}], "images": [...],
  "namespace"}``; the image is named by its file name (:mod:`capaudit.io.image_names`),
  ``namespace`` (when the set knows it) is read back by ``sets add``;
- the answers one source record gave (``sets add --turns all``) stay one record, in turn
  order, with their own questions; an answer a filter removed leaves its question out too;
- only an answer with no question (a set from a plain caption file) is written under a
  prompt: :data:`DEFAULT_QUESTION` or ``--prompt``; the export's note and provenance say
  which and for how many;
- a LLaVA record needs the ``<image>`` token in a human turn: it is put before the first
  question of a record that has none (counted); a ShareGPT question is written as it was.

A set added from a conversation file by a capaudit that did not keep questions (meta
without ``q``) is refused with the fix, unless ``--prompt`` says what to write.
"""

from __future__ import annotations

import json
from typing import IO, Iterable, Iterator

from capaudit.errors import InputError

__all__ = ["DEFAULT_QUESTION", "IMAGE_TOKEN", "CONVERSATION_FORMATS", "write_conversations",
           "group_records", "export_note"]

DEFAULT_QUESTION = "Describe the image in detail."
IMAGE_TOKEN = "<image>"
CONVERSATION_FORMATS = ("llava", "sharegpt4v", "sharegpt")


def _meta(text) -> dict:
    try:
        meta = json.loads(text) if text else {}
    except (TypeError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def group_records(rows: Iterable[dict]) -> Iterator[list[dict]]:
    """Consecutive rows that came from one source record (same ``meta.src`` and image, a
    conversation reader's rows: they carry ``turn``), in turn order; any other row alone."""
    group: list[dict] = []
    key = None
    for row in rows:
        meta = row["meta"]
        k = (meta.get("src"), row["image_key"]) if "turn" in meta else ("row", row["row_idx"])
        if group and k != key:
            yield sorted(group, key=lambda r: r["meta"].get("turn") or 0)
            group = []
        key = k
        group.append(row)
    if group:
        yield sorted(group, key=lambda r: r["meta"].get("turn") or 0)


def _turns(group: list[dict], prompt: str, counts: dict) -> list[tuple[str | None, str, bool]]:
    """``(question, answer, asked)`` of one record (``asked``: the question is the set's, not
    the prompt); counts questions kept and prompts written. A later answer that followed
    another answer in its record (no turn between) gets no question: none is invented."""
    pairs = []
    for n, row in enumerate(group):
        q = row["meta"].get("q")
        asked = isinstance(q, str) and bool(q.strip())
        if not asked and n and "q" in row["meta"]:
            pairs.append((None, row["caption"], False))
            continue
        counts["with_question" if asked else "prompt_written"] += 1
        pairs.append((q if asked else prompt, row["caption"], asked))
    return pairs


def _llava(group: list[dict], pairs, counts: dict, image: str) -> dict:
    first = group[0]
    questions = [q for q, _, _ in pairs]
    if not any(IMAGE_TOKEN in q for q in questions if q is not None):
        questions[0] = f"{IMAGE_TOKEN}\n{questions[0]}"
        counts["image_token_added"] += 1
    conv = []
    for q, (_, answer, _) in zip(questions, pairs):
        conv += ([] if q is None else [{"from": "human", "value": q}]) + \
            [{"from": "gpt", "value": answer}]
    return {"id": f"{first['image_key']}-{first['row_idx']}", "image": image,
            "conversations": conv, **_namespace(first, image)}


def _namespace(row: dict, image: str) -> dict:
    """The record's ``namespace`` field (the set's knowledge of whose ids these are, read
    back by ``sets add``), when the row has one that its image's name does not say already
    (``COCO_val2014_...`` does; ``000000226988.jpg`` or an id does not); trainers ignore a
    field they do not read."""
    from capaudit.io.imageids import infer_namespace

    ns = row.get("namespace")
    return {"namespace": ns} if ns and infer_namespace(image) != ns else {}


def _sharegpt(group: list[dict], pairs, counts: dict, image: str) -> dict:
    msgs = []
    for n, (q, answer, asked) in enumerate(pairs):
        if n == 0 and not asked and IMAGE_TOKEN not in q:
            q = IMAGE_TOKEN + q   # the prompt, as the trainers of this layout read it
        msgs += ([] if q is None else [{"role": "user", "content": q}]) + \
            [{"role": "assistant", "content": answer}]
    return {"messages": msgs, "images": [image], **_namespace(group[0], image)}


def _check_questions_kept(rows: list[dict], root_format: str | None,
                          prompt_given: bool) -> None:
    if root_format in CONVERSATION_FORMATS and rows and not prompt_given \
            and not any("q" in r["meta"] for r in rows):
        raise InputError(f"this set was added from a {root_format} file by an older capaudit "
                         "that did not keep the questions: every answer would be written "
                         "under one prompt", fix="add the file again (sets add NAME FILE "
                         "--replace) to keep them, or pass --prompt TEXT to write TEXT as "
                         "the question of every answer")


def _rows(batches, root_format: str | None, prompt_given: bool) -> Iterator[dict]:
    """Every row of ``batches`` with its meta read, after the first batch is checked."""
    for n, batch in enumerate(batches):
        rows = [{**r, "meta": _meta(r["meta"])} for r in batch.to_pylist()]
        if n == 0:
            _check_questions_kept(rows, root_format, prompt_given)
        yield from rows


def write_conversations(fh: IO[str], batches, to: str, *, prompt: str | None = None,
                        root_format: str | None = None) -> dict:
    """Write the rows of ``batches`` (Arrow batches of ``row_idx, image_key, caption,
    meta`` in row order) to ``fh`` as a JSON list in layout ``to``, one record at a time;
    returns what was written (records, answers, questions kept, prompts written and which
    prompt)."""
    from capaudit.io.image_names import image_file_name

    counts = {"records": 0, "answers": 0, "with_question": 0, "prompt_written": 0,
              "image_token_added": 0, "image_by_id": 0}
    text = prompt if prompt is not None else DEFAULT_QUESTION
    build = _sharegpt if to == "sharegpt" else _llava
    fh.write("[")
    for group in group_records(_rows(batches, root_format, prompt is not None)):
        first = group[0]
        image, named = image_file_name(first["image_key"], first.get("image_id"),
                                       first.get("namespace"), first["meta"])
        counts["image_by_id"] += not named
        record = build(group, _turns(group, text, counts), counts, image)
        fh.write(("\n" if counts["records"] == 0 else ",\n")
                 + json.dumps(record, ensure_ascii=False))
        counts["records"] += 1
        counts["answers"] += len(group)
    fh.write("\n]\n" if counts["records"] else "]\n")
    counts["prompt"] = text if counts["prompt_written"] else None
    return counts


def export_note(counts: dict) -> str:
    """One line: what the conversation export paired each answer with."""
    line = (f"{counts['answers']:,} answers in {counts['records']:,} records: "
            f"{counts['with_question']:,} under the question they answered")
    if counts["prompt_written"]:
        line += (f", {counts['prompt_written']:,} with no question in the set under the "
                 f"prompt {counts['prompt']!r}")
    if counts["image_token_added"]:
        line += f"; {IMAGE_TOKEN} put before the first question of {counts['image_token_added']:,}"
    if counts.get("image_by_id"):
        line += (f"; {counts['image_by_id']:,} records name their coco2014 image by its id: an "
                 "id does not say whether the file is COCO_train2014_ or COCO_val2014_ (the set "
                 "was not read from file names); map the ids to your image files")
    return line
