"""JSON and JSONL files: the layout's readers and its writer's rules, for ``sets add``, the
annotation files and the rewriter (``filter run --shards``, ``sets export --to original``).

- a JSON document read whole (:func:`load_json_document`), JSONL line by line
  (:func:`load_json_lines`), both with one-line errors naming the line;
- a JSON array read record by record, with the exact text of each record and of the gaps
  (:func:`iter_array_pieces`, :func:`iter_array_records`);
- a record written back the way its own text was written (:func:`dumps_like`), or revised
  where its captions stand (:func:`revised_in_place`).

The array, record by record:

Why: ShareGPT4V, LLaVA and COCO results files are published as one JSON array, and a
pretraining set's array (1.2M records, ~1.3 GB) must neither be held whole by a reader
nor by the writer that puts a cleaned set back in that layout. The array is read in
chunks; each record is parsed by the C decoder (``json.JSONDecoder.raw_decode``), which
also gives the record's end, so the stream carries the record's *exact text* beside its
value. Concatenating every piece in order gives back the file byte for byte: a writer
copies untouched records verbatim and re-writes only the records it changed, whatever
indentation or escaping the file was written with.

Pieces are ``("gap", index, text, None)`` (everything outside records: the opening
bracket, commas, whitespace, a BOM, the closing bracket; ``index`` is the record that
follows, ``-1`` after the last) and ``("record", index, text, value)``. Errors are one
line naming the file and the record (1-based): a document that is not an array, a
malformed or truncated record, one nested too deeply, one larger than
:data:`MAX_RECORD_CHARS`, bytes that are not UTF-8.
"""

from __future__ import annotations

import codecs
import io
import json
from pathlib import Path
from typing import IO, Any, Iterator, Mapping

from capaudit.errors import InputError

__all__ = ["iter_array_pieces", "iter_array_records", "is_json_array", "load_json_document",
           "load_json_lines", "utf8_text", "utf8_line", "dumps_like", "revised_in_place",
           "CHUNK_CHARS", "MAX_RECORD_CHARS"]

CHUNK_CHARS = 1 << 20            # characters decoded per read
MAX_RECORD_CHARS = 256 << 20     # one record larger than this is refused, not buffered
_WS = " \t\r\n"
_DECODER = json.JSONDecoder()


class _Chunks:
    """The text of a binary stream, decoded incrementally (no newline translation)."""

    def __init__(self, fh: IO[bytes], path, chunk_chars: int):
        self.fh, self.path, self.size = fh, path, chunk_chars
        self.decoder = codecs.getincrementaldecoder("utf-8")("strict")
        self.eof = False
        self.offset = 0          # bytes read so far (for the UTF-8 error)

    def read(self) -> str:
        if self.eof:
            return ""
        raw = self.fh.read(self.size)
        self.eof = not raw
        try:
            text = self.decoder.decode(raw, final=self.eof)
        except UnicodeDecodeError as exc:
            raise InputError(f"not valid UTF-8 (byte {self.offset + exc.start})",
                             path=self.path, fix="re-encode the file as UTF-8") from None
        self.offset += len(raw)
        return text


def _skip(buf: str, pos: int, chars: str) -> int:
    while pos < len(buf) and buf[pos] in chars:
        pos += 1
    return pos


