"""The Python API's leaderboard, dataset card and LIC: :class:`capaudit.api.AuditStore`
inherits them.

Why a module of its own: every ``capaudit audit`` command has its API call, and these
three did not (#34.10); :mod:`capaudit.api` had no room left under the 300-line rule. Each
method calls the function its command calls (:func:`capaudit.leaderboard.runner.
run_leaderboard`, :func:`capaudit.audit.lic.sets.lic_of_set`), so the API's numbers are
the CLI's, stored as a run the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from capaudit.audit.config import AuditConfig
from capaudit.core.argtypes import checked_methods

__all__ = ["LeaderboardCardLic", "FilterValidation"]



def _audit_cfg(metrics: str | Sequence[str] | None, options: Mapping[str, Any],
               config: str | Path | None, section: str = "audit") -> AuditConfig:
    """The audit settings of one call: given > YAML ``config``'s ``section`` > defaults (an
    unknown option is one line naming it)."""
    given = {k: (str(v) if isinstance(v, Path) else v) for k, v in options.items()}
    if metrics is not None:
        given["metrics"] = list(metrics) if not isinstance(metrics, str) else metrics
    return AuditConfig.resolve(config, given, section=section)


class LeaderboardCardLic:
    """``leaderboard``, ``card`` and ``lic`` of :class:`capaudit.api.AuditStore` (its ``_open``)."""

    def _open(self, read_only: bool = False, *, create: bool = False, sandbox: bool = False):
        raise NotImplementedError   # AuditStore's

    def leaderboard(self, targets: Sequence[str], metrics: str | Sequence[str] | None = None,
                    *, profile: str | None = None, html: str | Path | None = None,
                    markdown: str | Path | None = None, json: str | Path | None = None,
                    all_images: bool = False, config: str | Path | None = None,
                    **options: Any):
        """``capaudit audit leaderboard``: every metric (default: every GCE and LOTUS one)
        on two or more sets, bias gaps, criterion scores and each profile's N-avg ranking
        with its bootstrap; stored as a run. ``html``/``markdown``/``json``: the page
        folder and files to write (provenance beside each). ``all_images``: each set's
        values on its own images and nothing ranked (``profiles`` empty; sets of different
        datasets, refused without it, are shown). ``options``: the audit settings
        (``reference``, ``nsfw_lexicon``, ``n_boot``, ``min_n``, ``intersections``, ...).

        Returns the :class:`capaudit.leaderboard.board.Leaderboard`: ``sets``, ``columns``,
        ``values``, ``ci``, ``n``, ``status``, ``profiles`` (each with ``rank``,
        ``tied_rank``, ``rank_interval``, ``left_out``), ``notes``, ``to_dict()``.

        >>> import capaudit, tempfile, pathlib
        >>> store = capaudit.open(pathlib.Path(tempfile.mkdtemp()) / "a.duckdb")
        >>> _ = store.add_set("nic", capaudit.demo_file("nic.jsonl"))
        >>> _ = store.add_set("oscar", capaudit.demo_file("oscar.jsonl"))
        >>> store.add_annotations("chair-gt", capaudit.demo_file("chair_gt.jsonl"))
        >>> lb = store.leaderboard(["nic", "oscar"], metrics=["chair_s"], profile="overall",
        ...                        n_boot=50)
        >>> lb.sets, lb.profiles["overall"]["rank"]
        (['nic', 'oscar'], [2, 1])
        """
        from capaudit.leaderboard.outputs import write_outputs
        from capaudit.leaderboard.runner import run_leaderboard

        cfg = _audit_cfg(metrics, {**options, "profile": profile}, config, "leaderboard")
        with self._open(create=True) as store:
            out = run_leaderboard(store, [str(t) for t in targets], cfg,
                                  all_images=all_images)
            write_outputs(store, out, cfg, json, markdown, html)
        return out["leaderboard"]

    def card(self, sets: str | Sequence[str], out: str | Path, *, license: str | None = None,
             metrics: str | Sequence[str] | None = None, config: str | Path | None = None,
             **options: Any) -> list[str]:
        """``capaudit audit card``: audit ``sets`` and merge it into the dataset card ``out``
        (its YAML and text kept, capaudit's section between markers replaced on a rerun).
        ``license``: for a card that has none; ``options``: the audit settings. Returns the
        messages (e.g. a missing license).

        >>> import capaudit, tempfile, pathlib
        >>> tmp = pathlib.Path(tempfile.mkdtemp())
        >>> store = capaudit.open(tmp / "a.duckdb")
        >>> _ = store.add_set("nic", capaudit.demo_file("nic.jsonl"))
        >>> _ = (tmp / "README.md").write_text("---\\nlicense: cc-by-4.0\\n---\\n# nic\\n")
        >>> store.card("nic", tmp / "README.md", metrics=["length"], n_boot=20)
        []
        >>> "license: cc-by-4.0" in (text := (tmp / "README.md").read_text()), "# nic" in text
        (True, True)
        """
        from capaudit.report.card_file import audit_card

        cfg = _audit_cfg(metrics, {"disparity": "gender", **options}, config)
        with self._open() as store:
            return audit_card(store, [str(s) for s in ([sets] if isinstance(sets, (str, Path))
                                                       else sets)], out, cfg, license=license)[1]

    def lic(self, target: str, reference: str | None = None, *,
            demographics: str | Path | None = None, attribute: str = "gender",
            classifier: str = "lstm", seeds: int = 10, epochs: int | None = None,
            device: str = "auto", cache: bool = True, threads: int | None = None,
            align_vocab: bool = True, **classifier_options: Any) -> dict:
        """``capaudit audit lic``: LIC_M of ``target`` (Hirota et al. 2022) over the first
        ``seeds`` reference seeds, and with ``reference`` (human captions of the same
        images) LIC_D and LIC = LIC_M - LIC_D. Labels: ``demographics`` or the stored ones;
        ``cache``: seeds trained before are read from the store. ``classifier_options``:
        the transformer's ``model_path``, ``max_length``.

        Returns ``{"lic_m", "lic_d", "lic"}`` (each ``{"value", "std", "seeds"}``; the last
        two None without ``reference``), ``n_images``, ``config`` and per-seed
        ``details``, with ``name``: the set's.

        >>> import capaudit, tempfile, pathlib
        >>> store = capaudit.open(pathlib.Path(tempfile.mkdtemp()) / "a.duckdb")
        >>> _ = store.add_set("nic", capaudit.demo_file("nic.jsonl"))
        >>> res = store.lic("nic", demographics=capaudit.demo_file("demographics.jsonl"),
        ...                 seeds=1, epochs=1, device="cpu", threads=1)
        >>> res["name"], res["lic_d"], sorted(res["lic_m"])
        ('nic', None, ['seeds', 'std', 'value'])
        """
        from capaudit.audit.lic.runner import DEFAULT_SEEDS
        from capaudit.audit.lic.sets import lic_of_set
        from capaudit.errors import InputError

        if isinstance(seeds, bool) or not isinstance(seeds, int) or not 1 <= seeds <= 10:
            raise InputError(f"seeds must be a whole number from 1 to 10, not {seeds!r}",
                             fix="give seeds=1 ... seeds=10")
        with self._open(create=True) as store:
            name, res = lic_of_set(store, str(target), None if reference is None else
                                   str(reference), demographics, attribute=attribute,
                                   cache=cache, classifier=classifier,
                                   seeds=DEFAULT_SEEDS[:seeds], epochs=epochs, device=device,
                                   align_vocab=align_vocab, progress=False,
                                   classifier_options=classifier_options, threads=threads)
        return {"name": name, **res}


@checked_methods  # a wrong type is one UsageError naming the argument
class FilterValidation:
    """``validate_filter`` of :class:`capaudit.api.AuditStore` (its ``_open``)."""

    def _open(self, read_only: bool = False, *, create: bool = False, sandbox: bool = False):
        raise NotImplementedError   # AuditStore's

    def validate_filter(self, labels: str | Path, set: str, *, layout: str | None = None,
                        conflicts: str | None = None, allow_few: bool = False,
                        n_boot: int = 1000, seed: int = 0, json: str | Path | None = None,
                        disagreements: str | Path | None = None) -> dict:
        """``capaudit filter validate``: the decisions of the filter run that wrote ``set``
        (run it with ``action="flag"``; or the ``out`` folder of a ``filter run --shards``
        run, read from its shard logs) against human hallucination ``labels`` (a file in
        one of the layouts of docs/formats.md, sniffed unless ``layout`` is given). Stored
        in the store (``filter_validations``) and returned as a dict: ``status`` (ok,
        partial; too few matched captions are refused unless ``allow_few``), ``matching``,
        and per level the labels allow (``caption``, ``sentence``, ``graded``) precision,
        recall and F1 with their n, counts, image-bootstrap intervals (``ci``) and the
        confusion ``by_reason`` and ``by_evidence``. ``json`` / ``disagreements``: files to
        write (the same as the CLI's ``--json`` / ``--disagreements``)."""
        from capaudit.filters.validate.runner import validate_filter

        with self._open() as store:
            return validate_filter(store, labels, set, layout=layout, conflicts=conflicts,
                                   allow_few=allow_few, n_boot=n_boot, seed=seed,
                                   json_out=json, disagreements=disagreements)
