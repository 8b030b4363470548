"""Every option's default in ``--help``: filled in once, where typer cannot see it.

Why: most options default to ``None`` on the command line ("not given": the value then
comes from ``--config`` YAML or the settings' own defaults, :class:`capaudit.audit.config.
AuditConfig`, the filters' declared defaults, the judge's and the enrichment's configs), so
typer showed no default at all (``filter run --help`` showed none). :func:`fill_defaults`
sets each such option's ``show_default`` text before typer builds the command: from
``AuditConfig`` for the audit settings, from :data:`capaudit.filters.declared.DEFAULTS` for
``filter run`` (per filter where they differ), and from :data:`SHOWN` for the rest; a plain
switch shows ``off``. ``tests/test_cli_vocabulary.py`` holds every option of every command
to showing one. Import-light: typer and the two modules above only.
"""

from __future__ import annotations

import inspect
from typing import Any, Iterator

__all__ = ["fill_defaults", "SHOWN", "commands"]

# option -> the default shown where the parameter's own default is None ("not given");
# "COMMAND:--option" wins over "--option" (the same spelling with another default)
SHOWN: dict[str, str] = {
    # outputs: nothing written unless asked
    "--json": "not written", "--jsonl": "not written", "--markdown": "not written",
    "--html": "not written", "audit amplification:--report": "not written",
    "--disagreements": "not written",
    "sets export:--out": "SET.<format> in the working folder",
    "annotations derive-demographics:--out": "not written",
    "query:--out": "printed, not written", "filter run:--turns": "first",
    "annotations build-chair-gt:--out": "not written",
    # the LOTUS, annotation and set inputs
    "--reference": "none", "--lic-reference": "none: no LIC_D", "--clip-model": "none",
    "--images": "none", "--nsfw-lexicon": "the packaged list (LDNOOBW, context marks)",
    "--instances": "the stored annotations", "--chair-gt": "the stored annotations",
    "--demographics": "the stored annotations", "--lexicon": "COCO's 80 categories",
    "--config": "none", "--profiles": "configs/profiles.yaml, else the packaged copy",
    "--profile": "every profile", "--metrics": "every default metric",
    "audit leaderboard:--metrics": "every metric", "--disparity": "none",
    "--id-col": "the format's", "--caption-col": "the format's", "--split": "the file's",
    "--where": "every record", "--license": "the card's own (asked for when it has none)",
    "--prompt": "Describe the image in detail.", "--image-id": "every image", "--shards": "none",
    "--name": "the folder's name", "--address": "auto", "--model-path": "none",
    "--work-dir": "STORE.work/NAME.audit-work", "--lic-epochs": "the classifier's (20 lstm, 5 "
    "transformer)", "--lic-seeds": "10", "--lic-classifier": "lstm",
    # judged metrics (capaudit.judge.config.JudgeConfig, configs/judge.yaml)
    "--judge-backend": "openai", "--judge-url": "http://127.0.0.1:8000/v1",
    "--judge-model": "none (give one)", "--api-key-env": "OPENAI_API_KEY",
    "--max-calls": "no cap", "--max-cost": "no cap", "--evidence": "image",
    "--limit": "every caption", "--qa": "none",
    # --workers: judge.runner.RUN_DEFAULTS (one task per set), not the audit's 2
    **{f"{command}:{flag}": shown for flag, shown in (("--seed", "0"), ("--n-boot", "1000"),
                                                      ("--workers", "1"))
       for command in ("audit factuality", "audit dcscore", "audit capability",
                       "audit faithscore", "audit capscore", "judge validate")},
    # enrichment (capaudit.enrich.runner.DEFAULTS, configs/enrich.yaml)
    "--llm": "openai", "--model": "none (give one)", "--base-url": "http://127.0.0.1:8000/v1",
    "enrich:--api-key-env": "OPENAI_API_KEY", "--concurrency": "8", "--max-tokens": "the "
    "backend's", "--captioner": "none", "--captioner-model": "none", "--detector":
    "ssd-mobilenet", "--detector-weights": "the packaged model", "--annotations": "none",
    "--ocr": "off", "--captions": "first", "--cache": "none (no response cache)",
    "enrich:--limit": "every shard",
    # train-downstream and caption (capaudit.train_downstream.train.TrainConfig)
    "--precision": "auto", "--weight-decay": "0.05", "--warmup-steps": "0",
    "--checkpoint-every": "500", "--log-every": "50", "train-downstream:--workers": "-1 (auto)",
    "--device": "auto", "caption:--limit": "every image", "--attention": "auto",
    "train-downstream:--compile": "on a GPU, off on CPU",
    # filters and review
    "--score-evidence": "none", "review export:--format": "the --out suffix",
    "filter run:--evidence": "the kind whose file is given",
    "filter run:--chair-gt": "the stored annotations", "filter run:--instances":
    "the stored annotations", "filter run:--demographics": "the stored annotations",
    "review import:--format": "the file's suffix",
    "filter run:--judge-backend": "openai", "filter run:--reviser-backend": "the judge's",
    "filter run:--reviser-url": "the judge's", "filter run:--reviser-model": "the judge's",
}
_AUDIT_NONE = {"metrics": "every default metric", "chunk_size": "50,000 captions",
               "lic_epochs": "the classifier's (20 lstm, 5 transformer)"}