def iter_array_pieces(fh: IO[bytes], path: str | Path | None = None, *,
                      chunk_chars: int = CHUNK_CHARS) -> Iterator[tuple[str, int, str, Any]]:
    """The pieces of the top-level JSON array in ``fh`` (binary), in file order."""
    src = _Chunks(fh, path, chunk_chars)
    buf = src.read()
    while len(buf) < 2 and not src.eof:
        buf += src.read()
    start = 1 if buf.startswith("\ufeff") else 0          # a BOM (Notepad's): not content
    pos = _skip(buf, start, _WS)
    while pos >= len(buf) and not src.eof:
        buf += src.read()
        pos = _skip(buf, pos, _WS)
    if buf[pos:pos + 1] != "[":
        raise InputError("not a JSON array", path=path,
                         fix="a JSON list of records, or JSONL with one object per line")
    pos, index, gap_from = pos + 1, 0, 0
    while True:
        pos = _skip(buf, pos, _WS + ("," if index else ""))
        if pos >= len(buf):
            if src.eof:
                raise InputError(f"the JSON array ends early, after record {index}",
                                 path=path, fix="the file was cut short: copy it again")
            buf, pos, gap_from = buf[gap_from:] + src.read(), pos - gap_from, 0
            continue
        if buf[pos] == "]":
            if "," in buf[gap_from:pos]:
                raise InputError(f"malformed JSON after record {index} (a comma before the "
                                 "closing bracket)", path=path, row=index,
                                 fix="remove the trailing comma")
            tail = buf[gap_from:]
            while not src.eof:
                tail += src.read()
            rest = tail[pos - gap_from + 1:]
            if rest.strip(_WS):
                raise InputError("text after the end of the JSON array", path=path,
                                 fix="one JSON array per file")
            yield "gap", -1, tail, None
            return
        if index and buf[gap_from:pos].count(",") != 1:
            raise InputError(f"malformed JSON before record {index + 1} (a comma "
                             "missing or doubled)", path=path, row=index + 1,
                             fix="repair the JSON, or use JSONL with one object per line")
        value, end, buf, pos, gap_from = _record(src, buf, pos, gap_from, index, path)
        yield "gap", index, buf[gap_from:pos], None
        yield "record", index, buf[pos:end], value
        pos, gap_from, index = end, end, index + 1   # the buffer drops it at the next read


def _record(src: _Chunks, buf: str, pos: int, gap_from: int, index: int, path):
    """Decode the record at ``pos``, reading more while it runs past the buffer."""
    while True:
        try:
            value, end = _DECODER.raw_decode(buf, pos)
        except json.JSONDecodeError as exc:
            if src.eof and (exc.pos >= len(buf) or exc.msg.startswith("Unterminated")):
                raise InputError(f"the JSON array ends early, in record {index + 1}",
                                 path=path, row=index + 1,
                                 fix="the file was cut short: copy it again") from None
            if src.eof or not _truncated(exc, len(buf)):
                raise InputError(f"record {index + 1} is not valid JSON ({exc.msg})",
                                 path=path, row=index + 1,
                                 fix="repair the JSON, or use JSONL with one object per "
                                     "line") from None
        except RecursionError:
            raise InputError(f"record {index + 1} is nested too deeply to read", path=path,
                             row=index + 1, fix="flatten the record") from None
        else:  # a number or a literal at the buffer's end may go on in the next chunk
            if src.eof or buf[end - 1] in "]}\"" or end < len(buf) and buf[end] in _WS + ",]":
                return value, end, buf, pos, gap_from
        if len(buf) - pos > MAX_RECORD_CHARS:
            raise InputError(f"record {index + 1} is larger than {MAX_RECORD_CHARS >> 20}M "
                             "characters", path=path, row=index + 1,
                             fix="split the record; captions need far less")
        buf, pos, gap_from = buf[gap_from:] + src.read(), pos - gap_from, 0


def _truncated(exc: json.JSONDecodeError, size: int) -> bool:
    """Whether the decoder stopped because the text ran out (the chunk ended inside a
    string, or within the last few characters: a cut literal, number or escape)."""
    return exc.msg.startswith("Unterminated string") or exc.pos >= size - 16


def iter_array_records(fh: IO[bytes], path: str | Path | None = None, *,
                       chunk_chars: int = CHUNK_CHARS) -> Iterator[tuple[int, Any]]:
    """``(0-based index, value)`` of each record of the top-level JSON array in ``fh``."""
    for kind, index, _, value in iter_array_pieces(fh, path, chunk_chars=chunk_chars):
        if kind == "record":
            yield index, value


def is_json_array(head: bytes) -> bool:
    """Whether a file's first bytes open a JSON array (after a BOM and whitespace)."""
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] == b"["


