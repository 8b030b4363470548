"""Judged commands: ``capaudit audit factuality|dcscore|capability|faithscore|capscore`` and
``capaudit judge validate``.

Thin: every command takes the same judge options (built once here, attached to
each command's signature), resolves the config and calls
:func:`capaudit.judge.runner.run_judged` (or the validation), then prints the
numbers and the cost summary.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import List, Optional

import typer

from capaudit.cli.common import DbOption, console, db_path, open_store
from capaudit.core.ranges import N_BOOT_MAX, SEED_MAX

judge_app = typer.Typer(no_args_is_help=True, help="Judge models: validate them against labels.")

_P = inspect.Parameter
JUDGE_OPTIONS = [
    ("judge_backend", Optional[str], typer.Option(None, "--judge-backend",
                                                  help="openai (any OpenAI-compatible server) "
                                                       "or transformers (local, text-only)")),
    ("judge_url", Optional[str], typer.Option(None, "--judge-url", help="server base URL (…/v1)")),
    ("judge_model", Optional[str], typer.Option(None, "--judge-model",
                                                help="model name, or a local folder/gemma3-270m")),
    ("api_key_env", Optional[str], typer.Option(None, "--api-key-env",
                                                help="environment variable holding the API key")),
    ("dry_run", bool, typer.Option(False, "--dry-run", help="count calls, tokens and cost; "
                                   "no network at all, nothing stored")),
    ("max_calls", Optional[int], typer.Option(None, "--max-calls",
                                              help="stop after this many model calls")),
    ("max_cost", Optional[float], typer.Option(None, "--max-cost",
                                               help="stop before the estimated cost passes this")),
    ("evidence", Optional[str], typer.Option(None, "--evidence",
                                             help="image (default) or reference-captions "
                                                  "(text-only judges; labelled on every number)")),
    ("images", Optional[Path], typer.Option(None, "--images", help="image folder (COCO names)")),
    ("shards", Optional[Path], typer.Option(None, "--shards", help="webdataset shard folder")),
    ("reference", Optional[str], typer.Option(None, "--reference",
                                              help="Human caption set of the same images "
                                                   "(read by the judges that need references)")),
    ("limit", Optional[int], typer.Option(None, "--limit", min=1,
                                              help="first N captions of each set")),
    ("n_boot", Optional[int], typer.Option(None, "--n-boot", min=0, max=N_BOOT_MAX,
                                               help="bootstrap resamples")),
    ("seed", Optional[int], typer.Option(None, "--seed", min=0, max=SEED_MAX)),
    ("workers", Optional[int], typer.Option(None, "--workers", min=1,
                                            help="processes judging sets at once (1); a "
                                                 "capped run is one task")),
    ("executor", Optional[str], typer.Option(None, "--executor", help="local (default) or ray")),
    ("address", Optional[str], typer.Option(None, "--address", help="Ray cluster (auto)")),
    ("work_dir", Optional[str], typer.Option(None, "--work-dir",
                                             help="finished sets' verdicts, for a rerun to "
                                                  "resume (a path or URL; default beside the "
                                                  "store, removed once stored)")),
    ("json_out", Optional[Path], typer.Option(None, "--json", help="write results as JSON")),
    ("config", Optional[Path], typer.Option(None, "--config", help="YAML (configs/judge.yaml)")),
    ("db", Optional[Path], DbOption),
]
_JUDGE_KEYS = {"judge_backend": "backend", "judge_url": "url", "judge_model": "model",
               "api_key_env": "api_key_env", "max_calls": "max_calls", "max_cost": "max_cost",
               "evidence": "evidence"}


def _config(kw: dict, **cli) -> tuple[dict, dict]:
    """(the configuration of the results, how the judging runs); a capped run on several
    workers is said to be one task."""
    from capaudit.judge.runner import RUN_DEFAULTS, resolve_config, split_run

    judge = {v: kw.get(k) for k, v in _JUDGE_KEYS.items()}
    judge["dry_run"] = kw.get("dry_run") or None
    cfg, run = split_run(resolve_config(kw.get("config"), judge, n_boot=kw.get("n_boot"),
                                        seed=kw.get("seed"), limit=kw.get("limit"), **cli,
                                        **{k: kw.get(k) for k in RUN_DEFAULTS}))
    from capaudit.executors.base import check_executor
    from capaudit.judge.config import JudgeConfig
    from capaudit.judge.step import capped

    # an unknown one, or an address it would ignore: one line before any work
    check_executor(run["executor"], run["address"])
    if (run["workers"] > 1 or run["executor"] != "local") and \
            capped(JudgeConfig.from_mapping(cfg["judge"])):
        console.print("note: a capped run (--max-calls/--max-cost) judges every set in one "
                      "task, in order, whatever --workers says")
    return cfg, run


def _store(kw: dict):
    """A dry run writes nothing: it reads an existing store (or none, for caption files)."""
    if kw.get("dry_run"):
        return open_store(kw.get("db"), read_only=True) if db_path(kw.get("db")).exists() else None
    return open_store(kw.get("db"), create=True)  # judged results are stored


def _location(value):
    """A file option as text: a URL as given, a path as ``pathlib`` writes it (what the
    stored configuration held when these options were paths)."""
    from capaudit.core.storage.urls import is_url

    return value if value is None or is_url(value) else str(Path(value))


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.4f}" if isinstance(v, float) else str(v)


def print_summary(result: dict) -> None:
    s, j = result["summary"], result["judge"]
    who = f"{j['backend']}:{j['model'] or '(no model)'} judge {j['judge_id']}"
    if s["dry_run"]:
        cost = "unknown (add the model to judge.prices)" if s["est_cost"] is None \
            else f"{s['est_cost']:.4f}"
        cached = f" ({s['est_cached']} units already in the cache left out)" \
            if s.get("est_cached") else ""
        console.print(f"dry run ({who}): {s['est_calls']} calls{cached}, ~{s['est_tokens_in']} "
                      f"input and ~{s['est_tokens_out']} output tokens, estimated cost {cost}; "
                      f"where units come from the judge, {result.get('assumed_units', 8)} "
                      "assumed per caption (assumed_units); no call was made, nothing stored")
        return
    cost = "unknown (no price)" if s["cost"] is None else f"{s['cost']:.4f}"
    console.print(f"{who}: {s['calls']} calls, {s['tokens_in']} in / {s['tokens_out']} out tokens, "
                  f"{s['cache_hits']} cache hits, cost {cost}, {s['seconds']:.1f} s; "
                  f"ok {s['ok']}, unparsed {s['unparsed']}, failed {s['failed']}, "
                  f"not judged {s['not_judged']}"
                  + _resumed(s)
                  + (f" (capped: {s['stopped']}; the values rest on the judged units only)"
                     if s["stopped"] else ""))
    if s.get("spent") and s["cost"] is not None and abs(s["spent"] - s["cost"]) > 1e-9:
        console.print(f"--max-cost counted {s['spent']:.4f}: the reported usage, and each "
                      "reply's estimate where the server reported none or impossible figures")
    if s.get("usage_ignored"):
        console.print(f"warning: the server's token counts of {s['usage_ignored']} replies were "
                      "negative or absurd; counted as 0 (tokens and cost above are too low)")


def _resumed(s: dict) -> str:
    """What the work folder spared: whole sets, or chunks of a set (several workers)."""
    what = "; ".join(f"{s[k]} {unit} resumed" for k, unit in (
        ("resumed_sets", "set(s)"), ("resumed_parts", "part(s) of a set")) if s.get(k))
    n, m = s.get("unreused_parts") or (0, 0)
    return (f"; {what} from the work folder (their verdicts counted, not their calls)"
            if what else "") + (f"; {n} part(s) an earlier run left with --workers {m}"
                                f"{' or more' * (m > 1)} were judged again, not reused (a "
                                "killed run resumes with its own --workers)" if n else "")


def print_values(result: dict) -> None:
    from rich.table import Table

    tbl = Table("set", "metric", "group", "value", "n", "95% CI", "status")
    for name, vals in result["values"].items():
        for key, v in vals.items():
            ci = f"[{_fmt(v.get('ci_low'))}, {_fmt(v.get('ci_high'))}]" \
                if v.get("ci_low") is not None else "-"
            tbl.add_row(name, v.get("metric", key), v.get("grp", "all"),
                        _fmt(v.get("value")), _fmt(v.get("n")), ci, v.get("status", "ok"))
    console.print(tbl)


def _finish(result: dict, cfg: dict, json_out) -> None:
    from capaudit.core.config import write_json

    if result["values"] and not result["summary"]["dry_run"]:
        print_values(result)
    for k, v in result.get("extra", {}).items():
        if k.startswith("welch"):
            console.print(f"Welch t-test on {v['score']}, {v['a']} vs {v['b']}: "
                          f"t = {_fmt(v['t'])}, df = {_fmt(v['df'])}, p = {_fmt(v['p'])} "
                          f"(n = {v['n_a']}, {v['n_b']})")
    print_summary(result)
    if json_out:
        write_json(json_out, result, cfg, cfg.get("seed"), parents=False)
    if result.get("run_id") is not None:
        console.print(f"stored as run {result['run_id']}")


def _judged(name: str, module: str, doc: str, extra: list) -> None:
    """Build ``capaudit audit NAME`` with the common options plus ``extra``."""
    def command(**kw):
        import importlib

        from capaudit.judge.runner import run_judged

        compute = importlib.import_module(f"capaudit.judge.{module}").compute
        cli = {k: _location(v) for k, v in kw.items() if k in {e[0] for e in extra}}
        cfg, run = _config(kw, reference=kw.get("reference"), **cli)
        store = _store(kw)
        res = run_judged(store, name, kw["targets"], cfg, compute,
                         images=kw.get("images"), shards=kw.get("shards"),
                         reference=kw.get("reference"), run=run)
        _finish(res, cfg, kw.get("json_out"))

    params = [_P("targets", _P.KEYWORD_ONLY, annotation=List[str],
                 default=typer.Argument(..., help="registered sets or caption files"))]
    params += [_P(n, _P.KEYWORD_ONLY, annotation=t, default=d) for n, t, d in extra + JUDGE_OPTIONS]
    command.__signature__ = inspect.Signature(params)
    command.__doc__ = doc
    command.__name__ = name
    from capaudit.cli.audit import audit_app

    audit_app.command(name)(command)


_judged("factuality", "factuality",
        "Sentence factuality with context (VNLI-Critique protocol); the three DOCCI-Critique "
        "criteria with 95% intervals.", [])
_judged("dcscore", "dcscore",
        "DCScore both ways: HAR (model caption vs --reference) and MAR; hallucination and "
        "omission rates per unit type; Welch t-test between the first two sets.", [])
_judged("capability", "capability",
        "CAPability precision and hit per dimension (and KT-bar with --qa).",
        [("annotations", str, typer.Option(..., "--annotations",
                                           help="element annotations JSONL (docs/judges.md); "
                                                "a path or a URL")),
         ("qa", Optional[str], typer.Option(None, "--qa", help="the model's QA answers JSONL; "
                                                              "a path or a URL"))])
_judged("faithscore", "faithscore",
        "FaithScore and sentence-level FaithScore (atomic facts, each verified).", [])
_judged("capscore", "capscore",
        "CapScore (LOTUS): semantic and overall agreement with --reference, 0-1.", [])


def validate(**kw):
    """ROC-AUC, macro-F1, kappa and system-level Spearman/Kendall of a judge against labels."""
    from capaudit.judge.runner import run_validate

    cfg, run = _config(kw, labels=_location(kw["labels"]))
    store = _store(kw)
    res = run_validate(store, cfg, kw["labels"], images=kw.get("images"),
                       shards=kw.get("shards"), reference=kw.get("reference"), run=run)
    if not res["summary"]["dry_run"]:
        a = res["agreement"]
        console.print(" ".join(f"{k}={_fmt(a.get(k))}" for k in
                               ("n", "roc_auc", "macro_f1", "accuracy", "kappa", "spearman",
                                "kendall", "n_systems", "not_scored")) +
                      f" ({res['ties']} tied votes left out)")
    _finish({**res, "values": {}}, cfg, kw.get("json_out"))


validate.__signature__ = inspect.Signature(
    [_P("labels", _P.KEYWORD_ONLY, annotation=str,
        default=typer.Option(..., "--labels", help="sentence labels (JSONL/CSV) or a factuality "
                                                   "--json output; a path or a URL"))] +
    [_P(n, _P.KEYWORD_ONLY, annotation=t, default=d) for n, t, d in JUDGE_OPTIONS
     if n != "limit"])
judge_app.command("validate")(validate)


def register(app: typer.Typer) -> None:
    app.add_typer(judge_app, name="judge")
