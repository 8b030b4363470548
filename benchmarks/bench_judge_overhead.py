"""Judge-layer overhead per call and calls/s against a loopback judge with simulated latency.

Why: the judge layer (template rendering, strict parsing, status bookkeeping,
budget checks, the response cache) must cost little next to a model call.
Both sides send the same factuality requests to the same loopback
OpenAI-compatible server that sleeps ``--latency`` per call: "raw" calls the
backend directly with pre-rendered prompts and no cache, "judge" goes through
:class:`capaudit.judge.Judge` with the response cache on (a fresh cache file,
so every call is a miss and is written). Overhead per call =
(judge wall - raw wall) / calls, at each concurrency.

    python benchmarks/bench_judge_overhead.py --calls 256 --latency 0.1 --concurrency 1 8 32
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=256)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    args = ap.parse_args()

    from capaudit.llm import make_backend
    from capaudit.enrich.testing import FakeOpenAIServer
    from capaudit.judge import Judge, JudgeConfig
    from capaudit.judge.factuality import sentence_tasks

    def answer(body):
        return {"content": "no\nthere is no dog", "logprobs": [
            {"token": "no", "logprob": -0.1, "top_logprobs": [{"token": "no", "logprob": -0.1},
                                                               {"token": "yes", "logprob": -2.4}]}]}

    print(f"{'conc':>5} {'calls':>6} {'raw s':>8} {'judge s':>8} {'raw c/s':>8} "
          f"{'judge c/s':>9} {'overhead ms/call':>17}")
    with FakeOpenAIServer(delay_s=args.latency, answer=answer) as srv, \
            tempfile.TemporaryDirectory() as tmp:
        for conc in args.concurrency:
            # fresh sentences per concurrency level: never a cache hit
            sents = [f"Sentence {conc}-{i} says a dog sits on a red bench." for i in range(args.calls)]
            cfg = JudgeConfig(model="m", url=srv.base_url, concurrency=conc,
                              cache=str(Path(tmp) / f"c{conc}.sqlite"))
            judge = Judge(cfg)
            tasks = sentence_tasks(sents, "Evidence: the attached image.")
            reqs = [judge._request(t) for t in tasks]
            raw = make_backend("openai", {"model": "m", "base_url": srv.base_url,
                                          "concurrency": conc, "params": judge.params()})
            t0 = time.perf_counter()
            chunk = max(1, conc) * 4  # the judge sends chunks of this size too
            for s in range(0, len(reqs), chunk):
                raw.generate(reqs[s:s + chunk])
            t_raw = time.perf_counter() - t0
            t0 = time.perf_counter()
            verdicts = judge.run(tasks)
            t_judge = time.perf_counter() - t0
            assert all(v.status == "ok" and v.p_yes is not None for v in verdicts)
            judge.close()
            n = args.calls
            print(f"{conc:>5} {n:>6} {t_raw:>8.2f} {t_judge:>8.2f} {n / t_raw:>8.1f} "
                  f"{n / t_judge:>9.1f} {1000 * (t_judge - t_raw) / n:>17.2f}")


if __name__ == "__main__":
    main()
