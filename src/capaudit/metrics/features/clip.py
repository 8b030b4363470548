"""CLIP scores of captions: CLIPScore, long captions without silent truncation, retrieval.

No CLIP weights ship with capaudit: the model is a local folder or a Hugging Face
id already in the user's cache (transformers ``CLIPModel`` + its tokenizer and
image processor; nothing is downloaded, ``local_files_only``). A checkpoint with
more text positions than 77 (Long-CLIP: 248) is used at its full length.

* ``clipscore`` = 100 * max(cos(text, image), 0) per caption (CLIP-S of Hessel et
  al. 2021 with LOTUS's scale 100 instead of 2.5).
* Captions longer than the text positions are never cut silently. ``long_text``:
  ``truncate`` (default) keeps the first positions and *counts* every truncated
  caption (reported beside the value); ``chunk`` cuts the caption into
  sentence-aligned windows that fit (sentences packed greedily; a sentence longer
  than a window is split at token boundaries), embeds each window, and uses the
  mean of the windows' unit embeddings: its dot product with the image is the
  mean of the windows' cosines, which is then scored as above.
* ``clipscore_long`` is the mean CLIP-S of the captions longer than 77 tokens
  only, scored at full length (Long-CLIP positions or ``chunk``); with a
  77-position model and ``truncate`` it is not computed (the reason says why).
* Retrieval: every caption ranks all images of its set by similarity; ``rank`` =
  1 + images strictly more similar than its own. R@k = rank <= k, MRR = 1/rank.

Image embeddings are computed once per (model, image sha256) and cached in the
store (:mod:`capaudit.store.caches`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from capaudit.errors import InputError, require
from capaudit.io.images import image_file

__all__ = ["ClipScorer", "ClipResult", "retrieval_ranks", "STANDARD_POSITIONS"]

STANDARD_POSITIONS = 77
_SENT = re.compile(r"(?<=[.!?])\s+")


@dataclass
class ClipResult:
    """Per-caption CLIP measurements of one chunk (``NaN`` where the image was not found)."""

    clipscore: np.ndarray
    clipscore_long: np.ndarray      # NaN for captions within 77 tokens or not scorable at length
    text: np.ndarray                # float32 [n, d] caption vectors (unit, or mean of windows)
    images: dict                    # image id -> float32 unit vector, images found
    n_tokens: np.ndarray
    meta: dict = field(default_factory=dict)


def retrieval_ranks(text: np.ndarray, caption_image: Sequence[int],
                    images: dict) -> np.ndarray:
    """Rank of each caption's own image among ``images`` by similarity (1 = first;
    ties count in the caption's favour); ``NaN`` where its image is not among them."""
    ids = sorted(images)
    col = {iid: k for k, iid in enumerate(ids)}
    mat = np.stack([images[i] for i in ids]).astype(np.float32) if ids else None
    rank = np.full(len(text), np.nan)
    rows = np.array([r for r, i in enumerate(caption_image) if i in col], np.int64)
    for a in range(0, len(rows), 4096):
        r = rows[a:a + 4096]
        sim = text[r].astype(np.float32) @ mat.T
        own = sim[np.arange(len(r)), [col[caption_image[k]] for k in r]]
        rank[r] = 1 + (sim > own[:, None]).sum(axis=1)
    return rank


