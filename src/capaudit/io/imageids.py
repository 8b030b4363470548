"""Image-id normalisation.

COCO file names (``COCO_val2014_000000318219.jpg``, ``000000000009.jpg``,
``coco/train2017/000000000009.jpg``) and plain integers map to integer image
ids so that captions join with COCO annotations; any other id is kept as text
(``image_key``) and gets no integer id.
"""

from __future__ import annotations

import re

# basename is all digits, or COCO_<split><year>_<digits>; "sa_1.jpg" is a custom id
_COCO_NAME = re.compile(r"(?:^|/)(?:COCO_[a-z]+\d{4}_)?(\d{1,12})\.(?:jpg|jpeg|png)$",
                        re.IGNORECASE)
_INT = re.compile(r"^\s*\d{1,18}\s*$")


def parse_image_id(value) -> int | None:
    """Return the integer image id for ``value`` or ``None`` if it is a custom id."""
    if value is None:
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):  # 0..18 digits, like the text form: fits int64
        return value if 0 <= value < 10**18 else None
    if isinstance(value, float) and value.is_integer() and 0 <= value < 1e18:
        return int(value)
    text = str(value)
    if _INT.match(text):
        return int(text)
    match = _COCO_NAME.search(text)
    if match:
        return int(match.group(1))
    return None


# SQL twin of parse_image_id, for DuckDB-side ingestion of large files.
SQL_PARSE_IMAGE_ID = (
    "CASE WHEN regexp_matches(CAST({col} AS VARCHAR), '^\\s*\\d{{1,18}}\\s*$') "
    "THEN CAST(trim(CAST({col} AS VARCHAR)) AS BIGINT) "
    "WHEN regexp_matches(CAST({col} AS VARCHAR), "
    "'(^|/)(COCO_[a-z]+\\d{{4}}_)?\\d{{1,12}}\\.(jpg|jpeg|png)$', 'i') "
    "THEN CAST(regexp_extract(CAST({col} AS VARCHAR), '(\\d{{1,12}})\\.(jpg|jpeg|png)$', 1, 'i') AS BIGINT) "
    "ELSE NULL END"
)
