"""Spec of the judged metrics (:mod:`capaudit.judge`); computed by the judged commands.

A judge answers per sentence, unit or element, over the network or on a local
model, with caps on calls and cost, so these metrics are not streaming
accumulators (``streams = False``, like LIC): ``capaudit audit factuality |
dcscore | capability | faithscore | capscore`` compute and store them (with
the judge's id in every row). Their spec lives here so compare, report, the
LOTUS leaderboard and ``audit metrics`` read label, direction and criterion
like every other metric; names are the ``metric`` values those commands store.
"""

from __future__ import annotations

from capaudit.metrics.base import Metric, register_metric

__all__ = ["JUDGED"]

# name: (label, description, direction, criterion, extra needs)
JUDGED = {
    "factuality.response_correct": ("Resp. correct", "captions whose sentences are all factual "
                                    "(judge, DOCCI-Critique)", 1, "side_effects", {"images"}),
    "factuality.sentence_correct": ("Sent. correct", "share of factual sentences (judge, "
                                    "VNLI-Critique protocol)", 1, "side_effects", {"images"}),
    "factuality.caption_share": ("Caption share", "mean per-caption share of factual sentences "
                                 "(judge)", 1, "side_effects", {"images"}),
    "dcscore.har.hallucination": ("HAR halluc.", "1 − DCScore precision, human description as "
                                  "reference (judge)", -1, "side_effects", {"images", "reference"}),
    "dcscore.har.omission": ("HAR omission", "1 − DCScore recall, human description as reference "
                             "(judge)", -1, "descriptiveness", {"images", "reference"}),
    "dcscore.har.f1": ("HAR F1", "DCScore F1, human description as reference (judge)", 1,
                       "descriptiveness", {"images", "reference"}),
    "dcscore.mar.hallucination": ("MAR halluc.", "1 − DCScore precision of the human description "
                                  "against the model caption (judge)", 0, "side_effects",
                                  {"images", "reference"}),
    "dcscore.mar.omission": ("MAR omission", "1 − DCScore recall with the model caption as "
                             "reference (judge)", 0, "descriptiveness", {"images", "reference"}),
    "capability.precision": ("CAP prec.", "CAPability COR/(COR+INC) per dimension (judge)", 1,
                             "side_effects", set()),
    "capability.hit": ("CAP hit", "CAPability COR/ALL per dimension (judge)", 1,
                       "descriptiveness", set()),
    "capability.kt_bar": ("KT̄", "known in QA but not told in the caption (judge)", -1,
                          "descriptiveness", set()),
    "faithscore.faithscore": ("FaithScore", "verified-true atomic facts / facts (judge)", 1,
                              "side_effects", {"images"}),
    "faithscore.sentence_faithscore": ("FaithScore-S", "descriptive sentences whose facts are "
                                       "all true (judge)", 1, "side_effects", {"images"}),
    "capscore.semantic": ("CapS_S", "judged semantic agreement with the reference, 0-1 "
                          "(LOTUS CapScore)", 1, "alignment", {"reference"}),
    "capscore.overall": ("CapS_A", "judged overall agreement with the reference, 0-1 "
                         "(LOTUS CapScore)", 1, "alignment", {"reference"}),
}


class _JudgedSpec(Metric):
    default = False
    streams = False


for _name, (_label, _desc, _dir, _crit, _needs) in JUDGED.items():
    register_metric(type(f"Judged_{_name.replace('.', '_')}", (_JudgedSpec,), {
        "name": _name, "label": _label, "description": _desc, "direction": _dir,
        "criterion": _crit, "needs": frozenset({"judge", *_needs}),
        "__doc__": _desc, "__module__": __name__}))
