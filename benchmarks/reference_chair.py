"""The reference CHAIR evaluator, re-implemented for a side-by-side benchmark.

    PYTHONPATH=src python benchmarks/reference_chair.py CAPTIONS.jsonl --chair-gt GT.jsonl [--copies K]

Why: capaudit claims to be N times faster than the code that published CHAIR numbers
(Rohrbach et al. 2018, LisaAnne/Hallucination ``utils/chair.py``, as ported to Python 3 by
Maxlinn/CHAIR-metric-standalone). That claim needs the reference's *cost profile* on this
machine, and ``pattern`` does not install on Python 3.11, so this module redoes the same
algorithm, step for step and with the same per-caption work, without any of capaudit's
shortcuts (no caption or token caches, no fast tokenizer path, no worker processes):

* ``nltk.word_tokenize(caption.lower())`` per caption: Punkt sentence split, then NLTK's
  treebank word tokenizer per sentence. NLTK's trained Punkt model is a data download these
  machines lack; then an untrained ``PunktSentenceTokenizer`` does the split (capaudit's
  slow path does the same; same cost, same tokens on lowercased captions);
* every token through the pattern singularizer, uncached (``textblob.en.inflect`` holds a
  copy of pattern's rules; the few tokens where they disagree are patched from
  :data:`capaudit.text.singularize.REFERENCE_EXCEPTIONS`, a dict look-up before the rules);
* the two-word pass (``' '.join(words[i:i + 2])`` looked up in the double-word table),
  the toilet/seat rule, and the synonym filter -- which, as in the reference, rebuilds
  ``set(mscoco_objects)`` (about 400 entries) for every word it tests, twice;
* per caption an output record (hallucinated words, ground-truth words, generated words,
  indices, the words), as the reference builds for its JSON, then CHAIR_s and CHAIR_i.

What it leaves out, so the reference is, if anything, timed too fast: the ``tqdm`` bar and
writing the output JSON (``--save`` writes it, to see that cost), and building the ground
truth from the raw COCO caption and instance files -- it reads the CHAIR ground truth
(``chair_objects_trainval2014.jsonl``, the content of the reference's ``chair.pkl``
cache) instead; the seconds spent on that are reported apart (``gt_seconds``).

The synonym list is capaudit's packaged ``chair_synonyms.txt`` (the reference's
``synonyms.txt``, leading spaces and all) and the double-word rules are the constants of
:mod:`capaudit.text.objects`, so a rule cannot drift between the two; everything else is
independent of capaudit. The values must equal capaudit's reference mode (and the shared
reference values): ``tests/test_reference_chair.py`` checks that on real captions.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_seconds() -> float:
    """User + system CPU of this process and its reaped children."""
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def word_tokenizer():
    """``nltk.word_tokenize``, or the same two NLTK stages with an untrained Punkt model."""
    import nltk

    try:
        nltk.word_tokenize("a dog. a cat.")
        return nltk.word_tokenize
    except LookupError:
        from nltk.tokenize.destructive import NLTKWordTokenizer
        from nltk.tokenize.punkt import PunktSentenceTokenizer

        split, words = PunktSentenceTokenizer(), NLTKWordTokenizer()
        return lambda text: [t for sent in split.tokenize(text) for t in words.tokenize(sent)]


def pattern_singularize():
    """pattern's singularize (textblob's copy of its rules, patched where they differ), uncached."""
    from textblob.en.inflect import singularize

    from capaudit.text.singularize import REFERENCE_EXCEPTIONS

    patched = dict(REFERENCE_EXCEPTIONS)
    return lambda w: patched[w] if w in patched else singularize(w)


class ReferenceChair:
    """The reference evaluator: synonym tables, ground-truth sets, per-caption word lists."""

    def __init__(self, chair_gt: str | Path) -> None:
        from capaudit.text.objects import (
            ANIMAL_WORDS,
            DOUBLE_WORDS,
            VEHICLE_WORDS,
            synonyms_path,
        )

        self.tokenize, self.singularize = word_tokenizer(), pattern_singularize()
        self.mscoco_objects: list[str] = []           # every category and synonym, repeats kept
        self.inverse_synonym_dict: dict[str, str] = {}
        for line in synonyms_path().read_text(encoding="utf-8").splitlines():
            synonym = line.strip().split(", ")
            self.mscoco_objects.extend(synonym)
            for s in synonym:
                self.inverse_synonym_dict[s] = synonym[0]
        self.double_word_dict = {w: w for w in DOUBLE_WORDS}
        for w in ANIMAL_WORDS:
            self.double_word_dict[f"baby {w}"] = w
            self.double_word_dict[f"adult {w}"] = w
        for w in VEHICLE_WORDS:
            self.double_word_dict[f"passenger {w}"] = w
        self.double_word_dict.update({"bow tie": "tie", "toilet seat": "toilet", "wine glas": "wine glass"})
        t0 = time.perf_counter()
        self.imid_to_objects: dict[int, set] = defaultdict(list)
        with open(chair_gt, encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                self.imid_to_objects[row["image_id"]].extend(row["objects"])
        for imid in self.imid_to_objects:
            self.imid_to_objects[imid] = set(self.imid_to_objects[imid])
        self.gt_seconds = time.perf_counter() - t0

    def caption_to_words(self, caption: str):
        """``(words, node_words, idxs, double_words)`` of one caption, the reference's way."""
        words = [self.singularize(w) for w in self.tokenize(caption.lower())]
        i, double_words, idxs = 0, [], []
        while i < len(words):
            idxs.append(i)
            pair = " ".join(words[i:i + 2])
            if pair in self.double_word_dict:
                double_words.append(self.double_word_dict[pair])
                i += 2
            else:
                double_words.append(words[i])
                i += 1
        words = double_words
        if "toilet" in words and "seat" in words:
            words = [w for w in words if w != "seat"]
        # the set is rebuilt for every word tested, twice, exactly as the reference does
        idxs = [idxs[k] for k, w in enumerate(words) if w in set(self.mscoco_objects)]
        words = [w for w in words if w in set(self.mscoco_objects)]
        node_words = [self.inverse_synonym_dict[w] for w in words]
        return words, node_words, idxs, double_words

    def compute_chair(self, image_ids, captions) -> dict:
        """CHAIR_s and CHAIR_i (percent) over the captions, with the per-caption records."""
        n_caps = n_hall_caps = n_hall_words = n_coco_words = 0
        sentences = []
        for imid, cap in zip(image_ids, captions):
            words, node_words, idxs, raw_words = self.caption_to_words(cap)
            gt = self.imid_to_objects[imid]
            rec = {"image_id": imid, "caption": cap, "mscoco_hallucinated_words": [],
                   "mscoco_gt_words": list(gt), "mscoco_generated_words": list(node_words),
                   "hallucination_idxs": [], "words": raw_words}
            n_coco_words += len(node_words)
            hallucinated = False
            for word, node, idx in zip(words, node_words, idxs):
                if node not in gt:
                    n_hall_words += 1
                    rec["mscoco_hallucinated_words"].append((word, node))
                    rec["hallucination_idxs"].append(idx)
                    hallucinated = True
            n_caps += 1
            n_hall_caps += hallucinated
            rec["metrics"] = {"CHAIRs": int(hallucinated),
                              "CHAIRi": len(rec["mscoco_hallucinated_words"]) / len(words) if words else 0.0}
            sentences.append(rec)
        return {"sentences": sentences, "n": n_caps,
                "chair_s": 100 * n_hall_caps / n_caps, "chair_i": 100 * n_hall_words / n_coco_words}


