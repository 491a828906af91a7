"""``migrate`` (a python-diskcache directory into a new one, with a progress bar) and ``serve``
(the dashboard); click, rich and the dashboard's libraries are imported when they run."""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from .. import admin
from . import INSTALL_DASHBOARD, absent
from ._app import json_option
from ._output import Failure, Out, jsonable

if TYPE_CHECKING:
    import click

__all__ = ["DASHBOARD_MODULES", "add_commands", "migrate", "serve"]

DASHBOARD_MODULES = ("starlette", "uvicorn", "jinja2")

TRUSTED_WARNING = (
    "warning: --trusted loads every pickle in the source fully; a pickle can run any code "
    "(CVE-2025-69872). Use it only if you trust every process that ever wrote to it."
)


def migrate(out: Out, src: str, dst: str, trusted: bool, pickle: bool) -> None:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from ..migrate import migrate as run_migration

    if trusted:
        sys.stderr.write(TRUSTED_WARNING + "\n")
    # The bar starts at the first progress call, once the source is open and counted, so a
    # source or destination refused before that prints the one "Error: ..." line alone (rich
    # writes a line even for a bar that never showed).
    bars: list[Progress] = []

    def step(done: int, total: int) -> None:
        if not bars:
            bar = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            bar.start()
            bar.add_task("migrating", total=total)
            bars.append(bar)
        bars[0].update(bars[0].task_ids[0], completed=done, total=total)

    try:
        report = run_migration(src, dst, trusted=trusted, pickle=pickle, progress=step)
    finally:
        for bar in bars:
            bar.stop()
    if out.as_json:
        data: dict[str, Any] = asdict(report)
        data["skipped"] = [
            {"key": jsonable(s.key), "key_repr": repr(s.key), "cache": s.cache, "reason": s.reason}
            for s in report.skipped
        ]
        data["entries_per_second"] = report.entries_per_second
        out.json(jsonable_tree(data))
    else:
        # The summary quotes the source's keys and the reasons they were skipped: its
        # lines are kept, any other control character in them is escaped.
        out.line(report.summary(), keep="\n")


def jsonable_tree(data: Any) -> Any:
    """A report's fields as JSON can hold them (values it cannot are written as reprs)."""
    if isinstance(data, dict):
        return {str(k): jsonable_tree(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [jsonable_tree(v) for v in data]
    return jsonable(data)


def serve(directory: str, host: str, port: int, allow_actions: bool) -> None:
    missing = absent(DASHBOARD_MODULES)
    if missing:
        raise Failure(
            f"the dashboard needs {', '.join(missing)}, not installed here: {INSTALL_DASHBOARD}"
        )
    admin.open_cache(directory).close()  # a missing or foreign directory fails here, at once
    from ..dashboard import serve as run_dashboard

    run_dashboard(directory, host=host, port=port, allow_actions=allow_actions)


def add_commands(group: click.Group) -> None:
    import click

    @group.command("migrate")
    @click.argument("src")
    @click.argument("dst")
    @click.option(
        "--trusted",
        is_flag=True,
        help="Fully unpickle the source's pickles. A pickle can run any code: only for a "
        "source whose every writer you trust.",
    )
    @click.option(
        "--pickle",
        is_flag=True,
        help="Open DST with pickle=True, so values the safe format cannot hold (with "
        "--trusted) are stored as pickles instead of skipped.",
    )
    @json_option
    def migrate_command(src: str, dst: str, trusted: bool, pickle: bool, as_json: bool) -> None:
        """Copy the python-diskcache 5.6.3 directory SRC (a Cache or FanoutCache) into a new
        diskcache_oxide directory DST (writes DST; SRC is only read).

        Pickles are decoded by a restricted unpickler that builds only plain data; the rest
        are skipped and listed in the summary. DST appears only once the copy is complete.
        """
        migrate(Out(as_json), src, dst, trusted, pickle)

    @group.command("serve")
    @click.argument("directory")
    @click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
    @click.option(
        "--port",
        type=click.IntRange(0, 65535),
        default=8000,
        show_default=True,
        help="0: any free port (the address is printed).",
    )
    @click.option(
        "--allow-actions",
        is_flag=True,
        help="Show the retry, bury and purge buttons and accept them (writes). Without it "
        "the dashboard only reads and its action endpoints answer 403.",
    )
    def serve_command(directory: str, host: str, port: int, allow_actions: bool) -> None:
        """A live web dashboard of DIRECTORY: cache stats, queues, jobs by state, claims,
        updated every second. Needs the dashboard extra:
        pip install 'diskcache_oxide[dashboard]'. It has no login: it binds 127.0.0.1 unless
        --host says otherwise."""
        serve(directory, host, port, allow_actions)
