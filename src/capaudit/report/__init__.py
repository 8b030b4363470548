"""Compare reports: markdown and HTML with plots (see :mod:`capaudit.report.write`)."""

from capaudit.report.write import write_report

__all__ = ["write_report"]
