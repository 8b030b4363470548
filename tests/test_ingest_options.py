"""Options are never accepted and silently ignored; the API speaks its own words (#23)."""

from __future__ import annotations

import json

import pytest

import capaudit
from capaudit.audit.runner import DEFAULTS, run_audit
from capaudit.cli.main import main
from capaudit.errors import InputError
from capaudit.io.annotation_store import add_annotations
from capaudit.io.ingest import add_caption_set
from test_namespace_evidence import nocaps_document

# results_20130124.token, Flickr30k's own release: IMAGE.jpg#N<TAB>caption
FLICKR_LINES = ("1000092795.jpg#0\tTwo young guys with shaggy hair look at their hands .\n"
                "1000092795.jpg#1\tTwo young , White males are outside near many bushes .\n")


def cli(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def token_file(tmp_path):
    path = tmp_path / "results_20130124.token"
    path.write_text(FLICKR_LINES)
    return path


def test_options_the_format_does_not_read_are_refused(tmp_path, token_file, capsys):
    db = tmp_path / "a.duckdb"
    code, _, err = cli(["sets", "add", "f30k", token_file, "--split", "test", "--where",
                        "n = 0", "--turns", "all", "--db", db], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--split, --turns, --where do not apply to flickr-token files" in err
    assert "--split applies to hf, karpathy" in err
    assert "--turns applies to llava, sharegpt, sharegpt4v" in err
    code, _, err = cli(["sets", "add", "f30k", token_file, "--caption-col", "text",
                        "--db", db], capsys)
    assert code == 2 and "--caption-col does not apply to flickr-token files" in err
    code, out, _ = cli(["sets", "add", "f30k", token_file, "--db", db], capsys)
    assert code == 0 and "2 captions of 1 images" in out     # nothing was half-added before
    # the same check on the Python API, in its words
    store = capaudit.open(tmp_path / "b.duckdb")
    with pytest.raises(InputError, match=r"split= does not apply to flickr-token files"):
        store.add_set("f30k", token_file, split="test")
    # one declaration per reader, of options that exist
    from capaudit.io.readers.base import READER_OPTIONS, READERS

    for name in READERS.names():
        assert set(READERS.get(name).accepts) <= set(READER_OPTIONS), name


def test_multi_split_datasetdict_needs_split_and_records_it(tmp_path, capsys):
    datasets = pytest.importorskip("datasets", reason="pip install 'capaudit[hf]'")
    path = tmp_path / "captions_dd"
    datasets.DatasetDict({
        "train": datasets.Dataset.from_dict({"image_id": [9, 25], "caption": ["a dog", "a cat"]}),
        "test": datasets.Dataset.from_dict({"image_id": [42], "caption": ["a bird"]}),
    }).save_to_disk(str(path))
    db = tmp_path / "a.duckdb"
    code, _, err = cli(["sets", "add", "dd", path, "--db", db], capsys)
    assert code == 2 and "the dataset holds 2 splits (train, test)" in err
    assert "pass --split with one of them" in err
    code, out, _ = cli(["sets", "add", "dd", path, "--split", "test", "--db", db], capsys)
    assert code == 0 and "1 captions of 1 images" in out
    code, out, _ = cli(["sets", "show", "dd", "--db", db], capsys)
    assert code == 0 and "options split=test" in out


def test_api_keywords_are_checked_and_errors_name_api_parameters(tmp_path, token_file):
    store = capaudit.open(tmp_path / "a.duckdb")
    with pytest.raises(InputError, match=r"unknown option namespce= \(fix: did you mean "
                                         r"namespace=\?"):
        store.add_set("f30k", token_file, namespce="flickr30k")
    assert store.query("SELECT count(*) FROM caption_sets").rows == [(0,)]
    text_only = tmp_path / "scienceqa.json"    # a ScienceQA record without an image
    text_only.write_text(json.dumps([{"id": "1000", "conversations": [
        {"from": "human", "value": "Which is a compound?"}, {"from": "gpt", "value": "Water."}]}]))
    with pytest.raises(InputError) as exc:
        store.add_set("sqa", text_only)
    assert "pass skip_no_image=True to skip" in str(exc.value)
    assert "--skip-no-image" not in str(exc.value) and "--" not in exc.value.fix
    # add_annotations takes the namespace, as `annotations add --namespace`
    gt = tmp_path / "nocaps_objects.jsonl"
    gt.write_text('{"image_id": 0, "objects": ["man"]}\n')
    store.add_annotations("chair-gt", gt, namespace="nocaps")
    assert store.query("SELECT namespace FROM annotation_sources").rows == [("nocaps",)]


def test_every_cli_switch_is_worded_as_a_true_keyword():
    import typer.main

    from capaudit.cli.main import app
    from capaudit.errors import SWITCHES, api_wording

    found = set()

    def walk(cmd):
        for sub in getattr(cmd, "commands", {}).values():
            walk(sub)
        for p in cmd.params:
            if getattr(p, "is_flag", False):
                found.update(o[2:] for o in p.opts if o.startswith("--"))
    walk(typer.main.get_command(app))
    assert "skip-no-image" in found and found <= SWITCHES
    assert api_wording("pass --allow-partial or --no-cache; --filter.evidence KIND; "
                       "--split with one of them; my--file.json") == (
        "pass allow_partial=True or no_cache=True; evidence=KIND; split= with one of them; "
        "my--file.json")


def test_hf_caption_column_holding_a_list_gives_one_caption_each(store, tmp_path):
    datasets = pytest.importorskip("datasets", reason="pip install 'capaudit[hf]'")
    # Flickr30k's Hub layout (nlphuji/flickr30k, without its image column): five captions
    # per row in one list-valued ``caption`` column
    caps = ["Two young guys with shaggy hair look at their hands while hanging out in the yard .",
            "Two young , White males are outside near many bushes .",
            "Two men in green shirts are standing in a yard .",
            "A man in a blue shirt standing in a garden .",
            "Two friends enjoy time spent together ."]
    path = tmp_path / "flickr30k_hub"
    datasets.Dataset.from_dict({
        "caption": [caps], "sentids": [["0", "1", "2", "3", "4"]], "split": ["train"],
        "img_id": ["0"], "filename": ["1000092795.jpg"]}).save_to_disk(str(path))
    info = add_caption_set(store, "f30k", path).info
    assert (info.n_captions, info.n_images) == (5, 1)
    assert store.sql("SELECT image_key, image_id, caption FROM captions ORDER BY row_idx") == [
        ("1000092795.jpg", 1000092795, c) for c in caps]


def test_shards_built_from_a_coco2014_set_keep_its_namespace(store, tmp_path, capsys):
    images = tmp_path / "val2014"
    images.mkdir()
    from PIL import Image

    for iid in (11340, 391895):      # the images named as COCO ships them (shards build
        Image.new("RGB", (8, 8)).save(images / f"COCO_val2014_{iid:012d}.jpg")  # checks them)
    caps = tmp_path / "captions.jsonl"
    caps.write_text("".join(json.dumps({"image": f"COCO_val2014_{iid:012d}.jpg",
                                        "caption": f"A dog on a couch {iid}."}) + "\n"
                            for iid in (11340, 391895)))
    db = tmp_path / "a.duckdb"
    assert cli(["sets", "add", "coco", caps, "--db", db], capsys)[0] == 0
    code, _, err = cli(["shards", "build", "--images", images, "--captions", "coco",
                        "--out", tmp_path / "shards", "--db", db], capsys)
    assert code == 0, err
    info = add_caption_set(store, "back", tmp_path / "shards").info
    assert (info.format, info.n_captions, info.namespace) == ("webdataset", 2, "coco2014")


def test_annotations_of_another_dataset_never_offer_allow_partial(store, shared, tmp_path):
    # nocaps validation captions (COCO's layout, nocaps evidence) against CHAIR ground truth
    # of COCO images stored under a name that does not say its dataset: 3 of the 10 nocaps
    # ids (42, 73, 74) are also COCO ids. --allow-partial would score those 3 against
    # other pictures' objects, so it is not offered: the annotations are another dataset's
    chair = shared("data", "coco2014", "chair_objects_trainval2014.jsonl")
    gt = tmp_path / "objects.jsonl"
    with open(chair) as src:
        gt.write_text("".join(line for line in src if json.loads(line)["image_id"] < 1000))
    add_annotations(store, "chair-gt", gt)
    path = tmp_path / "nocaps_val_4500_captions.json"
    path.write_text(json.dumps(nocaps_document()))
    cfg = {**DEFAULTS, "n_boot": 20, "workers": 1, "metrics": ["chair_s", "length"]}
    with pytest.raises(InputError) as exc:
        run_audit(store, [str(path)], cfg)
    text = str(exc.value)
    assert "cover only 3 of the 10 images of the nocaps set" in text
    assert "they are annotations of another dataset" in text
    assert "allow-partial" not in text
    # named as COCO's (coco2014), they never join the nocaps ids: CHAIR is skipped, saying why
    store.con.execute("UPDATE annotation_sources SET namespace = 'coco2014'")
    res = next(iter(run_audit(store, [str(path)], cfg).values()))
    assert res.results["chair_s"].skipped == ("the chair-gt annotations are for coco2014, "
                                              "another dataset than this set's nocaps")
