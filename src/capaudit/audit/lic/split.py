"""The balanced train/test split of LIC, one per seed.

LIC is only comparable across caption sets when the classifier sees the same
number of images of each class, and the chance level is 50 %. The reference
therefore balances: the test split takes ``round(test_ratio x minority count)``
images of each class, the rest of the minority class and an equal random sample
of the majority class form the train split.

The random draws follow the reference exactly so that, given the same item
order, the same seed selects the same images: a ``random.Random(seed)`` pops
(with ``randrange``) first the label-0 training items, then label-1 training,
label-0 test, label-1 test, and finally shuffles train and test.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Hashable, Mapping, Sequence

from capaudit.errors import InputError


@dataclass(frozen=True)
class Split:
    """Item keys and 0/1 labels of one seed's train and test splits."""

    train: list
    train_labels: list[int]
    test: list
    test_labels: list[int]


def balanced_split(items: Sequence[Hashable], labels: Mapping, classes: tuple[str, str],
                   seed: int, test_ratio: float = 0.1) -> Split:
    """Split ``items`` (ordered keys) into a balanced train/test split for ``seed``.

    ``labels[item]`` must be one of ``classes``; ``classes[1]`` gets label 1
    (female / dark, as in the reference). Items with another label are skipped.
    """
    groups: list[list] = [[], []]
    for it in items:
        lab = labels.get(it)
        if lab == classes[0]:
            groups[0].append(it)
        elif lab == classes[1]:
            groups[1].append(it)
    minority = min(len(groups[0]), len(groups[1]))
    n_test = round(minority * test_ratio)
    n_train = minority - n_test
    if n_test < 1 or n_train < 1:
        raise InputError(
            f"too few labelled items for LIC: {len(groups[0])} {classes[0]} and "
            f"{len(groups[1])} {classes[1]} (need at least 10 of each)",
            fix="use a caption set covering more labelled images")
    rng = random.Random(seed)
    pools = [list(groups[0]), list(groups[1])]

    def draw(pool: list, n: int) -> list:
        return [pool.pop(rng.randrange(len(pool))) for _ in range(n)]

    tr0, tr1 = draw(pools[0], n_train), draw(pools[1], n_train)
    te0, te1 = draw(pools[0], n_test), draw(pools[1], n_test)
    train = [(it, 0) for it in tr0] + [(it, 1) for it in tr1]
    test = [(it, 0) for it in te0] + [(it, 1) for it in te1]
    rng.shuffle(train)
    rng.shuffle(test)
    return Split([t[0] for t in train], [t[1] for t in train],
                 [t[0] for t in test], [t[1] for t in test])
