"""Hostile outputs (issue 25, "Writing files"): nothing written destroys what capaudit did
not create.

Each test is a case of the hostile run that broke: an export folder deleted with all it
held, set names that became paths outside the working folder, ``--out`` on the store or on
a registered source, links planted where capaudit writes (``OUT.tmp``,
``OUT.changes.jsonl``, ``OUT.provenance.json``, inside a ``--report`` folder), ``--out``
at ``.`` or with a missing folder, file-system faults (full disk, read-only mount, no
permission) as one line with no temporary file left, HTML from set names in the Markdown
outputs and mathtext from set names in the plots.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
from pathlib import Path

import duckdb
import pytest

import capaudit
from capaudit.demo import DEMO_DIR, build_demo
from test_hostile import cli, one_line_error

NIC = DEMO_DIR / "nic.jsonl"
VICTIM_TEXT = "precious, not capaudit's\n"


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    """The demo store (coco, oscar, nic and their annotations), not audited."""
    db = tmp_path_factory.mktemp("demo") / "demo.duckdb"
    build_demo(db, run_audit=False)["store"].close()
    return db


@pytest.fixture
def db(demo_db, tmp_path, monkeypatch) -> Path:
    """A copy of the demo store in a fresh working folder (the test's cwd)."""
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(demo_db, work / "a.duckdb")
    monkeypatch.chdir(work)
    return work / "a.duckdb"


def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text(VICTIM_TEXT)
    return path


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in Path(folder).iterdir() if ".tmp" in p.name)


# -- folders are never removed ----------------------------------------------------------------
@pytest.mark.parametrize("to", ["webdataset", "coco"])
def test_export_into_a_folder_with_files_keeps_them(db, capsys, to):
    out = db.parent / "d"
    out.mkdir()
    (out / "keep.txt").write_text(VICTIM_TEXT)
    code, _, err = cli(["sets", "export", "nic", "--to", to, "--out", out, "--db", db], capsys)
    line = one_line_error(err)
    assert code == 2 and str(out) in line
    assert (out / "keep.txt").read_text() == VICTIM_TEXT and os.listdir(out) == ["keep.txt"]


def test_overwrite_replaces_only_capaudits_own_files(db, capsys):
    out = db.parent / "d"
    assert cli(["sets", "export", "nic", "--to", "webdataset", "--out", out, "--db", db],
               capsys)[0] == 0
    (out / "keep.txt").write_text(VICTIM_TEXT)
    (out / "nic-00007.tar").write_bytes(b"")        # not listed by capaudit: not its own
    code, _, err = cli(["sets", "export", "nic", "--to", "webdataset", "--out", out,
                        "--overwrite", "--db", db], capsys)
    assert code == 0, err
    assert (out / "keep.txt").read_text() == VICTIM_TEXT and (out / "nic-00007.tar").exists()
    assert (out / "nic-00000.tar").stat().st_size > 0 and leftovers(db.parent) == []


def test_export_from_a_subfolder_with_relative_names_deletes_nothing(db, capsys, monkeypatch):
    sub, sibling = db.parent / "sub", db.parent / "sibling"
    sub.mkdir()
    sibling.mkdir()
    (sibling / "keep.txt").write_text(VICTIM_TEXT)
    (sub / "mine.txt").write_text(VICTIM_TEXT)
    monkeypatch.chdir(sub)
    for name in ("..", ".", "../sibling"):
        code, _, err = cli(["sets", "add", name, NIC, "--db", db], capsys)
        assert code == 2, f"set name {name!r} accepted"
        one_line_error(err)
    for out in ("..", ".", "/", "../sibling"):
        code, _, err = cli(["sets", "export", "nic", "--to", "webdataset", "--out", out,
                            "--db", db], capsys)
        assert code == 2 and one_line_error(err)
    assert (sibling / "keep.txt").read_text() == VICTIM_TEXT
    assert (sub / "mine.txt").read_text() == VICTIM_TEXT and db.exists()


