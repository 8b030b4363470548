"""The counts a metric reports beside its value (``extra``), counted by hand on ten captions:
CHAIR's captions whose image has no ground truth, gender error's confusion matrix."""

from __future__ import annotations

import pytest

from capaudit.audit.engine import audit_captions
from capaudit.io.annotation_files import Annotations

# image 1 labelled male, 2 female, 3 male, 4 unlabelled; the last caption has no image id
IDS = [1, 1, 1, 1, 2, 2, 2, 3, 4, None]
CAPTIONS = [
    "A woman riding a horse.",       # 1 male   -> female
    "A woman standing by a horse.",  # 1 male   -> female
    "A man riding a horse.",         # 1 male   -> male
    "A horse in a field.",           # 1 male   -> neutral
    "A man with a cat.",             # 2 female -> male
    "A woman with a cat.",           # 2 female -> female
    "A girl with a cat.",            # 2 female -> female
    "A dog on the grass.",           # 3 male   -> neutral; image 3 has no CHAIR ground truth
    "A man on a bench.",             # 4 no label; no CHAIR ground truth
    "A woman on a bus.",             # no image id: in neither metric
]
ANN = Annotations(chair_gt={1: frozenset({"person", "horse"}), 2: frozenset({"person", "cat"})},
                  gender={1: "male", 2: "female", 3: "male"})


@pytest.fixture(scope="module")
def results():
    return audit_captions(IDS, CAPTIONS, ANN, n_boot=20, workers=1, min_images=1).results


def test_gender_confusion_is_label_then_prediction(results):
    r = results["gender_error"]
    assert r.extra["confusion"] == {"male->neutral": 2, "male->male": 1, "male->female": 2,
                                    "female->neutral": 0, "female->male": 1, "female->female": 2}
    # errors: male->female 2 + female->male 1, over the 8 captions of labelled images
    assert r.n == 8 and r.value == pytest.approx(100 * 3 / 8)


def test_captions_without_ground_truth_count_only_captions_with_an_image(results):
    # images 3 and 4 are not in the ground truth: one caption each; the caption without an
    # image id is left out of CHAIR, so it is not "without ground truth" either
    for name in ("chair_s", "chair_i"):
        assert results[name].extra["captions_without_gt"] == 2, name
    # an image missing from the table has an empty ground truth (as in the reference):
    # dog (image 3), man and bench (image 4) are hallucinated; 16 mentions in the 9 captions
    assert results["chair_s"].n == 9 and results["chair_s"].value == pytest.approx(100 * 2 / 9)
    assert results["chair_i"].value == pytest.approx(100 * 3 / 16)
    assert results["chair_i"].extra["hallucinated_mentions"] == 3
