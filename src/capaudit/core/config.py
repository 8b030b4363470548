"""Configuration with precedence CLI > YAML (``configs/``) > defaults.

Every command resolves its configuration through :func:`resolve`, and the
resolved mapping (plus seed and package versions, see :func:`provenance`) is
saved beside every output, so a number can always be traced to its settings.
"""

from __future__ import annotations

import copy
import importlib.metadata
import json
import os
import platform
import sys
from pathlib import Path
from typing import Mapping

from capaudit.core.names import did_you_mean
from capaudit.core.redact import redact, redact_values
from capaudit.errors import InputError

PACKAGES = ("capaudit", "duckdb", "numpy", "pyarrow", "nltk", "textblob", "typer", "rich",
            "torch", "transformers", "spacy", "ai-edge-litert", "ray")


def idle_cores() -> int:
    """Cores this process may use that the 1-minute load leaves idle, at least 1.

    Why: on a busy machine a second worker process only queues behind the other users of the
    cores; it adds its start-up and its pickled results to the CPU bill and saves no wall
    time (#24: on 2 cores at load 5, two record workers cost more than one). The counts a
    worker pool computes never depend on how many workers there are, so taking fewer changes
    no value."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return max(1, min(cores or 1, int((cores or 1) - load + 0.5)))


def worker_count(asked: int, work_bytes: int, bytes_per_worker: int) -> int:
    """Processes worth starting for ``work_bytes`` of input: no more than ``asked``, than the
    idle cores (:func:`idle_cores`), or than one per ``bytes_per_worker`` of input.

    Why the size: a started worker pays its own start-up, imports and annotation indexes
    before its first caption; on a small input that costs more CPU than it saves wall time
    (#24: 810k captions in 8 shards, 2 workers cost 1.67x the CPU of one). Results never
    depend on the count."""
    by_size = int(work_bytes // max(1, bytes_per_worker))
    return max(1, min(int(asked), idle_cores(), by_size))


def _deep_merge(base: dict, over: Mapping) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if value is None:
            continue
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _is_circular(data) -> bool:
    """True when a YAML alias made a container that contains itself (``a: &a [*a]``).
    Each container is walked once, so shared aliases ("billion laughs") stay cheap."""
    done: set[int] = set()

    def walk(node, path: set[int]) -> bool:
        if not isinstance(node, (dict, list)) or id(node) in done:
            return False
        if id(node) in path:
            return True
        path.add(id(node))
        found = any(walk(v, path) for v in (node.values() if isinstance(node, dict) else node))
        path.discard(id(node))
        done.add(id(node))
        return found

    try:
        return walk(data, set())
    except RecursionError:
        return True


class _DuplicateKey(Exception):
    """A mapping key written twice in a config (PyYAML keeps the last without a word)."""


def _unique_keys_loader():
    """PyYAML's safe loader, refusing a key given twice in one mapping."""
    import yaml

    class UniqueKeys(yaml.SafeLoader):
        anchored: set[int] = set()

        def compose_document(self):   # PyYAML's, keeping which nodes carried an anchor
            self.get_event()
            node = self.compose_node(None, None)
            self.get_event()
            self.anchored = {id(n) for n in self.anchors.values()}
            self.anchors = {}
            return node

        def construct_mapping(self, node, deep=False):
            seen = set()   # the keys written here; merged ones (<<: *anchor) may be overridden
            for key_node, _ in getattr(node, "value", ()):
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                    continue
                key = self.construct_object(key_node)
                if key in seen:
                    raise _DuplicateKey(key, key_node.start_mark.line + 1)
                seen.add(key)
            return super().construct_mapping(node, deep)
    return UniqueKeys


def load_yaml(path: str | Path) -> dict:
    import yaml

    path = Path(path)
    if not path.exists():
        raise InputError("config file not found", path=path, fix="pass an existing YAML file")
    if path.is_dir():
        raise InputError("it is a folder, not a YAML file", path=path,
                         fix="pass the YAML file inside it")
    try:
        data, anchors = _load(path.read_text(encoding="utf-8"))
    except _DuplicateKey as exc:
        raise InputError(f"the key '{exc.args[0]}' is given twice (line {exc.args[1]})",
                         path=path, fix="keep one of them: YAML would take the last silently") \
            from None
    except yaml.YAMLError as exc:
        raise InputError(f"malformed YAML ({exc.__class__.__name__})", path=path,
                         fix="correct the YAML syntax") from None
    except (RecursionError, UnicodeDecodeError) as exc:
        raise InputError(f"unreadable YAML ({type(exc).__name__})", path=path,
                         fix="a UTF-8 YAML mapping without deeply nested structures") from None
    if _is_circular(data):
        raise InputError("circular YAML alias (an anchor that contains itself)", path=path,
                         fix="replace the *alias with the values it should hold")
    if not isinstance(data, dict):
        raise InputError("config must be a mapping at top level", path=path)
    return YamlConfig(data, anchors)


class YamlConfig(dict):
    """A loaded config; ``anchor_keys``: its top-level keys whose value carries a YAML
    anchor (``defaults: &d {...}``), kept only to be referred to (``*d``) elsewhere."""

    def __init__(self, data: dict, anchor_keys=frozenset()):
        super().__init__(data)
        self.anchor_keys = frozenset(anchor_keys)


def _load(text: str) -> tuple:
    """``(data, top-level keys holding an anchor)`` of a YAML text."""
    import yaml

    loader = _unique_keys_loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}, ()
        keys = [k.value for k, v in node.value if isinstance(k, yaml.ScalarNode)
                and id(v) in loader.anchored] if isinstance(node, yaml.MappingNode) else []
        return loader.construct_document(node) or {}, keys
    finally:
        loader.dispose()


