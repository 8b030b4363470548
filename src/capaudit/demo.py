"""The demo: a fresh store from the bundled 1,000-image COCO sample, compared three ways.

Why a module of its own: ``capaudit demo`` and :func:`capaudit.demo_file` (the API)
build the same thing; the library must not import the CLI to do it.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DEMO_DIR", "build_demo"]

DEMO_DIR = Path(__file__).resolve().parent / "data" / "demo"


def _refuse_non_demo(db: Path) -> None:
    """The demo replaces its database: refuse a file holding anything but demo sets (so that
    ``$CAPAUDIT_DB`` pointing at a real store never loses it)."""
    if not Path(db).exists():
        return
    from capaudit.errors import InputError
    from capaudit.store import Store

    try:
        with Store(db, read_only=True) as st:
            foreign = [s for s in st.list_sets()
                       if not str(s.source_path or "").startswith(str(DEMO_DIR))]
    except InputError:
        foreign = None  # not a capaudit store at all
    if foreign is None or foreign:
        what = (f"holds the set '{foreign[0].name}' ({foreign[0].source_path})" if foreign
                else "is not a capaudit demo store")
        raise InputError(f"{db} {what}; the demo replaces its database",
                         fix="pass --db NEW.duckdb (or unset CAPAUDIT_DB)")


def build_demo(db: Path, report_dir: Path | None = None, run_audit: bool = True) -> dict:
    """A fresh database from the bundled 1,000-image sample, then ``audit compare`` with the
    gaps by gender and skin tone."""
    from capaudit.io.annotation_store import add_annotations
    from capaudit.io.ingest import add_caption_set
    from capaudit.store import Store

    _refuse_non_demo(db)
    for suffix in ("", ".wal"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    store = Store(db)
    for name, file in (("coco", "coco_captions.json"), ("oscar", "oscar.jsonl"),
                       ("nic", "nic.jsonl")):
        add_caption_set(store, name, DEMO_DIR / file)
    add_annotations(store, "instances", DEMO_DIR / "instance_categories.jsonl")
    add_annotations(store, "chair-gt", DEMO_DIR / "chair_gt.jsonl")
    add_annotations(store, "demographics", DEMO_DIR / "demographics.jsonl")
    out = {"store": store, "sets": ["coco", "oscar", "nic"]}
    if run_audit:
        from capaudit.report.compare import compare_and_report

        out["compare"] = compare_and_report(store, out["sets"], report_dir or
                                            Path("capaudit-demo-report"),
                                            cfg={"disparity": ["gender", "skin_tone"]})
    return out
