"""Per-caption records, computed once and shared by every metric and filter.

Why columnar: an audit touches every caption once (tokenize, singularize,
find objects, predict gender) and then every metric is a vectorised numpy
expression over the result. Records are flat arrays -- token counts,
sentence counts, gender codes, and object mentions in CSR form
(``m_offsets[i]:m_offsets[i+1]`` are caption ``i``'s mentions) -- so they are
cheap to pickle between worker processes and cheap to concatenate.

Why fast: identical caption strings are analysed once (model captions
repeat a lot: 22k distinct among oscar's 40k), tokenization has a
proven-identical fast path (:mod:`capaudit.text.tokenize`), singularization
is a per-token dict lookup after warm-up, and batches are split into chunks
processed on ``workers`` processes (fork) with bounded memory per chunk.
Importing NLTK costs ~5 s (it pulls in scipy) and only the rare captions off
the tokenizer's fast path need it, so workers hand such chunks back and the
parent imports NLTK once and reruns them (forked workers inherit it).

Tokens themselves are not kept (100k long captions would cost hundreds of MB).
For vocabulary we keep the distinct tokens, how many captions use each, and
for rare tokens the captions that use them (``posting_cap`` at most), which is
all the vocabulary bootstrap needs (see :mod:`capaudit.audit.bootstrap`). The records
themselves are defined in :mod:`capaudit.text.record_arrays`.
"""

from __future__ import annotations

import gc
import importlib
from collections import Counter
from bisect import bisect_right
from itertools import chain, islice
from typing import NamedTuple, Sequence

import numpy as np

from capaudit.text.gender import gender_code
from capaudit.text.objects import get_lexicon
from capaudit.text.record_arrays import NOT_KEPT, POSTING_CAP, CaptionRecords, Mention, NotKept
from capaudit.text.singularize import SINGULAR_CACHE, singular_tokens
from capaudit.text.tokenize import SlowPathDeferred, load_nltk, tokenize_caption

# the module, not the ``tokenize`` function that ``capaudit.text`` re-exports under the same
# name (``from capaudit.text import tokenize`` would give the function, and setting
# ``_DEFER`` on it would silently do nothing: every worker would import NLTK itself)
_tok = importlib.import_module("capaudit.text.tokenize")

__all__ = ["CaptionRecords", "CaptionAnalysis", "Mention", "build_records", "analyse_caption",
           "sentence_objects", "POSTING_CAP"]

CHUNK = 4096                # captions per work unit


class CaptionAnalysis(NamedTuple):
    """What :func:`analyse_caption` finds in one caption (a tuple, so it unpacks too)."""

    n_tokens: int
    n_sentences: int
    gender: int
    mentions: tuple      # (word id, category id, caption token index, sentence index)
    distinct: frozenset | None  # None when analysed without the vocabulary


def analyse_caption(caption: str, mode: str = "reference", distinct: bool = True) -> CaptionAnalysis:
    """``(n_tokens, n_sentences, gender, mentions, distinct tokens)`` of one caption.

    Token counts, distinct tokens and gender words use the line tokens, mentions
    the sentence tokens (see :mod:`capaudit.text.tokenize`).

    ``mentions`` is a tuple of ``(word id, category, token index, sentence index)``;
    ``distinct=False`` (no vocabulary asked for) leaves the distinct tokens ``None``.
    """
    sents, line = tokenize_caption(caption)
    ments = sentence_objects(sents, mode)
    if not distinct:
        return CaptionAnalysis(len(line), len(sents), gender_code(line), ments, None)
    toks = frozenset(line)
    return CaptionAnalysis(len(line), len(sents), gender_code(toks), ments, toks)


def sentence_objects(sents: list[list[str]], mode: str = "reference") -> tuple:
    """The CHAIR mentions of a caption's sentence tokens: ``(word id, category, caption token
    index, sentence index)`` each, in caption order (shared by :func:`analyse_caption` and the
    filters' :func:`~capaudit.text.mentions.caption_mentions`, which tokenize once)."""
    if len(sents) == 1:
        flat = sents[0]
    else:
        flat = list(chain.from_iterable(sents))
    found = get_lexicon(mode).find(singular_tokens(flat, mode))
    if found and len(sents) > 1:
        ends, acc = [], 0
        for s in sents:
            acc += len(s)
            ends.append(acc)
        return tuple((w, c, t, bisect_right(ends, t)) for w, c, t in found)
    return tuple((w, c, t, 0) for w, c, t in found)


