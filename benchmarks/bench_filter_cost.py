"""The hallucination filter's per-caption cost: ``capaudit filter run`` as a user runs it.

    PYTHONPATH=src python benchmarks/bench_filter_cost.py [--n 8333 100000] [--profile]
        [--importtime] [--per-caption] [--src OTHER/src] [--work /tmp/capaudit-bench-filter]
        [-- EXTRA FILTER OPTIONS]

For each N: the data of :mod:`benchmarks.filter_data` (N distinct ShareGPT4V-length
captions, chair-gt evidence for each copy's image), a fresh store with the set registered
(``sets add``, not timed), then one fresh process under ``/usr/bin/time -v``::

    capaudit filter run dN --filter hallucination --evidence chair-gt \\
        --chair-gt EVIDENCE --out dN_clean --db STORE

It prints CPU-seconds (user + system: the machine may be shared, so wall time is not
comparable), captions per CPU-second, peak RSS and wall time, one JSON line per N.
``--profile`` runs the same command under cProfile instead and prints the top 30 by
cumulative and by own time; ``--importtime`` prints the ``-X importtime`` total and the
slowest imports of the same command. ``--src`` runs another checkout's sources (before /
after on the same machine: ``git archive BASE src | tar -x -C /tmp/base``, then
``--src /tmp/base/src``). Options after ``--`` go to ``filter run`` (e.g.
``-- --object-mode corrected --non-visual flag``). ``--per-caption`` times the filter alone
in a fresh process after start-up (``HallucinationFilter.apply`` on the same captions, no
store): the per-caption cost without imports, the spaCy load and the runner.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from filter_data import DEFAULT_SHARED, make_filter_data  # noqa: E402

_CLI = "from capaudit.cli.main import run; run()"


SRC = [ROOT / "src"]  # --src: another checkout's sources (e.g. the code before a change)


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC[0]), env.get("PYTHONPATH", "")])
    return env


def prepare(n: int, work: Path, shared: Path) -> tuple[list[str], Path]:
    """A fresh store holding set ``dN``; returns the ``filter run`` arguments and the store."""
    data = make_filter_data(n, work / "data", shared)
    store = work / f"store_{n}"
    shutil.rmtree(store, ignore_errors=True)
    store.mkdir(parents=True)
    db = store / "capaudit.duckdb"
    subprocess.run([sys.executable, "-c", _CLI, "sets", "add", f"d{n}", str(data.captions),
                    "--db", str(db)], env=_env(), check=True, capture_output=True)
    args = ["filter", "run", f"d{n}", "--filter", "hallucination", "--evidence", "chair-gt",
            "--chair-gt", str(data.chair_gt), "--out", f"d{n}_clean", "--db", str(db)]
    return args, db


def timed(args: list[str], n: int) -> dict:
    """One fresh process under ``/usr/bin/time -v``: CPU-seconds, peak RSS, wall."""
    proc = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-c", _CLI, *args],
                          env=_env(), capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"filter run failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    field = {k.strip(): v.strip() for k, v in
             (line.split(": ", 1) for line in proc.stderr.splitlines() if ": " in line)}
    cpu = float(field["User time (seconds)"]) + float(field["System time (seconds)"])
    wall = field["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":")
    return {"n": n, "cpu_s": round(cpu, 2), "captions_per_cpu_s": round(n / cpu),
            "peak_rss_mb": round(int(field["Maximum resident set size (kbytes)"]) / 1024),
            "wall_s": round(sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall))), 2),
            "load_1min": os.getloadavg()[0]}


def profiled(args: list[str], work: Path, top: int = 30) -> None:
    """The same command under cProfile: the top functions by cumulative and by own time."""
    import pstats

    out = work / "filter.prof"
    code = f"import cProfile; cProfile.run({_CLI!r}, {str(out)!r})"
    subprocess.run([sys.executable, "-c", code, *args], env=_env(), check=True,
                   capture_output=True)
    stats = pstats.Stats(str(out))
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)


def import_time(args: list[str], top: int = 15) -> None:
    """``python -X importtime`` of the command: the total and the slowest imports (cumulative)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", _CLI, *args], env=_env(),
                          capture_output=True, text=True, check=True)
    rows = []
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            rows.append((int(m.group(2)), len(m.group(3)), m.group(4)))
    total = sum(cum for cum, depth, _ in rows if depth == 1)
    print(json.dumps({"import_s": round(total / 1e6, 2)}))
    for cum, _, name in sorted(rows, reverse=True)[:top]:
        print(f"{cum / 1e6:8.2f} s  {name}")


_PER_CAPTION = """
import gc, json, sys, time
from capaudit.filters.base import CaptionDoc
from capaudit.filters.evidence import load_evidence
from capaudit.filters.hallucination import HallucinationFilter
captions, chair_gt = sys.argv[1], sys.argv[2]
rows = json.load(open(captions))
ev = load_evidence("chair-gt", chair_gt)
gc.freeze(); gc.set_threshold(20_000, 10, 10)  # as the CLI process runs (cli/main.py)
out = {}
for name in ("first_pass", "second_pass"):  # the second: spaCy's parses already cached
    docs = [CaptionDoc(i, int(r["id"]), r["conversations"][1]["value"])
            for i, r in enumerate(rows)]
    filt = HallucinationFilter(ev)
    filt.setup(None)
    t = time.process_time()
    for res in filt.apply(docs):
        res.text()
    out[name + "_us_per_caption"] = round(1e6 * (time.process_time() - t) / len(docs), 1)
print(json.dumps(out))
"""


def per_caption(n: int, work: Path, shared: Path) -> dict:
    """The filter alone, in one fresh process after start-up: CPU per caption of
    ``HallucinationFilter.apply`` (and each result's text), without imports, the spaCy
    load or the store. The first pass includes the spaCy parses of the distinct sentences;
    the second (a new filter) finds them cached, as both the code before and after keep
    parse notes per process."""
    data = make_filter_data(n, work / "data", shared)
    proc = subprocess.run([sys.executable, "-c", _PER_CAPTION, str(data.captions),
                           str(data.chair_gt)], env=_env(), capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"per-caption run failed: {proc.stderr[-2000:]}")
    return {"n": n, **json.loads(proc.stdout.strip().splitlines()[-1])}


def main() -> None:
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[8333, 100_000])
    ap.add_argument("--work", type=Path, default=Path("/tmp/capaudit-bench-filter"))
    ap.add_argument("--shared", type=Path, default=DEFAULT_SHARED)
    ap.add_argument("--profile", action="store_true", help="cProfile instead of timing")
    ap.add_argument("--importtime", action="store_true", help="python -X importtime as well")
    ap.add_argument("--per-caption", action="store_true",
                    help="the filter alone, in-process: CPU microseconds per caption")
    ap.add_argument("--src", type=Path, default=SRC[0],
                    help="the package sources to run (default: this checkout's src/)")
    a = ap.parse_args(argv)
    SRC[0] = a.src.resolve()
    for n in a.n:
        if a.per_caption:
            print(json.dumps(per_caption(n, a.work, a.shared)), flush=True)
            continue
        args, db = prepare(n, a.work, a.shared)
        args += extra
        if a.profile:
            profiled(args, a.work)
        else:
            print(json.dumps(timed(args, n)), flush=True)
        if a.importtime:
            args, db = prepare(n, a.work, a.shared)
            import_time(args + extra)


if __name__ == "__main__":
    main()
