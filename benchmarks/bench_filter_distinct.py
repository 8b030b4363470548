"""The hallucination filter on distinct real text, beside the audit, one run (issue #43).

    PYTHONPATH=src python benchmarks/bench_filter_distinct.py [--shared ../shared]
        [--corpora vlm,captioners] [--runs audit,default,ref-keep,ref-judge,default-w2]
        [--keep DIR] [--before OTHER_CHECKOUT] [--repeat 3]

No rotated copies: every caption is one a model or a person wrote, once. Two corpora, each one
JSONL in LLaVA's layout (``image`` a COCO file name, so ids are COCO 2014's and ``--shards``
reads it as it is):

* ``vlm`` (long text): the 890 GPT-4V ShareGPT4V captions (``data/enriched``), LLaVA's 90 GPT-4
  answers (``data/real``), and CapsFusion's 10,000 fused LAION captions (``data/real``; these
  have no COCO image, so caption ``i`` borrows the CHAIR objects of the ``i``-th image of the
  ground truth not used above: most of their object words are then unsupported, which is the
  filter's costly case, every such sentence a candidate for the parse);
* ``captioners`` (short text): every distinct caption of the seven captioner files
  (``data/captioners``, the image of its first occurrence).

The evidence is ``data/coco2014/chair_objects_trainval2014.jsonl`` for every run. Each run is a
fresh process (``python -m capaudit.cli.main``) with a fresh store: ``audit`` is ``audit run
FILE --metrics chair_s,chair_i --n-boot 0 --workers 1`` (the audit's CHAIR on the same captions);
``default`` is ``filter run --shards FILE --filter hallucination`` (corrected words, non-visual
kept: the parse); ``ref-keep`` adds ``--object-mode reference --non-visual keep``, ``ref-judge``
``--object-mode reference --non-visual judge`` (no parse); ``default-w2`` is ``default`` over the
corpus split in 8 shards with ``--workers 2`` (its speed-up is against ``default-8``, the same 8
shards with one worker). ``--before DIR`` runs another checkout's ``src`` too, each round
measuring both sides one after the other; ``--repeat N`` shows each side's median CPU of N
rounds (and the range). Reported: CPU-seconds of the whole process tree (user + system),
captions per CPU-second, the peak RSS of the largest process, and wall time (meaningful only
on an idle machine; the load average is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_filter import DEFAULT_SHARED, measure  # noqa: E402

CHAIR_GT = ("data", "coco2014", "chair_objects_trainval2014.jsonl")
CAPTIONERS = ("att2in_val2014_gender", "nic_plus_val2014_gender", "nic_val2014_gender",
              "oscar_val2014_all", "oscar_val2014_gender", "sat_val2014_gender",
              "updn_val2014_gender")
RUNS = {"audit": None, "default": [], "ref-keep": ["--object-mode", "reference", "--non-visual",
                                                   "keep"],
        "ref-judge": ["--object-mode", "reference", "--non-visual", "judge"]}
N_SPLIT = 8


def _record(iid: int, caption: str) -> str:
    return json.dumps({"id": iid, "image": f"COCO_val2014_{iid:012d}.jpg",
                       "instruction": "Describe the image.", "output": caption,
                       "type": "detail"}, ensure_ascii=False) + "\n"


def vlm_rows(shared: Path) -> list[tuple[int, str]]:
    data = shared / "data"
    rows = [(int(r["id"]), next(t["value"] for t in r["conversations"] if t["from"] == "gpt"))
            for r in json.loads((data / "enriched" / "sharegpt4v_gpt4v_coco2017_890.json")
                                .read_text("utf-8"))]
    with open(data / "real" / "llava_coco2014_val_gpt4_qa_30x3.jsonl", encoding="utf-8") as fh:
        rows += [(int(r["id"]), r["output"]) for r in map(json.loads, fh)]
    used = {i for i, _ in rows}
    free = []
    with open(shared.joinpath(*CHAIR_GT), encoding="utf-8") as fh:
        for line in fh:
            iid = json.loads(line)["image_id"]
            if iid not in used:
                free.append(iid)
            if len(free) == 10_000:
                break
    fused = json.loads((data / "real" / "capsfusion_example_data.json").read_text("utf-8"))
    rows += [(iid, r["capsfuion_official"]) for iid, r in zip(free, fused)]
    return rows


def captioner_rows(shared: Path) -> list[tuple[int, str]]:
    seen, rows = set(), []
    for name in CAPTIONERS:
        with open(shared / "data" / "captioners" / f"{name}.jsonl", encoding="utf-8") as fh:
            for r in map(json.loads, fh):
                if r["caption"] not in seen:
                    seen.add(r["caption"])
                    rows.append((int(r["image_id"]), r["caption"]))
    return rows


def write_corpus(rows, folder: Path) -> dict:
    """``corpus.jsonl`` and the same records in :data:`N_SPLIT` shards (``split/``)."""
    (folder / "split").mkdir(parents=True, exist_ok=True)
    lines = [_record(i, c) for i, c in rows]
    (folder / "corpus.jsonl").write_text("".join(lines), "utf-8")
    per = -(-len(lines) // N_SPLIT)
    for k in range(N_SPLIT):
        (folder / "split" / f"part-{k}.jsonl").write_text("".join(lines[k * per:(k + 1) * per]),
                                                           "utf-8")
    words = sum(len(c.split()) for _, c in rows)
    return {"n": len(rows), "words_per_caption": round(words / len(rows), 1)}


def command(run: str, data: Path, work: Path, gt: str) -> list[str]:
    cli = [sys.executable, "-m", "capaudit.cli.main"]
    db = ["--db", str(work / f"{run}.duckdb")]
    if run == "audit":
        return [*cli, "audit", "run", str(data / "corpus.jsonl"), "--metrics", "chair_s,chair_i",
                "--chair-gt", gt, "--n-boot", "0", "--workers", "1", *db]
    src, workers, extra = str(data / "corpus.jsonl"), "1", RUNS.get(run, [])
    if run in ("default-8", "default-w2"):
        src, workers = str(data / "split"), ("2" if run == "default-w2" else "1")
    return [*cli, "filter", "run", "--shards", src, "--out", str(work / f"{run}-out"),
            "--filter", "hallucination", "--chair-gt", gt, "--workers", workers, *extra, *db]


def _rounds(runs, sides, repeat: int, corpus: Path, base: Path, gt: str) -> dict:
    """Every (run, side) measured ``repeat`` times, interleaved round by round (the machine's
    load drifts: each round measures every side within a minute or two)."""
    got: dict[tuple, list] = {}
    for _ in range(repeat):
        for run in runs:
            for side, src in sides:
                work = Path(tempfile.mkdtemp(prefix=f"{run}-{side}-", dir=base))
                env = {**os.environ, "PYTHONPATH": str(src),
                       "CAPAUDIT_DB": str(work / "x.duckdb"), "CAPAUDIT_WORKER_MB": "0"}
                got.setdefault((run, side), []).append(measure(command(run, corpus, work, gt),
                                                               env))
    return got


def _median(ms: list[dict]) -> dict:
    """The run of median CPU (its peak and wall with it), and the CPU range."""
    ms = sorted(ms, key=lambda m: m["cpu_s"])
    return {**ms[len(ms) // 2], "cpu_min": ms[0]["cpu_s"], "cpu_max": ms[-1]["cpu_s"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--corpora", default="vlm,captioners")
    ap.add_argument("--runs", default="audit,default,ref-keep,ref-judge")
    ap.add_argument("--keep", type=Path, help="write the corpora and stores here (kept)")
    ap.add_argument("--before", type=Path, help="also run another checkout's src/, interleaved "
                                                "(git archive main src | tar -x -C DIR)")
    ap.add_argument("--repeat", type=int, default=1, help="rounds; the median CPU is shown")
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench_filter_distinct_"))
    gt = str(args.shared.joinpath(*CHAIR_GT))
    sides = [("after", Path(__file__).resolve().parents[1] / "src")]
    if args.before:
        sides.insert(0, ("before", args.before / "src"))
    out = []
    for corpus in args.corpora.split(","):
        rows = vlm_rows(args.shared) if corpus == "vlm" else captioner_rows(args.shared)
        info = write_corpus(rows, base / corpus)
        load = os.getloadavg()[0]
        runs = args.runs.split(",")
        got = _rounds(runs, sides, args.repeat, base / corpus, base / corpus, gt)
        print(f"# {corpus}: {info['n']:,} distinct captions, {info['words_per_caption']} words "
              f"each on average; load average {load:.1f} -> {os.getloadavg()[0]:.1f}; "
              f"median of {args.repeat}", flush=True)
        for side, _ in sides:
            audit_cpu = None
            for run in runs:
                m = _median(got[(run, side)])
                rate = info["n"] / m["cpu_s"] if m["cpu_s"] else None
                audit_cpu = m["cpu_s"] if run == "audit" else audit_cpu
                vs = f"  {m['cpu_s'] / audit_cpu:4.1f}x audit" if audit_cpu and run != "audit" \
                    else ""
                print(f"{corpus:<11} {side:<6} {run:<11} cpu {m['cpu_s']:>6.2f} s "
                      f"({m['cpu_min']:.2f}-{m['cpu_max']:.2f})  {rate:>7,.0f} captions/CPU-s  "
                      f"peak {m['peak_mb']:>6.1f} MB  wall {m['wall_s']:>5.1f} s{vs}", flush=True)
                out.append({"corpus": corpus, "side": side, "run": run, **info, **m,
                            "captions_per_cpu_s": round(rate) if rate else None})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
