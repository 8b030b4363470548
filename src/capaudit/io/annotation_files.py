"""Image-level annotations: instance categories, CHAIR ground truth, demographics.

All loaders return plain dicts keyed by integer image id so every metric can
look up an image in O(1). Accepted forms:

- instance categories: the real COCO instances JSON (``images``,
  ``annotations``, ``categories``) or JSONL ``{"image_id", "categories"}``;
- CHAIR ground truth: JSONL ``{"image_id", "objects"}`` (or built from
  instances plus human captions, see :mod:`capaudit.text.chair_gt`);
- demographics: JSONL or CSV ``image_id, gender, skin_tone`` with gender in
  ``male/female`` (also ``man/woman``) and skin tone ``light/dark``; or
  derived from human captions (:func:`demographics_from_captions`).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from capaudit.core.names import check_path_text
from capaudit.errors import InputError
from capaudit.io.annotation_columns import read_name_sets
from capaudit.io.imageids import require_image_id
from capaudit.io.layouts import csv as csv_layout
from capaudit.io.layouts.json import load_json_lines

GENDER_ALIASES = {"male": "male", "man": "male", "m": "male", "men": "male",
                  "female": "female", "woman": "female", "f": "female", "women": "female"}
SKIN_ALIASES = {"light": "light", "dark": "dark"}


@dataclass
class Annotations:
    """Everything the metrics may need about the images, keyed by image id."""

    instances: dict[int, frozenset[str]] | None = None
    instance_counts: dict[int, dict[str, int]] | None = None
    chair_gt: dict[int, frozenset[str]] | None = None
    gender: dict[int, str] = field(default_factory=dict)      # 'male' / 'female'
    skin_tone: dict[int, str] = field(default_factory=dict)   # 'light' / 'dark'
    sources: dict[str, str] = field(default_factory=dict)     # kind -> path


def _check_exists(path: Path) -> None:
    check_path_text(path)
    if not path.exists():
        raise InputError("file not found", path=path, fix="check the path")
    if path.is_dir():
        raise InputError("it is a folder, not a file", path=path,
                         fix="give the annotation file inside it")
    if path.suffix.lower() in {".pkl", ".pickle", ".p"}:
        raise InputError("pickle files are refused: they can run arbitrary code when loaded",
                         path=path, fix="convert it to JSON or JSONL first")


def iter_jsonl(path: Path) -> Iterable[tuple[int, dict]]:
    """Yield (1-based row, record) from a JSONL file with clear errors."""
    for row, rec in load_json_lines(path):
        if not isinstance(rec, dict):
            raise InputError("each line must be a JSON object", path=path, row=row)
        yield row, rec


def _image_id(rec: Mapping, path: Path, row: int) -> int:
    if "image_id" not in rec:
        raise InputError("missing column 'image_id'", path=path, row=row,
                         fix="each record needs an 'image_id'")
    # the one id rule of every file (imageids): 3.0, "１２３" and "0801" are refused here as
    # a COCO captions file refuses them, never read as 3, 123 or 801
    return require_image_id(rec["image_id"], path=path, row=row)


def string_list(value, field: str, path: Path, row: int | None = None) -> list[str]:
    """A list-valued field (``objects``, ``categories``) as its names. A bare string is
    refused, not iterated (``"bowl"`` would become b, o, w, l), and so is a list holding
    anything but strings (``[1, null]`` would store "1" and NULL)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        got = type(value).__name__ if not isinstance(value, list) else "list with non-strings"
        raise InputError(f"'{field}' must be a list of strings, not a {got}", path=path, row=row,
                         fix=f'write "{field}": ["dog", "bowl"] (an empty list for none)')
    return value


def _coco_ids(data: dict, path: Path) -> tuple[list[int], list[tuple[int, str, bool]]]:
    """The ``images`` ids and ``(image_id, category name, iscrowd)`` of each annotation of a
    COCO instances JSON, every id exact (:func:`require_image_id`), each fault one line."""
    images = data.get("images", [])
    if not isinstance(images, list) or not all(isinstance(i, dict) and "id" in i for i in images):
        raise InputError("'images' must be a list of objects with an 'id'", path=path)
    ids = [require_image_id(img["id"], what=f"images entry {i + 1} id", path=path)
           for i, img in enumerate(images)]
    cats = data["categories"]
    if not isinstance(cats, list) or not all(isinstance(c, dict) and isinstance(c.get("name"), str)
                                             and "id" in c for c in cats):
        raise InputError("'categories' must be a list of objects with 'id' and 'name'", path=path)
    names = {c["id"]: c["name"] for c in cats if isinstance(c["id"], (int, str))}
    if not isinstance(data["annotations"], list):
        raise InputError("'annotations' must be a list", path=path)
    pairs = []
    for i, ann in enumerate(data["annotations"]):
        cat = ann.get("category_id") if isinstance(ann, dict) else None
        if not isinstance(cat, (int, str)) or cat not in names or "image_id" not in ann:
            raise InputError(f"annotation {i} lacks an image_id or a known category_id", path=path)
        pairs.append((require_image_id(ann["image_id"], what=f"annotation {i} image_id",
                                       path=path), names[ann["category_id"]],
                      bool(ann.get("iscrowd"))))
    return ids, pairs


