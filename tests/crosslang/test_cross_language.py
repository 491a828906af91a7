"""Cross-language: values written from Python are read by Rust programs through the engine,
and the other way round.

Uses the engine's example ``crates/engine/examples/cross_language.rs``
(``read|write <dir> <key>``), which exchanges a fixed reference record.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support import explain_difference

pytestmark = [pytest.mark.oxide, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "crates" / "engine" / "examples"


def run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    if not (EXAMPLES / f"{name}.rs").exists():
        pytest.skip(
            f"crates/engine/examples/{name}.rs does not exist (owned by the engine's authors); "
            "this test runs once it does"
        )
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not on PATH")
    command = [cargo, "run", "-q", "-p", "diskcache-oxide-engine", "--example", name, "--"]
    return subprocess.run(
        [*command, *args],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=280,
    )


# The record crates/engine/examples/cross_language.rs exchanges, as Python sees it.
REFERENCE_RECORD = {
    "name": "ada",
    "n": 3,
    "ratio": 0.5,
    "ok": True,
    "none": None,
    "tags": ("x", "y"),
    "ids": [1, 2],
    "raw": b"\x00\xff",
    "big": 2**70,
    "day": dt.date(2024, 1, 2),
    7: frozenset({"k"}),
}


def test_rust_recognises_the_reference_record_written_by_python(make_cache):
    cache = make_cache("xlang-record")
    cache["record"] = REFERENCE_RECORD
    cache.close()
    result = run_example("cross_language", "read", cache.directory, "record")
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert result.stdout.strip() == "match", result.stdout


def test_python_reads_the_reference_record_written_by_rust(make_cache, tmp_path):
    directory = str(tmp_path / "from-rust")
    result = run_example("cross_language", "write", directory, "record")
    assert result.returncode == 0, f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    cache = make_cache("from-rust")
    got = cache["record"]
    problem = explain_difference(REFERENCE_RECORD, got)
    assert problem is None, problem
