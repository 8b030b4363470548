"""The accumulator state types a shard state file may hold, registered by the metric modules.

Why here, beside the metrics: ``audit run --shards`` writes each shard's metric states to
a folder the user controls and reads them back without pickles
(:mod:`capaudit.audit.shards.state_io`): the loader rebuilds only the dataclasses named
in :data:`STATE_TYPES`. The module that defines a state registers it (``@register_state``
on the dataclass, or ``state_types = (MyState,)`` on the :class:`~.base.Metric`, which
registering the metric applies), so a new state type needs no edit to the loader; a
plugin metric's states come with the plugin.
"""

from __future__ import annotations

import dataclasses

__all__ = ["STATE_TYPES", "register_state"]

STATE_TYPES: dict[str, type] = {}


def register_state(cls: type) -> type:
    """Allow the dataclass ``cls`` (fields of encodable values) in shard state files."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    STATE_TYPES[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return cls