def _load_coco_instances(path: Path, exact: bool = False) -> tuple[dict, dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise InputError(f"malformed JSON ({exc.__class__.__name__})", path=path) from None
    if not isinstance(data, dict) or "annotations" not in data or "categories" not in data:
        raise InputError("not a COCO instances file (needs 'annotations' and 'categories')",
                         path=path)
    ids, pairs = _coco_ids(data, path)
    counts: dict[int, Counter] = defaultdict(Counter)
    for iid in ids:
        counts[iid]  # images without instances have an empty set
    crowds = set()
    for iid, name, crowd in pairs:
        counts[iid][name] += 1
        if crowd:
            crowds.add((iid, name))
    cats = {iid: frozenset(c) for iid, c in counts.items()}
    if exact:   # a crowd region holds an unknown number: its category has no exact count
        return cats, {iid: {k: n for k, n in c.items() if (iid, k) not in crowds}
                      for iid, c in counts.items()}
    return cats, {iid: dict(c) for iid, c in counts.items()}


def load_instances(path: str | Path, *, exact: bool = False
                   ) -> tuple[Mapping[int, frozenset[str]], dict[int, dict[str, int]] | None]:
    """Per-image instance categories (and counts where the file has them: a COCO instances
    JSON). ``exact``: each category's exact number of instances, its non-crowd annotations,
    none for a category with an ``iscrowd`` one (a crowd region holds an unknown number).

    A JSONL file in the plain shape is read in columnar form (:mod:`.annotation_columns`);
    any other is read row by row below, where each row is checked."""
    path = Path(path)
    _check_exists(path)
    if path.suffix.lower() == ".json":
        return _load_coco_instances(path, exact=exact)
    return _name_sets(path, "categories"), None


def load_chair_gt(path: str | Path) -> Mapping[int, frozenset[str]]:
    """CHAIR ground truth: JSONL ``{"image_id", "objects"}`` (columnar when the file is in the
    plain shape, else row by row with each row checked, as :func:`load_instances`)."""
    path = Path(path)
    _check_exists(path)
    return _name_sets(path, "objects")


def _name_sets(path: Path, column: str) -> dict[int, frozenset[str]]:
    """``{image_id: names}`` of a JSONL file of ``{"image_id", column: [...]}`` rows: columnar
    when the file is in the plain shape (:mod:`.annotation_columns`), else row by row with
    each row checked."""
    if (fast := read_name_sets(path, column)) is not None:
        return fast
    sets: dict[int, frozenset[str]] = {}
    for row, rec in iter_jsonl(path):
        if column not in rec:
            raise InputError(f"missing column '{column}'", path=path, row=row,
                             fix=f"use {{'image_id', '{column}': [...]}} per line")
        sets[_image_id(rec, path, row)] = frozenset(string_list(rec[column], column, path, row))
    return sets


def _norm(value, aliases: Mapping[str, str], what: str, path: Path, row: int) -> str | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in {"", "null", "none", "na", "unknown"}):
        return None
    key = str(value).strip().lower()
    if key not in aliases:
        raise InputError(f"unknown {what} {value!r}", path=path, row=row,
                         fix=f"use one of {sorted(set(aliases.values()))} or leave it empty")
    return aliases[key]


def load_demographics(path: str | Path) -> tuple[dict[int, str], dict[int, str]]:
    """Image-level gender and skin-tone labels from JSONL or CSV."""
    path = Path(path)
    _check_exists(path)
    if path.suffix.lower() == ".csv":
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv_layout.dict_rows(fh))
    else:
        rows = list(iter_jsonl(path))
    gender: dict[int, str] = {}
    skin: dict[int, str] = {}
    for row, rec in rows:
        iid = _image_id(rec, path, row)
        if "gender" not in rec and "skin_tone" not in rec:
            raise InputError("needs a 'gender' or 'skin_tone' column", path=path, row=row)
        g = _norm(rec.get("gender"), GENDER_ALIASES, "gender", path, row)
        s = _norm(rec.get("skin_tone"), SKIN_ALIASES, "skin tone", path, row)
        if g:
            gender[iid] = g
        if s:
            skin[iid] = s
    return gender, skin


def demographics_from_captions(image_ids: Iterable[int], predicted: Iterable[str],
                               rule: str = "all") -> dict[int, str]:
    """Derive image gender from the predicted gender of its human captions.

    ``predicted`` holds 'male' / 'female' / 'neutral' per caption (see
    :mod:`capaudit.text.gender`). ``rule='all'``: every caption of the image
    says male (man words, no woman words) -> male, and vice versa;
    ``rule='majority'``: more than half of the captions.
    """
    if rule not in {"all", "majority"}:
        raise InputError(f"unknown rule {rule!r}", fix="use --rule all or --rule majority")
    per_image: dict[int, Counter] = defaultdict(Counter)
    for iid, g in zip(image_ids, predicted):
        per_image[iid][g] += 1
    out: dict[int, str] = {}
    for iid, c in per_image.items():
        total = sum(c.values())
        for g in ("male", "female"):
            if (rule == "all" and c[g] == total) or (rule == "majority" and c[g] * 2 > total):
                out[iid] = g
    return out
