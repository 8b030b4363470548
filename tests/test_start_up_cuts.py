"""What #34.7 cut from a warm ``audit run``'s start stays cut, with the same numbers: the
interval's quantiles without ``np.quantile`` (whose first call imports ``numpy.ma``), and
``multiprocessing`` imported only when a worker pool starts."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from capaudit.audit.intervals import _quantiles, interval


def test_quantiles_are_numpys_own_floats():
    rng = np.random.default_rng(7)
    cases = [rng.normal(size=n) * s for n in (1, 2, 3, 40, 999, 1000) for s in (1, 1e-6, 1e6)]
    cases += [np.round(rng.normal(size=200), 1), np.full(50, 2.5), np.arange(10.0)]
    for v in cases:
        qs = (0.025, 0.5, 0.975)
        assert _quantiles(v, qs) == [float(x) for x in np.quantile(v, qs)]
    lo, hi = interval(np.arange(101.0), 50.0)
    assert (lo, hi) == pytest.approx((2.5, 97.5))   # by hand: the 2.5th and 97.5th of 0..100


def test_an_audit_start_imports_neither_numpy_ma_nor_multiprocessing():
    code = ("import sys; import capaudit.cli.main, capaudit.audit.runner, capaudit.text.records;"
            "from capaudit.audit.bootstrap import interval; import numpy as np;"
            "interval(np.arange(10.0), 4.5);"
            "print(sorted(m for m in ('numpy.ma', 'multiprocessing') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
