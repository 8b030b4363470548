"""Set names: the rule checked when a set is made, and the file-name form of any name.

Why: a set name becomes a default output file (``sets export NAME`` writes
``NAME.jsonl``), a label in reports and a key in pages. A name with a path separator
or ``..`` would write outside the working folder; a control character breaks lines and
terminals. New names are checked against :func:`check_set_name` wherever a set is
created (``sets add``, the API, filters, enrich, caption); names already stored are
still exported safely through :func:`safe_file_name`.
"""

from __future__ import annotations

import unicodedata

from capaudit.errors import InputError

__all__ = ["MAX_NAME", "check_set_name", "check_path_text", "safe_file_name",
           "escape_markdown_html", "did_you_mean"]

MAX_NAME = 200


def check_set_name(name: str) -> str:
    """``name`` in NFC when it is a usable set name, else one line naming the rule it
    breaks."""
    fix = "use letters, digits, '-', '_', '.' or spaces, e.g. nic_filtered"
    if not isinstance(name, str) or not name.strip():
        raise InputError("the set name is empty", fix="give the set a name")
    if len(name) > MAX_NAME:
        raise InputError(f"the set name is {len(name)} characters long (at most {MAX_NAME})",
                         fix="choose a shorter name")
    if "/" in name or "\\" in name:
        raise InputError(f"the set name {name!r} contains a path separator ('/' or '\\')",
                         fix=fix)
    if ".." in name or name.strip() == ".":
        raise InputError(f"the set name {name!r} is '.' or contains '..'", fix=fix)
    if any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in name):
        raise InputError(f"the set name {name!r} contains a control character", fix=fix)
    # one Unicode form: 'café' typed as é (NFC) or as e + U+0301 (NFD) is one name
    return unicodedata.normalize("NFC", name)


def check_path_text(path) -> None:
    """Refuse a path whose name is not valid UTF-8 (Python holds its bytes as surrogates):
    the store keeps every source path as text and cannot hold it."""
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise InputError("the file name is not valid UTF-8", path=shown,
                         fix="rename the file (or a folder above it) to a UTF-8 name") from None


def safe_file_name(name: str, default: str = "set") -> str:
    """A file name made from ``name`` that stays in its folder: letters, digits, ``-``,
    ``_`` and inner dots kept, everything else ``_``; never empty, never hidden."""
    keep = "".join(c if (c.isalnum() or c in "-_.") and c.isprintable() else "_"
                   for c in str(name))[:MAX_NAME]
    keep = keep.strip(".").replace("..", "_")
    while len(keep.encode("utf-8")) > MAX_NAME:  # 200 letters of 'é' are 400 bytes: over
        keep = keep[:-1]                         # a file system's 255 with ".jsonl" added
    return keep or default


def escape_markdown_html(text: str) -> str:
    """Markdown whose text cannot carry HTML: every ``<`` outside code spans becomes
    ``&lt;`` (no tag can open without it, so a set named ``<script>`` shows as text in any
    Markdown viewer); ``>`` and ``&`` stay, so arrows like ``->`` read as written. Code
    spans stay as they are, since a viewer shows them literally already."""
    import re

    parts = re.split(r"(`[^`\n]*`)", text)
    return "".join(p if p.startswith("`") and p.endswith("`") and len(p) > 1 else
                   p.replace("<", "&lt;") for p in parts)


def did_you_mean(name: str, choices, otherwise: str = "") -> str:
    """``did you mean 'x'?`` naming the choice closest to a mistyped ``name``, else
    ``otherwise``: the fix of an unknown-name error."""
    import difflib

    close = difflib.get_close_matches(name, list(choices), n=1)
    return f"did you mean '{close[0]}'?" if close else otherwise
