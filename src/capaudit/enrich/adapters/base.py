"""Adapter contract, prompt templates and the per-worker context.

Why adapters are separate from backends: ShareGPT4V-, FuseCap- and
CapsFusion-style enrichment differ only in *what* they ask (and which vision
tools feed the question), not in *how* a model is called. An adapter turns a
batch of samples into backend requests and back into output rows, each row
carrying its provenance: adapter, backend, model, prompt hash and the tags
used. Failed samples come back as rows with ``error`` set, never dropped.

Prompt templates are plain text files with ``{field}`` placeholders, looked
up as (1) the path given in the config, (2) ``configs/prompts/NAME.txt`` in
the working directory, (3) the project's ``configs/prompts``, which the
package ships as ``capaudit/data/prompts`` (a link in the source tree, real
files in a wheel). Users replace
wording without touching code; the prompt hash in the provenance tells runs
with different wording apart.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capaudit.core.registry import Registry
from capaudit.errors import InputError

_FIELD = re.compile(r"\{(\w+)\}")


PACKAGED_PROMPTS = Path(__file__).parents[2] / "data" / "prompts"  # -> configs/prompts


def prompt_dirs() -> list[Path]:
    """Where templates are looked up, first match wins: the user's, then the packaged ones."""
    return [Path.cwd() / "configs" / "prompts", PACKAGED_PROMPTS]


def load_prompt(name: str, override: str | None = None) -> str:
    if override:
        p = Path(override)
        if not p.exists():
            raise InputError("prompt template not found", path=p, fix="pass an existing .txt")
        return p.read_text(encoding="utf-8")
    for d in prompt_dirs():
        p = d / f"{name}.txt"
        if p.exists():
            return p.read_text(encoding="utf-8")
    raise InputError(f"no prompt template '{name}.txt' in {', '.join(map(str, prompt_dirs()))}",
                     fix=f"set prompts: {{{name}: PATH}} in the enrich config")


def prompt_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def render(template: str, **fields: Any) -> str:
    """Fill ``{field}`` placeholders; unknown placeholders are an error (typo guard)."""
    def sub(m):
        if m.group(1) not in fields:
            raise InputError(f"prompt placeholder '{{{m.group(1)}}}' is not known",
                             fix=f"use only: {', '.join(sorted(fields))}")
        return str(fields[m.group(1)])
    return _FIELD.sub(sub, template).strip()


@dataclass
class Context:
    """What a worker builds once and reuses for every shard it processes."""

    llm: Any                       # Backend
    captioner: Any = None          # Backend for capsfusion caption B
    detector: Any = None           # Detector for fusecap
    ocr: Any = None
    colors: bool = True
    captions: str = "first"        # first | all
    prompts: dict[str, str] = field(default_factory=dict)

    def prompt(self, name: str) -> str:
        if name not in self.prompts:
            raise InputError(f"prompt '{name}' not loaded")
        return self.prompts[name]


class Adapter:
    """``process(samples, ctx) -> list[dict]``: one row per output caption or failure."""

    name = "base"
    prompts: tuple[str, ...] = ()
    needs_detector = False
    needs_captioner = False

    def source_captions(self, sample, ctx: Context) -> list[tuple[int, str]]:
        caps = list(enumerate(sample.captions))
        return caps if ctx.captions == "all" else caps[:1]

    def provenance(self, ctx: Context, backend=None, **extra) -> dict:
        backend = backend or ctx.llm
        prov = {"adapter": self.name, "backend": backend.name, "model": backend.model,
                "params": backend.params,
                "prompt_hash": {p: prompt_hash(ctx.prompt(p)) for p in self.prompts}}
        prov.update(extra)
        return prov

    @staticmethod
    def row(sample, caption=None, error=None, **meta) -> dict:
        return {"key": sample.key, "image_id": sample.image_id, "caption": caption,
                "error": error, "meta": meta}

    def process(self, samples: list, ctx: Context) -> list[dict]:
        raise NotImplementedError


ADAPTERS: Registry = Registry("adapter")
ADAPTERS.register("sharegpt4v", "capaudit.enrich.adapters.sharegpt4v:ShareGPT4VAdapter",
                  version="1", description="VLM: image -> detailed description")
ADAPTERS.register("fusecap", "capaudit.enrich.adapters.fusecap:FuseCapAdapter", version="1",
                  description="caption + detector tags (+ colours, + OCR) -> LLM fusion")
ADAPTERS.register("capsfusion", "capaudit.enrich.adapters.capsfusion:CapsFusionAdapter",
                  version="1", description="caption + captioner caption -> LLM fusion")
