"""The reference CHAIR evaluator as its users run it, ported line for line for a benchmark.

    PYTHONPATH=src python benchmarks/reference_chair.py CAPTIONS.jsonl --chair-gt GT.jsonl \
        [--cache chair.pkl] [--save_path out.json] [--copies K]

Why: capaudit's speed is quoted as a ratio to the code that published CHAIR numbers
(Rohrbach et al. 2018, LisaAnne/Hallucination ``utils/chair.py``, in its Python 3 form,
Maxlinn/CHAIR-metric-standalone ``chair.py``). A ratio to a re-implementation with another
cost profile needed a correction factor measured on another day (the README divided by
1.14; #34 measured 1.23). This port does the reference's work in the reference's order, so
the ratio is timed in one run:

* the script's imports (``nltk``, the singularizer, ``tqdm``), then the evaluator from its
  pickle cache (``--cache``, as ``chair.py --cache chair.pkl``): the ``CHAIR`` object with
  its synonym tables, double-word rules and ground-truth sets. The reference builds it on a
  first run from the raw COCO caption and instance files (not here); this port builds it from
  ``--chair-gt`` (``chair_objects_trainval2014.jsonl``: the content of the published
  ``chair.pkl``) on a first run and pickles it; timed runs load the pickle, as the
  reference's users do (the benchmark makes the cache once, untimed);
* ``load_generated_captions``: the JSONL read whole, ``json.loads`` per line, then the id
  and caption lists;
* ``compute_chair``: per caption under ``tqdm.trange`` (to stderr), ``caption_to_words``
  (``nltk.word_tokenize(caption.lower())``, every token singularized, the two-word pass,
  the toilet/seat rule, the synonym filter that rebuilds ``set(self.mscoco_objects)`` for
  every word it tests, twice), the per-caption record with its CHAIRs / CHAIRi / Recall,
  the counts; then ``overall_metrics`` and ``print_metrics``; ``--save_path`` writes the
  JSON as the reference does.

Where it cannot be the reference: ``pattern`` does not install on Python 3.11, so the
singularizer is ``textblob.en.inflect.singularize`` (a copy of pattern's rules), patched
by a dict look-up where they disagree (:data:`capaudit.text.singularize.REFERENCE_EXCEPTIONS`);
NLTK's trained Punkt model is a download these machines lack, so ``nltk.word_tokenize``
falls back to an untrained ``PunktSentenceTokenizer`` and NLTK's treebank word tokenizer
(the same two stages; the same tokens on lowercased captions). Values: capaudit's reference
mode and the shared reference values (``tests/test_reference_chair.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import sys
import time
from collections import defaultdict
from pathlib import Path

# the reference's rule lists, as chair.py writes them (duplicates included)
COCO_DOUBLE_WORDS = ["motor bike", "motor cycle", "air plane", "traffic light", "street light",
                     "traffic signal", "stop light", "fire hydrant", "stop sign", "parking meter",
                     "suit case", "sports ball", "baseball bat", "baseball glove",
                     "tennis racket", "wine glass", "hot dog", "cell phone", "mobile phone",
                     "teddy bear", "hair drier", "potted plant", "bow tie", "laptop computer",
                     "stove top oven", "hot dog", "teddy bear", "home plate", "train track"]
ANIMAL_WORDS = ["bird", "cat", "dog", "horse", "sheep", "cow", "elephant", "bear", "zebra",
                "giraffe", "animal", "cub"]
VEHICLE_WORDS = ["jet", "train"]


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


def _singularizer():
    """pattern's ``singularize`` (textblob's copy of its rules, patched where they differ)."""
    from textblob.en.inflect import singularize

    from capaudit.text.singularize import REFERENCE_EXCEPTIONS

    patched = dict(REFERENCE_EXCEPTIONS)
    return lambda w: patched[w] if w in patched else singularize(w)


word_tokenize, singularize = word_tokenizer(), _singularizer()   # the script's imports


def _synonyms_txt() -> str:
    """The reference's ``synonyms.txt`` (packaged with capaudit, leading spaces and all)."""
    root = Path(__file__).resolve().parents[1] / "src" / "capaudit" / "data" / "lexicons"
    return (root / "chair_synonyms.txt").read_text(encoding="utf-8")


