"""Named, versioned registries with lazy entries.

Each role (readers, metrics, filters, detectors, backends, enrichers,
executors) owns one :class:`Registry`. Entries are registered either with a
decorator on the object itself or lazily as a ``"module:attr"`` string, so
heavy imports (torch, transformers, litert) only happen when that named
implementation is used. Unknown names give a "did you mean" message.
"""

from __future__ import annotations

import difflib
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterator, TypeVar

from capaudit.errors import InputError

T = TypeVar("T")


@dataclass
class Entry:
    name: str
    target: Any  # the object or a "module:attr" string
    version: str = "1"
    description: str = ""
    extra: str | None = None  # optional-dependency extra needed by this entry


@dataclass
class Registry(Generic[T]):
    """A mapping of names to implementations of one role."""

    role: str
    _entries: dict[str, Entry] = field(default_factory=dict)

    def register(self, name: str, target: Any = None, *, version: str = "1",
                 description: str = "", extra: str | None = None) -> Callable | None:
        """Register ``target`` (object or "module:attr") under ``name``.

        Used without ``target`` it returns a decorator.
        """
        if target is None:
            def deco(obj):
                self._add(Entry(name, obj, version, description or (obj.__doc__ or "").strip()
                                .split("\n")[0], extra))
                return obj
            return deco
        self._add(Entry(name, target, version, description, extra))
        return None

    def _add(self, entry: Entry) -> None:
        self._entries[entry.name] = entry

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def entry(self, name: str) -> Entry:
        if name not in self._entries:
            close = difflib.get_close_matches(name, self._entries, n=1)
            hint = f"did you mean '{close[0]}'?" if close else \
                f"choose one of: {', '.join(self.names())}"
            raise InputError(f"unknown {self.role} '{name}'", fix=hint)
        return self._entries[name]

    def get(self, name: str) -> T:
        """Return the implementation, importing it on first use."""
        entry = self.entry(name)
        if isinstance(entry.target, str):
            module_name, _, attr = entry.target.partition(":")
            try:
                module = importlib.import_module(module_name)
            except ImportError as exc:
                if entry.extra:
                    from capaudit.errors import MissingExtraError
                    raise MissingExtraError(exc.name or module_name, entry.extra,
                                            f"{self.role} '{name}'") from exc
                raise
            entry.target = getattr(module, attr)
        return entry.target

    def version(self, name: str) -> str:
        return self.entry(name).version
