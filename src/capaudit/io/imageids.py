"""Image ids and the namespace (dataset) they belong to.

An integer id means nothing on its own: nocaps ids 0-4,499, Flickr30k names
like ``1000092795.jpg`` and ScienceQA record ids are all numbers, and only
some of them are COCO images. So every id carries a *namespace*, inferred
only from evidence that cannot mean anything else:

- ``COCO_val2014_000000318219.jpg`` (any ``COCO_<split><year>_`` name) -> ``coco2014``;
- a COCO folder path, ``coco/train2017/000000000009.jpg`` -> ``coco2017``
  (``.../val2014/...`` -> ``coco2014``);
- a ``flickr30k``/``flickr8k`` folder -> ``flickr30k``/``flickr8k``;
- a numeric file name under some other folder (``llava_pretrain/images/00000/000000012.jpg``)
  -> that folder's first segment (``llava_pretrain``): a namespace of its own, joined with no
  COCO annotation;
- a bare number or a bare numeric file name (``318219``, ``000000000009.jpg``) -> no namespace
  (``None``, "unassigned"). Whether such ids are COCO ids is decided at audit time by the
  coverage check (:mod:`capaudit.audit.annotation_coverage`), not here.

Readers that know their dataset (Karpathy ``cocoid``, Flickr tokens) set the namespace
themselves; a COCO-layout JSON file is named by its own evidence (:func:`document_namespace`:
info block, URLs, file names, ``open_images_id``), never by the layout alone: nocaps ships
its Open Images captions in COCO's layout. ``coco2014`` and ``coco2017`` share image ids (2017 is a re-split of
the same images), so they join with each other (:func:`compatible`).
"""

from __future__ import annotations

import re

from capaudit.errors import InputError

ID_LIMIT = 10**18  # ids have at most 18 digits: every one fits a signed 64-bit integer

# ONE rule for every id capaudit reads (captions, COCO files, annotation files, shards):
# an image id is a whole number of 0 to 18 digits, given as an integer or as text of ASCII
# digits 0-9 only (re.ASCII: "\d" and str.isdigit also take full-width "１２３", which int()
# then reads as 123), in canonical form: no sign, no fraction (3.0 is no id: rounding names
# another image), no leading zero -- an Open Images key such as 0801961485534636 is text --
# except COCO's own 12-digit zero padding (000000391895, a COCO 2017 file name's stem).
_DIGITS = re.compile(r"[ \t]*([0-9]{1,18})[ \t]*", re.ASCII)
_COCO_PADDED = 12

# basename is all digits, or COCO_<split><year>_<digits>; "sa_1.jpg" is a custom id
_COCO_NAME = re.compile(r"(?:^|/)(?:COCO_[a-z]+[0-9]{4}_)?([0-9]{1,12})\.(?:jpg|jpeg|png)$",
                        re.IGNORECASE | re.ASCII)
_COCO_KEY = re.compile(r"^COCO_[a-z]+[0-9]{4}_([0-9]{1,12})$", re.IGNORECASE | re.ASCII)
_COCO_PREFIX = re.compile(r"(?:^|/)COCO_[a-z]+([0-9]{4})_[0-9]+", re.IGNORECASE | re.ASCII)
_COCO_DIR = re.compile(r"(?:^|/)(?:ms)?coco[^/]*/(?:[^/]+/)*?[a-z]*?(2014|2017)/",
                       re.IGNORECASE | re.ASCII)
_FLICKR_DIR = re.compile(r"(?:^|/)[^/]*(flickr30k|flickr8k)[^/]*/", re.IGNORECASE)

_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
# COCO's own image server: its URLs are COCO file names (val2017/000000397133.jpg)
_COCO_HOST = re.compile(r"^[a-z][a-z0-9+.-]*://(?:[a-z0-9-]+\.)*cocodataset\.org/"
                        r"(?:[^/]+/)*?[a-z]*?(2014|2017)/", re.IGNORECASE | re.ASCII)

