"""``.ci/run`` installs chromium and tesseract-ocr where it can, and says why where it cannot
(#34.11); pytest's summary lists every skipped test with its reason. The script's system
step runs here in a sandbox PATH (fake ``id`` and ``apt-get``), never touching this machine."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _sandbox(tmp_path: Path, uid: int, apt: bool, present: tuple[str, ...] = ()) -> Path:
    """A PATH folder with ``dirname``, an ``id`` answering ``uid``, optionally an ``apt-get``
    that logs its arguments and "installs" by creating the programs, and ``present`` ones."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    os.symlink(shutil.which("dirname"), bin_ / "dirname")

    def script(name: str, body: str) -> None:
        (bin_ / name).write_text("#!/bin/sh\n" + textwrap.dedent(body))
        (bin_ / name).chmod(0o755)

    script("id", f"echo {uid}\n")
    for name in present:
        script(name, "exit 0\n")
    if apt:
        script("apt-get", f"""\
            echo "$@" >> {tmp_path}/apt.log
            case "$*" in *install*) for p in chromium tesseract; do
              printf '#!/bin/sh\\n' > {bin_}/$p; {shutil.which('chmod')} 755 {bin_}/$p; done;; esac
            """)
    return bin_


def _run(bin_: Path, **env: str) -> str:
    proc = subprocess.run(["/bin/bash", str(ROOT / ".ci" / "run")], capture_output=True,
                          text=True, timeout=60,
                          env={"PATH": str(bin_), "CAPAUDIT_CI_SYSTEM_ONLY": "1", **env})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_root_with_apt_get_installs_both(tmp_path):
    out = _run(_sandbox(tmp_path, 0, apt=True))
    assert out == "CI: installed chromium tesseract-ocr from the distribution's packages"
    log = (tmp_path / "apt.log").read_text().splitlines()
    assert log[0] == "update -qq"
    assert log[1] == "install -y -qq --no-install-recommends chromium tesseract-ocr"


@pytest.mark.parametrize("uid,apt,present,env,said", [
    (1000, True, (), {}, "CI: not root: not installing chromium tesseract-ocr (their tests "
                         "skip; as root: apt-get install -y chromium tesseract-ocr)"),
    (0, False, ("chromium",), {}, "CI: no apt-get on this system: not installing "
                                  "tesseract-ocr (their tests skip)"),
    (0, True, (), {"CAPAUDIT_CI_NO_APT": "1"}, "CI: CAPAUDIT_CI_NO_APT is set: not installing "
                                                 "chromium tesseract-ocr (their tests skip)"),
    (0, True, ("chromium-browser", "tesseract"), {},
     "CI: chromium and tesseract are installed: the browser and OCR tests run"),
])
def test_each_case_says_what_it_did(tmp_path, uid, apt, present, env, said):
    assert _run(_sandbox(tmp_path, uid, apt, present), **env) == said
    assert not (tmp_path / "apt.log").exists()          # nothing installed


def test_summary_lists_every_skip_with_its_reason(tmp_path):
    test = tmp_path / "test_skips.py"
    test.write_text(textwrap.dedent("""\
        import pytest

        def test_one():
            pytest.skip("no chromium binary (Debian: apt-get install -y chromium)")

        @pytest.mark.skipif(True, reason="tesseract binary not installed")
        def test_two():
            pass

        def test_three():
            pass
        """))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"),
                           "--rootdir", str(tmp_path), "-p", "no:cacheprovider", "-q",
                           str(test)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(lines) == 2, proc.stdout
    assert lines[0].endswith("no chromium binary (Debian: apt-get install -y chromium)")
    assert lines[1].endswith("tesseract binary not installed")
