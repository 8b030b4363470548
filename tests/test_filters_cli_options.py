"""``filter run`` options come from each filter's declared defaults (no hand-kept table)."""

from __future__ import annotations

import inspect

import pytest

from capaudit.cli.filters import run
from capaudit.filters.options import filter_options
from capaudit.errors import InputError
from capaudit.filters.base import FILTERS

# run() parameters that are not filter options
_NOT_OPTIONS = {"set_name", "filter_name", "out", "score_evidence", "config", "replace", "db",
                "seed",
                # filter run --shards: the corpus, its executor and how its shards are read
                "shards", "executor", "workers", "address", "work_dir", "skip_bad",
                "keep_work", "fmt", "caption_col", "id_col", "turns", "where"}


def _flags() -> set[str]:
    return set(inspect.signature(run).parameters) - _NOT_OPTIONS


def test_every_flag_is_some_filters_option():
    declared = set().union(*(FILTERS.get(n).defaults for n in FILTERS.names()))
    assert _flags() - declared == set()


@pytest.mark.parametrize("name", FILTERS.names())
def test_a_filters_own_options_resolve_and_others_are_refused(name):
    defaults = FILTERS.get(name).defaults
    own = sorted(_flags() & set(defaults))
    assert own, name
    key = own[0]
    given = {key: defaults[key] if defaults[key] is not None else "x"}
    assert filter_options(name, given)[key] == given[key]
    foreign = sorted(_flags() - set(defaults))
    if foreign:
        with pytest.raises(InputError, match="--" + foreign[0].replace("_", "-")):
            filter_options(name, {foreign[0]: "x"})


def test_a_new_default_is_accepted_without_a_table_edit(monkeypatch):
    cls = FILTERS.get("gender-neutral")
    monkeypatch.setattr(cls, "defaults", {**cls.defaults, "new_knob": 3})
    assert filter_options("gender-neutral", {"new_knob": 5})["new_knob"] == 5
    with pytest.raises(InputError):
        filter_options("gender-balance", {"new_knob": 5})
