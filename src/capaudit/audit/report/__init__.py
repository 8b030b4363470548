"""Compare reports: markdown and HTML with plots (see :mod:`capaudit.audit.report.write`)."""

from capaudit.audit.report.write import write_report

__all__ = ["write_report"]
