"""The Python API: the CLI's plain functions behind one small object.

Notebooks and training scripts drive capaudit from Python; this facade calls
the same functions the ``capaudit`` commands call (ingest, audit runner,
compare, disparity, filter runner, export, the query sandbox), so a number
computed here is the number the CLI prints and stores. Errors are the
:class:`capaudit.errors.CapauditError` types the CLI turns into one line.

Each method opens the DuckDB file for its own call and closes it after, so a
store held in a notebook never locks out a ``capaudit`` command in a shell.

Example (the bundled demo data, offline):

>>> import capaudit, tempfile, pathlib
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> store = capaudit.open(tmp / "audit.duckdb")
>>> store.add_set("nic", capaudit.demo_file("nic.jsonl")).n_captions
1000
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from capaudit.api_audits import FilterValidation, LeaderboardCardLic, _audit_cfg
from capaudit.core.argtypes import checked_arguments, checked_methods
from capaudit.core.table import (RESULT_COLUMNS, ResultTable, audit_table as _audit_table,
                                 disparity_rows as _disparity_rows, metric_rows as _metric_rows)
from capaudit.errors import InputError, worded_for_api

__all__ = ["AuditStore", "ResultTable", "open", "demo_file"]

@checked_arguments
def demo_file(name: str) -> Path:
    """Path of a file of the bundled 1,000-image COCO demo sample.

    >>> demo_file("oscar.jsonl").name
    'oscar.jsonl'
    """
    from capaudit.demo import DEMO_DIR

    path = DEMO_DIR / name
    if not path.exists():
        raise InputError(f"no demo file '{name}'", fix="one of: " + ", ".join(
            sorted(p.name for p in DEMO_DIR.iterdir() if p.suffix in (".json", ".jsonl"))))
    return path


@worded_for_api   # errors name this API's keywords (skip_no_image=True), not the CLI's flags
@checked_methods  # a wrong type is one UsageError naming the argument (capaudit.open(3))
class AuditStore(LeaderboardCardLic, FilterValidation):
    """A capaudit DuckDB store; get one with :func:`capaudit.open`. Its leaderboard and LIC
    calls live in :mod:`capaudit.api_audits`."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"AuditStore({str(self.path)!r})"

    def _open(self, read_only: bool = False, *, create: bool = False, sandbox: bool = False):
        """The store for one call: only adding data creates the file (as in the CLI)."""
        from capaudit.store import Store

        return Store(self.path, read_only=read_only, create=create, sandbox=sandbox)

    def add_set(self, name: str, path: str | Path, format: str | None = None, *,
                replace: bool = False, **reader_options: Any):
        """Register a caption file or folder as set ``name`` (``format``: a reader name,
        ``None`` sniffs it; ``reader_options``: ``namespace``, and those of the format:
        ``id_col``, ``caption_col``, ``split``, ``turns``, ``where``, ``skip_no_image``, as
        ``sets add``; one the format does not read is refused). Returns its
        :class:`capaudit.store.db.SetInfo`; the same file again is a no-op.

        >>> import capaudit, tempfile, pathlib
        >>> store = capaudit.open(pathlib.Path(tempfile.mkdtemp()) / "a.duckdb")
        >>> info = store.add_set("oscar", capaudit.demo_file("oscar.jsonl"))
        >>> info.name, info.n_captions, info.n_images
        ('oscar', 1000, 1000)
        """
        from capaudit.io.ingest import add_caption_set

        with self._open(create=True) as store:
            return add_caption_set(store, name, path, format or "auto", replace=replace,
                                   **reader_options).info

    def add_annotations(self, kind: str, path: str | Path, name: str | None = None, *,
                        replace: bool = False, namespace: str | None = None) -> None:
        """Store annotations (``instances``, ``chair-gt`` or ``demographics``) that audits
        use by default; ``namespace``: the dataset of their image ids (default: what the
        file name says, ``instances_val2014.json`` -> ``coco2014``).

        >>> import capaudit, tempfile, pathlib
        >>> store = capaudit.open(pathlib.Path(tempfile.mkdtemp()) / "a.duckdb")
        >>> store.add_annotations("chair-gt", capaudit.demo_file("chair_gt.jsonl"))
        >>> store.query("SELECT kind FROM annotation_sources").rows
        [('chair-gt',)]
        """
        from capaudit.io.annotation_store import add_annotations

        with self._open(create=True) as store:
            add_annotations(store, kind, path, name, replace, namespace=namespace)

    def sets(self) -> list:
        """The registered sets (:class:`capaudit.store.db.SetInfo`), oldest first.

        >>> import capaudit, tempfile, pathlib
        >>> store = capaudit.open(pathlib.Path(tempfile.mkdtemp()) / "a.duckdb")
        >>> _ = store.add_set("nic", capaudit.demo_file("nic.jsonl"))
        >>> [s.name for s in store.sets()]
        ['nic']
        """
        with self._open(read_only=True, sandbox=True) as store:
            return store.list_sets()

    def audit(self, targets: str | Sequence[str], metrics: str | Sequence[str] | None = None,
              *, config: str | Path | None = None, **options: Any) -> ResultTable:
        """Audit sets (or caption files) like ``capaudit audit run``; stored as a run.

        ``options`` are the audit settings (``n_boot``, ``seed``, ``mode``, ``chair_gt``,
        ... see ``configs/audit.yaml``); ``config`` a YAML file (given > YAML > defaults).
        Returns one row per set x metric (group ``all``): value, n, ci_low, ci_high.

        >>> import capaudit, tempfile, pathlib
        >>> store = capaudit.open(pathlib.Path(tempfile.mkdtemp()) / "a.duckdb")
        >>> _ = store.add_set("nic", capaudit.demo_file("nic.jsonl"))
        >>> res = store.audit("nic", metrics=["vocab", "length"], n_boot=50)
        >>> [(r["metric"], r["n"]) for r in res]
        [('vocab', 1000), ('length', 1000)]
        """
        from capaudit.audit.runner import run_audit

        targets = [targets] if isinstance(targets, (str, Path)) else list(targets)
        cfg = _audit_cfg(metrics, options, config)
        with self._open() as store:
            results = run_audit(store, [str(t) for t in targets], cfg, only_needed=True)
        return _audit_table(results, results.get("_run_id"))

    def compare(self, sets: Sequence[str], metrics: str | Sequence[str] | None = None, *,
                report: str | Path | None = None, same_images: bool | None = None,
                config: str | Path | None = None, **options: Any):
        """``capaudit audit compare``: audit ``sets`` with the same annotations, mark best
        and worst where the intervals separate, and (with ``report``) write
        report.md/report.html with plots. ``same_images``: score every set on the images
        they share (``None``: when they overlap) or each on all its own.

        Returns the :class:`capaudit.report.compare.Comparison`; its rows as a
        :class:`ResultTable` with :func:`comparison_table`. ``disparity="gender"`` adds the
        gaps between groups of images.

        >>> import capaudit, tempfile, pathlib
        >>> store = capaudit.open(pathlib.Path(tempfile.mkdtemp()) / "a.duckdb")
        >>> _ = store.add_set("nic", capaudit.demo_file("nic.jsonl"))
        >>> _ = store.add_set("oscar", capaudit.demo_file("oscar.jsonl"))
        >>> cmp = store.compare(["nic", "oscar"], metrics=["vocab"], n_boot=50)
        >>> cmp.names, sorted({r["metric"] for r in comparison_table(cmp)})  # LIC: never absent
        (['nic', 'oscar'], ['lic', 'vocab'])
        """
        from capaudit.report.compare import compare_and_report

        cfg = _audit_cfg(metrics, options, config)
        with self._open() as store:
            return compare_and_report(store, list(sets), report, cfg, same_images)

    def disparity(self, targets: str | Sequence[str], by: str = "gender",
                  metrics: str | Sequence[str] | None = None, *,
                  config: str | Path | None = None, **options: Any) -> ResultTable:
        """``capaudit audit disparity``: each metric on the images of each group (``by``:
        ``gender`` or ``skin_tone``) and the difference, with intervals; stored as a run.
        Rows have group ``gender=male``, ``gender=female`` and ``gender:male-female``.

        >>> import capaudit, tempfile, pathlib
        >>> store = capaudit.open(pathlib.Path(tempfile.mkdtemp()) / "a.duckdb")
        >>> _ = store.add_set("nic", capaudit.demo_file("nic.jsonl"))
        >>> store.add_annotations("demographics", capaudit.demo_file("demographics.jsonl"))
        >>> res = store.disparity("nic", metrics=["length"], n_boot=50)
        >>> [r["group"] for r in res]
        ['gender=male', 'gender=female', 'gender:male-female']
        """
        from capaudit.audit.disparity import run_disparity

        targets = [targets] if isinstance(targets, (str, Path)) else list(targets)
        cfg = _audit_cfg(metrics, options, config)
        with self._open() as store:
            out = run_disparity(store, [str(t) for t in targets], cfg, by=by)
        run_id = out.pop("_run_id", None)
        rows = [row for name, d in out.items() for row in _disparity_rows(name, d)]
        return ResultTable(RESULT_COLUMNS, rows, run_id)

    def filter(self, set: str, filter: str, out: str, *, replace: bool = False, seed: int = 0,
               config: str | Path | None = None, score_evidence: str | None = None,
               **options: Any):
        """``capaudit filter run``: filter ``set`` into the new set ``out`` (linked to its
        parent, every sentence logged with its reason). ``options`` are the filter's
        (``action``, ``evidence``, ``chair_gt``, ...). Returns ``(SetInfo, FilterSummary)``.

        >>> import capaudit, tempfile, pathlib
        >>> store = capaudit.open(pathlib.Path(tempfile.mkdtemp()) / "a.duckdb")
        >>> _ = store.add_set("nic", capaudit.demo_file("nic.jsonl"))
        >>> store.add_annotations("chair-gt", capaudit.demo_file("chair_gt.jsonl"))
        >>> info, summary = store.filter("nic", "hallucination", "nic_clean")
        >>> info.parent, info.n_captions <= 1000
        ('nic', True)
        """
        from capaudit.filters.runner import filter_set

        given = {k: (str(v) if isinstance(v, Path) else v) for k, v in options.items()}
        with self._open() as store:
            return filter_set(store, set, filter, out, given, config=config, seed=seed,
                              replace=replace, score_evidence=score_evidence)

    def export(self, set: str, to: str, out: str | Path, *, overwrite: bool = False,
               prompt: str | None = None) -> Path:
        """``capaudit sets export``: write ``set`` as ``to`` (``jsonl``, ``parquet``, ...)
        to ``out`` (temporary name, then renamed), provenance beside it; ``overwrite`` as
        ``--overwrite`` (a folder output into a folder with files in it); ``prompt`` as
        ``--prompt`` (the question of an answer the set holds none for).

        >>> import capaudit, tempfile, pathlib
        >>> tmp = pathlib.Path(tempfile.mkdtemp())
        >>> store = capaudit.open(tmp / "a.duckdb")
        >>> _ = store.add_set("nic", capaudit.demo_file("nic.jsonl"))
        >>> path = store.export("nic", "jsonl", tmp / "nic.jsonl")
        >>> sum(1 for _ in path.open())
        1000
        """
        from capaudit.io.export import export_with_provenance

        with self._open(read_only=True) as store:
            return export_with_provenance(store, set, to, out, overwrite=overwrite,
                                          prompt=prompt)

    def query(self, sql: str) -> ResultTable:
        """Read-only SQL over the store, in the same sandbox as ``capaudit query`` (no
        files, network, extensions or settings).

        >>> import capaudit, tempfile, pathlib
        >>> store = capaudit.open(pathlib.Path(tempfile.mkdtemp()) / "a.duckdb")
        >>> _ = store.add_set("nic", capaudit.demo_file("nic.jsonl"))
        >>> store.query("SELECT name, n_captions FROM caption_sets").rows
        [('nic', 1000)]
        """
        from capaudit.store.query import run_query

        with self._open(read_only=True, sandbox=True) as store:
            cols, rows = run_query(store, sql)
        return ResultTable(tuple(cols), [tuple(r) for r in rows])


def comparison_table(cmp) -> ResultTable:
    """A :class:`capaudit.report.compare.Comparison` as rows (set x metric x group), with
    its disparity rows when it has them."""
    rows = [row for name in cmp.names for row in _metric_rows(name, cmp.results[name].results)]
    for name, per in (cmp.disparities or {}).items():
        for d in per.values():
            rows.extend(_disparity_rows(name, d))
    return ResultTable(RESULT_COLUMNS, rows, cmp.run_id)


@checked_arguments
def open(path: str | Path = "capaudit.duckdb") -> AuditStore:  # noqa: A001 - the API's verb
    """Open (create on first write) the capaudit store at ``path``.

    >>> import capaudit
    >>> capaudit.open("audit.duckdb")
    AuditStore('audit.duckdb')
    """
    return AuditStore(path)
