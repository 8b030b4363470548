"""Flickr's caption tokens (``results_20130124.token``, ``Flickr8k.token.txt``): one caption a
line, ``IMAGE.jpg#N<TAB>caption``.

Read by ``sets add`` (:class:`capaudit.io.readers.flickr.FlickrTokenReader`) and written
back by ``sets export --to original``
(:class:`capaudit.io.rewrite.text_lines.FlickrTokenRewriter`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import IO, Iterator

from capaudit.errors import InputError
from capaudit.io.layouts.json import utf8_line

__all__ = ["LINE", "lines", "token_lines", "split", "revised"]

LINE = re.compile(r"^([^\t#]+)#(\d+)\t(.*)$")   # image name, caption number, caption


def lines(fh: IO[bytes], path) -> Iterator[tuple[int, str]]:
    """``(1-based row, line with its end)`` of every line, split at ``\\n`` only: the reader's
    rows (``meta.src``) and the writer's must be the same lines, and a caption may hold a
    lone ``\\r`` (a text-mode split there put a revision on the wrong line)."""
    for row, raw in enumerate(fh, start=1):
        yield row, utf8_line(raw, path, row)


def token_lines(fh: IO[bytes], path: Path) -> Iterator[tuple[int, re.Match]]:
    """``(1-based line, LINE match)`` of each non-blank line (of :func:`lines`, read here
    in the same loop: one generator less per caption); a line that is not UTF-8 or not a
    token line is named by its row."""
    for row, raw in enumerate(fh, start=1):
        text = utf8_line(raw, path, row)
        line = text.rstrip("\r\n")
        if row == 1:   # a BOM is no part of the first image's name
            line = line.removeprefix("\ufeff")
        if not line.strip():
            continue
        m = LINE.match(line)
        if not m:
            raise InputError("line is not 'IMAGE.jpg#N<TAB>caption'", path=path,
                             row=row, fix="one caption per line, tab after #N")
        yield row, m


def split(line: str) -> tuple[str, str]:
    """(image name, caption) of a line as read, its line end included."""
    head, _, rest = line.partition("\t")
    return head.split("#")[0].removeprefix("\ufeff"), rest.rstrip("\r\n")


def revised(line: str, caption: str) -> str:
    """``line`` with its caption replaced (its ``IMAGE#N`` and final newline kept)."""
    head = line.partition("\t")[0]
    return f"{head}\t{caption}" + ("\n" if line.endswith("\n") else "")
