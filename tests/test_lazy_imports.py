"""Heavy packages load only when the implementation that needs them is used."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("torch", "transformers", "spacy", "ray", "matplotlib", "ai_edge_litert", "pytesseract",
         "ultralytics", "sentence_transformers")


def _loaded_after(code: str) -> list[str]:
    probe = code + f"\nimport sys, json\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_cli_and_registries_import_nothing_heavy():
    code = """
from capaudit.cli.main import app, main
from capaudit.audit.metrics import METRICS
from capaudit.enrich.backends.base import BACKENDS
from capaudit.enrich.adapters.base import ADAPTERS
from capaudit.filters.base import FILTERS
from capaudit.enrich.ocr import OCR
import capaudit.audit.disparity, capaudit.audit.compare, capaudit.io.readers
names = METRICS.names() + BACKENDS.names() + ADAPTERS.names() + FILTERS.names() + OCR.names()
assert len(names) > 15
"""
    assert _loaded_after(code) == []


def test_help_of_every_command_group_loads_nothing_heavy():
    code = """
from capaudit.cli.main import main
for group in (["--help"], ["audit", "--help"], ["filter", "--help"], ["sets", "--help"],
              ["enrich", "--help"], ["train-downstream", "--help"]):
    assert main(group) == 0
"""
    assert _loaded_after(code) == []
