"""Every judged command run once on a small hand-made corpus against the scripted loopback
judge (:mod:`judge_script`), its outputs made comparable: the ``--json`` result and the rows
it stored, without what changes from run to run (wall seconds, run ids, timestamps,
versions). Shared by the tests that hold judged runs identical however they are run."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from capaudit.cli.main import main
from capaudit.store import Store

# two sets over four images: a caption repeated within a set and across the sets, a
# false word (purple, surfboard, unicorn) here and there, an irrelevant unit (beautiful)
SETS = {
    "m": [(1, "A purple horse stands. It is beautiful."), (1, "A horse eats grass."),
          (2, "A man rides a surfboard on a wave."), (3, "A man rides a surfboard on a wave."),
          (4, "A brown dog runs in the park. The dog chases a ball.")],
    "n": [(1, "A horse stands in a field."), (2, "A man rides a surfboard on a wave."),
          (3, "A unicorn sits at a table. The table holds a cake."),
          (4, "A dog runs."), (4, "A brown dog chases a purple ball in the park.")],
}
HUMAN = {1: ["A brown horse stands in a field.", "A horse eats grass."],
         2: ["A surfer rides a wave."], 3: ["A man sits at a table with a cake."],
         4: ["A brown dog chases a ball in the park.", "A dog runs on grass."]}
ELEMENTS = [(1, "object", "horse"), (1, "color", "brown horse"), (2, "object", "wave"),
            (3, "object", "cake"), (3, "object", "table"), (4, "color", "brown dog"),
            (4, "object", "ball")]


def corpus(d: Path) -> dict:
    """The sets, references, images, annotations and labels written under ``d``."""
    from PIL import Image

    (d / "img").mkdir(parents=True, exist_ok=True)
    for i in HUMAN:
        Image.new("RGB", (8, 8), (i * 40, 80, 160)).save(d / "img" / f"{i}.jpg", "JPEG")
    for name, rows in SETS.items():
        (d / f"{name}.jsonl").write_text("\n".join(
            json.dumps({"image_id": i, "caption": c}) for i, c in rows))
    (d / "h.jsonl").write_text("\n".join(json.dumps({"image_id": i, "caption": c})
                                         for i, cs in HUMAN.items() for c in cs))
    (d / "el.jsonl").write_text("\n".join(json.dumps({"image_id": i, "dimension": dim,
                                                      "element": e}) for i, dim, e in ELEMENTS))
    from capaudit.judge.factuality import split_sentences

    labels = [{"image_id": i, "caption": c, "sentence_idx": k, "source": name,
               "label": "no" if "horse" in s.lower() else "yes"}
              for name, rows in SETS.items() for i, c in rows
              for k, s in enumerate(split_sentences(c))]
    (d / "labels.jsonl").write_text("\n".join(json.dumps(r) for r in labels))
    return {"m": d / "m.jsonl", "n": d / "n.jsonl", "h": d / "h.jsonl", "img": d / "img",
            "el": d / "el.jsonl", "labels": d / "labels.jsonl"}


def commands(c: dict) -> dict[str, list]:
    """Each judged command's arguments (targets and its own options)."""
    two = [c["m"], c["n"]]
    return {   # the capped run first: on an empty response cache, the cap bites
        "capped": ["audit", "dcscore", *two, "--reference", c["h"], "--images", c["img"],
                   "--max-calls", 9],
        "factuality": ["audit", "factuality", *two, "--images", c["img"]],
        "dcscore": ["audit", "dcscore", *two, "--reference", c["h"], "--images", c["img"]],
        "faithscore": ["audit", "faithscore", *two, "--images", c["img"]],
        "capscore": ["audit", "capscore", *two, "--reference", c["h"]],
        "capability": ["audit", "capability", *two, "--annotations", c["el"]],
        "validate": ["judge", "validate", "--labels", c["labels"], "--images", c["img"]],
        "dry-run": ["audit", "faithscore", *two, "--images", c["img"], "--dry-run",
                    "--judge-model", "gpt-4o"],
    }


def stored(db: Path, run_id) -> dict:
    """The rows a run stored, in the order they were written (run id left out)."""
    if run_id is None:
        return {}
    with Store(db, read_only=True) as st:
        rows = st.sql
        out = {"run": st.one("SELECT command, config, seed, status FROM runs WHERE run_id = ?",
                             [run_id])}
        for table in ("judge_items", "metrics"):
            cols = [r[0] for r in rows(f"DESCRIBE {table}") if r[0] != "run_id"]
            out[table] = rows(f"SELECT {', '.join(cols)} FROM {table} WHERE run_id = ? "
                                "ORDER BY rowid", [run_id])
        out["judges"] = rows("SELECT * FROM judges ORDER BY judge_id")
    return out


def run_one(args: list, out: Path, db: Path, url: str, extra=()) -> dict:
    """One command: its exit status, its ``--json`` result (wall seconds and run id left
    out) and the rows it stored."""
    rc = main([str(a) for a in [*args, "--judge-url", url, "--n-boot", 50, "--json", out,
                                "--db", db, *extra]])
    if rc != 0:
        return {"rc": rc}
    res = json.loads(out.read_text())
    res["summary"].pop("seconds")
    run_id = res.pop("run_id", None)
    text = json.dumps({"result": res, "stored": stored(db, run_id)}, default=str)
    # the temporary folder and the server's port differ from run to run
    text = text.replace(url, "<url>").replace(str(db.parent), "<tmp>")
    return {"rc": rc, **json.loads(text)}


def all_outputs(tmp: Path, extra=(), which=None) -> dict:
    """Every command (or those named in ``which``) against one scripted server, one
    response cache, one store, in the order of :func:`commands`."""
    from capaudit.enrich.testing import FakeOpenAIServer
    from judge_script import scripted_answer

    c = corpus(tmp / "corpus")
    out = {}
    with FakeOpenAIServer(answer=scripted_answer) as srv:
        for name, args in commands(c).items():
            if which is None or name in which:
                out[name] = run_one(args, tmp / f"{name}.json", tmp / "j.duckdb",
                                    srv.base_url, extra)
                out[name]["server_calls"] = srv.calls
    return out


def digest(output: dict) -> str:
    """A short hash of an output, its keys in their order (the ``--json`` file's own)."""
    return hashlib.sha256(json.dumps(output).encode()).hexdigest()[:16]