def _process_chunk(args: tuple[Sequence[str], np.ndarray, str, bool]) -> CaptionRecords:
    """Analyse distinct captions; token statistics weighted by each caption's multiplicity
    (only with ``vocabulary``: counting them was a fifth of a CHAIR audit's analysis)."""
    captions, mult, mode, vocabulary = args
    was_enabled = gc.isenabled()
    gc.disable()  # millions of small tuples: the cyclic GC would cost ~30% for nothing
    try:
        n = len(captions)
        n_tok, n_sent, gen, counts = [], [], [], []
        flat: list[tuple] = []
        dists: list[frozenset] = []
        # token -> captions using it, weighted by multiplicity; first-use order. Counter's
        # update counts a caption's tokens in C (most captions occur once)
        tally: Counter = Counter()
        for i, cap in enumerate(captions):
            if not isinstance(cap, str):
                cap = "" if cap is None else str(cap)
            r = analyse_caption(cap, mode, vocabulary)
            n_tok.append(r[0])
            n_sent.append(r[1])
            gen.append(r[2])
            counts.append(len(r[3]))
            if r[3]:
                flat.extend(r[3])
            if not vocabulary:
                continue
            dists.append(r[4])
            k = int(mult[i])
            if k == 1:
                tally.update(r[4])
            else:
                for t in r[4]:
                    tally[t] += k
        if not vocabulary:
            return _chunk_records(mode, n, n_tok, n_sent, gen, counts, flat, NOT_KEPT, NOT_KEPT)
        tok_counts = dict(tally)
        # a rare token's posting list: every caption using it, in order
        rare = {t for t, c in tok_counts.items() if c <= POSTING_CAP}
        posts: dict[str, list[int]] = {t: [] for t in tok_counts if t in rare}
        for i, d in enumerate(dists):
            for t in d.intersection(rare):
                posts[t].append(i)
        del dists
    finally:
        if was_enabled:
            gc.enable()
    return _chunk_records(mode, n, n_tok, n_sent, gen, counts, flat, tok_counts, posts)


def _chunk_records(mode, n, n_tok, n_sent, gen, counts, flat, tok_counts, posts) -> CaptionRecords:
    """The chunk's lists as record arrays."""
    offs = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=offs[1:])
    m = np.array(flat, dtype=np.int32).reshape(-1, 4)
    return CaptionRecords(mode, np.array(n_tok, np.int32), np.array(n_sent, np.int32),
                          np.array(gen, np.int8), offs, m[:, 0].astype(np.int16),
                          m[:, 1].astype(np.int16), m[:, 2].copy(), m[:, 3].copy(), tok_counts,
                          posts)


def _expand(d: CaptionRecords, inv: np.ndarray, mult: np.ndarray) -> CaptionRecords:
    """Records of distinct captions -> records of all captions (``inv``: caption -> distinct)."""
    cnt_d = np.diff(d.m_offsets)
    cnt = cnt_d[inv]
    offs = np.zeros(len(inv) + 1, np.int64)
    np.cumsum(cnt, out=offs[1:])
    total = int(offs[-1])
    src = np.repeat(d.m_offsets[:-1][inv] - offs[:-1], cnt) + np.arange(total, dtype=np.int64)
    posts: dict[str, list[int]] = {}
    if isinstance(d.postings, NotKept):
        posts = NOT_KEPT
    elif d.postings:
        order = np.argsort(inv, kind="stable")
        starts = np.zeros(len(mult) + 1, np.int64)
        np.cumsum(mult, out=starts[1:])
        for t, lst in d.postings.items():
            posts[t] = sorted(int(x) for j in lst for x in order[starts[j]:starts[j + 1]])
    return CaptionRecords(d.mode, d.n_tokens[inv], d.n_sentences[inv], d.gender[inv], offs,
                          d.m_word[src], d.m_cat[src], d.m_tok[src], d.m_sent[src],
                          d.token_counts, posts)


