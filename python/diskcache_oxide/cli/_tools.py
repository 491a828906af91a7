"""``migrate`` (a python-diskcache directory into a new one, with a progress bar), ``copy`` (a
cache's data into another: a directory into Redis, D-062) and ``serve`` (the dashboard); click,
rich and the dashboard's libraries are imported when they run."""

from __future__ import annotations

import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from .. import admin
from ._options import INSTALL_DASHBOARD, absent, json_option
from ._output import Failure, Out, jsonable

if TYPE_CHECKING:
    import click

__all__ = ["DASHBOARD_MODULES", "EXIT_SKIPPED", "add_commands", "copy", "migrate", "serve"]

DASHBOARD_MODULES = ("starlette", "uvicorn", "jinja2")

TRUSTED_WARNING = (
    "warning: --trusted loads every pickle in the source fully; a pickle can run any code "
    "(CVE-2025-69872). Use it only if you trust every process that ever wrote to it."
)


class _Bar:
    """A progress bar on stderr that starts at the first progress call, once the source is
    open and counted, so a source or destination refused before that prints the one
    "Error: ..." line alone (rich writes a line even for a bar that never showed)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.bars: list[Any] = []

    def __call__(self, done: int, total: int) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

        if not self.bars:
            bar = Progress(
                "[progress.description]{task.description}",
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                transient=False,
            )
            bar.start()
            bar.add_task(self.label, total=total)
            self.bars.append(bar)
        self.bars[0].update(self.bars[0].task_ids[0], completed=done, total=total)

    def stop(self) -> None:
        for bar in self.bars:
            bar.stop()


def migrate(out: Out, src: str, dst: str, trusted: bool, pickle: bool) -> None:
    from ..migrate import migrate as run_migration

    if admin.is_url(dst):
        raise Failure(
            f"migrate writes a new directory, not {admin.location(dst)}: migrate into a "
            "directory, then copy it into Redis with `diskcache-oxide copy DIR URL`"
        )
    if trusted:
        sys.stderr.write(TRUSTED_WARNING + "\n")
    step = _Bar("migrating")
    try:
        report = run_migration(src, dst, trusted=trusted, pickle=pickle, progress=step)
    finally:
        step.stop()
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


#: ``copy``'s exit status when it skipped entries or jobs (listed in its summary): a script
#: that checks only the status must not take an incomplete copy for a complete one.
EXIT_SKIPPED = 3


def copy(out: Out, src: str, dst: str, pickle: bool, merge: bool, jobs: bool) -> None:
    if pickle:
        sys.stderr.write(
            "warning: --pickle unpickles the source's pickled values to copy them; a pickle "
            "can run any code (CVE-2025-69872). Use it only if you trust every process that "
            "ever wrote to SRC.\n"
        )
    step = _Bar("copying")
    try:
        report = admin.copy(src, dst, pickle=pickle, merge=merge, jobs=jobs, progress=step)
    finally:
        step.stop()
    if out.as_json:
        data: dict[str, Any] = asdict(report)
        data["skipped"] = [
            {"what": s.what, "key": jsonable(s.key), "key_repr": repr(s.key), "reason": s.reason}
            for s in report.skipped
        ]
        out.json(jsonable_tree(data))
    else:
        out.line(report.summary(), keep="\n")
    if report.skipped:
        entries = sum(1 for skip in report.skipped if skip.what == "entry")
        jobs_skipped = len(report.skipped) - entries
        sys.stderr.write(
            f"diskcache-oxide copy: incomplete: {entries} entr{'y' if entries == 1 else 'ies'} "
            f"and {jobs_skipped} job{'' if jobs_skipped == 1 else 's'} skipped (listed in the "
            f"summary); exit status {EXIT_SKIPPED}\n"
        )
        raise SystemExit(EXIT_SKIPPED)


def serve(target: str, host: str, port: int, allow_actions: bool) -> None:
    missing = absent(DASHBOARD_MODULES)
    if missing:
        raise Failure(
            f"the dashboard needs {', '.join(missing)}, not installed here: {INSTALL_DASHBOARD}"
        )
    # A missing or foreign directory, a Redis server that does not answer, fails here, at once.
    admin.open_cache(target).close()
    from ..dashboard import serve as run_dashboard

    run_dashboard(target, host=host, port=port, allow_actions=allow_actions)


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

    @group.command("copy")
    @click.argument("src")
    @click.argument("dst")
    @click.option(
        "--merge",
        is_flag=True,
        help="Copy into a DST that already holds entries, writing over those with the same "
        "keys (its other entries stay). Without it a DST that is not empty is refused.",
    )
    @click.option(
        "--pickle",
        is_flag=True,
        help="Unpickle SRC's pickled values to copy them (they are skipped otherwise). A "
        "pickle can run any code: only for a source whose every writer you trust.",
    )
    @click.option("--no-jobs", "no_jobs", is_flag=True, help="Copy the entries only.")
    @json_option
    def copy_command(
        src: str, dst: str, merge: bool, pickle: bool, no_jobs: bool, as_json: bool
    ) -> None:
        """Copy every entry of the cache SRC into DST: a directory into a Redis namespace
        (redis://HOST:PORT/DB?namespace=NS), or either into the other (writes DST; SRC is only
        read).

        Each entry keeps its value, tag and expiry; queue items keep their queue and their
        place in it. Jobs keep their queue, value, unique key and delay (a leased job is
        copied as ready, a dead one stays dead; ids are new). Live claims and hit counts are
        not copied. The summary lists what was skipped and why. A DST that is not empty is
        refused unless --merge, and jobs are never copied into a DST that holds jobs.

        Exit status: 0 everything copied; 3 done, but some entries or jobs were skipped (how
        many is said on stderr, which they are in the summary); 1 failed; 2 bad usage.
        """
        copy(Out(as_json), src, dst, pickle, merge, not no_jobs)

    @group.command("serve")
    @click.argument("target", metavar="TARGET")
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
    def serve_command(target: str, host: str, port: int, allow_actions: bool) -> None:
        """A live web dashboard of TARGET (a directory or a Redis URL): cache stats, queues,
        jobs by state, claims, updated every second. Needs the dashboard extra:
        pip install 'diskcache_oxide[dashboard]'. It has no login: it binds 127.0.0.1 unless
        --host says otherwise."""
        serve(target, host, port, allow_actions)