@pytest.mark.parametrize("to, name", [("jsonl", "nic.jsonl"), ("coco", "nic.json")])
def test_a_default_name_never_replaces_the_users_file(db, capsys, to, name):
    # no --out: the name is capaudit's choice, so a user's file of that name stays; an export
    # capaudit wrote there before (its provenance beside it) is replaced as before
    mine = db.parent / name
    mine.write_text(VICTIM_TEXT)
    code, _, err = cli(["sets", "export", "nic", "--to", to, "--db", db], capsys)
    assert code == 2 and "--overwrite" in one_line_error(err)
    assert mine.read_text() == VICTIM_TEXT and leftovers(db.parent) == []
    mine.unlink()
    assert cli(["sets", "export", "nic", "--to", to, "--db", db], capsys)[0] == 0
    first = sha(mine)
    mine.write_text("changed\n")
    assert cli(["sets", "export", "nic", "--to", to, "--db", db], capsys)[0] == 0
    assert sha(mine) == first
    mine.write_text(VICTIM_TEXT)
    (db.parent / (name + ".provenance.json")).unlink()
    assert cli(["sets", "export", "nic", "--to", to, "--overwrite", "--db", db], capsys)[0] == 0
    assert sha(mine) == first


# -- set names never become paths -------------------------------------------------------------
@pytest.mark.parametrize("name, rule", [
    ("../escape", "path separator"), ("/tmp/x/abs", "path separator"),
    ("a\\b", "path separator"), ("a..b", "'..'"), ("tab\there", "control character"),
    ("line\nbreak", "control character"), ("x" * 201, "at most 200")])
def test_set_names_are_checked_when_added(db, capsys, name, rule):
    code, _, err = cli(["sets", "add", name, NIC, "--db", db], capsys)
    assert code == 2 and rule in one_line_error(err)
    with pytest.raises(capaudit.InputError, match=rule):
        capaudit.open(db).add_set(name, NIC)
    assert name not in [s.name for s in capaudit.open(db).sets()]


def test_filter_output_names_are_checked(db, capsys):
    code, _, err = cli(["filter", "run", "nic", "--filter", "hallucination", "--evidence",
                        "chair-gt", "--out", "../nic_clean", "--db", db], capsys)
    assert code == 2 and "path separator" in one_line_error(err)


@pytest.mark.parametrize("stored, written", [("../escape", "_escape.jsonl"),
                                             ("/tmp/x/abs", "_tmp_x_abs.jsonl")])
def test_stored_names_export_inside_the_working_folder(db, capsys, monkeypatch, stored, written):
    # a store written before names were checked may hold such a name
    con = duckdb.connect(str(db))
    con.execute("UPDATE caption_sets SET name = ? WHERE name = 'nic'", [stored])
    con.close()
    sub = db.parent / "sub"
    sub.mkdir()
    monkeypatch.chdir(sub)
    code, out, err = cli(["sets", "export", stored, "--db", db], capsys)
    assert code == 0, err
    assert sorted(os.listdir(sub)) == [written, written + ".provenance.json"]
    assert sum(1 for _ in open(sub / written)) == 1000
    assert not (db.parent / "escape.jsonl").exists() and not Path("/tmp/x/abs.jsonl").exists()


# -- the store and the registered sources are never written over ------------------------------
def test_out_on_the_store_is_refused(db, capsys):
    before = sha(db)
    code, _, err = cli(["sets", "export", "nic", "--out", db, "--db", db], capsys)
    assert code == 2 and "the store" in one_line_error(err)
    assert sha(db) == before and [s.name for s in capaudit.open(db).sets()] == \
        ["coco", "nic", "oscar"]


def test_out_on_a_registered_source_is_refused(db, capsys, tmp_path):
    src = tmp_path / "mine.jsonl"
    shutil.copy(NIC, src)
    assert cli(["sets", "add", "mine", src, "--db", db], capsys)[0] == 0
    before = sha(src)
    for to in ("original", "jsonl"):
        code, _, err = cli(["sets", "export", "nic", "--to", to, "--out", src, "--db", db],
                           capsys)
        assert code == 2 and "source file of set 'mine'" in one_line_error(err)
    assert sha(src) == before
    assert cli(["sets", "export", "mine", "--to", "original", "--out", tmp_path / "back.jsonl",
                "--db", db], capsys)[0] == 0


@pytest.mark.parametrize("cmd", [
    ["audit", "run", "nic", "--n-boot", "2", "--json", "{out}"],
    ["review", "export", "nic", "--all", "--format", "jsonl", "--out", "{out}"],
    ["audit", "words", "nic", "--limit", "2", "--json", "{out}"]])
