"""Which object mode should the hallucination filter use by default? Count its false drops.

Why: the filter reads object mentions with the CHAIR rules of one mode (``reference``: the
published CHAIR code, quirks included; ``corrected``: its known misses fixed, compound
modifiers such as the "passenger" of "passenger airplanes" not read as objects). A drop is
false when the sentence names only objects the image holds. This script runs the filter in
both modes over real captions and, for every sentence a mode drops, asks whether the objects
the sentence names are all in the image's instance annotations.

What a sentence "names": the objects *both* modes read in it (each after its own rules:
negated, modifier and non-visual mentions set aside as the filter sets them aside), plus
each reading only one mode makes that a hand label (:data:`READINGS`, written after reading
every such sentence, all listed in ``--out``) says is a real mention ("on a bus", which the
reference's singularizer turns into "bu") rather than a misreading ("a orange cat", "a
mother elephant"). A disputed reading with no label is counted as "unadjudicated", not
guessed.

Evidence for the filter: the CHAIR ground truth (the filter's default kind). Judge of a
drop: COCO instance categories (``instance_categories_val2014.jsonl``) where they cover
the image (COCO val2014 ids); the 890 ShareGPT4V captions (COCO train2017 ids, few of them
in that file) are judged against the CHAIR ground truth, which covers all of them.

    python benchmarks/filter_object_modes.py --shared ../shared --out /tmp/modes.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

MODES = ("reference", "corrected")


def caption_files(shared: Path) -> list[tuple[str, Path, dict]]:
    """(set name, file, reader options) of every real caption file with COCO image ids."""
    files = [(p.name.removesuffix(".jsonl"), p, {})
             for p in sorted((shared / "data" / "captioners").glob("*.jsonl"))]
    files.append(("llava_gpt4_qa", shared / "data" / "real" /
                  "llava_coco2014_val_gpt4_qa_30x3.jsonl", {}))
    files.append(("sharegpt4v_890", shared / "data" / "enriched" /
                  "sharegpt4v_gpt4v_coco2017_890.json", {}))
    return files


def judged_sentences(filt, docs) -> dict[tuple[int, int], dict]:
    """``{(row, sentence): {"named": {...}, "dropped": bool, "text": str}}`` of one mode."""
    out = {}
    for doc in docs:
        scores = filt.score(doc)
        result = filt.decide(doc, scores)
        sents = doc.sentences
        by_idx = {s.sentence_idx: s for s in scores}
        for d in result.decisions:
            facts = by_idx[d.sentence_idx].facts
            named = {x.split("->")[1] for x in facts.get("supported", []) +
                     facts.get("unsupported", [])}
            out[(doc.row_idx, d.sentence_idx)] = {
                "named": named, "dropped": d.action == "drop", "image_id": doc.image_id,
                "text": sents[d.sentence_idx], "unsupported": facts.get("unsupported", []),
                "mentions": facts.get("supported", []) + facts.get("unsupported", [])}
    return out


# Hand labels of the readings the two modes dispute, from reading every disputed drop
# (``--out`` lists them): does the sentence name that object (True) or is the word read as
# an object by mistake (False)? A disputed reading not listed here is counted apart as
# "unadjudicated", never guessed.
READINGS = {
    ("reference", "orange->orange"): (False, "a colour: 'a orange cat'"),
    ("reference", "computer->laptop"): (False, "modifies a noun: 'a computer keyboard'"),
    ("reference", "mother->person"): (False, "modifies a noun: 'a mother elephant'"),
    ("reference", "baby->person"): (False, "modifies a noun: 'a baby calf'"),
    ("reference", "passenger->person"): (False, "modifies a noun: 'passenger airplanes'"),
    ("reference", "condor->bird"): (False, "an airline's name: 'a white Condor airplane'"),
    ("reference", "container->bowl"): (False, "modifies a noun: 'a container car'"),
    ("corrected", "bus->bus"): (True, "'on a bus' (reference singularizes it to 'bu')"),
    ("corrected", "hair drier->hair drier"): (True, "'a hair dryer' (reference: no match)"),
    ("corrected", "motor bike->motorcycle"): (True, "'a motor bike' (reference: no match)"),
    ("corrected", "tie->tie"): (True, "'a display of ties'"),
}
# a disputed reading whose label differs from its word's above, by the sentence it is in
SENTENCE_READINGS = {("corrected", "tie->tie", "ties the indoor"): (False, "a verb: 'ties "
                                                                            "the indoor and "
                                                                            "outdoor'")}


def reading(mode: str, mention: str, sentence: str):
    """The hand label of one disputed reading: (names the object?, why), or None."""
    for (m, w, part), label in SENTENCE_READINGS.items():
        if m == mode and w == mention and part in sentence:
            return label
    return READINGS.get((mode, mention))


def adjudicate(mode: str, v: dict, agreed: set, disputed: set, judge_objs) -> str:
    """``false`` (every object the sentence names is in the image), ``true`` or
    ``unadjudicated`` (a disputed reading without a hand label)."""
    named = set(agreed)
    for mention in v["mentions"]:
        if mention.split("->")[1] not in disputed:
            continue
        label = reading(mode, mention, v["text"])
        if label is None:
            return "unadjudicated"
        if label[0]:
            named.add(mention.split("->")[1])
    return "false" if named <= judge_objs else "true"


def measure(name: str, docs, chair_gt, judge, judge_name: str) -> dict:
    from capaudit.filters.hallucination import HallucinationFilter

    per_mode, seconds = {}, {}
    for mode in MODES:
        t0 = time.process_time()
        filt = HallucinationFilter(chair_gt, object_mode=mode)
        filt.setup(None)
        per_mode[mode] = judged_sentences(filt, docs)
        seconds[mode] = round(time.process_time() - t0, 1)
    row = {"set": name, "captions": len(docs), "judge": judge_name,
           "sentences": len(per_mode["reference"]), "cpu_s": seconds}
    for mode in MODES:
        other = per_mode[MODES[1 - MODES.index(mode)]]
        drops = {k: v for k, v in per_mode[mode].items() if v["dropped"]}
        judged = {k: v for k, v in drops.items() if v["image_id"] in judge}
        verdicts, listed = Counter(), []
        for k, v in judged.items():
            agreed = v["named"] & other[k]["named"]
            disputed = v["named"] - other[k]["named"]
            verdict = adjudicate(mode, v, agreed, disputed, judge[v["image_id"]])
            verdicts[verdict] += 1
            if verdict != "true" or disputed:
                listed.append({"row": k[0], "sentence": v["text"], "image_id": v["image_id"],
                               "verdict": verdict, "unsupported": v["unsupported"],
                               "agreed": sorted(agreed), "disputed": sorted(disputed)})
        words = Counter(f"{w} ({ex['verdict']})" for ex in listed for w in ex["unsupported"]
                        if w.split("->")[1] in ex["disputed"])
        row[mode] = {"dropped": len(drops), "judged": len(judged),
                     "false_drops": verdicts["false"],
                     "unadjudicated": verdicts["unadjudicated"],
                     "disputed_words": dict(words.most_common()), "examples": listed}
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=Path("../shared"))
    ap.add_argument("--out", type=Path, default=None, help="write every row (JSON) here")
    ap.add_argument("--show", type=int, default=3, help="false drops printed per mode and set")
    args = ap.parse_args(argv)
    import capaudit
    from capaudit.filters.runner import load_docs
    from capaudit.io.annotation_files import load_chair_gt, load_instances
    from capaudit.store import Store

    chair_gt = {i: dict.fromkeys(o, 1.0) for i, o in
                load_chair_gt(args.shared / "data/coco2014/chair_objects_trainval2014.jsonl"
                              ).items()}
    instances = load_instances(args.shared / "data/coco2014/instance_categories_val2014.jsonl")[0]
    gt_sets = {i: set(o) for i, o in chair_gt.items()}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "modes.duckdb"
        api = capaudit.open(db)
        for name, path, opts in caption_files(args.shared):
            api.add_set(name, path, **opts)
            with Store(db, read_only=True) as store:
                docs = load_docs(store, name)
            covered = sum(d.image_id in instances for d in docs) / max(len(docs), 1)
            judge, judge_name = ((instances, "instances val2014") if covered > 0.9 else
                                 (gt_sets, "CHAIR ground truth"))
            row = measure(name, docs, chair_gt, judge, judge_name)
            rows.append(row)
            print(f"{name}: {row['captions']:,} captions, {row['sentences']:,} sentences "
                  f"(judge: {judge_name})", file=sys.stderr)
            for mode in MODES:
                r = row[mode]
                print(f"  {mode:9s} dropped {r['dropped']:6,}  false drops {r['false_drops']:5,}"
                      f"  unadjudicated {r['unadjudicated']:3,}  cpu {row['cpu_s'][mode]} s",
                      file=sys.stderr)
                for ex in [e for e in r["examples"] if e["verdict"] != "true"][:args.show]:
                    print(f"      {ex['verdict']}: {ex['sentence'][:80]!r} unsupported "
                          f"{ex['unsupported']} disputed {ex['disputed']}", file=sys.stderr)
    total = {m: {k: sum(r[m][k] for r in rows) for k in ("dropped", "judged", "false_drops",
                                                         "unadjudicated")}
             for m in MODES}
    print(json.dumps({"total": total, "sets": [{k: v if k not in MODES else
                                                 {kk: vv for kk, vv in v.items()
                                                  if kk != "examples"}
                                                 for k, v in r.items()} for r in rows]},
                     indent=1))
    if args.out:
        args.out.write_text(json.dumps({"total": total, "sets": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
