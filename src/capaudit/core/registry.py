"""Named, versioned registries with lazy entries.

Each role (readers, metrics, filters, detectors, backends, enrichers,
executors) owns one :class:`Registry`. Entries are registered either with a
decorator on the object itself or lazily as a ``"module:attr"`` string, so
heavy imports (torch, transformers, litert) only happen when that named
implementation is used. Unknown names give a "did you mean" message.

Rules: a name is registered once (a second registration is refused, so a
plugin cannot silently replace a built-in), and an implementation must be a
subclass (or instance) of the role's ``base`` when one is set. Third-party
packages add entries through entry points in the group ``capaudit.<group>``
(``capaudit.metrics``, ``capaudit.readers``, ``capaudit.filters``,
``capaudit.backends``): their names are read from the installed metadata on
the first lookup and their modules imported only when that name is used, as
pytest's plugins and lm-eval's registry do.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterator, TypeVar

from capaudit.core.names import did_you_mean
from capaudit.errors import CapauditError, InputError, MissingExtraError, shown

T = TypeVar("T")


@dataclass
class Entry:
    name: str
    target: Any  # the object or a "module:attr" string
    version: str = "1"
    description: str = ""
    extra: str | None = None  # optional-dependency extra needed by this entry
    plugin: bool = False      # came from an entry point of another package
    origin: Any = None        # the entry point it came from (plugins)


ENTRY_POINT_PREFIX = "capaudit."


class RegistryError(CapauditError):
    """A name registered twice, or an implementation of the wrong kind (plugins included)."""


@functools.lru_cache(maxsize=1)
def _capaudit_entry_points() -> dict[str, list]:
    """``{group: entry points}`` of every capaudit group; the metadata is scanned once per
    process for all of them (one scan of site-packages costs ~0.1 s)."""
    from importlib.metadata import distributions

    out: dict[str, list] = {}
    for dist in distributions():
        for ep in dist.entry_points:
            if ep.group.startswith(ENTRY_POINT_PREFIX) and ep not in out.get(ep.group, ()):
                out.setdefault(ep.group, []).append(ep)
    return out


def rescan_plugins() -> None:
    """Forget the scanned entry points (registries re-read them on their next lookup)."""
    _capaudit_entry_points.cache_clear()


@dataclass
class Registry(Generic[T]):
    """A mapping of names to implementations of one role."""

    role: str
    _entries: dict[str, Entry] = field(default_factory=dict)
    base: type | None = None                      # implementations must subclass this
    check: Callable[[str, Any], None] | None = None   # check(name, impl): ValueError if wrong
    group: str | None = None                      # entry-point group suffix ("metrics")
    _plugins_loaded: bool = False

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
        old = self._entries.get(entry.name)
        if old is not None and _where(old.target) != _where(entry.target):  # a reload is fine
            raise RegistryError(f"{self.role} '{entry.name}' is already registered "
                             f"({_where(old.target)}); pick another name for {_where(entry.target)}")
        if not isinstance(entry.target, str):
            self._validate(entry.name, entry.target)
        self._entries[entry.name] = entry

    def _validate(self, name: str, obj: Any) -> None:
        if self.base is not None:
            ok = isinstance(obj, self.base) or (isinstance(obj, type) and issubclass(obj, self.base))
            if not ok:
                raise RegistryError(f"{self.role} '{name}' ({_where(obj)}) is not a "
                                f"{self.base.__module__}.{self.base.__qualname__}")
        if self.check is not None:
            try:
                self.check(name, obj)
            except ValueError as exc:
                raise RegistryError(str(exc)) from exc

    def load_plugins(self) -> None:
        """Add the names of entry points in ``capaudit.<group>`` (targets stay lazy).

        Installed metadata is read once per process; after installing a plugin in a running
        process call ``capaudit.core.registry.rescan_plugins()``.
        """
        if self._plugins_loaded or not self.group:
            return
        self._plugins_loaded = True
        for ep in _capaudit_entry_points().get(ENTRY_POINT_PREFIX + self.group, []):
            old = self._entries.get(ep.name)
            if old is not None and old.plugin and old.target == ep.value:
                continue  # the same plugin found twice on sys.path
            if old is not None:
                raise RegistryError(f"{self.role} '{ep.name}' from the entry point {ep.value} is "
                                 f"already registered ({_where(self._entries[ep.name].target)}); "
                                 "the plugin must use another name")
            self._entries[ep.name] = Entry(ep.name, ep.value, description=f"plugin {ep.value}",
                                           plugin=True, origin=ep)

    def registered(self) -> list[str]:
        """Names in registration order (built-ins first, then plugins)."""
        self.load_plugins()
        return list(self._entries)

    def names(self) -> list[str]:
        return sorted(self.registered())

    def known(self) -> list[str]:
        """Names registered so far, in order, without scanning for plugins (a help text
        built at every start: the scan reads every installed package's metadata)."""
        return list(self._entries)

    def __contains__(self, name: str) -> bool:
        if name in self._entries:  # a built-in (or already loaded) name: no metadata scan
            return True
        self.load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def entry(self, name: str) -> Entry:
        if name not in self._entries:  # plugins are scanned only for a name not built in
            self.load_plugins()
        if name not in self._entries:
            broken = BROKEN.get((ENTRY_POINT_PREFIX + (self.group or ""), name))
            if broken:   # a plugin left out earlier in this process: say why, again
                raise RegistryError(f"{self.role} '{name}': cannot import the plugin "
                                    f"{broken[1]} of package {broken[0]} ({broken[2]})")
            raise InputError(f"unknown {self.role} '{name}'", fix=did_you_mean(
                name, self._entries, f"choose one of: {', '.join(self.names())}"))
        return self._entries[name]

    def get(self, name: str) -> T:
        """Return the implementation, importing it on first use. A plugin that cannot be
        imported (any error in its module) or is of the wrong kind is left out of this
        registry for the process, named once in a warning (:func:`plugin_broken`)."""
        entry = self.entry(name)
        if isinstance(entry.target, str):
            if entry.plugin:
                try:
                    entry.target = self._load(name, entry)
                except Exception as exc:  # noqa: BLE001 - another package's code: anything
                    self._entries.pop(name, None)
                    raise plugin_broken(self.role, entry, exc) from None
            else:
                entry.target = self._load(name, entry)
        return entry.target

    def _load(self, name: str, entry: Entry):
        module_name, _, attr = entry.target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            if entry.extra:
                raise MissingExtraError(exc.name or module_name, entry.extra,
                                        f"{self.role} '{name}'") from exc
            raise
        target = getattr(module, attr, None)
        if target is None:
            raise RegistryError(f"{self.role} '{name}': {module_name} has no '{attr}'")
        self._validate(name, target)
        return target

    def available(self) -> list[T]:
        """Every implementation in registration order, plugins that are broken left out
        (each named once in a warning): what a command that lists or runs them all uses."""
        out = []
        for name in self.registered():
            try:
                out.append(self.get(name))
            except RegistryError:
                if name in self._entries:   # a built-in's fault is a bug: not hidden
                    raise
        return out

    def version(self, name: str) -> str:
        return self.entry(name).version


# plugins left out in this process: (group, entry point name) -> (package, value, error)
BROKEN: dict[tuple[str, str], tuple[str, str, str]] = {}


def plugin_broken(role: str, entry: Entry, exc: BaseException) -> RegistryError:
    """Record a plugin that failed to load, warn once on stderr (package, entry point,
    error), and return the one-line error for a command that asked for it by name.

    Why: a plugin whose module raised at import (a RuntimeError, a missing dependency of its
    own) ended every command that lists the metrics in a traceback; it is another
    package's fault, so capaudit goes on without it and says so."""
    import sys

    ep = entry.origin
    group = getattr(ep, "group", f"capaudit.{role}")
    dist = getattr(getattr(ep, "dist", None), "name", None) or "?"
    error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
    error = shown(error.rstrip(": "), one_line=True)[:300]
    key = (group, entry.name)
    if key not in BROKEN:
        BROKEN[key] = (dist, str(entry.target), error)
        sys.stderr.write(f"capaudit: warning: plugin {entry.name!r} of package {dist} "
                         f"(entry point {group}: {entry.target}) cannot be loaded ({error}); "
                         "left out (see capaudit plugins)\n")
    return RegistryError(f"{role} '{entry.name}': cannot import the plugin {entry.target} "
                         f"of package {dist} ({error})")


def _where(obj: Any) -> str:
    if isinstance(obj, str):
        return obj
    mod = getattr(obj, "__module__", None) or type(obj).__module__
    qual = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    return f"{mod}:{qual}"