def build_records(captions: Sequence[str], mode: str = "reference", workers: int = 2,
                  chunk: int = CHUNK, vocabulary: bool = True) -> CaptionRecords:
    """Analyse ``captions`` on up to ``workers`` processes (1 = in this process; no more than
    the cores the load leaves idle, :func:`~capaudit.core.config.idle_cores`).

    ``vocabulary=False`` leaves the token table out (``token_counts`` and ``postings`` are
    :class:`~capaudit.text.record_arrays.NotKept`): the audit asks for it only when a
    metric reads it.

    Identical captions are analysed once: the distinct captions are split in
    chunks, analysed, and the result expanded back to every caption.
    """
    get_lexicon(mode)  # fail early on a bad mode, and build before forking
    index: dict[str, int] = {}
    inv = np.fromiter((index.setdefault(c, len(index)) for c in captions), np.int64, len(captions))
    distinct = list(index)
    del index
    mult = np.bincount(inv, minlength=len(distinct))
    jobs = [(distinct[s:s + chunk], mult[s:s + chunk], mode, vocabulary)
            for s in range(0, len(distinct), chunk)]
    if workers > 1 and len(jobs) > 1:  # at most as many processes as idle cores
        from capaudit.core.config import idle_cores

        workers = min(workers, idle_cores())
    if workers <= 1 or len(jobs) <= 1:
        parts = [_process_chunk(j) for j in jobs]
    else:
        parts = _learn(_run_pool(_deferring_chunk, jobs, workers))
        redo = [i for i, p in enumerate(parts) if p is None]
        if redo:  # some caption needs NLTK: import it once here, workers inherit it
            load_nltk()
            for i, p in zip(redo, _learn(_run_pool(_worker_chunk, [jobs[i] for i in redo], workers))):
                parts[i] = p
    return _expand(CaptionRecords.concat(parts, mode), inv, mult)


def _worker_chunk(job: tuple) -> tuple[CaptionRecords, dict[str, dict[str, str]]]:
    """Worker entry: the chunk's records plus the singular forms this worker computed.

    Singularizing a token the first time runs TextBlob's regex rules (tens of
    microseconds); forked workers would lose what they learnt at exit, so every
    later call (the next ``audit_stream`` chunk, the next caption set) would
    pay again. They send the new cache entries back instead (:func:`_learn`).
    """
    marks = {m: len(c) for m, c in SINGULAR_CACHE.items()}
    rec = _process_chunk(job)
    return rec, {m: dict(islice(c.items(), marks[m], None)) for m, c in SINGULAR_CACHE.items()}


def _learn(results: list) -> list[CaptionRecords | None]:
    """Merge the workers' new singular forms into this process's cache; return the records."""
    out = []
    for r in results:
        if r is None:
            out.append(None)
            continue
        rec, news = r
        for m, d in news.items():
            cache = SINGULAR_CACHE[m]
            for k, v in d.items():
                cache.setdefault(k, v)  # a pure function of the token: same value everywhere
        out.append(rec)
    return out


def _run_pool(fn, jobs: list, workers: int) -> list:
    if len(jobs) == 1:
        return [fn(jobs[0])]
    import multiprocessing as mp   # only when a pool runs (~15 ms of every audit's start)
    import signal

    ctx = mp.get_context("fork")
    stops = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    # forked with these blocked: a worker ended before its initializer ran must not run the
    # parent's handler (a copy of the command raising KeyboardInterrupt); it unblocks them
    held = signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    try:
        pool = ctx.Pool(min(workers, len(jobs)), initializer=_quiet_worker)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    with pool:
        return list(pool.imap(fn, jobs))


def _quiet_worker() -> None:
    """In each forked worker: the parent's signal handling is not the worker's. Forked, a
    worker inherited the command's SIGTERM handler (raise KeyboardInterrupt), so the
    pool's own ``terminate()`` at the end of every multi-worker audit could print a
    worker's traceback; Ctrl-C, sent to the whole process group, printed one per worker.
    The parent handles Ctrl-C and ends the pool; a worker just ends."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    try:
        signal.set_wakeup_fd(-1)  # the parent's wake-up pipe is read by no thread here
    except ValueError:  # pragma: no cover - not the main thread
        pass
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})


def _deferring_chunk(job: tuple) -> tuple | None:
    """Worker entry: give the chunk back (None) rather than import NLTK in every worker."""
    _tok._DEFER = True
    try:
        return _worker_chunk(job)
    except SlowPathDeferred:
        return None
