"""``capaudit audit lic``: LIC leakage of a caption set (and of human captions).

Kept import-light: torch and transformers are imported only when the command
runs. The lead attaches it with ``audit_app.command("lic")(lic_command)``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from capaudit.errors import InputError


def _load_target(target: str, db: Optional[Path]) -> tuple[str, dict[int, list[str]]]:
    """(name, image id -> captions) from a caption file or a registered set.

    Files: JSONL ``{"image_id", "caption"}`` (several lines per image allowed)
    or a COCO captions JSON (``images``/``annotations``). Anything else is
    looked up as a set name in the store. One function so that it can be
    swapped for the store's reader.
    """
    path = Path(target)
    out: dict[int, list[str]] = {}
    if not path.exists() and (path.suffix.lower() in (".json", ".jsonl") or "/" in target):
        raise InputError("file not found", path=path, fix="check the path")
    if path.is_file():
        from capaudit.io.annotations import iter_jsonl
        from capaudit.io.imageids import parse_image_id

        if path.suffix.lower() == ".json":
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise InputError(f"not valid JSON ({exc})", path=path) from None
            if not isinstance(data, dict) or "annotations" not in data:
                raise InputError("expected a COCO captions JSON with 'annotations'", path=path,
                                 fix="use COCO format or JSONL with image_id/caption")
            rows = enumerate(data["annotations"], start=1)
        else:
            rows = iter_jsonl(path)
        for row, rec in rows:
            if not isinstance(rec, dict) or "image_id" not in rec or "caption" not in rec:
                raise InputError("each record needs 'image_id' and 'caption'", path=path, row=row)
            iid = parse_image_id(rec["image_id"])
            if iid is None:
                raise InputError(f"image_id {rec['image_id']!r} is not a COCO image id", path=path, row=row)
            out.setdefault(iid, []).append(str(rec["caption"] or ""))
        name = path.stem
    else:
        from capaudit.cli.common import open_store

        with open_store(db, read_only=True) as store:
            table = store.captions(target, "image_id, caption")
        for iid, cap in zip(table.column("image_id").to_pylist(), table.column("caption").to_pylist()):
            if iid is not None:
                out.setdefault(int(iid), []).append(cap or "")
        name = target
    if not out:
        raise InputError("no captions found", path=target)
    return name, out


class _StoreCache:
    """Adapter from the store's LIC cache table to run_lic's get/put protocol."""

    def __init__(self, store):
        self.store = store

    def get(self, key: str):
        return self.store.cache_get(key)

    def put(self, key: str, value: dict) -> None:
        with self.store.transaction():
            self.store.cache_put(key, value)


def lic_command(
    target: str = typer.Argument(..., help="Caption set: JSONL (image_id, caption), COCO JSON, or set name"),
    reference: Optional[str] = typer.Option(None, "--reference", help="Human captions of the same images (LIC_D)"),
    demographics: Optional[Path] = typer.Option(None, "--demographics", help="JSONL/CSV image_id, gender, skin_tone"),
    classifier: str = typer.Option("lstm", "--classifier", help="lstm (reference) or transformer"),
    seeds: int = typer.Option(10, "--seeds", min=1, max=10, help="Use the first N reference seeds"),
    epochs: Optional[int] = typer.Option(None, "--epochs", min=1, help="Default: 20 (lstm), 5 (transformer)"),
    attribute: str = typer.Option("gender", "--attribute", help="gender or skin_tone"),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the results as JSON here"),
    db: Optional[Path] = typer.Option(None, "--db", help="DuckDB file for the cache (and set names)"),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda"),
    align_vocab: bool = typer.Option(True, "--align-vocab/--no-align-vocab",
                                     help="Human words outside the model's vocabulary become <unk>"),
    model_path: Optional[Path] = typer.Option(None, "--model-path", help="Transformer: local encoder directory"),
    max_length: int = typer.Option(64, "--max-length", help="Transformer: max word pieces"),
    no_cache: bool = typer.Option(False, "--no-cache", help="Train every seed even if cached"),
) -> None:
    """LIC leakage (Hirota et al. 2022): LIC_M, and with --reference LIC_D and LIC = LIC_M - LIC_D."""
    from rich.console import Console
    from rich.table import Table

    from capaudit.audit.lic.runner import DEFAULT_SEEDS, run_lic
    from capaudit.io.annotations import load_demographics

    if demographics is None:
        raise InputError("LIC needs image labels", fix="pass --demographics FILE (image_id, gender, skin_tone)")
    if attribute not in ("gender", "skin_tone"):
        raise InputError(f"unknown attribute '{attribute}'", fix="use gender or skin_tone")
    gender, skin = load_demographics(demographics)
    labels = gender if attribute == "gender" else skin
    name, caps = _load_target(target, db)
    model_captions = {i: c[0] for i, c in caps.items()}
    human = None
    if reference is not None:
        _, human = _load_target(reference, db)
    options = {}
    if classifier == "transformer":
        options = {"max_length": max_length} | ({"model_path": model_path} if model_path else {})

    cache = None
    store = None
    if not no_cache:
        from capaudit.cli.common import open_store
        store = open_store(db)
        cache = _StoreCache(store)
    try:
        res = run_lic(model_captions, labels, human, classifier=classifier, seeds=DEFAULT_SEEDS[:seeds],
                      epochs=epochs, device=device, cache=cache, attribute=attribute,
                      align_vocab=align_vocab, classifier_options=options)
    finally:
        if store is not None:
            store.close()

    keys = [k for k in ("lic_m", "lic_d", "lic") if res[k] is not None]
    table = Table(title=f"LIC ({classifier}, {attribute}) on {name}: {res['n_images']} images")
    table.add_column("seed", justify="right")
    for k in keys:
        table.add_column(k.upper(), justify="right")
    for s in res["lic_m"]["seeds"]:
        table.add_row(str(s), *[f"{res[k]['seeds'][s]:.2f}" for k in keys])
    table.add_row("mean ± std", *[f"{res[k]['value']:.2f} ± {res[k]['std']:.2f}" for k in keys],
                  style="bold")
    Console().print(table)
    if json_out is not None:
        payload = {"sets": {name: {k: res[k] for k in ("lic_m", "lic_d", "lic")} |
                            {"n_images": res["n_images"], "config": res["config"]}}}
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(payload, indent=2, default=str), encoding="utf-8")
