"""Spec of the LIC leakage metrics (Hirota et al. 2022); computed by :mod:`capaudit.audit.lic`.

LIC trains gender classifiers on masked captions, so it is not a streaming
accumulator (``streams = False``): ``audit run --lic`` and ``audit lic`` compute
it and the engine leaves it alone. Its spec still lives here so compare,
report, plots and ``audit metrics`` treat it like every other metric.
"""

from __future__ import annotations

from capaudit.metrics.base import Metric, register_metric

# why a LIC value is absent when --lic was not given: one text for the table, report and JSON
LIC_NOT_COMPUTED = "not computed (use --lic)"

__all__ = ["Lic", "LicM", "LicD", "LIC_NOT_COMPUTED"]


class _LicSpec(Metric):
    criterion = "bias"
    needs = frozenset({"demographics", "model", "reference"})
    default = False
    streams = False


@register_metric
class LicM(_LicSpec):
    name, label = "lic_m", "LIC_M"
    description = "gender leakage of the model captions (classifier score ×100)"
    direction = -1
    needs = frozenset({"demographics", "model"})


@register_metric
class LicD(_LicSpec):
    name, label = "lic_d", "LIC_D"
    description = "gender leakage of the human reference captions (classifier score ×100)"
    direction = 0


# registered last: its column comes after the two leakages it is the difference of
@register_metric
class Lic(_LicSpec):
    name, label = "lic", "LIC"
    description = "leakage amplification LIC_M − LIC_D (Hirota et al. 2022)"
    direction = -1
