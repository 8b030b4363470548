"""The reference-faithful LSTM leakage classifier, made fast on CPUs.

Faithful to rebnej/lick-caption-bias ``lstm_leakage.py``: vocabulary from the
train split only (at most 25k words, ``<unk>`` = 0 and ``<pad>`` = 1, both
embedding rows zeroed at start), embedding 100, 2-layer bidirectional LSTM with
hidden 256 and dropout 0.5 (on the embeddings, between the layers and on the
concatenated last forward/backward states), one logit, BCE-with-logits, Adam
lr 5e-5, batch 64, 20 epochs, no early stopping, the model after the last epoch
is scored.

Speed. The network is small, so a seed is all GEMMs: 4.6 MFLOP per token
forward, x3 with backward (13.8 MFLOP), 59,935 tokens x 20 epochs = 16.6 TFLOP
for the 5,966 oscar training captions. This box's cores (AMD EPYC, AVX2) reach
~75 GFLOP/s per core in a square fp32 ``torch.matmul``, so the compute bound is
~220 CPU seconds, ~110 s on 2 free cores; one dense training step reaches ~70 %
of that peak (as much as the same GEMMs issued one by one through
``torch.matmul``), the packed path ~60 %, so a seed costs ~310 CPU seconds:
~2.5-3 min on 2 idle cores (measured 141-192 s per seed; ``python
benchmarks/bench_lic.py flops`` and ``speed`` give these figures).
Getting that close to the bound takes keeping the GEMMs busy. The reference batches
with torchtext's ``BucketIterator``: every epoch it shuffles the train split,
sorts it by length in pools of 100 batches (a LIC split of 5,966 captions is
one pool), cuts batches of 64 and shuffles their order. We do the same, which means almost
every batch has captions of a single length: those run through ``nn.LSTM`` on a
plain dense tensor (oneDNN's fused RNN kernel, ~15 % faster than the packed
path and with no padding at all); the few batches that straddle two lengths
run packed exactly as in the reference, so the final states are those of each
caption's own last token in both cases. All batches are cut from one
pre-built id matrix with a single index op, losses never leave the device
during an epoch, and evaluation runs under ``torch.inference_mode``.

Denormals. On CPU we turn on flush-to-zero (``torch.set_flush_denormal``,
process-wide) as a guard: late in training some gate gradients and Adam
moments can fall into the denormal range, which x86 cores handle in microcode
(a large slowdown when it happens). Values below 1e-38 do not change the
result. (On our shared 2-core box epoch times also varied 5-50 s with the load
of other processes, so we did not isolate how much this guard saves.)
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn

UNK, PAD = "<unk>", "<pad>"


def build_vocab(token_lists: Sequence[Sequence[str]], max_size: int = 25000) -> dict[str, int]:
    """Word -> index as torchtext's ``build_vocab``: specials first, then by frequency, ties alphabetical."""
    counts = Counter(t for toks in token_lists for t in toks)
    counts.pop(UNK, None)
    counts.pop(PAD, None)
    words = sorted(counts, key=lambda w: (-counts[w], w))[:max_size]
    stoi = {UNK: 0, PAD: 1}
    for w in words:
        stoi[w] = len(stoi)
    return stoi