def test_other_outputs_on_the_store_or_a_source_are_refused(db, capsys, tmp_path, cmd):
    src = tmp_path / "mine.jsonl"
    shutil.copy(NIC, src)
    assert cli(["sets", "add", "mine", src, "--db", db], capsys)[0] == 0
    for out, what in ((db, "the store"), (src, "source file of set 'mine'")):
        before = sha(out)
        code, _, err = cli([a.format(out=out) for a in cmd] + ["--db", db], capsys)
        assert code == 2 and what in one_line_error(err)
        assert sha(out) == before


# -- links planted where capaudit writes are never followed -----------------------------------
def test_link_at_out_tmp_is_not_followed(db, capsys, tmp_path):
    target = victim(tmp_path)
    (db.parent / "nic.jsonl.tmp").symlink_to(target)
    code, _, err = cli(["sets", "export", "nic", "--out", "nic.jsonl", "--db", db], capsys)
    assert code == 0, err
    assert target.read_text() == VICTIM_TEXT
    assert sum(1 for _ in open(db.parent / "nic.jsonl")) == 1000


@pytest.mark.parametrize("suffix", [".changes.jsonl", ".provenance.json"])
def test_link_at_a_sidecar_is_refused(db, capsys, tmp_path, suffix):
    target = victim(tmp_path)
    (db.parent / f"back.jsonl{suffix}").symlink_to(target)
    code, _, err = cli(["sets", "export", "nic", "--to", "original", "--out", "back.jsonl",
                        "--db", db], capsys)
    assert code == 2 and "symbolic link" in one_line_error(err)
    assert target.read_text() == VICTIM_TEXT
    assert not (db.parent / "back.jsonl").exists()     # refused before anything was written


def test_link_at_a_json_output_is_refused(db, capsys, tmp_path):
    target = victim(tmp_path)
    (db.parent / "r.json").symlink_to(target)
    code, _, err = cli(["audit", "run", "nic", "--n-boot", "2", "--json", "r.json", "--db", db],
                       capsys)
    assert code == 2 and "symbolic link" in one_line_error(err)
    assert target.read_text() == VICTIM_TEXT