def utf8_text(path: Path | str, encoding: str = "utf-8", data: bytes | None = None) -> str:
    """A whole file's text (``encoding``: ``utf-8``, or ``utf-8-sig`` where a BOM is taken
    off); bytes that are not UTF-8 are one line naming the first of them and the fix.
    ``data``: the file's bytes, read already (a URL's), ``path`` then only names it."""
    try:
        return (Path(path).read_bytes() if data is None else data).decode(encoding)
    except UnicodeDecodeError as exc:
        raise InputError(f"not valid UTF-8 (byte {exc.start})", path=path,
                         fix="re-encode the file as UTF-8") from None


def utf8_line(raw: bytes, path, row: int) -> str:
    """One line of a file as text; bytes that are not UTF-8 are one line naming its row."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError("not valid UTF-8", path=path, row=row,
                         fix="re-encode the file as UTF-8") from None


def load_json_document(path: Path):
    """Load a whole JSON document with one-line errors (line number from the parser)."""
    text = utf8_text(path, "utf-8-sig")  # a BOM (Notepad's) as in JSONL
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"malformed JSON at line {exc.lineno}, column {exc.colno} ({exc.msg})",
                         path=path, fix="repair the JSON, or use JSONL with one object per line") \
            from None
    except RecursionError:
        raise InputError("JSON nested too deeply to read", path=path,
                         fix="flatten the document (captions need only a few levels)") from None


def load_json_lines(path: Path | str, data: bytes | None = None) -> Iterator[tuple[int, object]]:
    """``(1-based row, value)`` of each non-blank line of a JSONL file, with one-line errors
    naming the row (readers and annotation files share it); ``data``: the file's bytes, read
    already (a URL's, through the storage layer), ``path`` then only names it."""
    with open(path, "rb") if data is None else io.BytesIO(data) as fh:
        for row, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                yield row, json.loads(utf8_line(raw, path, row))
            except json.JSONDecodeError as exc:
                raise InputError(f"malformed JSON ({exc.msg})", path=path, row=row,
                                 fix="one JSON object per line") from None
            except RecursionError:
                raise InputError("JSON nested too deeply", path=path, row=row,
                                 fix="flatten the record") from None


def dumps_like(value, text: str, gap: str) -> str:
    """``value`` as JSON written the way ``text`` (the record's original text, which followed
    ``gap`` in the file) was: same indentation unit and depth, separators and escaping."""
    ascii_only = not any(ord(c) > 127 for c in text)
    lines = text.split("\n", 2)
    if len(lines) > 1:
        base = gap.rsplit("\n", 1)[-1] if "\n" in gap else ""
        second = lines[1][:len(lines[1]) - len(lines[1].lstrip(" \t"))]
        unit = second[len(base):] if second.startswith(base) else second
        out = json.dumps(value, indent=unit or None, ensure_ascii=ascii_only,
                         separators=(",", ": "))
        return out.replace("\n", "\n" + base) if base else out
    item = ", " if (", \"" in text or ", {" in text or ", [" in text) else ","
    key = ": " if "\": " in text else ":"
    if "," not in text:
        item = ", "
    return json.dumps(value, ensure_ascii=ascii_only, separators=(item, key))


def revised_in_place(text: str, rec, mine: Mapping, value) -> str | None:
    """The record's ``text`` with each revised caption's JSON string replaced where it stands,
    everything else kept byte for byte; ``None`` when that is not certain to be right (a
    dropped caption, a caption whose string is not found exactly once, a result that does
    not read back as ``value``, the record with its changes applied): the caller writes the
    record again with :func:`dumps_like`.

    Why: writing an indented record again runs ``json``'s pure-Python encoder (the C one
    takes no indent), 12% of a sharded filter's CPU on ShareGPT4V arrays; and what was not
    revised is left exactly as it was, whatever the file's own spacing or escapes."""
    ascii_only = text.isascii()
    olds = {p.turn: p.text for p in rec.places}
    for turn, new in mine.items():
        old = olds.get(turn, None)
        if new is None or not isinstance(old, str):
            return None
        encoded = json.dumps(old, ensure_ascii=ascii_only)
        if text.count(encoded) != 1:
            return None
        text = text.replace(encoded, json.dumps(new, ensure_ascii=ascii_only))
    return text if json.loads(text) == value else None
