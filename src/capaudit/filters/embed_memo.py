"""The parse's token embedding, remembered by the token features it is a function of.

Why: spaCy's ``tok2vec`` is ``embed >> encode``. The embedding of a token (six hashed
tables of its NORM, PREFIX, SUFFIX, SHAPE, SPACY and IS_SPACE ids, concatenated, then one
maxout layer with layer norm) was a fifth of the filter's parse CPU on distinct long
captions (~1.0 of ~4.0 CPU-s on the benchmark's ``vlm`` corpus), yet those 50k tokens hold
only ~8.4k distinct feature rows: words recur even where sentences do not.

Why it is exact: every step after the feature extraction works row by row. A hashed table
gives a row of sums of the rows the id hashes to; the concatenation copies; the maxout's
matrix product computes each output row from its input row alone (BLIS sums each entry
over ``k`` in the same order whatever the number of rows: checked bitwise for batches of
1 to 8,366 rows), then adds the bias and takes the maximum piece per row; the layer norm
normalizes each row by its own moments; dropout is off outside training. So a token's
embedding is a function of its feature row, and computing it once per distinct row, in
any batch, gives the same floats (``tests/test_embed_memo.py`` compares the tok2vec
output bitwise with the pipeline as spaCy loads it). The encoder (the window layers, whose
output depends on the neighbours) runs on every token as before.

Training (``is_train``) goes through the embedding itself, unchanged, and forgets what was
remembered (the weights it was computed with are about to change). Weights loaded into a
remembered model in place (``from_bytes``/``from_disk``) are not seen: load a new pipeline.
Parses of one pipeline from several threads take turns in the memo (a lock), so each
gets the rows it asked for.
"""

from __future__ import annotations

import threading

__all__ = ["remember_embeddings", "LIMIT"]

#: distinct feature rows kept (96 floats each: ~19 MB); the memo restarts beyond it
LIMIT = 50_000


def remember_embeddings(nlp) -> bool:
    """Put the memo in front of the pipeline's ``tok2vec`` embedding (True), or leave the
    pipeline as it is when its tok2vec is not ``embed >> encode`` with a feature extractor
    first (another architecture: False)."""
    from thinc.api import Model

    if "tok2vec" not in nlp.pipe_names:
        return False
    tok2vec = nlp.get_pipe("tok2vec").model
    embed = tok2vec.get_ref("embed") if tok2vec.has_ref("embed") else None
    if embed is None or not tok2vec.layers or tok2vec.layers[0] is not embed \
            or not embed.layers or embed.layers[0].name != "extract_features":
        return False
    memo = _Memo(embed)
    tok2vec.layers[0] = Model("remembered_embed", memo.forward, layers=[embed])
    return True


class _Memo:
    """Distinct feature rows (bytes of the row) -> row of ``table`` holding the embedding."""

    def __init__(self, embed):
        self.embed = embed
        self.rows: dict[bytes, int] = {}
        self.table = None
        self.lock = threading.Lock()   # rows and table change together

    def forward(self, model, docs, is_train: bool):
        if is_train:
            with self.lock:
                self.rows, self.table = {}, None
            return self.embed(docs, is_train=True)
        extract = self.embed.layers[0]
        features = extract(docs, is_train=False)[0]
        keys = [[r.tobytes() for r in f] for f in features]
        with self.lock:
            out = self._rows_of(keys, features)

        def backprop(dY):
            raise NotImplementedError("the remembered embedding is for prediction only")

        return out, backprop

    def _rows_of(self, keys: list, features: list) -> list:
        """Each doc's embedding rows, computing those of rows not seen before."""
        import numpy as np

        rest = self.embed.layers[1:]
        if sum(map(len, keys)) + len(self.rows) > LIMIT:
            self.rows, self.table = {}, None
        rows, new = self.rows, {}
        for doc_keys, f in zip(keys, features):
            for i, k in enumerate(doc_keys):
                if k not in rows and k not in new:
                    new[k] = f[i]
        if new:
            X = [np.ascontiguousarray(np.stack(list(new.values())))]
            for layer in rest:
                X = layer(X, is_train=False)[0]
            start = len(rows)
            rows.update(zip(new, range(start, start + len(new))))
            self.table = X[0] if self.table is None else np.concatenate([self.table, X[0]])
        table = self.table
        if table is None:   # no token in any doc
            table = np.zeros((0, self.embed.get_dim("nO")), np.float32)
        return [table[np.fromiter((rows[k] for k in doc_keys), np.intp, len(doc_keys))]
                for doc_keys in keys]
