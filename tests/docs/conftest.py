"""Lists the doc blocks marked no-run (tests/docs/test_docs_run.py) at the end of every run
that collected them, with their reasons, so that a block left out never goes unnoticed."""

from __future__ import annotations

import pytest

_PREFIX = "no-run: "


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = []
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        if not isinstance(longrepr, tuple) or "test_docs_run.py" not in report.nodeid:
            continue
        reason = str(longrepr[2]).removeprefix("Skipped: ")
        if reason.startswith(_PREFIX):
            block = report.nodeid.partition("[")[2].rstrip("]")
            lines.append(f"{block}: {reason[len(_PREFIX) :]}")
    if lines:
        terminalreporter.write_sep("-", f"doc blocks not run ({len(lines)}, marked no-run)")
        for line in sorted(lines):
            terminalreporter.write_line(line)
