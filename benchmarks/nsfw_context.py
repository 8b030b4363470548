"""NSFW hits before and after the context marks, on the shared real caption files.

Why: the LDNOOBW phrases "girl on" and "tied up" matched innocent COCO captions and decided a
leaderboard. This prints, per file, the captions with a hit under the plain LDNOOBW list
(LOTUS's matching) and under capaudit's marked lexicon, the entries set aside, and every
caption whose verdict changed, so the rule can be read, not trusted.

    PYTHONPATH=src python benchmarks/nsfw_context.py [--shared ../shared] [--quiet]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path


def _captions(path: Path) -> list[str]:
    if path.suffix == ".jsonl":
        return [json.loads(line)["caption"] for line in path.open(encoding="utf-8")]
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, dict):          # COCO captions layout
        return [a["caption"] for a in data["annotations"]]
    return [t["value"] for r in data for t in r["conversations"] if t["from"] == "gpt"]


def main() -> None:
    from capaudit.metrics.features.nsfw import NsfwMatcher, get_matcher

    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--quiet", action="store_true", help="counts only, no captions")
    args = ap.parse_args()
    root = Path(args.shared) / "data"
    plain = NsfwMatcher.from_file(Path(args.shared) / "lexicons" / "ldnoobw_en.txt")
    marked = get_matcher()
    files = sorted((root / "captioners").glob("*.jsonl")) + [
        root / "coco2014" / "captions_val2014_subset.json",
        root / "coco2017" / "captions_val2017.json",
        root / "enriched" / "sharegpt4v_gpt4v_coco2017_890.json"]
    print(f"{'file':40s} {'captions':>8s} {'hit before':>10s} {'hit after':>9s}  set aside")
    for f in files:
        caps = _captions(f)
        before = after = 0
        aside: Counter = Counter()
        changed = []
        for c in caps:
            b = bool(plain.hits(c))
            h, a = marked.scan(c)
            before += b
            after += bool(h)
            aside.update(a)
            if b != bool(h):
                changed.append((c, a))
        print(f"{f.name:40s} {len(caps):8,d} {before:10,d} {after:9,d}  "
              + (", ".join(f"{k} x{v}" for k, v in aside.most_common()) or "-"))
        if not args.quiet:
            for c, a in changed:
                print(f"    set aside {'/'.join(a)}: {c.strip()}")


if __name__ == "__main__":
    main()