class CHAIR:
    """``chair.py``'s evaluator: the tables in ``__init__``, the ground truth from ``chair_gt``
    (the reference's ``get_annotations``, here from its published content)."""

    def __init__(self, chair_gt: str | Path):
        self.imid_to_objects = defaultdict(list)  # later become a dict of sets
        synonyms = [s.strip().split(", ") for s in _synonyms_txt().splitlines()]
        self.mscoco_objects = []  # mscoco objects and *all* synonyms
        self.inverse_synonym_dict = {}
        for synonym in synonyms:
            self.mscoco_objects.extend(synonym)
            for s in synonym:
                self.inverse_synonym_dict[s] = synonym[0]
        self.double_word_dict = {}
        for double_word in COCO_DOUBLE_WORDS:
            self.double_word_dict[double_word] = double_word
        for animal_word in ANIMAL_WORDS:
            self.double_word_dict["baby %s" % animal_word] = animal_word
            self.double_word_dict["adult %s" % animal_word] = animal_word
        for vehicle_word in VEHICLE_WORDS:
            self.double_word_dict["passenger %s" % vehicle_word] = vehicle_word
        self.double_word_dict["bow tie"] = "tie"
        self.double_word_dict["toilet seat"] = "toilet"
        self.double_word_dict["wine glas"] = "wine glass"
        with open(chair_gt, encoding="utf-8") as fh:
            for line in fh:
                row = json.loads(line)
                self.imid_to_objects[row["image_id"]].extend(row["objects"])
        for imid in self.imid_to_objects:  # deduplicate
            self.imid_to_objects[imid] = set(self.imid_to_objects[imid])

    def caption_to_words(self, caption):
        """MSCOCO words in the caption: (words, node words, their indices, all words)."""
        words = word_tokenize(caption.lower())
        words = [singularize(w) for w in words]
        i = 0
        double_words = []
        idxs = []
        while i < len(words):
            idxs.append(i)
            double_word = " ".join(words[i:i + 2])
            if double_word in self.double_word_dict:
                double_words.append(self.double_word_dict[double_word])
                i += 2
            else:
                double_words.append(words[i])
                i += 1
        words = double_words
        if ("toilet" in words) & ("seat" in words):
            words = [word for word in words if word != "seat"]
        idxs = [idxs[idx] for idx, word in enumerate(words) if word in set(self.mscoco_objects)]
        words = [word for word in words if word in set(self.mscoco_objects)]
        node_words = []
        for word in words:
            node_words.append(self.inverse_synonym_dict[word])
        return words, node_words, idxs, double_words

    def compute_chair(self, cap_file, image_id_key="image_id", caption_key="caption",
                      copies: int = 1):
        """The reference's ``compute_chair`` on a caption file (``copies``: the benchmark's
        case variants, :func:`case_variant`; 1 reads the file as the reference does)."""
        if copies == 1:
            caps, imids = load_generated_captions(cap_file, image_id_key, caption_key)
        else:
            imids, caps = read_captions(cap_file, copies)
        return self.compute_chair_lists(imids, caps)

    def compute_chair_lists(self, eval_imids, caps):
        """The loop of ``compute_chair`` over captions already read."""
        import tqdm

        imid_to_objects = self.imid_to_objects
        num_caps = num_hallucinated_caps = hallucinated_word_count = coco_word_count = 0.
        num_recall_gt_objects = num_gt_objects = 0.
        output = {"sentences": []}
        for i in tqdm.trange(len(caps), file=sys.stderr):
            cap, imid = caps[i], eval_imids[i]
            words, node_words, idxs, raw_words = self.caption_to_words(cap)
            gt_objects = imid_to_objects[imid]
            cap_dict = {"image_id": imid, "caption": cap, "mscoco_hallucinated_words": [],
                        "mscoco_gt_words": list(gt_objects),
                        "mscoco_generated_words": list(node_words),
                        "hallucination_idxs": [], "words": raw_words}
            cap_dict["metrics"] = {"CHAIRs": 0, "CHAIRi": 0, "Recall": 0}
            coco_word_count += len(node_words)
            hallucinated = False
            recall_gt_objects = set()
            for word, node_word, idx in zip(words, node_words, idxs):
                if node_word not in gt_objects:
                    hallucinated_word_count += 1
                    cap_dict["mscoco_hallucinated_words"].append((word, node_word))
                    cap_dict["hallucination_idxs"].append(idx)
                    hallucinated = True
                else:
                    recall_gt_objects.add(node_word)
            num_caps += 1
            if hallucinated:
                num_hallucinated_caps += 1
            num_gt_objects += len(gt_objects)
            num_recall_gt_objects += len(recall_gt_objects)
            cap_dict["metrics"]["CHAIRs"] = int(hallucinated)
            cap_dict["metrics"]["CHAIRi"] = 0.
            cap_dict["metrics"]["Recall"] = 0.
            if len(words) > 0:
                cap_dict["metrics"]["CHAIRi"] = \
                    len(cap_dict["mscoco_hallucinated_words"]) / float(len(words))
            if len(gt_objects) > 0:
                cap_dict["metrics"]["Recall"] = len(recall_gt_objects) / len(gt_objects)
            output["sentences"].append(cap_dict)
        output["overall_metrics"] = {"CHAIRs": num_hallucinated_caps / num_caps,
                                     "CHAIRi": hallucinated_word_count / coco_word_count,
                                     "Recall": num_recall_gt_objects / num_gt_objects}
        return output