_SAME_IDS = {"coco2014": "coco", "coco2017": "coco", "coco": "coco"}


def digits_id(text: str) -> int | None:
    """The id a text of ASCII digits names under the one rule above, else ``None``."""
    m = _DIGITS.fullmatch(text)
    if m is None:
        return None
    digits = m.group(1)
    if digits[0] == "0" and len(digits) > 1 and len(digits) != _COCO_PADDED:
        return None
    return int(digits)


def is_digit_key(key) -> bool:
    """Whether ``key`` is text of ASCII digits only (``str.isdigit`` also says yes to
    full-width and superscript digits)."""
    return type(key) is str and key.isascii() and key.isdigit()


def is_url(text: str) -> bool:
    """Whether ``text`` is a URL (``https://...``, ``s3://...``)."""
    return _SCHEME.match(text) is not None


def parse_image_id(value) -> int | None:
    """Return the integer image id for ``value`` or ``None`` if it is a custom id.

    A URL names its image by the whole URL: a trailing number is no id (89 different
    ``.../videos/<id>/thumb/1.jpg`` are 89 images, not image 1), except on COCO's own
    server or under a COCO file name (``COCO_val2014_000000391895.jpg``)."""
    if value is None or isinstance(value, (bool, float)):
        return None
    if isinstance(value, int):  # 0..18 digits, like the text form: fits int64
        return value if 0 <= value < ID_LIMIT else None
    text = str(value)
    iid = digits_id(text)
    if iid is not None:
        return iid
    match = _COCO_NAME.search(text)
    if match and (not is_url(text) or _COCO_HOST.match(text) or _COCO_PREFIX.search(text)):
        return int(match.group(1))
    return None


# An image named by text (a URL, an Open Images key, a path) has no id to join, but it is
# one image: the audit's bootstrap unit and every count of images take it as one, under a
# unit key at or above ID_LIMIT (no id is that large, so it never joins an annotation).
_KEYED_SPAN = 2**63 - 1 - ID_LIMIT