def commands(app) -> Iterator[tuple[str, Any]]:
    """``(command path, callback)`` of every command of a typer app, groups walked."""
    from typer.main import get_command_name

    def walk(t, prefix: str):
        for c in t.registered_commands:
            name = c.name or get_command_name(c.callback.__name__)
            yield (prefix + " " + name).strip(), c.callback
        for g in t.registered_groups:
            yield from walk(g.typer_instance, (prefix + " " + (g.name or "")).strip())
    yield from walk(app, "")


def _audit_default(name: str) -> str | None:
    from capaudit.audit.config import AuditConfig

    defaults = AuditConfig.defaults()
    if name not in defaults:
        return None
    v = defaults[name]
    if v is None:
        return _AUDIT_NONE.get(name)
    return ("on" if v else "off") if isinstance(v, bool) else str(v)


def _filter_default(name: str) -> str | None:
    """``filter run``'s generated option: its default in each built-in filter that has it."""
    from capaudit.filters.declared import DEFAULTS

    per = {f: d[name] for f, d in DEFAULTS.items() if name in d}
    if not per:
        return None
    show = {f: ("none" if v is None else ("on" if v else "off") if isinstance(v, bool) else str(v))
            for f, v in per.items()}
    if len(set(show.values())) == 1:
        return next(iter(show.values()))
    return "; ".join(f"{f}: {v}" for f, v in show.items())


def _shown(path: str, flag: str, name: str, info) -> str | None:
    """The default text of one option, or None when typer already shows one."""
    if info.default is ...:        # required
        return None
    if info.default is not None and not (info.default is False):
        return None
    if f"{path}:{flag}" in SHOWN:
        return SHOWN[f"{path}:{flag}"]
    if path == "filter run" and (text := _filter_default(name)) is not None:
        return text
    if flag in SHOWN:
        return SHOWN[flag]
    if (text := _audit_default(name)) is not None:
        return text
    return "off" if info.default is False else None


def fill_defaults(app) -> None:
    """Set ``show_default`` of every option of ``app`` whose default typer cannot show."""
    from typer.models import OptionInfo

    for path, callback in commands(app):
        for name, param in inspect.signature(callback).parameters.items():
            info = param.default
            if not isinstance(info, OptionInfo) or info.show_default not in (True, None):
                continue
            decls = [d for d in (info.param_decls or ()) if d.startswith("--")]
            flag = decls[0].split("/")[0] if decls else "--" + name.replace("_", "-")
            text = _shown(path, flag, name, info)
            if text is not None:
                info.show_default = text
