"""A caption file whose format cannot be told, given to a command without ``--format``
(``audit run FILE``): the fix line said only "pass --format", an option ``audit run`` does
not have (typer: "No such option: --format"). It now also says how such a command gets the
format: register the file with ``sets add NAME FILE --format F`` and give NAME; and that
way works."""

from __future__ import annotations

import json

from capaudit.cli.main import main


def test_an_unknown_layout_given_to_audit_run_names_a_fix_that_works(tmp_path, capsys):
    # a CHAIR output without its overall_metrics (300 sentences as the CHAIR code writes
    # them, words and all): not sniffed as CHAIR's, yet readable so
    words = "a man rides a brown horse along the beach at sunset near the water".split()
    doc = {"sentences": [{"image_id": 1290 + i, "caption": " ".join(words),
                          "mscoco_hallucinated_words": [], "mscoco_gt_words": ["person"],
                          "mscoco_generated_words": ["person", "horse"],
                          "hallucination_idxs": [], "words": words,
                          "metrics": {"CHAIRs": 0, "CHAIRi": 0.0}} for i in range(300)]}
    path = tmp_path / "chair.json"
    path.write_text(json.dumps(doc))
    db = str(tmp_path / "s.duckdb")
    rc = main(["audit", "run", str(path), "--metrics", "length", "--n-boot", "10", "--db", db])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1, err
    assert "cannot tell the caption format" in err
    assert "capaudit sets add NAME FILE --format FORMAT" in err, err
    assert main(["sets", "add", "c", str(path), "--format", "chair", "--db", db]) == 0
    assert main(["audit", "run", "c", "--metrics", "length", "--n-boot", "10", "--db", db]) == 0
