"""SQL lives behind ``store/`` (#13): no other package sends raw statements to the store.

Why a scan: a query written in ``io/`` or ``audit/`` is a schema dependency nobody sees
when the table changes; the store modules are the one place to look. The exceptions are
the places where SQL is the point and the store is not the target: ``io/readers/tabular.py``
reads input files with its own DuckDB connection, ``llm/cache.py`` is a SQLite answer
cache (the user's own SQL runs in ``store/query.py``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import capaudit

PACKAGE = Path(capaudit.__file__).parent
ALLOWED = {"io/readers/tabular.py", "llm/cache.py"}
# DuckDB connection / Store methods that run a statement
STATEMENT_CALLS = {"sql", "one", "execute", "executemany"}


def statement_calls(source: str) -> list[tuple[int, str]]:
    """``(line, call text)`` of every ``X.sql(...)``, ``X.one(...)``, ``X.execute(...)``
    in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in STATEMENT_CALLS):
            found.append((node.lineno, ast.unparse(node.func)))
    return sorted(found)


def test_scanner_finds_the_calls_it_forbids():
    src = ("def f(store, con):\n"
           "    store.sql('SELECT 1')\n"
           "    row = store.one('SELECT 2', [1])\n"
           "    store.con.execute('UPDATE t SET x = 1')\n"
           "    con.executemany('INSERT INTO t VALUES (?)', [[1]])\n"
           "    reader.select_sql(path)\n")
    assert statement_calls(src) == [(2, "store.sql"), (3, "store.one"),
                                    (4, "store.con.execute"), (5, "con.executemany")]


def test_no_raw_sql_outside_store():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith("store/") or rel in ALLOWED:
            continue
        for line, call in statement_calls(path.read_text(encoding="utf-8")):
            offenders.append(f"{rel}:{line}: {call}(...)")
    assert not offenders, ("statements sent to the store outside capaudit/store/ (move each "
                           "behind a named function in a store module):\n" + "\n".join(offenders))
