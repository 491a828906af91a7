"""The README's quickstart runs as written (in a temporary directory)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.oxide

README = Path(__file__).resolve().parents[2] / "README.md"


def test_quickstart_runs(capsys):
    text = README.read_text(encoding="utf-8")
    match = re.search(r"## Quickstart.*?```python\n(.*?)```", text, re.S)
    assert match, "README.md has no python code block under 'Quickstart'"
    code = match.group(1)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out
    assert "('python', 'rust')" in out
    assert "[1, 2, None]" in out


def test_work_queue_example_runs(capsys):
    text = README.read_text(encoding="utf-8")
    match = re.search(r"## Work queue.*?```python\n(.*?)```", text, re.S)
    assert match, "README.md has no python code block under 'Work queue'"
    exec(compile(match.group(1), "README.md", "exec"), {"__name__": "readme"})
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "transcode-500000000000000 {'episode': 510}",
        "{'episode': 511}",
    ]