def case_variant(caption: str, copy: int) -> str:
    """Copy ``copy`` of a caption: its j-th letter upper-cased where bit j of ``copy`` is set.

    Both tools lower-case first, so every value is unchanged, yet the copies of one caption
    are distinct strings (up to 32 copies of any caption with 5 letters): scaling a file up
    this way does not hand capaudit's identical-caption shortcut more repeats than the real
    file has."""
    if not copy:
        return caption
    out, j = [], 0
    for ch in caption:
        if ch.isalpha():
            if copy >> j & 1:
                ch = ch.upper()
            j += 1
        out.append(ch)
    return "".join(out)


def read_captions(path: str | Path, copies: int = 1):
    """``(image_ids, captions)`` of a ``{"image_id", "caption"}`` JSONL file, ``copies`` times."""
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    ids = [r["image_id"] for r in rows] * copies
    caps = [case_variant(r["caption"], k) for k in range(copies) for r in rows]
    return ids, caps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captions", type=Path)
    ap.add_argument("--chair-gt", type=Path, required=True)
    ap.add_argument("--copies", type=int, default=1, help="repeat the file K times (case variants)")
    ap.add_argument("--save", type=Path, help="write the reference's output JSON here")
    args = ap.parse_args()
    t0, c0 = time.perf_counter(), cpu_seconds()
    ids, caps = read_captions(args.captions, args.copies)
    t_read = time.perf_counter() - t0
    chair = ReferenceChair(args.chair_gt)
    t1, c1 = time.perf_counter(), cpu_seconds()
    out = chair.compute_chair(ids, caps)
    t_chair, c_chair = time.perf_counter() - t1, cpu_seconds() - c1
    if args.save:
        args.save.write_text(json.dumps({"sentences": out["sentences"], "overall_metrics":
                                         {"CHAIRs": out["chair_s"], "CHAIRi": out["chair_i"]}}))
    print(json.dumps({"n": out["n"], "chair_s": round(out["chair_s"], 3), "chair_i": round(out["chair_i"], 3),
                      "read_seconds": round(t_read, 2), "gt_seconds": round(chair.gt_seconds, 2),
                      "chair_seconds": round(t_chair, 2), "chair_cpu_s": round(c_chair, 2),
                      "in_process_seconds": round(time.perf_counter() - t0, 2),
                      "in_process_cpu_s": round(cpu_seconds() - c0, 2), "pid": os.getpid()}))


if __name__ == "__main__":
    sys.exit(main())
