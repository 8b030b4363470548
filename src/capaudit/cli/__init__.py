"""The typer CLI: a thin layer over plain functions (see :mod:`capaudit.cli.main`)."""
