"""``capaudit annotations detect``: detector evidence for images without COCO labels.

Why: a web-scale set has no instance labels, but recall, CHAIR and the
hallucination filter only need "which categories are in this image". A
detector run over every image of the shards gives that, stored as an
ordinary instance source (``--instances NAME``) with its provenance
(detector, sha256 of its weights, score threshold) in a JSON beside the
instances file. Per shard: detections of images with an integer image id
are written to ``WORK/<config hash>/<shard>.instances.jsonl`` (temp file,
rename) and marked done with the input's sha256, so a killed run resumes.
Detector evidence has its own error: ``benchmarks/detector_evidence.py``
measures it against COCO labels.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from capaudit.errors import InputError
from capaudit.runner.step import Step, once_per_worker

__all__ = ["run_detect_annotations", "detect_shard"]


@dataclass
class DetectTask:
    shard: str
    work: str
    detector: str
    options: dict
    min_score: float
    cfg_hash: str


def detect_shard(task: DetectTask) -> dict:
    """Detect every image of one shard into its instances JSONL (or find it done)."""
    from capaudit.enrich.detectors import make_detector
    from capaudit.enrich.detectors.base import decode_image
    from capaudit.io.image_shards import read_shard
    from capaudit.core.storage.paths import write_whole
    from capaudit.io.markers import input_fingerprint, matches, read_marker, write_marker

    work, name = Path(task.work), Path(task.shard).name
    marker = read_marker(work, name)
    fp = input_fingerprint(Path(task.shard), (marker or {}).get("input"))
    out = work / (Path(name).stem + ".instances.jsonl")
    if matches(marker, task.cfg_hash, fp) and out.exists():
        return {"shard": name, "status": "resumed", "images": marker["images"]}
    det = once_per_worker(("detector", task.detector, json.dumps(task.options, sort_keys=True)),
                          lambda: make_detector(task.detector, task.options))  # once per worker
    lines, n, undecodable = [], 0, 0
    for s in read_shard(task.shard):
        if s.image is None or s.image_id is None:
            continue
        try:
            img = decode_image(s.image)
        except Exception:  # noqa: BLE001 - a bad image is counted, not fatal
            undecodable += 1
            continue
        dets = [d for d in det.detect([img], [s.image_id])[0] if d.score >= task.min_score]
        counts: dict[str, int] = {}
        for d in dets:
            counts[d.category] = counts.get(d.category, 0) + 1
        lines.append(json.dumps({"image_id": s.image_id, "categories": sorted(counts),
                                 "counts": counts}))
        n += 1
    write_whole(out, ("\n".join(lines) + ("\n" if lines else "")).encode())
    write_marker(work, name, task.cfg_hash, {"input": fp, "images": n,
                                             "undecodable": undecodable})
    return {"shard": name, "status": "done", "images": n, "undecodable": undecodable}


class DetectStep(Step):
    """``annotations detect`` as a step of the runner: a task per shard (:func:`detect_shard`),
    the shards' instances joined in shard order into ``NAME.instances.jsonl`` with its
    provenance beside it."""

    passes = (detect_shard,)

    def __init__(self, shards: list[Path], work_dir, name: str, detector: str, options: dict,
                 min_score: float, prov: dict):
        from capaudit.io.markers import config_hash

        self.shards, self.work_dir, self.name, self.prov = shards, work_dir, name, prov
        self.detector, self.options, self.min_score = detector, options, min_score
        self.key = config_hash(prov)
        self.shared = ((str(work_dir), "work folder", "--work-dir"),)

    def plan(self, root: str, workers: int) -> list[DetectTask]:
        self.root, self.work = Path(root), Path(root) / self.key
        self.work.mkdir(exist_ok=True)
        return [DetectTask(str(p), str(self.work), self.detector, self.options, self.min_score,
                           self.key) for p in self.shards]

    def merge(self, tasks: list[DetectTask], results: list[dict[int, dict]]) -> Path:
        from capaudit.core.storage.paths import write_whole

        merged = b"".join((self.work / (p.stem + ".instances.jsonl")).read_bytes()
                          for p in self.shards)
        out = self.root / f"{self.name}.instances.jsonl"
        write_whole(out, merged)
        write_whole(self.root / f"{self.name}.instances.provenance.json",
                    json.dumps({**self.prov, "shards": [p.name for p in self.shards]},
                               indent=2).encode())
        return out


def run_detect_annotations(store, shards: str, name: str, detector: str = "ssd-mobilenet",
                           options: dict | None = None, min_score: float = 0.5,
                           work_dir: str | Path | None = None, executor: str = "local",
                           workers: int = 1, address: str | None = None,
                           on_shard=None) -> tuple[str, int, dict]:
    """Detect, then store the instance source ``name``; returns (name, images, provenance)."""
    from capaudit.core.storage.work_folder import default_work_dir
    from capaudit.enrich.detectors import make_detector
    from capaudit.io.annotation_store import add_annotations
    from capaudit.io.image_shards import list_shards
    from capaudit.runner.run import run_step
    from capaudit.runner.step import RunOptions

    if not 0 <= min_score <= 1:
        raise InputError(f"--min-score {min_score} is not a score", fix="a value in [0, 1]")
    options = dict(options or {})
    paths = list_shards(shards)
    # a missing model or extra fails here, once; the in-process run (one worker) reuses it
    det = once_per_worker(("detector", detector, json.dumps(options, sort_keys=True)),
                          lambda: make_detector(detector, options))
    weights = getattr(det, "weights_path", None)
    prov = {"detector": detector, "model_id": det.model_id, "min_score": min_score,
            "weights_sha256": hashlib.sha256(Path(weights).read_bytes()).hexdigest()
            if weights else None}
    # beside the store (<store>.work/NAME.detect-work), never the working directory
    step = DetectStep(paths, work_dir or default_work_dir(store.path, name, "detect-work"),
                      name, detector, options, min_score, prov)
    out = run_step(step, RunOptions(executor, workers, address, False, on_shard))
    src, n = add_annotations(store, "instances", out, name, replace=True)
    return src, n, prov