def encode(token_lists: Sequence[Sequence[str]], stoi: dict[str, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids [N, T_max] padded with <pad>, lengths [N]); empty captions become one <unk>."""
    seqs = [[stoi.get(t, 0) for t in toks] or [0] for toks in token_lists]
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.long)
    ids = torch.full((len(seqs), int(lengths.max())), stoi[PAD], dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return ids, lengths


class BiLSTMNet(nn.Module):
    """Embedding -> dropout -> 2-layer BiLSTM -> [h_fwd; h_bwd] -> dropout -> linear."""

    def __init__(self, vocab_size: int, emb: int = 100, hidden: int = 256, layers: int = 2,
                 dropout: float = 0.5, pad_idx: int = 1):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb, padding_idx=pad_idx)
        self.rnn = nn.LSTM(emb, hidden, num_layers=layers, bidirectional=True, dropout=dropout)
        self.fc = nn.Linear(2 * hidden, 1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor | None) -> torch.Tensor:
        """``ids`` is [T, B]; ``lengths`` (descending, on CPU) only when lengths differ."""
        x = self.dropout(self.embedding(ids))
        if lengths is not None:
            x = nn.utils.rnn.pack_padded_sequence(x, lengths)
        _, (h, _) = self.rnn(x)
        return self.fc(self.dropout(torch.cat((h[-2], h[-1]), dim=1))).squeeze(1)


def _run_batch(net: BiLSTMNet, ids: torch.Tensor, lengths: torch.Tensor, idx: torch.Tensor,
               device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward one batch of item indices ``idx``; returns (logits, the order used)."""
    lens = lengths[idx]
    lens, order = torch.sort(lens, descending=True, stable=True)
    idx = idx[order]
    t_max = int(lens[0])
    batch = ids[idx, :t_max].t().contiguous().to(device, non_blocking=True)
    packed_lengths = None if int(lens[-1]) == t_max else lens
    return net(batch, packed_lengths), idx


def bucket_batches(lengths: torch.Tensor, batch_size: int, gen: torch.Generator,
                   pool_batches: int = 100) -> list[torch.Tensor]:
    """One epoch of BucketIterator-style batches.

    Shuffle all items; cut pools of ``pool_batches`` x ``batch_size``; in each
    pool stable-sort by length, cut batches and shuffle their order (torchtext
    legacy ``pool()``). A LIC train split of <= 6,400 captions is one pool.
    """
    perm = torch.randperm(len(lengths), generator=gen)
    out: list[torch.Tensor] = []
    for pool in torch.split(perm, batch_size * pool_batches):
        order = np.argsort(lengths[pool].numpy(), kind="stable")
        batches = list(torch.split(pool[torch.from_numpy(order)], batch_size))
        out += [batches[i] for i in torch.randperm(len(batches), generator=gen).tolist()]
    return out


class LSTMClassifier:
    """Train-and-score object for one LIC classifier (fresh network per ``fit_score``)."""

    name = "lstm"
    mask_token: str | None = None  # None: the attribute's word ("genderword" / "raceword")
    unk_token = UNK
    default_epochs = 20

    def __init__(self, emb: int = 100, hidden: int = 256, layers: int = 2, dropout: float = 0.5,
                 lr: float = 5e-5, batch_size: int = 64, max_vocab: int = 25000,
                 device: str | torch.device = "cpu"):
        self.emb, self.hidden, self.layers, self.dropout = emb, hidden, layers, dropout
        self.lr, self.batch_size, self.max_vocab = lr, batch_size, max_vocab
        self.device = torch.device(device)

    def config(self) -> dict:
        """Everything that changes the result (used in cache keys)."""
        return {"classifier": "lstm", "emb": self.emb, "hidden": self.hidden, "layers": self.layers,
                "dropout": self.dropout, "lr": self.lr, "batch_size": self.batch_size,
                "max_vocab": self.max_vocab, "batching": "bucket-v1"}

    def fit_score(self, train_tokens: Sequence[Sequence[str]], train_labels: Sequence[int],
                  test_tokens: Sequence[Sequence[str]], test_labels: Sequence[int], *, seed: int,
                  epochs: int | None = None,
                  on_epoch: Callable[[int, int], None] | None = None) -> dict:
        """Train on the train split for ``epochs`` and return the LIC score on the test split."""
        epochs = self.default_epochs if epochs is None else epochs
        if self.device.type == "cpu":
            torch.set_flush_denormal(True)
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        stoi = build_vocab(train_tokens, self.max_vocab)
        tr_ids, tr_len = encode(train_tokens, stoi)
        te_ids, te_len = encode(test_tokens, stoi)
        y_tr = torch.tensor(train_labels, dtype=torch.float32, device=self.device)
        y_te = torch.tensor(test_labels, dtype=torch.float32)

        net = BiLSTMNet(len(stoi), self.emb, self.hidden, self.layers, self.dropout, stoi[PAD])
        with torch.no_grad():
            net.embedding.weight[stoi[UNK]].zero_()
            net.embedding.weight[stoi[PAD]].zero_()
        net.to(self.device)
        opt = torch.optim.Adam(net.parameters(), lr=self.lr)
        loss_fn = nn.BCEWithLogitsLoss()

        for epoch in range(epochs):
            net.train()
            for idx in bucket_batches(tr_len, self.batch_size, gen):
                logits, idx = _run_batch(net, tr_ids, tr_len, idx, self.device)
                loss = loss_fn(logits, y_tr[idx.to(self.device)])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            if on_epoch is not None:
                on_epoch(epoch + 1, epochs)

        probs = self.predict_proba(net, te_ids, te_len)
        return score_probs(probs, y_te) | {"n_train": len(train_labels), "n_test": len(test_labels),
                                            "vocab_size": len(stoi), "epochs": epochs}

    @torch.inference_mode()
    def predict_proba(self, net: BiLSTMNet, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """P(label 1) for every item, in input order."""
        net.eval()
        out = torch.empty(len(lengths))
        for idx in torch.split(torch.argsort(lengths, stable=True), 256):
            logits, idx = _run_batch(net, ids, lengths, idx, self.device)
            out[idx] = torch.sigmoid(logits.float()).cpu()
        return out


def score_probs(probs: torch.Tensor, labels: torch.Tensor) -> dict:
    """LIC score = mean over items of 1[correct] x confidence, x 100 (and plain accuracy)."""
    pred = (probs >= 0.5).float()
    conf = torch.maximum(probs, 1 - probs)
    correct = (pred == labels).float()
    score = float((correct * conf).mean()) * 100
    if math.isnan(score):  # pragma: no cover - empty test split is rejected upstream
        score = 0.0
    return {"score": score, "accuracy": float(correct.mean()) * 100}
