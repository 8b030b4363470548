"""Cleaning a corpus at its size: the hallucination filter's memory, CPU and scale-out (#31).

    PYTHONPATH=src python benchmarks/bench_filter.py [--shared ../shared] [--sizes 100000,1200000]
        [--runs set,file,shards,shards-w2] [--keep DIR] [--before SRC_DIR] [--distinct]

The data (issue #31): the 890 real GPT-4V captions of
``data/enriched/sharegpt4v_gpt4v_coco2017_890.json``, each copy made distinct by rotating its
sentences by the copy number and appending the sentence ``Copy k.``; copy ``k`` of caption
``j`` gets its own image id ``k * 1,000,000 + (j's COCO id)`` (COCO ids are below 600,000), and
the evidence is the CHAIR ground truth of ``data/coco2014/chair_objects_trainval2014.jsonl``
mapped onto those ids (each copy's id carries the objects of its original image), so every id
is covered and every copy is judged as the original would be. Written as one ShareGPT4V JSON
array (the layout ShareGPT4V-PT is published in), and as 12 such arrays for ``--shards``.

Each command runs as a user runs it: a fresh process (``python -m capaudit.cli.main``), a fresh
store. Reported per command: CPU-seconds (user + system of the command and every process it
started) and the peak RSS of its largest process (``RUSAGE_CHILDREN``'s ``ru_maxrss``: the
command itself or one of its workers, whichever was larger). Wall time is printed but only
means something on an idle machine.

Runs: ``set`` is the registered-set path (``sets add``, ``filter run SET``, ``sets export --to
original``); ``file`` is ``filter run --shards FILE`` (one shard); ``shards`` the 12 shards with
one worker, ``shards-w2`` with two local workers. ``--before DIR`` runs the ``set`` path with
another checkout's ``src`` (today's main: ``git archive c2b91f3 src | tar -x -C DIR``).

``--distinct`` gives every sentence of every copy a token of its own (``zKnI`` before its
final mark): the issue's data repeats each sentence in other orders, which every cache of
sentences and parses benefits from; a corpus of captions written one by one does not.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = Path(os.environ.get("CAPAUDIT_SHARED") or ROOT.parent / "shared")
SOURCE = ("data", "enriched", "sharegpt4v_gpt4v_coco2017_890.json")
CHAIR_GT = ("data", "coco2014", "chair_objects_trainval2014.jsonl")
ID_STRIDE = 1_000_000
N_SHARDS = 12


def _originals(shared: Path) -> list[tuple[int, str, list[str]]]:
    """``(COCO id, record id, sentences)`` of the 890 captions (sentences as the filter
    splits them)."""
    sys.path.insert(0, str(ROOT / "src"))
    from capaudit.text.mentions import sentence_spans

    out = []
    for rec in json.loads(shared.joinpath(*SOURCE).read_text("utf-8")):
        cap = next(t["value"] for t in rec["conversations"] if t["from"] == "gpt")
        sents = [cap[a:b] for a, b in sentence_spans(cap)]
        out.append((int(rec["id"]), rec["id"], sents))
    return out


def _distinct(k: int, sents: list[str]) -> list[str]:
    """Copy ``k``'s sentences each made its own: a token ``zKnI`` before its final mark (no
    sentence recurs, as in a corpus of captions written one by one)."""
    out = []
    for i, s in enumerate(sents):
        tag = f" z{k}n{i}"
        out.append(s[:-1] + tag + s[-1] if s[-1:] in ".!?" else s + tag)
    return out


def _record(k: int, iid: int, sents: list[str], distinct: bool = False) -> dict:
    r = k % len(sents)
    if distinct:
        sents = _distinct(k, sents)
    text = " ".join(sents[r:] + sents[:r]) + f" Copy {k}."
    new_id = k * ID_STRIDE + iid
    return {"id": f"{new_id:012d}", "image": f"coco/train2017/{new_id:012d}.jpg",
            "conversations": [{"from": "human", "value": "Analyze the image in a "
                               "comprehensive and detailed manner.\n<image>"},
                              {"from": "gpt", "value": text}]}


def write_data(shared: Path, folder: Path, n: int, distinct: bool = False) -> dict:
    """The issue's data in ``folder``: ``corpus.json`` (one array), ``shards/part-NN.json``
    (12 arrays, the same records in order) and ``evidence.jsonl`` (mapped CHAIR ground truth)."""
    done = folder / "ready.json"
    if done.is_file():
        return json.loads(done.read_text())
    folder.mkdir(parents=True, exist_ok=True)
    originals = _originals(shared)
    objects = {}
    with open(shared.joinpath(*CHAIR_GT), "rb") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                objects[rec["image_id"]] = rec["objects"]
    (folder / "shards").mkdir(exist_ok=True)
    per_shard = -(-n // N_SHARDS)
    whole = open(folder / "corpus.json", "w", encoding="utf-8")
    evidence = open(folder / "evidence.jsonl", "w", encoding="utf-8")
    shard = None
    whole.write("[")
    for i in range(n):
        k, j = divmod(i, len(originals))
        iid, _, sents = originals[j]
        rec = json.dumps(_record(k, iid, sents, distinct), indent=1, ensure_ascii=False)
        rec = rec.replace("\n", "\n ")
        whole.write(("," if i else "") + "\n " + rec)
        if i % per_shard == 0:
            if shard is not None:
                shard.write("\n]\n")
                shard.close()
            shard = open(folder / "shards" / f"part-{i // per_shard:02d}.json", "w",
                         encoding="utf-8")
            shard.write("[\n " + rec)
        else:
            shard.write(",\n " + rec)
        evidence.write(json.dumps({"image_id": k * ID_STRIDE + iid,
                                   "objects": objects.get(iid, [])}) + "\n")
    whole.write("\n]\n")
    shard.write("\n]\n")
    for fh in (whole, evidence, shard):
        fh.close()
    info = {"n": n, "bytes": (folder / "corpus.json").stat().st_size}
    done.write_text(json.dumps(info))
    return info


def measure(cmd: list[str], env: dict) -> dict:
    """Run ``cmd`` in a fresh child of a fresh process; its CPU-seconds and the peak RSS of
    its largest process (``ru_maxrss`` of RUSAGE_CHILDREN, measured in that middle process
    so nothing else this script ran counts)."""
    probe = ("import json, resource, subprocess, sys, time\n"
             "t0 = time.perf_counter()\n"
             "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
             "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
             "print(json.dumps({'rc': rc, 'cpu_s': round(u.ru_utime + u.ru_stime, 2),"
             " 'peak_mb': round(u.ru_maxrss / 1024, 1),"
             " 'wall_s': round(time.perf_counter() - t0, 1)}))\n")
    out = subprocess.run([sys.executable, "-c", probe, *cmd], env=env, check=True,
                         capture_output=True, text=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    if got["rc"] != 0:
        raise SystemExit(f"failed ({got['rc']}): {' '.join(cmd)}\n{out.stderr[-2000:]}")
    return got


def _cli(src: Path) -> list[str]:
    return [sys.executable, "-m", "capaudit.cli.main"]


def run_set(data: Path, work: Path, env: dict, tag: str) -> list[tuple[str, dict]]:
    db = str(work / f"{tag}.duckdb")
    cli = _cli(ROOT)
    steps = [("sets add", [*cli, "sets", "add", "d", str(data / "corpus.json"), "--db", db]),
             ("filter run SET", [*cli, "filter", "run", "d", "--filter", "hallucination",
                                 "--chair-gt", str(data / "evidence.jsonl"), "--out", "d_clean",
                                 "--db", db]),
             ("sets export --to original", [*cli, "sets", "export", "d_clean", "--to",
                                            "original", "--out", str(work / f"{tag}.json"),
                                            "--db", db])]
    return [(name, measure(cmd, env)) for name, cmd in steps]


def run_shards(data: Path, work: Path, env: dict, tag: str, src: str,
               workers: int) -> list[tuple[str, dict]]:
    db = str(work / f"{tag}.duckdb")
    cmd = [*_cli(ROOT), "filter", "run", "--shards", src, "--out", str(work / f"{tag}-out"),
           "--filter", "hallucination", "--chair-gt", str(data / "evidence.jsonl"),
           "--workers", str(workers), "--db", db]
    return [(f"filter run --shards ({tag})", measure(cmd, env))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--sizes", default="100000,1200000")
    ap.add_argument("--runs", default="set,file,shards,shards-w2")
    ap.add_argument("--keep", type=Path, help="Keep (and reuse) the data in this folder")
    ap.add_argument("--before", type=Path, help="A checkout whose src/ runs the 'set' path "
                                                "as the 'before' figures")
    ap.add_argument("--distinct", action="store_true",
                    help="Make every sentence distinct (no cache of sentences or parses helps)")
    args = ap.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench_filter_"))
    rows = []
    for n in (int(x) for x in args.sizes.split(",") if x):
        data = base / (f"n{n}-distinct" if args.distinct else f"n{n}")
        info = write_data(args.shared, data, n, args.distinct)
        print(f"# {n:,} captions: corpus.json {info['bytes'] / 1e6:.0f} MB, "
              f"{N_SHARDS} shards", flush=True)
        for run in args.runs.split(","):
            work = Path(tempfile.mkdtemp(prefix=f"{run}-", dir=base))
            src = ROOT / "src"
            if run == "before":
                if args.before is None:
                    raise SystemExit("--runs before needs --before DIR")
                src = args.before / "src"
            # every worker asked for starts (the machine's load does not decide): the scale-out
            # is what is measured
            env = {**os.environ, "PYTHONPATH": str(src), "CAPAUDIT_DB": str(work / "x.duckdb"),
                   "CAPAUDIT_WORKER_MB": "0"}
            if run in ("set", "before"):
                got = run_set(data, work, env, run)
            elif run == "file":
                got = run_shards(data, work, env, run, str(data / "corpus.json"), 1)
            elif run == "shards":
                got = run_shards(data, work, env, run, str(data / "shards"), 1)
            elif run == "shards-w2":
                got = run_shards(data, work, env, run, str(data / "shards"), 2)
            else:
                raise SystemExit(f"unknown run {run}")
            for name, m in got:
                rate = n / m["cpu_s"] if "filter" in name and m["cpu_s"] else None
                rows.append((n, run, name, m, rate))
                print(f"{n:>9,} {run:<9} {name:<34} cpu {m['cpu_s']:>8.1f} s  peak "
                      f"{m['peak_mb']:>7.1f} MB  wall {m['wall_s']:>7.1f} s"
                      + (f"  {rate:,.0f} captions/CPU-s" if rate else ""), flush=True)
    print(json.dumps([{"n": n, "run": r, "step": s, **m, "captions_per_cpu_s":
                       None if rate is None else round(rate)} for n, r, s, m, rate in rows]))


if __name__ == "__main__":
    main()
