"""The ``diskcache-oxide`` group, its error handling, and the commands on a cache's entries
(``info``, ``keys``, ``get``, ``check``, ``vacuum``).

Each command is a plain function here (``info(out, directory)``, ...) that does the work
through :mod:`diskcache_oxide.admin`; :func:`build_group` declares the click commands that
call them. click is imported inside it (see the package's docstring).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from .. import __version__, admin
from ..errors import CacheError
from ._output import Failure, Out, age, describe, jsonable, parse_key, shown, size

if TYPE_CHECKING:
    import click

__all__ = ["build_group", "check", "get", "info", "keys", "vacuum"]

F = TypeVar("F", bound=Callable[..., Any])

KEY_HELP = (
    "KEY is a str as typed. --int reads it as an int; --literal as a Python literal, "
    "such as ('user', 1), b'raw', 1.5 or None: the form `keys` prints. (--json is the "
    "output format, as everywhere.)"
)


# ---- the commands' work ---------------------------------------------------------------------


def info(out: Out, directory: str) -> None:
    with admin.open_cache(directory) as cache:
        data = admin.info(cache)
    if out.as_json:
        out.json(data)
        return
    out.line(f"directory  {data['directory']}")
    out.line(
        f"entries    {data['count']}    volume {size(data['volume'])}    "
        f"hits {data['hits']}    misses {data['misses']}    live claims {data['claims']}"
    )
    out.line()
    out.table("settings", ["setting", "value"], sorted(data["settings"].items()))
    out.line()
    out.table(
        "queues",
        ["prefix", "depth", "oldest"],
        (
            (_prefix_text(row["prefix"]), row["depth"], age(row["oldest_age"]))
            for row in data["queues"]
        ),
        numeric=["depth", "oldest"],
    )
    out.line()
    out.table(
        "job queues",
        ["name", "ready", "scheduled", "leased", "dead"],
        (
            (name, c["ready"], c["scheduled"], c["leased"], c["dead"])
            for name, c in data["jobs"].items()
        ),
        numeric=["ready", "scheduled", "leased", "dead"],
    )


def _prefix_text(prefix: str | None) -> str:
    return "- (int keys)" if prefix is None else prefix


def keys(out: Out, directory: str, prefix: str | None, limit: int) -> None:
    with admin.open_cache(directory) as cache:
        found = admin.keys(cache, prefix=prefix, limit=limit or None)
    if out.as_json:
        out.json([describe(key) for key in found])
        return
    for key in found:
        out.line(repr(key))


def get(out: Out, directory: str, key: Any) -> None:
    missing = object()
    with admin.open_cache(directory) as cache:
        value, expire_time, tag = cache.get(key, default=missing, expire_time=True, tag=True)
    if value is missing:
        raise Failure(f"no key {key!r} in {directory}")
    if out.as_json:
        out.json(
            {
                "key": describe(key),
                "value": describe(value),
                "expire_time": expire_time,
                "tag": jsonable(tag),
            }
        )
    elif isinstance(value, str):
        # The value is the whole output, so its lines and tabs are kept; every other
        # control character is escaped (see shown()).
        out.line(value, keep="\n\t")
    else:
        out.line(repr(value))


def check(out: Out, directory: str, fix: bool) -> None:
    with admin.open_cache(directory, write=fix) as cache:
        found = cache.check(fix=fix)
        remaining = cache.check() if fix and found else found

    def rows(messages: list[warnings.WarningMessage]) -> list[dict[str, str]]:
        return [{"kind": m.category.__name__, "message": str(m.message)} for m in messages]

    if out.as_json:
        out.json(
            {
                "directory": directory,
                "ok": not remaining,
                "problems": rows(found),
                "fixed": fix and bool(found) and not remaining,
                "remaining": rows(remaining),
            }
        )
    elif not found:
        out.line(f"{directory}: no problems found")
    else:
        out.table("problems", ["kind", "message"], ((r["kind"], r["message"]) for r in rows(found)))
        if fix:
            left = len(remaining)
            out.line(f"fixed {len(found) - left} of {len(found)}; {left} remain")
        else:
            out.line(f"{len(found)} problems; run with --fix to repair")
    if remaining:
        raise SystemExit(1)


def vacuum(out: Out, directory: str) -> None:
    with admin.open_cache(directory, write=True) as cache:
        before = cache.volume()
        freed = admin.vacuum(cache)
        after = cache.volume()
    if out.as_json:
        out.json({"directory": directory, "before": before, "after": after, "freed": freed})
    else:
        out.line(f"vacuumed {directory}: {size(before)} -> {size(after)}, {size(freed)} freed")


# ---- the click declarations -----------------------------------------------------------------


def _silence_stdout() -> None:
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (click's CliRunner): nothing to do
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def json_option(func: F) -> F:
    import click

    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(
        func
    )


def key_options(func: F) -> F:
    import click

    func = click.option("--literal", is_flag=True, help="KEY is a Python literal.")(func)
    return click.option("--int", "as_int", is_flag=True, help="KEY is an int.")(func)


def build_group() -> click.Group:
    import click

    from . import _queues, _tools

    class Error(click.ClickException):
        """One line on stderr ("Error: ..."), then exit 1."""

    class UsageError(click.UsageError):
        """A bad argument the parser could not see (a KEY that is not an int): exit 2."""

    class Group(click.Group):
        """Turns the failures a user should read into one line on stderr and an exit code:
        no traceback for a missing or foreign directory, a locked or damaged database."""

        def invoke(self, ctx: click.Context) -> Any:
            try:
                return super().invoke(ctx)
            except BrokenPipeError:
                # The reader went away (`| head`): stop quietly with 1, as rich does, and
                # point stdout at /dev/null so that the flush at exit fails no more.
                _silence_stdout()
                raise SystemExit(1) from None
            except Failure as failure:
                if failure.code == 2:
                    raise UsageError(failure.message) from None
                raise Error(failure.message) from None
            except (CacheError, OSError) as error:
                # A path or a name in the message may come from the directory.
                raise Error(shown(str(error) or type(error).__name__)) from None

    @click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name="diskcache-oxide")
    def group() -> None:
        """Look inside a diskcache_oxide directory: its entries, queues, leased jobs and
        claims; check, repair and vacuum it; migrate a python-diskcache directory; serve a
        live dashboard.

        Every command only reads unless its name says it changes something: jobs
        retry/bury/purge, claims release, check --fix, vacuum, migrate. A reading command
        opens the directory read-only and changes none of its data; but while another
        process has the cache open, SQLite records the reader in cache.db-shm (the index
        of its write-ahead log), and may create that file. Text from the directory is
        printed with its control characters escaped as a Python repr writes them; --json
        prints strict JSON. Exit status: 0 done, 1 failed or not found (or a check found
        problems), 2 bad usage.
        """

    @group.command("info")
    @click.argument("directory")
    @json_option
    def info_command(directory: str, as_json: bool) -> None:
        """Settings, counts, volume, and each queue's depth and oldest item's age."""
        info(Out(as_json), directory)

    @group.command("keys")
    @click.argument("directory")
    @click.option("--prefix", help="Only the str keys that start with this.")
    @click.option(
        "--limit", type=click.IntRange(min=0), default=100, show_default=True, help="0: all."
    )
    @json_option
    def keys_command(directory: str, prefix: str | None, limit: int, as_json: bool) -> None:
        """The cache's keys, one per line, as Python literals (what `get --literal` takes).

        A key this process cannot decode (a pickle, an unregistered type) is listed as
        <unreadable key: ERROR>, and the keys after it follow.
        """
        keys(Out(as_json), directory, prefix, limit)

    @group.command("get", epilog=KEY_HELP)
    @click.argument("directory")
    @click.argument("key")
    @key_options
    @json_option
    def get_command(directory: str, key: str, as_int: bool, literal: bool, as_json: bool) -> None:
        """Print the value stored at KEY (a str as it is, anything else as its repr).

        Control characters but newlines and tabs are escaped, as everywhere (--json: the
        exact value). Exits 1 if there is no such key. Pickled values are never loaded.
        """
        get(Out(as_json), directory, parse_key(key, as_int=as_int, literal=literal))

    @group.command("check")
    @click.argument("directory")
    @click.option("--fix", is_flag=True, help="Repair what is found (writes).")
    @json_option
    def check_command(directory: str, fix: bool, as_json: bool) -> None:
        """Check the database and value files; exits 1 if problems are found (or remain
        after --fix)."""
        check(Out(as_json), directory, fix)

    @group.command("vacuum")
    @click.argument("directory")
    @json_option
    def vacuum_command(directory: str, as_json: bool) -> None:
        """Rebuild the database without its free pages (writes); prints the bytes freed."""
        vacuum(Out(as_json), directory)

    _queues.add_commands(group)
    _tools.add_commands(group)
    from ..tasks._worker import add_command as add_worker_command  # issue 22, D-063

    add_worker_command(group)
    return group
