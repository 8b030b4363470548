"""Write the audit into a dataset card, merged into the card already there.

Why: ``audit card --out README.md`` used to write the file whole, and a dataset's own card
(its license, its YAML metadata, the text its authors wrote) was gone. The card is read and
written with ``huggingface_hub``'s :class:`~huggingface_hub.DatasetCard` (the Hub's own
reader of the YAML block), so that:

- the card's metadata and text stay; capaudit's section sits between two HTML comment
  markers and a rerun replaces only what is between them (a card written by an earlier
  capaudit, without markers, has its "## Audit (capaudit)" part replaced);
- the Hub metadata is completed, never overwritten: ``license`` is kept, or taken from
  ``--license`` when the card has none (said in one line when neither gives one);
  ``task_categories`` gains ``image-to-text``, ``size_categories`` is set from the sets'
  caption counts when absent, ``tags`` gains ``capaudit``; the machine-read audit is the
  ``capaudit_audit`` key, replaced on a rerun;
- a card whose YAML cannot be read is refused (one line), never replaced.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Iterable

from capaudit.errors import InputError, require

__all__ = ["BEGIN", "END", "merge_card", "size_category", "write_card"]

BEGIN = "<!-- capaudit audit: begin (capaudit audit card rewrites what is between these lines) -->"
END = "<!-- capaudit audit: end -->"
OLD_HEADING = "## Audit (capaudit)"
TASK = "image-to-text"
TAG = "capaudit"
# the Hub's size buckets (number of examples), smallest first
_SIZES = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
          (1_000_000, "100K<n<1M"), (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M"),
          (1_000_000_000, "100M<n<1B"), (10_000_000_000, "1B<n<10B")]


def size_category(n: int) -> str:
    """The Hub's ``size_categories`` bucket of ``n`` examples."""
    return next((name for bound, name in _SIZES if n < bound), "n>10B")


def _as_list(value) -> list:
    return [] if value is None else list(value) if isinstance(value, (list, tuple)) else [value]


def _read(hub, text: str, path: Path):
    hub_log = logging.getLogger("huggingface_hub")
    level = hub_log.level
    hub_log.setLevel(logging.ERROR)   # "metadata block was not found": a card without YAML
    try:
        return hub.DatasetCard(text)
    except Exception as exc:  # noqa: BLE001 - the YAML parser's errors are many
        raise InputError(f"the card's YAML metadata cannot be read ({type(exc).__name__})",
                         path=path, fix="fix the YAML between the --- lines, or write the "
                         "audit to another --out") from None
    finally:
        hub_log.setLevel(level)


def _section(text: str, section: str, had_audit: bool) -> str:
    """``text`` with capaudit's section put between the markers (replacing what was)."""
    block = f"{BEGIN}\n{section.rstrip()}\n{END}"
    if BEGIN in text and END in text.split(BEGIN, 1)[1]:
        head, rest = text.split(BEGIN, 1)
        return head + block + rest.split(END, 1)[1]
    if had_audit and OLD_HEADING in text:     # written by a capaudit without markers
        return text.split(OLD_HEADING, 1)[0] + block + "\n"
    return (text.rstrip() + "\n\n" if text.strip() else "") + block + "\n"


def merge_card(existing: str | None, section: str, audit_meta: dict[str, Any],
               n_captions: Iterable[int], license: str | None = None, *,
               title: str = "", path: Path = Path("README.md")) -> tuple[str, list[str]]:
    """``(card text, messages)``: ``existing`` (None: no card yet) with the audit merged."""
    hub = require("huggingface_hub", "hf", "writing a Hugging Face dataset card")
    card = _read(hub, existing or "", path)
    data, said = card.data, []
    had_audit = "capaudit_audit" in data.to_dict()
    if data.license:
        if license and license not in _as_list(data.license):
            said.append(f"kept the card's license ({data.license}); --license {license} "
                        "not applied (edit the card to change it)")
    elif license:
        data.license = license
    else:
        said.append("the card has no license: pass --license ID (e.g. cc-by-4.0; the Hub "
                    "asks for one, and only the data's owner can say which)")
    data.task_categories = list(dict.fromkeys(_as_list(data.task_categories) + [TASK]))
    if not data.size_categories:
        data.size_categories = sorted({size_category(n) for n in n_captions},
                                      key=[b for _, b in _SIZES].index)
    data.tags = list(dict.fromkeys(_as_list(getattr(data, "tags", None)) + [TAG]))
    setattr(data, "capaudit_audit", audit_meta)
    text = card.text if existing else f"# {title}\n" if title else ""
    return f"---\n{data.to_yaml()}\n---\n{_section(text, section, had_audit)}", said


def write_card(out: str | Path, section: str, audit_meta: dict[str, Any],
               n_captions: Iterable[int], license: str | None = None, *,
               title: str = "") -> list[str]:
    """Merge the audit into the card at ``out`` (a new card when there is none) and write it
    (temporary name, then renamed); returns the messages to show."""
    from capaudit.core.safe_write import write_text

    out = Path(out)
    existing = out.read_text(encoding="utf-8") if out.is_file() else None
    text, said = merge_card(existing, section, audit_meta, n_captions, license, title=title,
                            path=out)
    write_text(out, text, parents=True)
    return said


def audit_card(store, sets: list[str], out: str | Path, cfg, *, license: str | None = None):
    """Audit ``sets`` (as ``audit compare`` does, each on all its own images) and merge the
    result into the card at ``out``: the one path of ``capaudit audit card`` and
    :meth:`capaudit.api.AuditStore.card`. Returns ``(comparison, messages)``."""
    from capaudit.core.config import current_command, package_versions
    from capaudit.core.names import escape_markdown_html
    from capaudit.core.safe_write import check_file_target
    from capaudit.report.card import dataset_card
    from capaudit.report.compare import compare_sets

    require("huggingface_hub", "hf", "writing a Hugging Face dataset card")  # before the audit
    check_file_target(Path(out))  # a link, the store or a source is refused before any work
    cmp = compare_sets(store, sets, cfg, same_images=False)
    meta, section = dataset_card(cmp, store, cfg, package_versions(), current_command())
    counts = [int(meta["capaudit_audit"]["sets"][n]["captions"] or 0) for n in cmp.names]
    said = write_card(out, escape_markdown_html(section), meta["capaudit_audit"], counts,
                      license, title=", ".join(cmp.names))
    return cmp, said
