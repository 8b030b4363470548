"""``capaudit audit card``: the audit as a dataset-card section, from the same result
objects as every other view (#21), on the bundled COCO demo sample and a set filtered
from it with the CHAIR ground truth."""

from __future__ import annotations

import json

import yaml

from capaudit.cli.main import main


def test_card_of_the_demo_and_a_filtered_set(tmp_path, capsys):
    from capaudit.demo import build_demo

    db = tmp_path / "demo.duckdb"
    build_demo(db, run_audit=False)
    import capaudit
    store = capaudit.open(db)
    store.filter("nic", "hallucination", "nic_clean", evidence="chair-gt",
                 object_mode="reference", non_visual="judge")
    card = tmp_path / "card" / "README.md"
    assert main(["audit", "card", "nic", "nic_clean", "--out", str(card), "--n-boot", "50",
                 "--db", str(db)]) == 0
    text = card.read_text()
    head, body = text.split("\n---\n", 1)
    meta = yaml.safe_load(head.removeprefix("---\n"))["capaudit_audit"]
    # the same numbers as the JSON of an audit of the same sets (same seed, same basis)
    js = tmp_path / "run.json"
    assert main(["audit", "run", "nic", "--n-boot", "50", "--json", str(js),
                 "--db", str(db)]) == 0
    run = json.loads(js.read_text())["sets"]["nic"]
    nic = meta["sets"]["nic"]["metrics"]
    assert nic["chair_s"]["value"] == run["chair_s"]["value"]
    assert nic["chair_s"]["n_images"] == run["chair_s"]["n_images"] == 1000
    assert nic["chair_s"]["coverage"] == {"chair_gt": 1.0} and nic["chair_s"]["status"] == "ok"
    # filtered with the CHAIR ground truth and scored with it: circular, said in both parts
    clean = meta["sets"]["nic_clean"]["metrics"]["chair_s"]
    assert clean["value"] == 0.0 and clean["status"] == "circular"
    row = next(line for line in body.splitlines() if line.startswith("| CHAIR_s | 0.00 |"))
    assert "| circular" in row
    assert "- nic_clean CHAIR_s: circular: scored with the CHAIR ground truth" in body
    # its own 640 captions, scored on nic's 1,000 images: said, never "1,000 captions"
    kept = meta["sets"]["nic_clean"]
    assert (kept["captions"], kept["images"], kept["scored_images"]) == (640, 640, 1000)
    assert ("640 captions on 640 images. Filtered from `nic` and scored, as `nic`, on its "
            "1,000 images: each of the 360 captions the filter dropped counts as an empty "
            "caption.") in body
    assert "1,000 captions on 1,000 images" not in body.split("### nic_clean")[1]
    assert ("By gender (male − female; 95% interval; n = images of the smaller group; on its "
            "own 640 images, not its parent's):") in body
    # the gap of a circular value is circular too; gaps signed as on the board
    assert "| CHAIR_s | 0.00 [0.00, 0.00] n=470 | 0.00 [0.00, 0.00] n=170 | +0.00 [+0.00, " \
           "+0.00] n=170 (circular) |" in body
    men, women, n_women = _demo_nic_gender_error()                # 7.34, 21.64, 305
    row = next(line for line in body.split("### nic_clean")[0].splitlines()
               if line.startswith(f"| Gender err | {men:.2f} ["))
    assert f"| {women:.2f} [" in row
    assert f"n={n_women} | {men - women:+.2f} [-".replace("-", "\u2212") in row
    # a card marks no best or worst: the compare notes about marking are left out
    assert "best/worst marked" not in body and "--all-images" not in body
    # every value with its n; the filter history; gaps by gender with their direction
    assert f"| CHAIR_s | {run['chair_s']['value']:.2f} | " in body and "| 1,000 | ok |" in body
    assert "- `nic_clean` from `nic`: hallucination (" in body
    assert "By gender (male − female; 95% interval; n = images of the smaller group):" in body
    assert "- CHAIR ground truth: 1,000 of 1,000 images (100.0%)" in body
    assert "### Provenance" in body and "capaudit audit card nic nic_clean" in body


def test_card_never_overwrites_the_store_or_follows_a_link(tmp_path, capsys):
    from capaudit.demo import build_demo

    db = tmp_path / "demo.duckdb"
    build_demo(db, run_audit=False)
    before = db.read_bytes()
    assert main(["audit", "card", "nic", "--out", str(db), "--n-boot", "10",
                 "--db", str(db)]) == 2
    assert db.read_bytes() == before
    target = tmp_path / "victim.txt"
    target.write_text("keep")
    link = tmp_path / "CARD.md"
    link.symlink_to(target)
    assert main(["audit", "card", "nic", "--out", str(link), "--n-boot", "10",
                 "--db", str(db)]) == 2
    assert target.read_text() == "keep"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 or all(line.startswith("capaudit: error:") for line in err[-1:])


def _demo_nic_gender_error() -> tuple[float, float, int]:
    """Gender error of the demo's nic captions on men's and on women's images, and the
    women's images (the smaller group), counted here from the bundled files with the rule of
    Burns et al. 2018 (their word lists; nic's captions come tokenized, split on spaces)."""
    from pathlib import Path

    import capaudit

    demo = Path(capaudit.__file__).parent / "data" / "demo"
    man = set("boy brother dad husband man groom male guy men males boys guys dads dude "
              "policeman policemen father son fireman actor gentleman boyfriend mans his obama "
              "actors".split())
    woman = set("girl sister mom wife woman bride female lady women girls ladies females moms "
                "actress nun girlfriend her she".split())
    label = {r["image_id"]: r["gender"] for r in map(json.loads, (demo / "demographics.jsonl").open())}
    errors, captions = {"male": 0, "female": 0}, {"male": 0, "female": 0}
    images: dict[str, set] = {"male": set(), "female": set()}
    for r in map(json.loads, (demo / "nic.jsonl").open()):
        g, words = label[r["image_id"]], set(r["caption"].lower().split())
        said = ("male" if words & man and not words & woman else
                "female" if words & woman and not words & man else None)
        errors[g] += said is not None and said != g
        captions[g] += 1
        images[g].add(r["image_id"])
    return (100 * errors["male"] / captions["male"], 100 * errors["female"] / captions["female"],
            len(images["female"]))
