"""Benchmark the caption tokenizer against a plain regex pass (CPU time, one core).

    PYTHONPATH=src python benchmarks/bench_tokenize.py [--n 100000] [--shared ../shared] [--repeat 3]

The goal (issue #13): :func:`capaudit.text.tokenize.tokenize_caption` within 2x of a
regex pass on long captions while staying equal to NLTK. Per caption set it prints the
best of ``--repeat`` runs, measured with ``time.process_time`` (CPU time of this
process, so other processes on the machine distort it less than wall time; the passes
alternate, so a change in load hits both sides), of:

(a) the regex pass: ``re.findall(r"\\w+|[^\\w\\s]", caption.lower())`` per caption
    (the pattern compiled once; words and single punctuation characters);
(b) the whole ``tokenize_caption`` path (lowercasing, fast path, segmented path, NLTK);
(c) the captions that miss the fast path (``fast_tokenize_caption`` gives None): their
    share and what ``tokenize_caption`` costs on them alone.

Caption sets: ``--n`` long captions (ShareGPT4V length, ~160 tokens, all distinct) from
:func:`capaudit.audit.synthetic.long_captions`, and the distinct short captions of the
shared captioner files and COCO human captions. NLTK is imported before timing.
The 1-minute load average is printed with each set.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
DEFAULT_SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or ROOT.parent / "shared")
REGEX = re.compile(r"\w+|[^\w\s]")


def best_cpu(fn, items, repeat: int) -> float:
    """Least CPU seconds of ``repeat`` passes of ``fn`` over ``items``."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        for x in items:
            fn(x)
        best = min(best, time.process_time() - t0)
    return best


def regex_pass(caption: str) -> list[str]:
    return REGEX.findall(caption.lower())


def measure(name: str, caps: list[str], repeat: int) -> dict:
    from capaudit.text.tokenize import fast_tokenize_caption, tokenize_caption
    miss = [c for c in caps if fast_tokenize_caption(c.lower()) is None]
    load = os.getloadavg()[0]
    t_re = t_tok = t_miss = float("inf")
    for _ in range(repeat):  # alternated, so a change in the machine's load hits both
        t_re = min(t_re, best_cpu(regex_pass, caps, 1))
        t_tok = min(t_tok, best_cpu(tokenize_caption, caps, 1))
        t_miss = min(t_miss, best_cpu(tokenize_caption, miss, 1))
    row = {"set": name, "captions": len(caps),
           "tokens_per_caption": round(sum(len(regex_pass(c)) for c in caps[:2000]) / min(len(caps), 2000), 1),
           "regex_s": round(t_re, 3), "tokenize_s": round(t_tok, 3), "ratio": round(t_tok / t_re, 2),
           "fast_path_miss_share": round(len(miss) / len(caps), 4), "miss_s": round(t_miss, 3),
           "load_1min": round(load, 2)}
    print(f"{name}: {len(caps):,} captions (~{row['tokens_per_caption']} tokens), load {load:.2f}\n"
          f"  regex pass     {t_re:7.2f} s CPU\n"
          f"  tokenize       {t_tok:7.2f} s CPU  = {t_tok / t_re:.2f}x the regex pass\n"
          f"  fast-path miss {len(miss) / len(caps):7.2%} of captions, {t_miss:.2f} s CPU of it",
          flush=True)
    return row


def shared_short_captions(shared: Path) -> list[str]:
    caps: dict[str, None] = {}
    for f in sorted((shared / "data" / "captioners").glob("*.jsonl")):
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                caps[json.loads(line)["caption"]] = None
    coco = json.loads((shared / "data" / "coco2014" / "captions_val2014_subset.json").read_text("utf-8"))
    for a in coco["annotations"]:
        caps[a["caption"]] = None
    return list(caps)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="long captions (default 100,000)")
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--repeat", type=int, default=3, help="passes per measurement; the best counts")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    coco = args.shared / "data" / "coco2014" / "captions_val2014_subset.json"
    if not coco.is_file():
        print(f"error: {coco} not found; pass --shared (the folder holding data/)", file=sys.stderr)
        return 2
    from capaudit.audit.synthetic import long_captions
    from capaudit.text.tokenize import load_nltk
    load_nltk()
    rows = [measure("long", [c for _, c in long_captions(coco, args.n)], args.repeat),
            measure("shared short", shared_short_captions(args.shared), args.repeat)]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
