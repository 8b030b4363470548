"""Moved to :mod:`capaudit.io.layouts.json` (the JSON layout's one module); this name stays
for the modules that other branches edit in this session (io/readers/llava.py,
filters/shards/plan.py) until they are merged: remove it then."""

from capaudit.io.layouts.json import (CHUNK_CHARS, MAX_RECORD_CHARS,  # noqa: F401
                                      is_json_array, iter_array_pieces, iter_array_records)