class ClipScorer:
    def __init__(self, model_path: str, long_text: str = "truncate", batch_size: int = 32,
                 device: str = "cpu"):
        if long_text not in ("truncate", "chunk"):
            raise InputError(f"unknown --long-text '{long_text}'", fix="use truncate or chunk")
        torch = require("torch", "ml", "CLIP metrics")
        tf = require("transformers", "ml", "CLIP metrics")
        self.torch, self.long_text, self.batch_size, self.device = torch, long_text, batch_size, device
        tf.utils.logging.disable_progress_bar()
        tf.utils.logging.set_verbosity_error()
        try:
            self.model = tf.CLIPModel.from_pretrained(model_path, local_files_only=True).eval()
            self.tokenizer = tf.AutoTokenizer.from_pretrained(model_path, local_files_only=True)
            proc = getattr(tf, "CLIPImageProcessorPil", None) or tf.CLIPImageProcessor
            self.processor = proc.from_pretrained(model_path, local_files_only=True)
        except Exception as exc:  # noqa: BLE001 - any load failure is the user's path
            raise InputError(f"'{model_path}' is not a CLIP model ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:160]})",
                             fix="give --clip-model a folder (or cached Hugging Face id) holding "
                                 "a transformers CLIPModel, its tokenizer and image processor")
        self.positions = int(self.model.config.text_config.max_position_embeddings)
        first = next(self.model.parameters()).detach().flatten()[:64].numpy().tobytes()
        cfg = self.model.config.to_json_string(use_diff=False).encode()
        self.key = f"{Path(str(model_path)).name}:{hashlib.sha1(cfg + first).hexdigest()[:16]}"

    # ---- text -----------------------------------------------------------
    def _ids(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False, truncation=False)["input_ids"]

    def _wrap(self, ids: list[int]) -> list[int]:
        tok = self.tokenizer
        return [tok.bos_token_id, *ids, tok.eos_token_id]

    def windows(self, text: str) -> list[list[int]]:
        """Sentence-aligned windows of at most ``positions`` tokens (specials included)."""
        room = self.positions - 2
        out: list[list[int]] = []
        cur: list[int] = []
        for sent in _SENT.split(text.strip()):
            ids = self._ids(sent)
            while len(ids) > room:           # a sentence longer than a window: token pieces
                if cur:
                    out.append(cur)
                    cur = []
                out.append(ids[:room])
                ids = ids[room:]
            if cur and len(cur) + len(ids) > room:
                out.append(cur)
                cur = []
            cur = cur + ids
        if cur or not out:
            out.append(cur)
        return [self._wrap(w) for w in out]

    def _embed_ids(self, seqs: list[list[int]]) -> np.ndarray:
        torch = self.torch
        pad = self.tokenizer.pad_token_id
        pad = self.tokenizer.eos_token_id if pad is None else pad
        out = []
        for a in range(0, len(seqs), self.batch_size):
            batch = seqs[a:a + self.batch_size]
            width = max(len(s) for s in batch)
            ids = torch.full((len(batch), width), pad, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for i, s in enumerate(batch):
                ids[i, :len(s)] = torch.tensor(s)
                mask[i, :len(s)] = 1
            with torch.no_grad():
                f = self.model.get_text_features(input_ids=ids, attention_mask=mask)
            f = getattr(f, "pooler_output", f)
            out.append(torch.nn.functional.normalize(f, dim=-1).numpy())
        return np.concatenate(out) if out else np.zeros((0, self.model.config.projection_dim))

    def text_embeddings(self, captions: Sequence[str]) -> tuple[np.ndarray, np.ndarray, dict]:
        """(text vectors [n, d], tokens per caption, counts): unit vectors, or for chunked
        captions the mean of their windows' unit vectors."""
        n_tokens = np.array([len(self._ids(c)) + 2 for c in captions], np.int64)
        long = n_tokens > self.positions
        seqs, owner = [], []
        for i, c in enumerate(captions):
            if not long[i]:
                seqs.append(self._wrap(self._ids(c)))
                owner.append(i)
            elif self.long_text == "chunk":
                for w in self.windows(c):
                    seqs.append(w)
                    owner.append(i)
            else:
                seqs.append(self._wrap(self._ids(c)[:self.positions - 2]))
                owner.append(i)
        emb = self._embed_ids(seqs)
        owner_a = np.asarray(owner, np.int64)
        vec = np.zeros((len(captions), emb.shape[1]), np.float32)
        np.add.at(vec, owner_a, emb)
        vec /= np.maximum(np.bincount(owner_a, minlength=len(captions)), 1)[:, None]
        counts = {"long_captions": int(long.sum()),
                  "truncated": int(long.sum()) if self.long_text == "truncate" else 0,
                  "chunked": int(long.sum()) if self.long_text == "chunk" else 0,
                  "windows": len(seqs), "positions": self.positions}
        return vec, n_tokens, counts

    # ---- images ---------------------------------------------------------
    def image_embeddings(self, paths: Sequence[Path], store=None) -> np.ndarray:
        from PIL import Image

        from capaudit.store.caches import get_embeddings, put_embeddings

        hashes = [hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths]
        have = get_embeddings(store, self.key, hashes)
        todo = [i for i, h in enumerate(hashes) if h not in have]
        new: dict[str, np.ndarray] = {}
        for a in range(0, len(todo), self.batch_size):
            idx = todo[a:a + self.batch_size]
            imgs = []
            for i in idx:
                try:
                    with Image.open(paths[i]) as im:
                        imgs.append(im.convert("RGB"))
                except Exception as exc:  # noqa: BLE001
                    raise InputError(f"cannot read the image ({exc})", path=paths[i],
                                     fix="replace or remove the file") from None
            px = self.processor(images=imgs, return_tensors="pt")["pixel_values"]
            with self.torch.no_grad():
                f = self.model.get_image_features(pixel_values=px)
            f = getattr(f, "pooler_output", f)
            f = self.torch.nn.functional.normalize(f, dim=-1).numpy()
            new.update({hashes[i]: f[k] for k, i in enumerate(idx)})
        put_embeddings(store, self.key, new)
        have.update(new)
        d = self.model.config.projection_dim
        return np.stack([have[h] for h in hashes]) if hashes else np.zeros((0, d), np.float32)

    # ---- scores ---------------------------------------------------------
    def score(self, captions: Sequence[str], image_ids: Sequence[int | None], images_dir: Path,
              store=None) -> ClipResult:
        """CLIP-S of every caption with its own image; retrieval ranks come from
        :func:`retrieval_ranks` over all the set's images (the metrics do it at the end)."""
        ids = [None if i is None or int(i) < 0 else int(i) for i in image_ids]
        uniq = sorted({i for i in ids if i is not None})
        found = {i: p for i in uniq if (p := image_file(Path(images_dir), i)) is not None}
        if uniq and not found:
            raise InputError(f"no image of this set in {images_dir}",
                             fix="give --images a folder of the COCO images "
                                 "(COCO_val2014_<id>.jpg or <id>.jpg)")
        img_ids = sorted(found)
        img_emb = self.image_embeddings([found[i] for i in img_ids], store)
        images = {iid: img_emb[k] for k, iid in enumerate(img_ids)}
        txt, n_tokens, counts = self.text_embeddings(captions)
        n = len(captions)
        cs, cs_long = np.full(n, np.nan), np.full(n, np.nan)
        for r, i in enumerate(ids):
            if i in images:
                cs[r] = 100.0 * max(float(txt[r] @ images[i]), 0.0)
        have = ~np.isnan(cs)
        long = n_tokens > STANDARD_POSITIONS
        at_length = self.positions > STANDARD_POSITIONS or self.long_text == "chunk"
        if at_length:
            sel = long & have & (n_tokens <= self.positions) if self.long_text == "truncate" \
                else long & have
            cs_long[sel] = cs[sel]
        meta = dict(counts, images_found=len(found), images_missing=len(uniq) - len(found),
                    captions_without_image=int((~have).sum()))
        return ClipResult(cs, cs_long, txt, images, n_tokens, meta)