def test_a_device_output_is_written_into_never_replaced(db, capsys, tmp_path):
    # what `--json /dev/null` is: a character device (a private copy of /dev/null's, so the
    # old code's rename cannot break the machine's own)
    import stat

    node = tmp_path / "null"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except OSError as exc:
        pytest.skip(f"cannot make a device node here ({exc.strerror})")
    for cmd in (["audit", "run", "nic", "--n-boot", "2", "--json", node],
                ["sets", "export", "nic", "--out", node]):
        code, _, err = cli([*cmd, "--db", db], capsys)
        assert code == 0, err
        assert stat.S_ISCHR(os.lstat(node).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["null", "work"]   # no provenance, no temporary


def test_link_at_a_work_folder_lock_is_not_followed(tmp_path):
    from capaudit.core.storage.work_folder import LOCK_NAME, work_dir_lock

    target = victim(tmp_path)
    work = tmp_path / "work.enrich"
    work.mkdir()
    (work / LOCK_NAME).symlink_to(target)
    with pytest.raises(capaudit.InputError, match="cannot use this work directory"):
        with work_dir_lock(work):
            pass
    assert target.read_text() == VICTIM_TEXT


def test_trained_model_folder_keeps_other_files(tmp_path):
    from capaudit.train_downstream.train import _export

    out = tmp_path / "run" / "model"
    out.mkdir(parents=True)
    (out / "notes.txt").write_text(VICTIM_TEXT)

    class Saves:   # what save_pretrained does: files into a folder
        def __init__(self, name):
            self.name = name

        def save_pretrained(self, folder):
            (Path(folder) / self.name).write_text("{}")

    _export(Saves("model.safetensors"), Saves("tokenizer.json"), tmp_path, out)
    assert (out / "notes.txt").read_text() == VICTIM_TEXT
    assert (out / "model.safetensors").exists() and (out / "tokenizer.json").exists()


@pytest.mark.parametrize("planted", ["report.html.tmp", "metrics.json"])
def test_links_in_a_report_folder_are_not_followed(db, capsys, tmp_path, planted):
    target = victim(tmp_path)
    rep = db.parent / "rep"
    rep.mkdir()
    (rep / planted).symlink_to(target)
    code, _, err = cli(["audit", "compare", "nic", "oscar", "--n-boot", "5", "--report", rep,
                        "--db", db], capsys)
    assert target.read_text() == VICTIM_TEXT
    if planted == "metrics.json":
        assert code == 2 and "symbolic link" in one_line_error(err)
    else:
        assert code == 0, err
        assert (rep / "report.html").read_text().startswith("<!doctype html>")


# -- paths that cannot be written: one line, nothing left behind ------------------------------
def test_missing_folder_and_a_folder_as_file(db, capsys):
    code, _, err = cli(["sets", "export", "nic", "--out", "no/such/x.jsonl", "--db", db], capsys)
    assert code == 2 and "folder does not exist" in one_line_error(err)
    (db.parent / "d").mkdir()
    code, _, err = cli(["sets", "export", "nic", "--out", "d", "--db", db], capsys)
    assert code == 2 and "it is a folder" in one_line_error(err)


@pytest.mark.parametrize("err_no, words", [(errno.ENOSPC, "disk is full"),
                                           (errno.EROFS, "read-only"),
                                           (errno.EACCES, "permission denied")])
@pytest.mark.parametrize("to", ["jsonl", "coco", "webdataset"])
def test_file_system_faults_are_one_line_and_leave_no_tmp(db, capsys, monkeypatch, err_no,
                                                          words, to):
    # the rename into place is refused as the file system would refuse it
    def refuse(*_a, **_k):
        raise OSError(err_no, os.strerror(err_no))

    monkeypatch.setattr(os, "replace", refuse)
    monkeypatch.setattr(os, "rename", refuse)
    code, _, err = cli(["sets", "export", "nic", "--to", to, "--out", "out_x", "--db", db],
                       capsys)
    assert code == 2 and words in one_line_error(err) and "fix:" in err
    assert leftovers(db.parent) == [] and not (db.parent / "out_x").exists()


def test_read_only_folder(db, capsys):
    ro = db.parent / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as root: a 0o555 folder is writable (the fault is covered "
                        "by test_file_system_faults_are_one_line_and_leave_no_tmp)")
        code, _, err = cli(["sets", "export", "nic", "--out", ro / "x.jsonl", "--db", db], capsys)
        assert code == 2 and "permission denied" in one_line_error(err)
        assert os.listdir(ro) == []
    finally:
        ro.chmod(0o755)


# -- set names in Markdown and plots are text --------------------------------------------------
HOSTILE_HTML = "<img src=x onerror=alert(1)>"


@pytest.mark.parametrize("name, md_shown, html_shown", [
    (HOSTILE_HTML, "&lt;img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)&gt;"),
    ("<script>alert(1)", "&lt;script>alert(1)", "&lt;script&gt;alert(1)")])
def test_report_markdown_takes_set_names_as_text(db, capsys, name, md_shown, html_shown):
    assert cli(["sets", "add", name, NIC, "--db", db], capsys)[0] == 0
    rep = db.parent / "rep"
    code, _, err = cli(["audit", "compare", name, "oscar", "--n-boot", "5",
                        "--report", rep, "--db", db], capsys)
    assert code == 0, err
    md = (rep / "report.md").read_text()
    assert name not in md and md_shown in md
    html = (rep / "report.html").read_text()
    assert html_shown in html and "<script" not in html
    assert "<img" not in html.replace("<img src=\"data:", "")


@pytest.mark.parametrize("name", ["$x^$", "$\\foo$"])
def test_report_plots_take_set_names_as_text(db, capsys, name):
    # names matplotlib would read as mathtext ("$x^$" is a syntax error there, "$\foo$" an
    # unknown command: the case; `sets add` now refuses its backslash, a store
    # written before that check may hold it)
    con = duckdb.connect(str(db))
    con.execute("UPDATE caption_sets SET name = ? WHERE name = 'nic'", [name])
    con.close()
    rep = db.parent / "rep"
    code, _, err = cli(["audit", "compare", name, "oscar", "--n-boot", "5", "--report", rep,
                        "--db", db], capsys)
    assert code == 0, err
    pngs = sorted(p.name for p in rep.glob("*.png"))
    assert "chair_s_vs_recall.png" in pngs and name in (rep / "report.md").read_text()
    assert all((rep / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


@pytest.mark.parametrize("name, shown", [
    (HOSTILE_HTML, "&lt;img src=x onerror=alert(1)>"),
    ("<script>alert(1)</script>", "&lt;script>alert(1)&lt;/script>")])
def test_leaderboard_markdown_escapes_html(name, shown):
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from lotus_boards import board_sets

    from capaudit.leaderboard.board import build_leaderboard
    from capaudit.leaderboard.markdown import leaderboard_markdown
    from capaudit.leaderboard.profiles import load_catalogue

    sets, ann = board_sets()
    sets[0].name = name
    lb = build_leaderboard(sets, load_catalogue(), ann, n_boot=20, seed=0)
    text = leaderboard_markdown({"leaderboard": lb.to_dict()})
    assert name not in text and shown in text and "<script" not in text


# -- a real full disk and a real read-only mount (a tmpfs in a user namespace) ----------------
def _in_small_mount(mnt: Path, size: str, command: list, ro: bool = False, copy=None):
    """``command`` in a private mount namespace where ``mnt`` is a tmpfs of ``size``
    (read-only with ``ro``; ``copy`` = (file, name) put on it first); skipped where user
    namespaces are not allowed."""
    import shlex
    import subprocess
    import sys

    if not shutil.which("unshare"):
        pytest.skip("no unshare(1): a small tmpfs cannot be mounted without root")
    mnt.mkdir(exist_ok=True)
    opts = f"size={size}" + (",ro" if ro else "")
    put = (f"cp {shlex.quote(str(copy[0]))} {shlex.quote(str(mnt / copy[1]))} || exit 98; "
           if copy else "")
    script = (f"mount -t tmpfs -o {opts} tmpfs {shlex.quote(str(mnt))} || exit 99; {put}"
              f"{shlex.join([sys.executable, '-m', 'capaudit.cli.main', *map(str, command)])};"
              f" code=$?; ls -A {shlex.quote(str(mnt))}; exit $code")
    src = Path(capaudit.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(src)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])}
    r = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True,
                       env=env, timeout=300)
    if r.returncode == 99 or "unshare failed" in r.stderr or "Operation not permitted" in r.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()[:200]}")
    return r


