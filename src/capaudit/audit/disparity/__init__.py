"""Disparity of every metric across groups of images: woman/man, light/dark skin.

- :mod:`.gaps`: :func:`audit_disparity` / :func:`disparity_stream`, each metric on
  each group and the gap between them, with bootstrap intervals (:class:`Disparity`);
- :mod:`.groups`: the groupings and how captions are split by their image's group;
- :mod:`.runs`: disparity audits of stored sets, written to the store;
- :mod:`.tables`: the gaps as table rows and Markdown for reports and the CLI.

Every public name is importable from ``capaudit.audit.disparity`` as before the split.
"""

from capaudit.audit.disparity.gaps import Disparity, audit_disparity, disparity_stream
from capaudit.audit.disparity.groups import GROUPINGS, not_by
from capaudit.audit.disparity.runs import (compare_disparities, run_disparity, store_disparity,
                                           target_disparity)
from capaudit.audit.disparity.tables import disparity_markdown, disparity_rows

__all__ = ["GROUPINGS", "Disparity", "audit_disparity", "disparity_stream", "not_by",
           "target_disparity", "run_disparity", "store_disparity", "compare_disparities",
           "disparity_rows", "disparity_markdown"]