def load_generated_captions(cap_file, image_id_key: str, caption_key: str):
    """The reference's reader: the whole JSONL (or JSON list), then the two lists."""
    ext = os.path.splitext(cap_file)[-1]
    if ext == ".json":
        caps = json.load(open(cap_file))
    else:
        caps = [json.loads(s) for s in open(cap_file)]
    imids = [obj[image_id_key] for obj in caps]
    caps = [obj[caption_key] for obj in caps]
    return caps, imids


def print_metrics(hallucination_cap_dict):
    for k, v in hallucination_cap_dict["overall_metrics"].items():
        print(str(k).ljust(10), f"{v * 100:.01f}", sep=": ", file=sys.stderr)


def load_evaluator(cache: Path, chair_gt: Path) -> CHAIR:
    """The evaluator from its pickle cache, built from ``chair_gt`` and cached when absent
    (the reference's ``--cache``; a benchmark's own file, never a user's)."""
    if cache.exists():
        with open(cache, "rb") as fh:
            return pickle.load(fh)
    evaluator = CHAIR(chair_gt)
    with open(cache, "wb") as fh:
        pickle.dump(evaluator, fh)
    return evaluator


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
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("captions", type=Path)
    ap.add_argument("--chair-gt", type=Path, required=True)
    ap.add_argument("--cache", type=Path, help="the evaluator's pickle (default: beside "
                    "--chair-gt's name in the temp folder; made on the first run)")
    ap.add_argument("--copies", type=int, default=1, help="repeat the file K times (case variants)")
    ap.add_argument("--save_path", type=Path, help="write the reference's output JSON here")
    args = ap.parse_args()
    cache = args.cache or Path(os.environ.get("TMPDIR", "/tmp")) / \
        f"capaudit-reference-chair-{args.chair_gt.stem}-{os.getuid()}.pkl"
    t0, c0 = time.perf_counter(), cpu_seconds()
    evaluator = load_evaluator(cache, args.chair_gt)
    t_gt = time.perf_counter() - t0
    t1, c1 = time.perf_counter(), cpu_seconds()
    cap_dict = evaluator.compute_chair(str(args.captions), copies=args.copies)
    t_chair, c_chair = time.perf_counter() - t1, cpu_seconds() - c1
    print_metrics(cap_dict)
    if args.save_path:
        with open(args.save_path, "w") as f:
            json.dump(cap_dict, f, indent=2, ensure_ascii=False)
    m = cap_dict["overall_metrics"]
    print(json.dumps({"n": len(cap_dict["sentences"]), "chair_s": round(100 * m["CHAIRs"], 3),
                      "chair_i": round(100 * m["CHAIRi"], 3), "gt_seconds": round(t_gt, 2),
                      "chair_seconds": round(t_chair, 2), "chair_cpu_s": round(c_chair, 2),
                      "in_process_seconds": round(time.perf_counter() - t0, 2),
                      "in_process_cpu_s": round(cpu_seconds() - c0, 2), "pid": os.getpid()}))


if __name__ == "__main__":
    sys.exit(main())
