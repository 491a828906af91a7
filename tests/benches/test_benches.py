"""The cache and mixed-workload benchmarks still run end to end and report every row with its
ratio (no timing is asserted).

Only quick modes are run here: they take seconds. The queue benchmark's quick mode spawns
drains of five libraries and takes a minute or more; mypy checks it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.oxide, pytest.mark.slow]

BENCHES = Path(__file__).resolve().parents[2] / "benches"


def run_quick(script: str, out: Path) -> tuple[dict[str, Any], str]:
    run = subprocess.run(
        [sys.executable, str(BENCHES / script), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(out.read_text()), run.stdout


def test_the_cache_benchmark_reports_each_row_with_its_ratio(tmp_path: Path) -> None:
    report, stdout = run_quick("bench_cache.py", tmp_path / "bench.json")
    rows = report["results"]
    ops = [row["op"] for row in rows]
    expected = {
        "get int (memo: 256 hot keys)",
        "get dict (memo: 256 hot keys)",
        "set new int",
        "set overwrite int",
        "delete int",
        "incr",
        "get 1MB bytes",
    }
    assert expected <= set(ops), ops
    assert all(row["ratio"] > 0 for row in rows)
    assert "operations meet their target" in stdout

    # The headline get reads a working set too big for the memo, and comes first.
    headline = [row for row in rows if row["headline"]]
    assert len(headline) == 1, ops
    assert rows[0] is headline[0]
    assert not headline[0]["memo_friendly"]
    assert headline[0]["op"].startswith("get (") and "keys, random" in headline[0]["op"]
    assert report["working_set"] >= 10_000
    if report["diskcache_rs_version"] is not None:
        assert headline[0]["ratio_rs"] > 0

    # The memo-friendly rows are labelled so in the JSON and the table, and printed last.
    memo = [row for row in rows if row["memo_friendly"]]
    assert {row["op"] for row in memo} == {
        f"get {label} (memo: 256 hot keys)" for label in ("int", "str", "dict")
    }
    assert rows[-len(memo) :] == memo
    assert "memo-friendly" in stdout
    assert stdout.index(headline[0]["op"]) < stdout.index("memo-friendly")
    assert stdout.index("memo-friendly") < stdout.index(memo[0]["op"])


def test_the_mixed_benchmark_reports_each_row_with_its_ratios(tmp_path: Path) -> None:
    report, stdout = run_quick("bench_mixed.py", tmp_path / "mixed.json")
    rows = report["results"]
    kinds = {"Cache", "FanoutCache(shards=4)"}
    seen = {(row["library"], row["kind"], row["processes"]) for row in rows}
    assert seen == {
        (library, kind, procs)
        for library in ("python-diskcache", "oxide")
        for kind in kinds
        for procs in (1, 4)
    }
    for row in rows:
        assert not row["errors"], row
        assert row["calls"] == row["ops_per_process"] * row["processes"], row
        assert row["wall_s"] > 0, row
        for action in ("get", "set", "all"):
            stats = row["stats"][action]
            assert 0 < stats["median_us"] <= stats["p90_us"] <= stats["p99_us"], row
            assert stats["p99_us"] <= stats["max_us"], row

    comparisons = report["comparisons"]
    assert {(c["kind"], c["processes"]) for c in comparisons} == {
        (kind, procs) for kind in kinds for procs in (1, 4)
    }
    for c in comparisons:
        assert c["ratios"]["wall"] > 0, c
        for action in ("get", "set", "all"):
            ratios = c["ratios"][action]
            assert all(ratios[stat] > 0 for stat in ("median_us", "p90_us", "p99_us", "max_us"))
    for heading in ("1 process x", "4 processes x", "python-diskcache / oxide", "wall"):
        assert heading in stdout, heading


def test_the_claims_benchmark_reports_each_waiter_beside_python_diskcache(tmp_path: Path) -> None:
    report, stdout = run_quick("bench_claims.py", tmp_path / "claims.json")
    for name in ("oxide", "oxide-portable", "diskcache"):
        row = report[name]
        assert row["n"] == report["samples"], row
        assert 0 < row["median_us"] <= row["p90_us"] <= row["p99_us"], row
    assert "vs diskcache" in stdout
