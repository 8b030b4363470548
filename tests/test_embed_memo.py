"""The parse's token embedding remembered by feature row (capaudit.filters.embed_memo): the
tok2vec output is bitwise the pipeline's as spaCy loads it, on real sentences, in batches of
any size and order, across memo restarts."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("spacy")


def _whole():
    import spacy

    from capaudit.filters.parse import SPACY_MODELS

    for name in SPACY_MODELS:
        try:
            return spacy.load(name, exclude=["ner"])
        except OSError:
            continue
    pytest.skip("no spaCy English model installed")


def _tok2vec(nlp, sents, batch: int):
    from spacy.tokens import Doc

    from capaudit.filters.parse import _words

    model, out = nlp.get_pipe("tok2vec").model, []
    for a in range(0, len(sents), batch):
        out += model.predict([Doc(nlp.vocab, words=_words(s)) for s in sents[a:a + batch]])
    return out


def _bitwise(xs, ys) -> bool:
    return len(xs) == len(ys) and all(
        x.shape == y.shape and x.dtype == y.dtype and (x.view("u4") == y.view("u4")).all()
        for x, y in zip(xs, ys))


def test_remembered_embedding_is_bitwise_spacys(shared, monkeypatch):
    from capaudit.filters import embed_memo
    from capaudit.filters.parse import _nlp
    from capaudit.text.sentences import caption_sentences

    path = shared("data", "enriched", "sharegpt4v_gpt4v_coco2017_890.json")
    caps = [next(t["value"] for t in r["conversations"] if t["from"] == "gpt")
            for r in json.loads(path.read_text("utf-8"))[600:700]]
    sents = [s for c in caps for s in caption_sentences(c)[1]]
    nlp, whole = _nlp(), _whole()
    layer = nlp.get_pipe("tok2vec").model.layers[0]
    assert layer.name == "remembered_embed"
    want = _tok2vec(whole, sents, 64)
    n_tokens = sum(len(s) for s in sents)
    assert n_tokens > 15_000
    # first sight, then again from the memo in another order and other batch sizes
    assert _bitwise(_tok2vec(nlp, sents, 64), want)
    assert _bitwise(_tok2vec(nlp, sents[::-1], 1)[::-1], want)
    assert _bitwise(_tok2vec(nlp, sents, 500), want)
    memo = layer._func.__self__
    assert 0 < len(memo.rows) < n_tokens / 3   # words recur: far fewer rows than tokens
    # a small memo restarts again and again: still the same floats
    monkeypatch.setattr(embed_memo, "LIMIT", 300)
    assert _bitwise(_tok2vec(nlp, sents, 7), want)
    assert len(memo.rows) <= 300


def test_a_pipeline_without_that_embedding_is_left_as_it_is():
    import spacy

    from capaudit.filters.embed_memo import remember_embeddings

    blank = spacy.blank("en")
    assert remember_embeddings(blank) is False
    blank.add_pipe("tok2vec")   # the default architecture: embed >> encode, features first
    blank.initialize()
    docs = [blank.make_doc("a dog on a bed and a dog"), blank.make_doc("")]
    want = blank.get_pipe("tok2vec").model.predict(docs)
    assert remember_embeddings(blank) is True
    assert blank.get_pipe("tok2vec").model.layers[0].name == "remembered_embed"
    for _ in range(2):   # computed, then remembered
        got = blank.get_pipe("tok2vec").model.predict(docs)
        assert [g.shape for g in got] == [(8, 96), (0, 96)] == [w.shape for w in want]
        assert (got[0].view("u4") == want[0].view("u4")).all()


def test_training_forgets_what_was_remembered():
    """A training call changes the weights the remembered rows were computed with: the memo
    starts again (it kept answering with the old weights' rows)."""
    from spacy.tokens import Doc

    from capaudit.filters.parse import _nlp

    try:
        nlp = _nlp()
    except Exception as exc:   # no English model installed
        pytest.skip(str(exc))
    layer = nlp.get_pipe("tok2vec").model.layers[0]
    if layer.name != "remembered_embed":
        pytest.skip("this pipeline's tok2vec is not remembered")
    memo = layer._func.__self__
    docs = [Doc(nlp.vocab, words=["a", "dog", "on", "a", "bed"])]
    before = len(memo.rows)   # what earlier parses in this process left
    layer.predict(docs)
    assert memo.rows and len(memo.rows) <= before + 4
    layer(docs, is_train=True)
    assert memo.rows == {} and memo.table is None
