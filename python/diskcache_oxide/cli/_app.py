"""The ``diskcache-oxide`` group, its error handling, and the commands on a cache's entries
(``info``, ``keys``, ``get``, ``check``, ``vacuum``).

Each command is a plain function here (``info(out, target)``, ...) that does the work
through :mod:`diskcache_oxide.admin`; :func:`build_group` declares the click commands that
call them. click is imported inside it (see the package's docstring). A TARGET is a cache
directory or a Redis URL (D-062): the commands read both through admin, and what only a
directory has prints as absent (``-``) or, for ``check`` and ``vacuum``, says it does not
apply.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import TYPE_CHECKING, Any

from .. import __version__, admin
from .._store import store_of
from ._options import KEY_HELP, json_option, key_options, target_argument
from ._output import Failure, Out, age, describe, jsonable, parse_key, shown, size

if TYPE_CHECKING:
    import click

__all__ = ["build_group", "check", "get", "info", "keys", "vacuum"]


# ---- the commands' work ---------------------------------------------------------------------


#: How a figure only a directory has is printed on Redis.
ABSENT = "-"


def info(out: Out, target: str) -> None:
    with admin.open_cache(target) as cache:
        data = admin.info(cache)
    if out.as_json:
        out.json(data)
        return
    redis = data["backend"] == "redis"
    if redis:
        out.line(f"redis      {data['location']}")
        out.line(f"namespace  {data['namespace']}")
    else:
        out.line(f"directory  {data['directory']}")
    volume = ABSENT if data["volume"] is None else size(data["volume"])
    out.line(
        f"entries    {data['count']}    volume {volume}    "
        f"hits {data['hits']}    misses {data['misses']}    live claims {data['claims']}"
    )
    out.line()
    out.table("settings", ["setting", "value"], sorted(data["settings"].items()))
    if redis:
        out.line()
        out.table(
            "only in a directory (they do not apply on Redis)",
            ["setting", "on Redis"],
            sorted(data["not_applicable"].items()),
        )
    out.line()
    out.table(
        "queues",
        ["prefix", "depth", "oldest"],
        (
            (
                _prefix_text(row["prefix"]),
                row["depth"],
                ABSENT if redis and row["oldest_age"] is None else age(row["oldest_age"]),
            )
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
    if redis and not data["count"] and not data["queues"] and not data["claims"]:
        out.line()
        out.line(
            f"the namespace {data['namespace']!r} holds nothing on this server: if you expected "
            "data, check the URL's ?namespace="
        )


def _prefix_text(prefix: str | None) -> str:
    return "- (int keys)" if prefix is None else prefix


def keys(out: Out, target: str, prefix: str | None, limit: int) -> None:
    with admin.open_cache(target) as cache:
        found = admin.keys(cache, prefix=prefix, limit=limit or None)
    if out.as_json:
        out.json([describe(key) for key in found])
        return
    for key in found:
        out.line(repr(key))


def get(out: Out, target: str, key: Any) -> None:
    with admin.open_cache(target) as cache:
        found = admin.entry(cache, key)
    if found is None:
        raise Failure(f"no key {key!r} in {admin.location(target)}")
    value, expire_time, tag = found
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
    admin.not_applicable(directory, "check")
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
    admin.not_applicable(directory, "vacuum")
    with admin.open_cache(directory, write=True) as cache:
        look = store_of(cache).inspector()
        before = look.volume() or 0
        freed = admin.vacuum(cache)
        after = look.volume() or 0
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


def build_group() -> click.Group:
    import click

    from . import _queues, _tools

    target_arg = target_argument()

    class Error(click.ClickException):
        """One line on stderr ("Error: ..."), then exit 1."""

    class UsageError(click.UsageError):
        """A bad argument the parser could not see (a KEY that is not an int): exit 2."""

    class Group(click.Group):
        """Turns the failures a user should read into one line on stderr and an exit code:
        no traceback for a missing or foreign directory, a locked or damaged database, a
        Redis server that does not answer."""

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
            except admin.errors() as error:
                # A path or a name in the message may come from the directory. A Redis
                # error (a server down, a timeout) is one line too.
                raise Error(shown(str(error) or type(error).__name__)) from None

    @click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(__version__, prog_name="diskcache-oxide")
    def group() -> None:
        """Look inside a diskcache_oxide directory or Redis namespace: its entries, queues,
        leased jobs and claims; check, repair and vacuum a directory; migrate a
        python-diskcache directory; copy a directory into Redis; serve a live dashboard; run
        the tasks' workers (worker DIR_OR_URL MODULE...).

        TARGET is a cache directory or a Redis URL: redis://HOST:PORT/DB?namespace=NS
        (rediss:// for TLS, unix:///path/redis.sock?db=0&namespace=NS, and ?cluster=1 for a
        Redis Cluster; the namespace defaults to "default"). What only a directory has (its
        volume on disk, its settings, check, vacuum) prints as - or says it does not apply.

        Every command only reads unless its name says it changes something: jobs
        retry/bury/purge, claims release, check --fix, vacuum, migrate, copy, worker. A reading
        command opens a directory read-only and changes none of its data; but while another
        process has the cache open, SQLite records the reader in cache.db-shm (the index
        of its write-ahead log), and may create that file. On Redis a reading command sends
        only read commands (it counts no hit or miss). Text from the cache is printed with
        its control characters escaped as a Python repr writes them; --json prints strict
        JSON. Exit status: 0 done, 1 failed or not found (or a check found problems), 2 bad
        usage, 3 copy skipped entries or jobs (worker's own are in its --help).
        """

    @group.command("info")
    @target_arg
    @json_option
    def info_command(target: str, as_json: bool) -> None:
        """Settings, counts, volume, and each queue's depth and oldest item's age (on Redis:
        the namespace, the server's memory settings, and - for what only a directory has)."""
        info(Out(as_json), target)

    @group.command("keys")
    @target_arg
    @click.option("--prefix", help="Only the str keys that start with this.")
    @click.option(
        "--limit", type=click.IntRange(min=0), default=100, show_default=True, help="0: all."
    )
    @json_option
    def keys_command(target: str, prefix: str | None, limit: int, as_json: bool) -> None:
        """The cache's keys, one per line, as Python literals (what `get --literal` takes).

        A key this process cannot decode (a pickle, an unregistered type) is listed as
        <unreadable key: ERROR>, and the keys after it follow.
        """
        keys(Out(as_json), target, prefix, limit)

    @group.command("get", epilog=KEY_HELP)
    @target_arg
    @click.argument("key")
    @key_options
    @json_option
    def get_command(target: str, key: str, as_int: bool, literal: bool, as_json: bool) -> None:
        """Print the value stored at KEY (a str as it is, anything else as its repr).

        Control characters but newlines and tabs are escaped, as everywhere (--json: the
        exact value). Exits 1 if there is no such key. Pickled values are never loaded.
        """
        get(Out(as_json), target, parse_key(key, as_int=as_int, literal=literal))

    @group.command("check")
    @target_arg
    @click.option("--fix", is_flag=True, help="Repair what is found (writes).")
    @json_option
    def check_command(target: str, fix: bool, as_json: bool) -> None:
        """Check the database and value files; exits 1 if problems are found (or remain
        after --fix). A directory only: on Redis it says it does not apply."""
        check(Out(as_json), target, fix)

    @group.command("vacuum")
    @target_arg
    @json_option
    def vacuum_command(target: str, as_json: bool) -> None:
        """Rebuild the database without its free pages (writes); prints the bytes freed. A
        directory only: on Redis it says it does not apply."""
        vacuum(Out(as_json), target)

    _queues.add_commands(group)
    _tools.add_commands(group)
    from ..tasks._worker import add_command as add_worker_command  # issue 22, D-063

    add_worker_command(group)
    return group