# the top-level sections of a YAML config shared by the commands that read one section
# each (audit run/compare/disparity: audit; audit leaderboard; filter run; train-downstream)
SECTIONS = ("audit", "leaderboard", "filter", "train_downstream")


def _check_sections(data: Mapping, path: str | Path) -> None:
    """A top-level section no command reads (``filtres:``) is one line with a did-you-mean:
    its settings were silently ignored and the run went on with the defaults."""
    unknown = [str(k) for k in data if k not in SECTIONS
               and k not in getattr(data, "anchor_keys", ())]   # anchors: kept for *refs
    if unknown:
        raise InputError(f"unknown section '{unknown[0]}' in the config", path=path,
                         fix=f"{did_you_mean(unknown[0], SECTIONS)} the sections are: "
                             f"{', '.join(SECTIONS)}".lstrip())


def resolve(defaults: Mapping, yaml_path: str | Path | None = None,
            cli: Mapping | None = None, section: str | None = None) -> dict:
    """Merge defaults, then the YAML file (its ``section`` if given), then CLI values.

    CLI values that are ``None`` mean "not given" and do not override.
    """
    cfg = dict(defaults)
    if yaml_path:
        data = load_yaml(yaml_path)
        if section:
            _check_sections(data, yaml_path)
            data = data.get(section, {}) or {}
            if not isinstance(data, dict):
                raise InputError(f"'{section}' must be a mapping of options", path=yaml_path,
                                 fix=f"write {section}: followed by indented key: value lines")
        unknown = sorted(str(k) for k in data if k not in cfg) if cfg else []
        if unknown:
            raise InputError(f"unknown option '{unknown[0]}'"
                             + (f" in '{section}'" if section else ""), path=yaml_path,
                             fix=f"{did_you_mean(unknown[0], map(str, cfg))} known options: "
                                 f"{', '.join(sorted(map(str, cfg)))}".lstrip())
        cfg = _deep_merge(cfg, data)
    if cli:
        cfg = _deep_merge(cfg, cli)
    return cfg


def user_cache_dir() -> Path:
    """capaudit's cache folder for the user: ``$CAPAUDIT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/capaudit``, else ``~/.cache/capaudit`` (never the working directory,
    where the judge's response cache used to land as ``.capaudit_cache/``)."""
    if os.environ.get("CAPAUDIT_CACHE_DIR"):
        return Path(os.environ["CAPAUDIT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "capaudit"


def package_versions(names=PACKAGES) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


_COMMAND: list[str] | None = None   # set by the CLI entry point for this invocation


def set_command(argv: list[str] | None) -> None:
    """Record the arguments of the running ``capaudit`` command (``main(argv)`` calls this)."""
    global _COMMAND
    _COMMAND = None if argv is None else [str(a) for a in argv]


def current_command() -> str:
    """``capaudit ARGS`` as the user ran it (also when called as ``main([...])``)."""
    import shlex

    args = _COMMAND if _COMMAND is not None else sys.argv[1:]
    return redact(" ".join(["capaudit", *(shlex.quote(a) for a in args)]))


def provenance(config: Mapping, seed: int | None = None, command: str | None = None) -> dict:
    """What is saved beside every output: resolved config, seed, versions."""
    return {
        "command": command if command is not None else current_command(),
        "config": redact_values(dict(config)),
        "seed": seed,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "versions": package_versions(),
    }


def provenance_beside(output: str | Path, config: Mapping, seed: int | None = None) -> Path:
    """Write the provenance of a file output beside it: ``OUT.provenance.json`` (a folder
    output gets ``provenance.json`` inside). Output formats stay as specified."""
    from capaudit.core.safe_write import is_stream
    from capaudit.core.storage.urls import local_path, on_disk

    if not on_disk(output):   # an object: OUT.provenance.json
        return write_provenance(f"{output}.provenance.json", config, seed)
    output = local_path(output)
    if is_stream(output):   # /dev/null, a pipe: nothing is kept, so nothing to describe
        return output
    target = output / "provenance.json" if output.is_dir() else \
        output.with_name(output.name + ".provenance.json")
    return write_provenance(target, config, seed)


def write_provenance(path: str | Path, config: Mapping, seed: int | None = None,
                     command: str | None = None) -> Path:
    return write_json(path, provenance(config, seed, command))


def write_json(path: str | Path, data, config: Mapping | None = None, seed: int | None = None,
               *, parents: bool = True) -> Path:
    """``data`` as indented JSON (a value JSON has no type for as its text), with the
    provenance of ``config`` beside it when one is given: a command's ``--json FILE``."""
    from capaudit.core.safe_write import write_text

    out = write_text(path, json.dumps(data, indent=2, default=str), parents=parents)
    if config is not None:
        provenance_beside(path, config, seed)
    return out
