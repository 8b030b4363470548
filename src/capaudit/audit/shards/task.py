"""A shard's task and its saved state: what the shard function and the merge both read.

Why apart: the shard function (:mod:`.run`) writes a state file and the driver's
merge (:mod:`.merge`, and the replicate sums of :mod:`.sums`) reads it back. Both
sides need the task, the state file's name and its checksum; kept here, below
both, neither imports the other.

A task holds text and plain data only (the shard's location, the work folder's location,
storage options without credentials): a Ray task on another node builds its own file
system from them (:class:`capaudit.core.storage.folder.Folder`), and its state, details and marker
go to the work folder, a URL when the nodes share no disk.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capaudit.core.storage.urls import name_of, parent_of, shown_url
from capaudit.errors import InputError

__all__ = ["ShardTask", "STATE_SUFFIX", "state_name", "state_path", "sha256_hex",
           "fresh_accumulators", "load_task_state"]

STATE_SUFFIX = ".state.npz"


@dataclass
class ShardTask:
    """One shard of a sharded audit: its file, its place, and where its state goes."""

    path: str                 # the shard's location: a local path or a URL
    index: int
    work: str                 # this configuration's work folder: a local path or a URL
    cfg: dict
    cfg_hash: str
    annotations: Any
    ann_namespaces: dict = field(default_factory=dict)   # {kind: namespace}: the row guard
    details: bool = True                                   # write <shard>.details.parquet
    identity: dict = field(default_factory=dict)          # the listing's identity (remote)
    storage_options: dict = field(default_factory=dict)   # no credentials: the node's own

    @property
    def name(self) -> str:
        return name_of(self.path)

    def folder(self):
        from capaudit.core.storage.folder import Folder

        return Folder(self.work, self.storage_options)


def state_name(shard: str) -> str:
    """The name of ``shard``'s state file in its work folder."""
    return Path(name_of(shard)).stem + STATE_SUFFIX


def state_path(work, shard: str):
    """Where the state of ``shard`` lives in the work folder ``work`` (a URL for a remote
    folder)."""
    from capaudit.core.storage.urls import join, local_path

    local = local_path(work)
    return local / state_name(shard) if local is not None else join(str(work), state_name(shard))


def sha256_hex(data: bytes) -> str:
    """The hex digest a shard's marker records of its state file."""
    return hashlib.sha256(data).hexdigest()


def _load_state(path, data: bytes) -> dict:
    """The shard state in ``path`` (one-line error naming it when it does not parse)."""
    from capaudit.audit.shards.state_io import StateError, loads_state

    try:
        parts = loads_state(data)
        if not isinstance(parts, dict) or not {"acc", "acc2"} <= parts.keys():
            raise StateError("not a shard state")
        return parts
    except StateError as exc:
        raise InputError(f"unreadable shard state ({exc})", path=shown_url(path),
                         fix=f"delete the work directory {shown_url(parent_of(parent_of(path)))} "
                             "and rerun") from None


def _load_into(acc, parts: dict | None) -> None:
    from capaudit.metrics.stream import StreamStats

    if acc is None or parts is None:
        return
    part = StreamStats.__new__(StreamStats)
    part.__dict__.update(acc.__dict__)
    part.states, part.units = parts["states"], parts["units"]
    part.n_captions, part.skipped = parts["n_captions"], parts["skipped"]
    acc.merge(part)


def fresh_accumulators(cfg: dict, annotations):
    from capaudit.audit.engine import accumulate
    from capaudit.audit.runner import metric_names

    return accumulate((), annotations, metric_names(cfg), cfg["mode"], 1, cfg["min_images"],
                      corrected=cfg["corrected"], config=cfg)


def load_task_state(task: ShardTask) -> tuple:
    """``(acc, acc2)``: the shard's saved state, checked against its marker's sha256."""
    from capaudit.io.markers import read_marker

    folder, shard = task.folder(), task.name
    data = folder.read_bytes(state_name(shard)) or b""
    if sha256_hex(data) != (read_marker(folder, shard) or {}).get("state_sha256"):
        raise InputError("a shard state changed under the audit", path=folder.url(shard),
                         fix="rerun (another process wrote this work directory)")
    parts, (a, a2) = _load_state(state_path(task.work, shard), data), fresh_accumulators(
        task.cfg, task.annotations)
    _load_into(a, parts["acc"])
    _load_into(a2, parts["acc2"])
    return a, a2
