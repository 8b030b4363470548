"""N-avg, profiles and the bootstrap of the whole ranking (hand-derived expectations)."""

from __future__ import annotations

import numpy as np
import pytest

from capaudit.errors import InputError
from capaudit.leaderboard.board import Column, build_leaderboard, n_avg, normalise
from capaudit.leaderboard.profiles import load_catalogue
from lotus_boards import board_sets, per_image


def test_normalise_min_max_and_inversion():
    v = np.array([[10.0, 1.0, 5.0], [20.0, 3.0, 5.0], [15.0, 2.0, 5.0]])
    z = normalise(v, np.array([True, False, True]))
    assert z[:, 0].tolist() == [0.0, 1.0, 0.5]
    assert z[:, 1].tolist() == [1.0, 0.0, 0.5]            # lower is better: inverted
    assert z[:, 2].tolist() == [0.5, 0.5, 0.5]            # equal values: no information


def test_n_avg_criteria_then_profile_weights():
    cols = [Column("a", "descriptiveness", True, "a"), Column("b", "descriptiveness", True, "b"),
            Column("c", "side_effects", False, "c")]
    v = np.array([[1.0, 0.0, 10.0], [0.0, 1.0, 0.0], [0.5, 0.5, 5.0]])
    # normalised: set0 (1, 0, 0) set1 (0, 1, 1) set2 (.5, .5, .5)
    score, crit = n_avg(v, cols, {"descriptiveness": 1, "side_effects": 3})
    assert crit["descriptiveness"].tolist() == [0.5, 0.5, 0.5]
    assert crit["side_effects"].tolist() == [0.0, 1.0, 0.5]
    assert score.tolist() == pytest.approx([(0.5 + 0) / 4, (0.5 + 3) / 4, (0.5 + 1.5) / 4])
    # a weighted criterion that was not computed drops out of the weights
    score2, _ = n_avg(v, cols, {"descriptiveness": 1, "alignment": 5})
    assert score2.tolist() == [0.5, 0.5, 0.5]


def test_profiles_rank_differently_and_bootstrap_reports_certainty():
    sets, ann = board_sets()
    cat = load_catalogue()
    lb = build_leaderboard(sets, cat, ann, n_boot=200, seed=1)
    names = [c.name for c in lb.columns]
    assert {"noun_precision", "chair_s", "semantic_nodes"} <= set(names)
    assert "gap:chair_s:gender" in names and "gap:noun_precision:gender" in names
    det, risk = lb.profiles["detail-oriented"], lb.profiles["risk-conscious"]
    assert det["rank"] == [1, 2, 3]                       # A describes most
    assert risk["rank"][2] == 1                           # C hallucinates least
    # A dominates the detail criteria by far: first in every resample
    assert det["first_share"][0] == 1.0 and det["rank_interval"][0] == [1, 1]
    assert det["stable"]
    # a missing metric is named, never averaged as zero
    assert any("clipscore" in n and "no CLIP model" in n for n in lb.notes)
    assert any("capscore.overall" in n and "judge" in n for n in lb.notes)


def test_gap_is_the_group_difference_of_the_same_statistics():
    sets, ann = board_sets()
    lb = build_leaderboard(sets, load_catalogue(), ann, n_boot=0)
    j = [c.name for c in lb.columns].index("gap:noun_precision:gender")
    for i, s in enumerate(sets):
        st = s.estimates["noun_precision"].stats
        male = np.array([ann.gender[int(k)] == "male" for k in s.images])
        direct = st[male, 0].sum() / st[male, 1].sum() - st[~male, 0].sum() / st[~male, 1].sum()
        info = lb.groups[s.name]["gap:noun_precision:gender"]
        assert info["signed_gap"] == pytest.approx(direct)
        assert lb.values[i, j] == pytest.approx(abs(direct))
        assert info["n_male"] == male.sum() and info["n_female"] == (~male).sum()


def test_flip_warning_when_two_sets_are_the_same():
    sets, ann = board_sets()
    rng = np.random.default_rng(5)
    twin = {k: per_image(np.asarray(e.stats[:, 0]) + rng.normal(0, 1e-9, len(e.stats)),
                         100.0 if k == "chair_s" else 1.0)
            for k, e in sets[0].estimates.items()}
    for k in twin:  # same values as A up to noise: the order of A and A2 is a coin toss
        twin[k].stats[:, 0] = sets[0].estimates[k].stats[:, 0] * (1 + rng.normal(0, 0.05, 40))
    from capaudit.leaderboard.board import SetEval

    sets.append(SetEval("A2", twin, {}, sets[0].images, sets[0].n_units))
    lb = build_leaderboard(sets, load_catalogue(), ann, n_boot=300, seed=0,
                           profiles=["detail-oriented"])
    r = lb.profiles["detail-oriented"]
    flips = {(f["above"], f["below"]): f["share"] for f in r["flips"]}
    assert max(flips.get(("A", "A2"), 0), flips.get(("A2", "A"), 0)) > 0.05
    assert not r["stable"]
    assert any("flips in" in n for n in lb.notes)


def test_catalogue_errors_are_one_line(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("criteria: {alignment: [clipscore]}\nprofiles: {x: {speed: 1}}\n")
    with pytest.raises(InputError, match="unknown criterion 'speed'"):
        load_catalogue(bad)
    bad.write_text("criteria: {alignment: [clipscore]}\nprofiles: {x: {alignment: -1}}\n")
    with pytest.raises(InputError, match="must be a number >= 0"):
        load_catalogue(bad)
    with pytest.raises(InputError, match="did you mean 'risk-conscious'"):
        load_catalogue().weights("risk-concious")


def test_packaged_profiles_equal_the_config_copy():
    from pathlib import Path

    import capaudit

    root = Path(__file__).resolve().parents[1]
    packaged = Path(capaudit.__file__).parent / "data" / "profiles.yaml"
    assert packaged.read_text() == (root / "configs" / "profiles.yaml").read_text()
    cat = load_catalogue()
    assert {"detail-oriented", "risk-conscious", "accuracy-focused"} <= set(cat.profiles)


def test_intersections_show_each_cell_with_its_images():
    sets, ann = board_sets()
    ann.skin_tone = {int(i): ("dark" if i % 4 == 0 else "light") for i in sets[0].images}
    lb = build_leaderboard(sets, load_catalogue(), ann, n_boot=0, intersections=True)
    cells = lb.groups["A"]["intersections"]["noun_precision"]
    st = sets[0].estimates["noun_precision"].stats
    imgs = sets[0].images
    fem_dark = np.array([ann.gender[int(i)] == "female" and ann.skin_tone[int(i)] == "dark"
                         for i in imgs])
    assert cells["female, dark"]["images"] == fem_dark.sum() == 10
    assert cells["female, dark"]["value"] == pytest.approx(st[fem_dark, 0].mean())
    assert cells["male, dark"]["images"] == 0 and cells["male, dark"]["value"] is None
