"""Issue #33, third hostile pass: every value checked at the door.

Cases 4 (cost caps), 9 (judge YAML and URL), 10 (the Python API's types) and the value
cases of 11 (names, --min-n, --metrics, YAML sections): refused before any work, one line
(a command-line option: click's usage error, its ``Error:`` line naming the range), exit 2,
no paid request sent and nothing stored.
"""

from __future__ import annotations

import pytest
from test_hostile import cli, one_line_error

import capaudit
from capaudit.enrich.testing import FakeOpenAIServer
from capaudit.errors import CapauditError, UsageError

NIC = capaudit.demo_file("nic.jsonl")


def usage_line(err: str) -> str:
    """The ``Error:`` line of a usage error (exit 2), no traceback."""
    assert "Traceback" not in err and err.startswith("Usage: capaudit"), err
    return [ln for ln in err.splitlines() if ln.startswith("Error: ")][0]


@pytest.fixture
def judged(tmp_path, capsys, monkeypatch):
    """A store holding nic, and the price of model 'm' (1,000 $/Mtok: any call costs)."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "j.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    (tmp_path / "prices.yaml").write_text("judge:\n  prices:\n    m: {input: 1000, "
                                          "output: 1000}\n")
    return db


def _capscore(db, srv, *extra):
    return ["audit", "capscore", "nic", "--reference", "nic", "--judge-url", srv.base_url,
            "--judge-model", "m", "--config", "prices.yaml", "--limit", "20", "--db", db,
            *extra]


# -- 4. the cost and call caps ----------------------------------------------------------------
@pytest.mark.parametrize("flag, value, says", [
    ("--max-cost", "nan", "must be a number of at least 0, not 'nan'"),
    ("--max-cost", "inf", "must be a number of at least 0, not 'inf'"),
    ("--max-cost", "-1", "must be a number of at least 0, not '-1'"),
    ("--max-calls", "-1", "must be a whole number of at least 0, not '-1'"),
    ("--max-calls", "１", "must be a whole number of at least 0, not '１'")])
def test_a_cost_or_call_cap_that_caps_nothing_is_refused_before_any_request(
        judged, capsys, flag, value, says):
    before = judged.read_bytes()
    with FakeOpenAIServer(answer=lambda b: {"content": '{"semantic": 1, "overall": 1}'}) as srv:
        code, _, err = cli(_capscore(judged, srv, flag, value), capsys)
        assert srv.calls == 0   # with nan: 20 paid requests
    assert code == 2 and usage_line(err) == f"Error: Invalid value for '{flag}': {says}"
    assert judged.read_bytes() == before


def test_the_cap_still_caps(judged, capsys):
    with FakeOpenAIServer(answer=lambda b: {"content": '{"semantic": 1, "overall": 1}'}) as srv:
        code, _, err = cli(_capscore(judged, srv, "--max-cost", "0.0005"), capsys)
        assert code == 0 and srv.calls == 0, err   # one call would cost more than 0.0005


@pytest.mark.parametrize("yaml, says", [
    ("judge:\n  max_cost: .nan\n", "max_cost (--max-cost) must be a number of at least 0"),
    ("judge:\n  max_calls: -3\n", "max_calls (--max-calls) must be a whole number of at least 0")])
def test_a_cap_from_the_yaml_meets_the_same_check(judged, capsys, yaml, says):
    (judged.parent / "caps.yaml").write_text(yaml)
    with FakeOpenAIServer() as srv:
        code, _, err = cli(["audit", "capscore", "nic", "--reference", "nic", "--judge-url",
                            srv.base_url, "--config", "caps.yaml", "--db", judged], capsys)
        assert srv.calls == 0
    assert code == 2 and says in one_line_error(err)


# -- 9. the judge's YAML and URL ------------------------------------------------------------
@pytest.mark.parametrize("yaml, says", [
    ("judge:\n  params: [1, 2]\n", "judge params must be a mapping of name: value, not list"),
    ("judge:\n  params: 5\n", "judge params must be a mapping of name: value, not int 5"),
    ("judge:\n  chars_per_token: 0\n", "chars_per_token must be a number from 0.1 to 1,000"),
    ("judge:\n  prices: {m: 3}\n", "judge prices of 'm' must be a mapping")])
def test_judge_settings_of_the_wrong_shape_are_one_line(judged, capsys, yaml, says):
    (judged.parent / "bad.yaml").write_text(yaml)
    code, _, err = cli(["audit", "capscore", "nic", "--reference", "nic", "--config",
                        "bad.yaml", "--dry-run", "--db", judged], capsys)
    assert code == 2 and says in one_line_error(err)


def test_a_malformed_judge_url_is_one_line(judged, capsys):
    code, _, err = cli(["audit", "capscore", "nic", "--reference", "nic", "--judge-url",
                        "http://[::1/v1", "--db", judged], capsys)
    assert code == 2 and "--judge-url 'http://[::1/v1' is not an http(s) URL" in \
        one_line_error(err)


# -- 10. the Python API's types ---------------------------------------------------------------
@pytest.fixture(scope="module")
def api_store(tmp_path_factory):
    store = capaudit.open(tmp_path_factory.mktemp("api") / "a.duckdb")
    store.add_set("nic", NIC)
    return store


CALLS = {
    "open(3)": (lambda s, t: capaudit.open(3), "open(): path must be a text or a path, not int 3"),
    "audit(metrics=5)": (lambda s, t: s.audit("nic", metrics=5),
                         "store.audit(): metrics must be a text or a list of texts or None"),
    "audit(5)": (lambda s, t: s.audit(5), "store.audit(): targets must be"),
    "add_set(path=5)": (lambda s, t: s.add_set("z", 5), "store.add_set(): path must be"),
    "add_set(format=5)": (lambda s, t: s.add_set("z", NIC, 5), "store.add_set(): format must"),
    "add_annotations(name=5)": (lambda s, t: s.add_annotations("chair-gt", NIC, 5),
                                "store.add_annotations(): name must be a text or None"),
    "compare('nic')": (lambda s, t: s.compare("nic"),
                       "store.compare(): sets must be a list of texts, not str 'nic'"),
    "compare(same_images='x')": (lambda s, t: s.compare(["nic", "nic"], same_images="x"),
                                 "same_images must be True or False or None"),
    "filter(set=5)": (lambda s, t: s.filter(5, "hallucination", "o"),
                      "store.filter(): set must be a text, not int 5"),
    "filter(seed='x')": (lambda s, t: s.filter("nic", "hallucination", "o", seed="x"),
                         "store.filter(): seed must be a whole number, not str 'x'"),
    "export(set=5)": (lambda s, t: s.export(5, "jsonl", t / "o.jsonl"),
                      "store.export(): set must be a text, not int 5"),
    "export(out=5)": (lambda s, t: s.export("nic", "jsonl", 5), "store.export(): out must be"),
    "query(None)": (lambda s, t: s.query(None), "store.query(): sql must be a text"),
    "demo_file(5)": (lambda s, t: capaudit.demo_file(5), "demo_file(): name must be a text")}


@pytest.mark.parametrize("call", list(CALLS))
def test_a_wrong_type_at_the_api_is_a_capaudit_error_naming_the_argument(api_store,
                                                                          tmp_path, call):
    fn, says = CALLS[call]
    with pytest.raises(UsageError) as info:   # was a TypeError/AttributeError from inside
        fn(api_store, tmp_path)
    assert isinstance(info.value, CapauditError) and says in str(info.value)
    assert [s.name for s in api_store.sets()] == ["nic"]   # nothing made or changed


# -- 11. names, numbers, lists and sections ---------------------------------------------------
def test_a_name_in_nfc_and_in_nfd_is_one_set(tmp_path, capsys):
    db = tmp_path / "n.duckdb"
    nfc, nfd = "caf\u00e9", "cafe\u0301"
    assert cli(["sets", "add", nfc, NIC, "--db", db], capsys)[0] == 0
    code, _, err = cli(["sets", "add", nfd, capaudit.demo_file("oscar.jsonl"), "--db", db],
                       capsys)
    assert code == 2 and "a caption set named 'café' already exists" in one_line_error(err)
    assert [s.name for s in capaudit.open(db).sets()] == [nfc]
    code, out, err = cli(["audit", "run", nfd, "--metrics", "vocab", "--n-boot", "10",
                          "--db", db], capsys)
    assert code == 0, err
    assert capaudit.open(db).query("SELECT DISTINCT set_name FROM metrics").rows == [(nfc,)]


@pytest.mark.parametrize("args, says", [
    (["audit", "compare", "nic", "nic2", "--min-n", "-5"],
     "Error: Invalid value for '--min-n': must be a whole number of at least 0, not '-5'"),
    (["audit", "run", "nic", "--n-boot", "１０"],
     "Error: Invalid value for '--n-boot': must be a whole number from 0 to 100,000, not '１０'"),
    (["audit", "run", "nic", "--min-coverage", "nan"],
     "Error: Invalid value for '--min-coverage': must be a number from 0.0 to 1.0, not 'nan'")])
def test_numeric_options_go_through_the_one_parser(tmp_path, capsys, args, says):
    db = tmp_path / "s.duckdb"
    code, _, err = cli([*args, "--db", db], capsys)
    assert code == 2 and usage_line(err) == says
    assert not db.exists()


@pytest.mark.parametrize("metrics", ["", " , "])
def test_an_empty_metric_list_is_refused_not_every_metric(tmp_path, capsys, metrics):
    db = tmp_path / "s.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    code, _, err = cli(["audit", "run", "nic", "--metrics", metrics, "--db", db], capsys)
    assert code == 2 and "metrics (--metrics) names nothing" in one_line_error(err)
    assert capaudit.open(db).query("SELECT count(*) FROM runs").rows == [(0,)]


def test_a_misspelled_yaml_section_is_refused_with_did_you_mean(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    cfg = tmp_path / "c.yaml"
    cfg.write_text("filtres:\n  tolerance: 0.1\naudit:\n  n_boot: 10\n")
    code, _, err = cli(["audit", "run", "nic", "--config", cfg, "--db", db], capsys)
    line = one_line_error(err)
    assert code == 2 and "unknown section 'filtres'" in line and "did you mean 'filter'?" in line
    # a top-level key that only holds a YAML anchor is no section: still read
    cfg.write_text("shared: &s {n_boot: 10, metrics: [vocab]}\naudit: *s\n")
    code, _, err = cli(["audit", "run", "nic", "--config", cfg, "--db", db], capsys)
    assert code == 0, err


def test_the_api_refuses_an_empty_metric_list_too(api_store):
    with pytest.raises(UsageError, match="names nothing"):
        api_store.audit("nic", metrics=[])


def test_yaml_bool_settings_of_the_judge_are_checked(judged, capsys):
    (judged.parent / "b.yaml").write_text("judge:\n  logprobs: 'no'\n")
    code, _, err = cli(["audit", "capscore", "nic", "--reference", "nic", "--config", "b.yaml",
                        "--dry-run", "--db", judged], capsys)
    assert code == 2 and "judge logprobs must be true or false" in one_line_error(err)


@pytest.mark.parametrize("raw", ["nan", "inf", "０.５"])
def test_a_filter_override_goes_through_the_one_number_parser(tmp_path, capsys, raw):
    db = tmp_path / "s.duckdb"
    assert cli(["sets", "add", "nic", NIC, "--db", db], capsys)[0] == 0
    code, _, err = cli(["filter", "run", "nic", "--filter", "gender-balance", "--out", "b",
                        "--filter.tolerance", raw, "--db", db], capsys)
    assert code == 2 and f"--filter.tolerance expects a number, got '{raw}'" in \
        one_line_error(err)
    assert [s.name for s in capaudit.open(db).sets()] == ["nic"]
