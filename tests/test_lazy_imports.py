"""Heavy packages load only when the implementation that needs them is used."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "spacy", "ray", "matplotlib", "ai_edge_litert", "pytesseract",
         "ultralytics", "sentence_transformers")


def _loaded_after(code: str) -> list[str]:
    probe = code + f"\nimport sys, json\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_cli_and_registries_import_nothing_heavy():
    code = """
from capaudit.cli.main import app, main
from capaudit.metrics import METRICS
from capaudit.llm.base import BACKENDS
from capaudit.enrich.adapters.base import ADAPTERS
from capaudit.filters.base import FILTERS
from capaudit.enrich.ocr import OCR
import capaudit.audit.disparity, capaudit.report.compare, capaudit.io.readers
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



@pytest.mark.parametrize("blocked, build, extra", [
    ("pytesseract", lambda: __import__("capaudit.enrich.ocr", fromlist=["OCR"]).OCR.get(
        "tesseract")(), "ocr"),
    ("ray", lambda: __import__("capaudit.executors", fromlist=["EXECUTORS"]).EXECUTORS.get(
        "ray")(workers=1), "ray"),
    ("ai_edge_litert", lambda: __import__("capaudit.enrich.detectors", fromlist=["x"])
     .make_detector("ssd-mobilenet", {}), "detect"),
    ("ultralytics", lambda: __import__("capaudit.enrich.detectors", fromlist=["x"])
     .make_detector("ultralytics", {"weights": __file__}), "yolo"),  # any existing file
    ("datasets", lambda: list(__import__("capaudit.io.readers", fromlist=["x"])
                              .get_reader("hf").read("x")), "hf"),
])
def test_a_missing_optional_package_names_its_extra(monkeypatch, blocked, build, extra):
    """With the package made unimportable, using what needs it is one clear error naming
    the extra to install (``pip install 'capaudit[EXTRA]'``), not an ImportError."""
    from capaudit.errors import MissingExtraError

    for name in list(sys.modules):
        if name == blocked or name.startswith(blocked + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, blocked, None)  # `import blocked` now raises ImportError
    with pytest.raises(MissingExtraError, match=rf"pip install 'capaudit\[{extra}\]'"):
        build()