def keyed_unit(key) -> int | None:
    """The audit's unit key of an image named by the text ``key`` (``None``: no key): a
    64-bit hash, stable across runs and machines, placed past every image id."""
    if key is None:
        return None
    import hashlib

    digest = hashlib.blake2b(str(key).encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return ID_LIMIT + int.from_bytes(digest, "big") % _KEYED_SPAN


def image_units(ids: list, keys: list) -> list:
    """Each row's unit: its image id, else :func:`keyed_unit` of its key. Two rows are one
    image when they have one id, or no id and one key: the rule ``sets add``, ``sets show``
    and the audit count images by (:data:`capaudit.store.sets.IMAGE`)."""
    if None not in ids:
        return ids
    cache: dict = {}
    out = []
    for iid, key in zip(ids, keys):
        if iid is None:
            iid = cache.get(key)
            if iid is None:
                iid = cache[key] = keyed_unit(key)
        out.append(iid)
    return out


def key_image_id(key) -> int | None:
    """:func:`parse_image_id` of a sample key, which may also be a COCO file name without its
    extension (webdataset keys drop it: ``COCO_val2014_000000011340``)."""
    m = _COCO_KEY.match(key.strip()) if isinstance(key, str) else None
    return int(m.group(1)) if m else parse_image_id(key)


def is_row_key(key, meta: dict) -> bool:
    """Whether a webdataset sample's all-digit key is img2dataset's row number (``000000012``
    is the 13th URL of its list, not image 12): its JSON carries the ``url`` it was fetched
    from and no id of the image."""
    return (is_digit_key(key) and isinstance(meta, dict)
            and "url" in meta and "image_id" not in meta)


def exact_image_id(value) -> int | None:
    """The id of a field that *declares* an integer id (COCO ``image_id``/``id``, Karpathy
    ``cocoid``): an integer or a string of digits, 0 to 18 digits; ``None`` for anything
    else. Unlike :func:`parse_image_id`, never a float (``1.7`` and even ``1.0``: a float
    here is a damaged file, and rounding it names another image) and never a boolean
    (``true`` is 1 to Python)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value if 0 <= value < ID_LIMIT else None
    if isinstance(value, str):
        return digits_id(value)
    return None


def require_image_id(value, *, what: str = "image_id", path=None, row: int | None = None) -> int:
    """:func:`exact_image_id` or one line naming the file, the row and the value."""
    iid = exact_image_id(value)
    if iid is None:
        shown = repr(value)
        shown = shown if len(shown) <= 40 else shown[:37] + "..."
        raise InputError(f"{what} {shown} is not an integer image id", path=path, row=row,
                         fix="ids are whole numbers of 0 to 18 ASCII digits (no "
                             "fractions, booleans, names or leading zeros)")
    return iid


def infer_namespace(value) -> str | None:
    """The namespace ``value`` (an image key) gives unambiguous evidence for, else ``None``."""
    if value is None or isinstance(value, (bool, int, float)):
        return None
    text = str(value).strip().replace("\\", "/")
    if is_digit_key(text):  # a bare number (most keys): none of the patterns below can match
        return None
    if is_url(text):  # a URL is evidence of COCO only on COCO's server or under a COCO name
        m = _COCO_PREFIX.search(text) or _COCO_HOST.match(text)
        return ("coco2017" if m.group(1) == "2017" else "coco2014") if m else None
    m = _COCO_PREFIX.search(text)
    if m:
        return "coco2017" if m.group(1) == "2017" else "coco2014"
    m = _COCO_DIR.search(text)
    if m:
        return "coco" + m.group(1)
    m = _FLICKR_DIR.search(text)
    if m:
        return m.group(1).lower()
    if "/" in text.strip("/") and parse_image_id(text) is not None:
        return "path:" + text.strip("/").split("/", 1)[0].lower()
    return None


# what a COCO-layout file's info block, URLs and extra id fields say about its dataset, most
# specific first: nocaps borrows COCO's layout (and even its ``coco_url`` key) for Open Images
# pictures, so a nocaps or Open Images mark outweighs the COCO-looking field names
_DOC_MARKS = (("nocaps", re.compile(r"nocaps", re.IGNORECASE)),
              ("openimages", re.compile(r"open[ _-]?images", re.IGNORECASE)),
              ("flickr30k", re.compile(r"flickr30k", re.IGNORECASE)),
              ("coco", re.compile(r"cocodataset\.org|mscoco|\bcoco\b", re.IGNORECASE)))
_URL_KEYS = ("coco_url", "flickr_url", "url", "file_path", "filepath")


def document_namespace(info, images) -> str | None:
    """The namespace a COCO-layout document is evidence for, from every piece of it: the
    ``info`` block (description, url), the images' URLs and file names and extra id fields
    (``open_images_id``). The layout alone is no evidence: a file with none gives ``None``
    (unassigned; the audit's coverage check decides), never ``coco2014`` by default. An
    ``info`` that names its ``namespace`` (capaudit's ``--to coco`` export) is taken at its word."""
    if isinstance(info, dict) and isinstance(info.get("namespace"), str) and info["namespace"]:
        return info["namespace"]
    texts = [json_text(info)] if info else []
    names, extra_ids = [], False
    for img in images if isinstance(images, list) else []:
        if not isinstance(img, dict):
            continue
        texts += [str(img[k]) for k in _URL_KEYS if isinstance(img.get(k), str)]
        if isinstance(img.get("file_name"), str):
            names.append(img["file_name"])
        extra_ids = extra_ids or "open_images_id" in img
    blob = "\n".join(texts)
    for name, mark in _DOC_MARKS[:3]:
        if mark.search(blob) or name == "openimages" and extra_ids:
            return name
    from_names = {infer_namespace(n) for n in names} - {None}
    from_names |= {infer_namespace(t) for t in texts if "/" in t} - {None}
    coco_years = {ns for ns in from_names if ns in ("coco2014", "coco2017")}
    if len(coco_years) == 1:
        return coco_years.pop()
    if coco_years or _DOC_MARKS[3][1].search(blob):
        # COCO named, year from the info block (2014 and 2017 share ids: they join alike)
        return "coco2017" if "2017" in blob and "2014" not in blob else "coco2014"
    return None


def json_text(value) -> str:
    """A JSON value's text (an info block of any shape) for the marks above."""
    import json

    return json.dumps(value, ensure_ascii=False, default=str)


def compatible(a: str | None, b: str | None) -> bool:
    """Whether ids of namespaces ``a`` and ``b`` name the same images (``None``: unknown)."""
    if a is None or b is None:
        return True
    return a == b or (a in _SAME_IDS and _SAME_IDS.get(a) == _SAME_IDS.get(b))


def file_evidence(evidence: str | None, key_namespaces) -> str | None:
    """What the file itself names (a ``dataset_id`` column) as every row's namespace, when
    no row's key names another dataset; else None. ``sets add`` and a file given to
    ``audit run`` both ask this, so the two paths agree."""
    if evidence and all(compatible(ns, evidence) for ns in key_namespaces):
        return evidence
    return None


def set_namespace(row_namespaces) -> str | None:
    """One name for a set from its rows' namespaces: the common one, ``None`` if none has
    evidence, ``mixed`` when rows disagree or only some have evidence."""
    seen = set(row_namespaces)
    if not seen or seen == {None}:
        return None
    if len(seen) == 1:
        return next(iter(seen))
    return "mixed"


def annotation_namespace(path) -> str | None:
    """A COCO annotation file names its split (``instances_val2014.json``,
    ``chair_objects_trainval2014.jsonl``): that is the evidence; otherwise ``None``."""
    m = re.search(r"(?:^|[_\-./])(?:train|val|trainval|test)(2014|2017)(?:[_\-.]|$)",
                  str(path).replace("\\", "/").rsplit("/", 1)[-1], re.IGNORECASE)
    return ("coco" + m.group(1)) if m else None


# SQL twin of parse_image_id, for DuckDB-side ingestion of large files (RE2's [0-9] is ASCII).
_SQL_URL = "'^[a-z][a-z0-9+.-]*://'"
SQL_PARSE_IMAGE_ID = (
    "CASE WHEN regexp_matches(CAST({col} AS VARCHAR), "
    "'^[ \\t]*(0|[1-9][0-9]{{0,17}}|[0-9]{{12}})[ \\t]*$') "
    "THEN CAST(regexp_extract(CAST({col} AS VARCHAR), '[0-9]+') AS BIGINT) "
    "WHEN regexp_matches(CAST({col} AS VARCHAR), "
    "'(^|/)(COCO_[a-z]+[0-9]{{4}}_)?[0-9]{{1,12}}\\.(jpg|jpeg|png)$', 'i') "
    f"AND (NOT regexp_matches(CAST({{col}} AS VARCHAR), {_SQL_URL}, 'i') "
    "OR regexp_matches(CAST({col} AS VARCHAR), '(^|/)COCO_[a-z]+[0-9]{{4}}_[0-9]', 'i') "
    "OR regexp_matches(CAST({col} AS VARCHAR), '^[a-z][a-z0-9+.-]*://([a-z0-9-]+\\.)*"
    "cocodataset\\.org/([^/]+/)*?[a-z]*?(2014|2017)/', 'i')) "
    "THEN CAST(regexp_extract(CAST({col} AS VARCHAR), '([0-9]{{1,12}})\\.(jpg|jpeg|png)$', 1, 'i') AS BIGINT) "
    "ELSE NULL END"
)
