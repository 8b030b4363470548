"""numpy <-> Arrow through the buffers (capaudit.core.arrays): the same arrays as pyarrow's own
conversions, and an audit that never imports pandas."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from capaudit.core.arrays import byte_lengths, from_list, from_numpy, strings, to_numpy

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.float32, np.float64,
          np.bool_]


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_numpy_is_pa_array(dtype):
    rng = np.random.default_rng(3)
    values = (rng.integers(0, 100, 37) % 2 == 0) if dtype is np.bool_ else \
        rng.integers(-50, 100, 37).astype(dtype) if np.dtype(dtype).kind != "u" else \
        rng.integers(0, 100, 37).astype(dtype)
    mask = rng.integers(0, 3, 37) == 0
    for v, m in [(values, mask), (values[::3], mask[::3]), (values[:0], mask[:0])]:
        assert from_numpy(v).equals(pa.array(v))
        got = from_numpy(v, valid=~m)
        assert got.equals(pa.array(v, mask=m))
        assert got.null_count == int(m.sum())


def test_from_numpy_keeps_nan_apart_from_null():
    v = np.array([1.5, np.nan, 3.0])
    got = from_numpy(v, valid=np.array([True, True, False]))
    assert got.to_pylist()[0] == 1.5 and np.isnan(got.to_pylist()[1]) and got.to_pylist()[2] is None


@pytest.mark.parametrize("dtype", DTYPES)
def test_to_numpy_is_pyarrow_to_numpy(dtype):
    arr = pa.array((np.arange(40) % 3 == 0) if dtype is np.bool_ else np.arange(40).astype(dtype))
    chunked = pa.chunked_array([arr[:7], arr[7:]])
    for a in (arr, arr[5:], arr[13:29], chunked, chunked[3:30], arr[:0]):
        want = a.to_numpy() if isinstance(a, pa.ChunkedArray) else a.to_numpy(zero_copy_only=False)
        got = to_numpy(a)
        assert got.dtype == want.dtype and np.array_equal(got, want)


def test_to_numpy_refuses_nulls_and_text():
    with pytest.raises(ValueError, match="1 nulls"):
        to_numpy(pa.array([1, None, 3]))
    with pytest.raises(TypeError, match="string"):
        to_numpy(pa.array(["a"]))


def test_strings_is_pa_array():
    for values in (["neutral", "male", "female"], ["", "é", "日本語", "a b", ""], []):
        assert strings(values).equals(pa.array(values, pa.string()))


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string(), pa.binary(), pa.string_view()])
def test_byte_lengths_is_binary_length_with_nulls_as_zero(typ):
    values = ["a dog", None, "", "caf\u00e9 \u65e5\u672c", None, "x" * 300, "b"]
    arr = pa.array([None if v is None else (v.encode() if pa.types.is_binary(typ) else v)
                    for v in values], typ)
    for a in (arr, arr[1:], arr[2:6], arr[:0]):
        want = [0 if v is None else len(v if isinstance(v, bytes) else v.encode())
                for v in a.to_pylist()]
        got = byte_lengths(a)
        assert got.dtype == np.int64 and got.tolist() == want


def test_audit_run_imports_no_pandas(tmp_path):
    """pyarrow imports pandas (~0.4 s) on its first numpy or Python-object conversion; an
    audit holds no pandas object, so neither the first run (annotations parsed and cached)
    nor a later one (read from the store's cache) may import it."""
    caps = tmp_path / "caps.jsonl"
    caps.write_text("".join(json.dumps({"image_id": i, "caption": c}) + "\n" for i, c in
                            [(1, "a dog on a couch"), (2, "two cats and a dog"),
                             (3, "a man riding a horse"), (4, "a pizza on a table")]))
    gt = tmp_path / "gt.jsonl"
    gt.write_text("".join(json.dumps({"image_id": i, "objects": o}) + "\n" for i, o in
                          [(1, ["dog", "couch"]), (2, ["cat"]), (3, ["person", "horse"]),
                           (4, ["dining table"])]))
    probe = f"""
import sys
from capaudit.cli.main import main
for _ in range(2):
    assert main(["audit", "run", {str(caps)!r}, "--chair-gt", {str(gt)!r}, "--metrics",
                 "chair_s,chair_i", "--n-boot", "20", "--workers", "1",
                 "--db", {str(tmp_path / "s.duckdb")!r}]) == 0
print("PANDAS" if "pandas" in sys.modules else "NO-PANDAS")
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "NO-PANDAS"


@pytest.mark.parametrize("typ", [pa.string(), pa.int32(), pa.int64(), pa.float64()])
def test_from_list_is_pa_array(typ):
    rng = np.random.default_rng(5)
    if typ == pa.string():
        pool = ["", "é", "日本語", "a dog on a bench", "x" * 300, "\x00", "\u2028"]
    elif typ == pa.float64():
        pool = [0.0, -1.5, 1e300, float("nan"), float("inf"), 0.25]
    else:
        pool = [0, 1, -7, 2**31 - 1, -2**31] + ([2**62, -2**63] if typ == pa.int64() else [])
    for n, nulls in [(0, 0), (1, 0), (1, 1), (9, 3), (130, 40), (64, 0)]:
        values = [pool[i] for i in rng.integers(0, len(pool), n)]
        for i in rng.choice(n, nulls, replace=False) if n else []:
            values[i] = None
        got, want = from_list(values, typ), pa.array(values, typ)
        assert got.type == want.type and got.null_count == want.null_count
        assert _shown(got) == _shown(want) == _shown(values)


def _shown(values) -> list:
    """Values with NaN as text (NaN != NaN)."""
    values = values.to_pylist() if isinstance(values, pa.Array) else values
    return ["nan" if isinstance(v, float) and v != v else v for v in values]


def test_from_list_leaves_the_rest_to_pyarrow():
    # other kinds, out of range, surrogates: pa.array's own conversion or its own error
    assert from_list([1, 2.0], pa.float64()).equals(pa.array([1, 2.0], pa.float64()))
    assert from_list([np.int64(3)], pa.int64()).equals(pa.array([3], pa.int64()))
    for values, typ in (([2**31], pa.int32()), ([2**63], pa.int64()), (["\ud800"], pa.string()),
                        ([1], pa.string()), ([True, None], pa.int64())):
        with pytest.raises(Exception) as got:
            from_list(values, typ)
        with pytest.raises(type(got.value)):
            pa.array(values, typ)


def test_filter_log_table_imports_no_pandas():
    # the filter's log rows go to Arrow through the buffers: no pandas in the process
    code = ("import sys\nfrom capaudit.filters.stream import LOG_SCHEMA, LogColumns\n"
            "cols = LogColumns()\n"
            "for f in LOG_SCHEMA:\n"
            "    cols.cols[f.name] += {'string': ['a', None], 'double': [0.5, None]}.get("
            "str(f.type), [3, None])\n"
            "t = cols.table('s', None, {'shard': ['x', 'y'], 'record': [1, 2], 'turn': [0, None]})"
            "\nassert t.num_rows == 2 and t.column('turn').null_count == 1, t\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas')))")
    out = subprocess.run([sys.executable, "-c", "import json\n" + code], capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out) == []
