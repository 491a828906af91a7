"""Fixtures for the command line's tests: a filled directory and click's CliRunner on the
``diskcache-oxide`` group (tests/cli/cli_support.py fills the directory)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli_support import Filled, Run, fill

pytest.importorskip(
    "click", reason="the CLI's tests need click (pip install -r requirements-dev.txt)"
)
pytest.importorskip(
    "rich", reason="the CLI's tests need rich (pip install -r requirements-dev.txt)"
)

from click.testing import CliRunner, Result  # noqa: E402
from diskcache_oxide.cli import build  # noqa: E402


@pytest.fixture
def filled(tmp_path: Path) -> Filled:
    return fill(tmp_path / "cache")


@pytest.fixture
def run() -> Run:
    """``run(*args, input=None)``: the command's Result (exit_code, stdout, stderr)."""
    group = build()

    def invoke(*args: Any, input: str | None = None) -> Result:
        return CliRunner().invoke(group, [str(a) for a in args], input=input)

    return invoke


@pytest.fixture
def run_json(run: Run) -> Callable[..., Any]:
    """``run_json(*args)``: the parsed JSON a command printed with --json (it must exit 0)."""

    def invoke(*args: Any) -> Any:
        result = run(*args, "--json")
        assert result.exit_code == 0, (result.output, result.stderr)
        return json.loads(result.stdout)

    return invoke
