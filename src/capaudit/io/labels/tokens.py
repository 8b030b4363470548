"""``tokens``: word- or token-level labels over a caption,
``{"image_id", "caption", "tokens": [...], "labels": [0/1, ...]}`` (1 = the word is
hallucinated), the shape token-level hallucination sets publish (a caption's words, each
tagged). Each token is found in the caption in order (exact, then ignoring case); a
labelled token becomes a hallucinated character span, so sentences are judged as with
``spans``.
"""

from __future__ import annotations

from capaudit.errors import InputError
from capaudit.io.labels.base import LabelLayout, Labelled, binary, json_field, text_field

__all__ = ["TokenLabels", "token_spans"]


def token_spans(caption: str, tokens: list, row: int, path) -> list[tuple[int, int]]:
    """Character span of each token, found left to right."""
    lower, at, out = caption.lower(), 0, []
    for tok in tokens:
        tok = str(tok)
        start = caption.find(tok, at)
        if start < 0:
            start = lower.find(tok.lower(), at)
        if start < 0 or not tok.strip():
            raise InputError(f"token {tok[:30]!r} is not in the caption after character {at}",
                             path=path, row=row, fix="tokens must be the caption's words, "
                                                     "in order")
        out.append((start, start + len(tok)))
        at = start + len(tok)
    return out


class TokenLabels(LabelLayout):
    """A 0/1 per token of the caption."""

    name = "tokens"
    fields = ("image_id", "caption", "tokens", "labels")
    levels = ("caption", "sentence")

    def parse(self, rec: dict, row: int, path) -> Labelled:
        caption = text_field(rec, "caption", row, path)
        tokens = json_field(rec, "tokens", row, path)
        labels = [binary(v, row, path, "labels") for v in json_field(rec, "labels", row, path)]
        if len(tokens) != len(labels):
            raise InputError(f"{len(tokens)} tokens but {len(labels)} labels", path=path,
                             row=row, fix="one label per token")
        spans = [s for s, lab in zip(token_spans(caption, tokens, row, path), labels) if lab]
        return Labelled(row, text_field(rec, "image_id", row, path), caption, spans=spans,
                        notes={"tokens": len(tokens), "hallucinated_tokens": sum(labels)})
