"""``faithscore``: FaithScore's human annotation (Jing et al. 2023, bcdnlp/FAITHSCORE
``annotation.jsonl``): ``{"id": "000000525439", "answer": "...", "stage 1": {...},
"stage 2": {atomic fact: 0/1}}``.

Which value means hallucinated: the repository's README says stage-2 ``1`` marks a
hallucinated fact, but its data say the opposite (facts about objects the image's CHAIR
ground truth holds are labelled 1, those about objects it lacks 0:
``../shared/data/human_labels/README.md``), so **0 = hallucinated, 1 = faithful**. An
answer is hallucinated when any stage-2 fact is 0; an answer with no stage-2 fact is
faithful. The facts are not located in the answer's text, so the labels are caption-level.
A repeated answer is hallucinated if any of its records says so (``repeats = "any"``), and
the disagreement is reported.
"""

from __future__ import annotations

from capaudit.errors import InputError
from capaudit.io.labels.base import LabelLayout, Labelled, binary, text_field

__all__ = ["FaithScoreLabels"]


class FaithScoreLabels(LabelLayout):
    """Atomic facts per answer, 0 = hallucinated."""

    name = "faithscore"
    fields = ("id", "answer", "stage 2")
    repeats = "any"

    def parse(self, rec: dict, row: int, path) -> Labelled:
        facts = rec.get("stage 2")
        if facts is None:
            facts = {}
        if not isinstance(facts, dict):
            raise InputError("'stage 2' is not an object of facts", path=path, row=row,
                             fix='write "stage 2" as {"atomic fact": 0 or 1}')
        values = [binary(v, row, path, "stage 2") for v in facts.values()]
        wrong = values.count(0)
        return Labelled(row, text_field(rec, "id", row, path),
                        text_field(rec, "answer", row, path), label=int(wrong > 0),
                        notes={"facts": len(values), "hallucinated_facts": wrong})
