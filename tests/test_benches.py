"""The cache benchmark still runs end to end and reports every row (no timing is asserted).

Only the cache benchmark's quick mode is run here: it takes seconds. The queue benchmark's
quick mode spawns drains of five libraries and takes a minute or more; mypy checks it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.oxide, pytest.mark.slow]

BENCHES = Path(__file__).resolve().parents[1] / "benches"


def test_the_cache_benchmark_reports_each_row_with_its_ratio(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    run = subprocess.run(
        [sys.executable, str(BENCHES / "bench_cache.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    report = json.loads(out.read_text())
    ops = {row["op"] for row in report["results"]}
    expected = {
        "get int",
        "set new int",
        "set overwrite int",
        "delete int",
        "incr",
        "get 1MB bytes",
    }
    assert expected <= ops, ops
    assert all(row["ratio"] > 0 for row in report["results"])
    assert "operations meet their target" in run.stdout
