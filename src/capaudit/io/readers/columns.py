"""Which field of a record is its image id and which its caption, and what to say when the
names are not the ones a reader knows.

Why one module: every flat-record reader (JSONL, CSV/TSV, parquet, JSON lists) picks its
columns from the same candidate names, and when none is there the user needs the same
answer from each: the columns that exist, the likely id and caption among them (by name,
then by what the sampled values look like: file names and URLs are ids, the longest text
is the caption), and the flags that read them. A file whose id field has another name
(``image/key``, ``question_id``) is never read with row numbers for ids in silence: a
field that looks like an id is named instead (:func:`id_like`), and a file of answers to
questions (``question_id``, no image field) is recognised as one (:func:`answers_file`).
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping, Sequence

from capaudit.errors import InputError

__all__ = ["ID_CANDIDATES", "CAPTION_CANDIDATES", "likely_ids", "likely_captions",
           "missing_caption", "missing_id", "id_like", "answers_file", "not_captions"]

ID_CANDIDATES = ("image_id", "image", "file_name", "filename", "image_name", "image_file",
                 "id", "key", "image_url", "url")
CAPTION_CANDIDATES = ("caption", "text", "capsfusion", "description")

# names that say "this identifies the image" (or a record): image/key, question_id, imgid, URL
_ID_NAME = re.compile(r"(?:^|[^a-z])(?:id|key|uid|guid|url|uri|path)s?$|^img|image|file|name$",
                      re.IGNORECASE)
# ids of something else than the picture: the model, the answer, the annotator, the licence
_OTHER_ID = re.compile(r"^(?:model|answer|annotator|worker|user|author|license|licence|"
                       r"category|split|dataset|source|task|prompt|conversation)", re.IGNORECASE)
_QUESTION = re.compile(r"question[_ ]?id|^qid$|^q_id$", re.IGNORECASE)
_IMAGE_NAME = re.compile(r"image|img|file|url|path|photo|picture", re.IGNORECASE)
# names that say "this is the text about the image"
_CAPTION_NAME = re.compile(r"caption|descr|text|sentence|pred|output|answer|response|summary|"
                           r"alt|title|gpt|generated", re.IGNORECASE)
_FILE_OR_URL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://\S+|\S+\.(?:jpe?g|png|gif|webp|bmp))$",
                          re.IGNORECASE)


def _texts(rows: Sequence[Mapping], col: str) -> list[str]:
    return [v for r in rows if isinstance(v := r.get(col), str)]


def likely_captions(cols: Sequence[str], rows: Sequence[Mapping] = ()) -> list[str]:
    """Columns likely to hold captions, best first: text columns named like one, then the
    text columns whose sampled values run longest (a URL or file name is never one)."""
    def mean_words(col: str) -> float:
        vals = _texts(rows, col)
        if not vals or any(_FILE_OR_URL.match(v.strip()) for v in vals[:20]):
            return 0.0
        return sum(len(v.split()) for v in vals) / len(vals)
    texty = [c for c in cols if not rows or mean_words(c) > 0]
    named = [c for c in texty if _CAPTION_NAME.search(c)]
    rest = sorted((c for c in texty if c not in named and mean_words(c) >= 3),
                  key=mean_words, reverse=True) if rows else []
    return named + rest


def likely_ids(cols: Sequence[str], rows: Sequence[Mapping] = (),
               exclude: Iterable[str] = ()) -> list[str]:
    """Columns likely to name the image, best first: the known names, names like an id
    (``image/key``, ``imgid``), then columns whose sampled values are file names or URLs."""
    skip = set(exclude)
    out = [c for c in ID_CANDIDATES if c in cols and c not in skip]
    out += [c for c in cols if c not in out and c not in skip and _ID_NAME.search(c)
            and not _OTHER_ID.match(c)]
    for c in cols:
        vals = _texts(rows, c)
        if c not in out and c not in skip and vals and all(
                _FILE_OR_URL.match(v.strip()) for v in vals[:20]):
            out.append(c)
    return out


def id_like(cols: Sequence[str], rows: Sequence[Mapping] = (), caption: str | None = None
            ) -> list[str]:
    """The columns that look like an id of some kind when none has a name a reader takes for
    the image id: the ones a silent fallback to row numbers would have ignored."""
    return [c for c in likely_ids(cols, rows, exclude=[caption] if caption else [])
            if c not in ID_CANDIDATES]


def answers_file(cols: Sequence[str]) -> str | None:
    """The question-id column of an answers file (LLaVA-Bench ``answer-file.jsonl``:
    ``question_id, prompt, text, answer_id, model_id``): question ids and no field that
    names an image. ``None`` for any other layout."""
    question = next((c for c in cols if _QUESTION.search(c)), None)
    if question is None or any(_IMAGE_NAME.search(c) for c in cols):
        return None
    return question


def _shown(cols: Sequence[str]) -> str:
    text = ", ".join(cols[:20]) + (", ..." if len(cols) > 20 else "")
    return text or "none"


def missing_caption(cols: Sequence[str], rows: Sequence[Mapping] = (), *, path=None,
                    row: int | None = None, given: str | None = None,
                    numbered: bool = False) -> InputError:
    """One line when no caption column is found (or ``given`` is not one of ``cols``):
    the columns that exist, the likely caption and id among them, the flags that read them."""
    caps = likely_captions(cols, rows)
    ids = likely_ids(cols, rows, exclude=caps[:1])
    what = f"no column '{given}'" if given else "no caption column found"
    note = "; the file has no header row, so they are numbered from 0" if numbered else ""
    hint = ""
    if caps:
        hint = f"; likely caption: {' or '.join(caps[:2])}"
        hint += f", likely image id: {ids[0]}" if ids else ""
    flags = (f"pass --caption-col {caps[0]}" + (f" --id-col {ids[0]}" if ids else "")
             if caps else "pass --caption-col naming the caption column")
    return InputError(f"{what} (columns: {_shown(cols)}{note}){hint}", path=path, row=row,
                      fix=flags)


def missing_id(cols: Sequence[str], candidates: Sequence[str], caption: str, *, path=None,
               question: str | None = None) -> InputError:
    """One line for a file whose id field has another name: it would have been read with
    row numbers for ids, joining nothing and counting each caption as an image."""
    if question is not None:
        return InputError(
            f"an answers file: '{question}' numbers questions and no column names an image "
            f"(columns: {_shown(cols)}), so its '{caption}' texts are no captions of known "
            "images", path=path,
            fix="add the benchmark's questions file (it names each question's image) or "
                f"join it to these answers; to read them as captions of their own, pass "
                f"--id-col {question} --namespace NAME (a name of yours)")
    return InputError(f"no image id column among the names readers know, but "
                      f"{' and '.join(repr(c) for c in candidates[:3])} look like ids "
                      f"(columns: {_shown(cols)})", path=path,
                      fix=f"pass --id-col {candidates[0]} (or --id-col naming another "
                          "column); ids are never invented from row numbers in silence")


def refuse_row_numbers(cols: Sequence[str], caption: str, sample=tuple, *, path=None) -> None:
    """Raise :func:`missing_id` for a file with no id column by a name readers know when it
    is an answers file or a column looks like an id by another name (``sample()``: a few
    records for the hint, read only then)."""
    question = answers_file(cols)
    like = [question] if question is not None else id_like(cols, sample(), caption=caption)
    if like:
        raise missing_id(cols, like, caption, path=path, question=question)


# what a record that is no caption looks like: a question (POPE's "Is there a dog in the
# image?" with a yes/no label), or a prompt/instruction to a model ("Describe the image.")
_PROMPT = re.compile(r"^(?:<image>\s*)?(?:please\s+)?(?:describe|provide|write|generate|give|"
                     r"explain|summari[sz]e|tell|caption|look at)\b.*\b(?:image|picture|photo|"
                     r"scene|figure)s?\b", re.IGNORECASE | re.DOTALL)
_LABEL_NAME = re.compile(r"^(?:label|answer|gt|gt_answer|ground_truth|target)s?$", re.IGNORECASE)
_YES_NO = {"yes", "no"}
NOT_CAPTIONS_SHARE = 0.8   # this share of the sampled texts or more: the records are not captions


def not_captions(cols: Sequence[str], rows: Sequence[Mapping], caption: str, *, path=None
                 ) -> InputError | None:
    """One line when the sampled ``rows``' ``caption`` texts are questions or prompts, not
    captions (a POPE question file: ``{"question_id", "image", "text": "Is there a snowboard in
    the image?", "label": "yes"}``): read as captions, every metric would measure the
    questions. Asked only when the caption column was picked by name, not given by the user
    (``--caption-col`` reads the field as captions: the user says they are)."""
    texts = [(n, v.strip()) for n, r in enumerate(rows) if isinstance(v := r.get(caption), str)]
    if not texts:
        return None
    asked = [n for n, t in texts if t.endswith("?")]
    told = [n for n, t in texts if _PROMPT.match(t)]
    found, what = max((asked, "questions"), (told, "prompts to a model"), key=lambda x: len(x[0]))
    if len(found) < NOT_CAPTIONS_SHARE * len(texts):
        return None
    label = next((c for c in cols if c != caption and _LABEL_NAME.match(c) and all(
        str(r.get(c)).strip().lower() in _YES_NO for r in rows if r.get(c) is not None)
        and any(r.get(c) is not None for r in rows)), None)
    kind = (f"yes/no questions with their answers in '{label}' (a POPE-style question file)"
            if label and what == "questions" else what)
    return InputError(f"these records hold {kind}, not captions: {len(found)} of the "
                      f"{len(texts)} sampled '{caption}' texts are "
                      f"{'questions' if what == 'questions' else 'instructions'} "
                      f"(columns: {_shown(cols)})", path=path, row=found[0] + 1,
                      fix="add the file of the captions or answers a model wrote for these "
                          f"images; to read '{caption}' as captions anyway, pass --caption-col "
                          f"{caption}")
_NESTED_TYPES = ("STRUCT", "MAP", "UNION")


def is_scalar_type(typ: str | None) -> bool:
    """Whether a DuckDB column type can hold an image id: a struct (an HF ``Image`` feature's
    ``{bytes, path}``), a map, a list or bytes never can."""
    t = (typ or "").upper()
    return not (t.startswith(_NESTED_TYPES) or t.endswith("]") or t == "BLOB")


def scalar_candidate(cols: Sequence[str], types: Mapping[str, str]) -> str | None:
    """The first id candidate (:data:`ID_CANDIDATES` order) of a scalar type."""
    return next((c for c in ID_CANDIDATES if c in cols and is_scalar_type(types.get(c))), None)


def integer_id_hint(chosen: str, cols: Sequence[str], types: Mapping[str, str],
                    rows: Sequence[Mapping]) -> str | None:
    """When the chosen id column holds no integer id in ``rows`` (names: ``ids: none``) and
    another id-named column holds one in every row (an NSD parquet's ``id`` beside its file
    ``image``), the line that offers it; the user decides whether those are image ids."""
    from capaudit.io.imageids import parse_image_id

    if not rows or any(parse_image_id(r.get(chosen)) is not None for r in rows):
        return None
    for col in [c for c in cols if c != chosen and is_scalar_type(types.get(c))]:
        named = col in ID_CANDIDATES or (_ID_NAME.search(col) and not _OTHER_ID.search(col))
        if named and all(parse_image_id(r.get(col)) is not None for r in rows):
            return (f"column '{col}' holds integer ids in every sampled row and '{chosen}' "
                    f"holds names: if '{col}' names the images, add it again with --id-col "
                    f"{col} --replace")
    return None


_NAME_FIELDS = ("file_name", "filename", "image", "image_name", "image_file", "image_path",
                "path", "file", "url", "coco_url")


def namespace_hint(chosen: str | None, rows: Sequence[Mapping]) -> str | None:
    """When the records' file-name field (not the id column) names COCO images whose number
    is the record's id in every sampled row (``"file_name": "COCO_val2014_000000391895.jpg"``
    beside ``"image_id": 391895``), the line that proposes the namespace it is evidence for;
    the ids themselves are bare numbers and stay unassigned until the user says so."""
    from capaudit.io.imageids import infer_namespace, parse_image_id

    if chosen is None or not rows:
        return None
    for col in _NAME_FIELDS:
        if col == chosen or not all(isinstance(r.get(col), str) for r in rows):
            continue
        spaces = {infer_namespace(r[col]) for r in rows}
        same = all(parse_image_id(r[col]) == parse_image_id(r.get(chosen)) for r in rows)
        if len(spaces) == 1 and (ns := spaces.pop()) in ("coco2014", "coco2017") and same:
            return (f"the '{col}' field names {ns} images with the record's id in every "
                    f"sampled record ({len(rows)}): if every id is a {ns} image id, add it "
                    f"again with --namespace {ns} --replace")
    return None


def pick_id_column(idc: str | None, given: str | None, cols: Sequence[str],
                   types: Mapping[str, str], sample) -> tuple:
    """``(id column, id hint, namespace hint)`` of a tabular file: the candidate picked by
    name (``idc``) unless it is nested (an HF ``Image`` struct is never the id: the next
    scalar candidate is), and the lines ``sets add`` prints (:func:`integer_id_hint`,
    :func:`namespace_hint`) from ``sample()``'s rows."""
    if not given and idc is not None and not is_scalar_type(types.get(idc)):
        idc = scalar_candidate(cols, types)
    offer = not given and types.get(idc) == "VARCHAR"
    if idc is None or not offer and not any(c in cols and c != idc for c in _NAME_FIELDS):
        return idc, None, None       # nothing to offer: no sample read
    rows = sample()
    return idc, integer_id_hint(idc, cols, types, rows) if offer else None, \
        namespace_hint(idc, rows)