@pytest.mark.parametrize("to", ["jsonl", "coco", "webdataset"])
def test_export_to_a_full_disk(db, tmp_path, to):
    mnt = tmp_path / "full"
    r = _in_small_mount(mnt, "16k", ["sets", "export", "nic", "--to", to, "--out",
                                      mnt / "out", "--db", db])
    assert r.returncode == 2 and "disk is full" in one_line_error(r.stderr), r.stderr
    assert r.stdout.strip() == ""          # nothing left on the disk: no .tmp, no half file


def test_export_to_a_read_only_mount(db, tmp_path):
    mnt = tmp_path / "ro"
    r = _in_small_mount(mnt, "1m", ["sets", "export", "nic", "--out", mnt / "x.jsonl",
                                    "--db", db], ro=True)
    assert r.returncode == 2 and "read-only" in one_line_error(r.stderr), r.stderr


def test_sets_add_on_a_full_disk_is_one_line_and_stores_nothing(tmp_path):
    mnt = tmp_path / "full"
    r = _in_small_mount(mnt, "40k", ["sets", "add", "nic", NIC, "--db", mnt / "a.duckdb"])
    line = one_line_error(r.stderr)
    assert r.returncode == 2 and "disk is full" in line and "nothing was stored" in line


def test_audit_run_with_its_store_on_a_full_disk_is_one_line_and_stores_nothing(db, tmp_path):
    # the store fits, with 64 KiB to spare: the audit's results do not
    mnt = tmp_path / "full"
    size = db.stat().st_size + 64 * 1024
    r = _in_small_mount(mnt, str(size), ["audit", "run", "nic", "--n-boot", "2", "--db",
                                         mnt / "a.duckdb"], copy=(db, "a.duckdb"))
    line = one_line_error(r.stderr)
    assert r.returncode == 2 and "disk is full" in line and "nothing was stored" in line


def test_reliability_doc_lists_every_hostile_write_test():
    """docs/reliability.md promises what this file checks: every test here has its row."""
    import re

    doc = (Path(__file__).resolve().parents[1] / "docs" / "reliability.md").read_text()
    names = re.findall(r"^def (test_\w+)", Path(__file__).read_text(), flags=re.M)
    assert [n for n in names if f"`{n}`" not in doc] == []
