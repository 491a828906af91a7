"""The commands on a cache's queues, leased jobs and claims: ``queue``, ``jobs`` and
``claims``, on a directory or a Redis namespace alike (D-062; click is imported inside
:func:`add_commands`, see the package's docstring)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from .. import admin
from ._options import KEY_HELP, json_option, key_options, target_argument
from ._output import ERROR_WIDTH, Failure, Out, age, cut, describe, parse_key, shown

if TYPE_CHECKING:
    import click

__all__ = ["STATES", "add_commands"]

#: The job states a user may name, with the words the issue and rq use as aliases.
STATES: dict[str, admin.JobState] = {
    "ready": "ready",
    "queued": "ready",
    "scheduled": "scheduled",
    "delayed": "scheduled",
    "leased": "leased",
    "dead": "dead",
}

INT_QUEUE = "-"


# ---- queue DIR PREFIX -----------------------------------------------------------------------


def _prefix(text: str) -> str | None:
    return None if text == INT_QUEUE else text


def queue_ls(out: Out, target: str, prefix: str | None, limit: int) -> None:
    with admin.open_cache(target) as cache:
        items = admin.queue_items(cache, prefix, limit=limit or 2**62)
    if out.as_json:
        out.json([{"key": describe(i.key), "value": describe(i.value)} for i in items])
        return
    out.table(None, ["key", "value"], ((repr(i.key), repr(i.value)) for i in items), empty="")


def queue_peek(out: Out, target: str, prefix: str | None) -> None:
    with admin.open_cache(target) as cache:
        items = admin.queue_items(cache, prefix, limit=1)
    if not items:
        raise Failure(f"the queue {_name(prefix)} is empty")
    item = items[0]
    if out.as_json:
        out.json({"key": describe(item.key), "value": describe(item.value)})
    else:
        # The tab is ours, between the two (a repr holds none): only it is kept raw.
        out.line(f"{shown(repr(item.key))}\t{shown(repr(item.value))}", keep="\t")


def queue_len(out: Out, target: str, prefix: str | None) -> None:
    with admin.open_cache(target) as cache:
        row = admin.queue(cache, prefix)
    if out.as_json:
        out.json(asdict(row))
    else:
        out.line(str(row.depth))


def _name(prefix: str | None) -> str:
    return "of int keys" if prefix is None else repr(prefix)


# ---- jobs DIR NAME --------------------------------------------------------------------------


def _known_queue(cache: admin.AnyCache, target: str, name: str) -> None:
    names = admin.job_queues(cache)
    if name not in names:
        listed = ", ".join(repr(n) for n in names) or "none"
        where = admin.location(target)
        raise Failure(f"no job queue {name!r} in {where} (its job queues: {listed})")


def _job_in(cache: admin.AnyCache, target: str, name: str, job_id: int) -> admin.JobRow:
    row = admin.job(cache, job_id)
    if row is None:
        raise Failure(f"no job {job_id} in {admin.location(target)}")
    if row.queue != name:
        raise Failure(f"job {job_id} is in the job queue {row.queue!r}, not {name!r}")
    return row


def jobs_ls(
    out: Out,
    target: str,
    name: str,
    state: admin.JobState | None,
    limit: int,
    after: int,
) -> None:
    with admin.open_cache(target) as cache:
        _known_queue(cache, target, name)
        rows = admin.jobs(cache, name, state, limit=limit, after=after)
    if out.as_json:
        out.json([asdict(row) for row in rows])
        return
    out.table(
        None,
        ["id", "state", "attempts", "age", "due in", "lease age", "error", "value"],
        (
            (
                r.id,
                r.state,
                f"{r.attempts}/{r.max_attempts or '∞'}",
                age(r.age),
                _due(r),
                age(r.lease_age),
                # Its start: a worker that passes a job over writes a long reason
                # (D-047), which `jobs show` prints in full.
                cut(r.error or "", ERROR_WIDTH),
                r.value,
            )
            for r in rows
        ),
        numeric=["id", "attempts", "age", "due in", "lease age"],
        empty="no jobs",
    )


def _due(row: admin.JobRow) -> str:
    # A ready job may run now; a scheduled one once due; a leased one's lease ends then
    # (negative: it ran out, and the job goes back at the next take or sweep).
    if row.state == "ready":
        return "now"
    return age(row.due_in)


def jobs_show(out: Out, target: str, name: str, job_id: int) -> None:
    with admin.open_cache(target) as cache:
        row = _job_in(cache, target, name, job_id)
    if out.as_json:
        out.json(asdict(row))
        return
    fields = asdict(row)
    for field in ("age", "due_in", "lease_age"):
        fields[field] = age(fields[field])
    out.table(None, ["field", "value"], fields.items())


def jobs_retry(
    out: Out, target: str, name: str, ids: tuple[int, ...], every: bool, delay: float
) -> None:
    if bool(ids) == every:
        raise Failure("give the ids of the dead jobs to retry, or --all", code=2)
    failed = []
    with admin.open_cache(target, write=True) as cache:
        _known_queue(cache, target, name)
        if every:
            ids = tuple(r.id for r in admin.jobs(cache, name, "dead", limit=2**62))
        for job_id in ids:
            row = _job_in(cache, target, name, job_id)
            if admin.retry_job(cache, job_id, delay=delay):
                out.line(f"job {job_id} is back in {name!r}")
            else:
                failed.append(f"job {job_id} is {row.state}, not dead: not retried")
    if every and not ids:
        out.line(f"no dead jobs in {name!r}")
    if failed:
        raise Failure("; ".join(failed))


def jobs_bury(out: Out, target: str, name: str, ids: tuple[int, ...], reason: str) -> None:
    failed = []
    with admin.open_cache(target, write=True) as cache:
        _known_queue(cache, target, name)
        for job_id in ids:
            _job_in(cache, target, name, job_id)
            if admin.bury_job(cache, job_id, reason):
                out.line(f"job {job_id} is dead: {reason}")
            else:
                failed.append(f"job {job_id} is already dead")
    if failed:
        raise Failure("; ".join(failed))


def jobs_purge(out: Out, target: str, name: str, yes: bool) -> None:
    import click

    with admin.open_cache(target, write=True) as cache:
        _known_queue(cache, target, name)
        dead = admin.job_counts(cache, name).dead
        if dead and not yes:
            question = shown(f"delete the {dead} dead jobs of {name!r}?")
            click.confirm(question, abort=True, err=True)
        purged = admin.purge_dead(cache, name)
    if out.as_json:
        out.json({"queue": name, "purged": purged})
    else:
        out.line(f"deleted {purged} dead jobs of {name!r}")


# ---- claims DIR -----------------------------------------------------------------------------


def claims_ls(out: Out, target: str, namespace: str | None) -> None:
    with admin.open_cache(target) as cache:
        rows = admin.claims(cache, namespace)
    if out.as_json:
        out.json([asdict(row) for row in rows])
        return
    out.table(
        None,
        ["namespace", "key", "holder", "held for", "lease left", "token"],
        (
            (r.namespace, r.key, f"{r.host}:{r.pid}", age(r.held_for), age(r.lease_left), r.token)
            for r in rows
        ),
        numeric=["held for", "lease left"],
        empty="no live claims",
    )


def claims_release(out: Out, target: str, key: Any, namespace: str) -> None:
    with admin.open_cache(target, write=True) as cache:
        released = admin.release_claim(cache, key, namespace)
    if not released:
        raise Failure(f"no live claim on {key!r} in the namespace {namespace!r}")
    out.line(f"released the claim on {key!r} ({namespace!r}); its holder's next renewal fails")


# ---- the click declarations -----------------------------------------------------------------


def add_commands(group: click.Group) -> None:
    import click

    directory_arg = target_argument()

    @group.group("queue")
    @directory_arg
    @click.argument("prefix")
    @click.pass_context
    def queue_group(ctx: click.Context, target: str, prefix: str) -> None:
        """A queue on the cache's keys (push/pull): PREFIX is the prefix it was pushed with,
        or - for the queue of int keys (pushed without a prefix)."""
        ctx.obj = (target, _prefix(prefix))

    @queue_group.command("ls")
    @click.option("--limit", type=click.IntRange(min=0), default=100, show_default=True)
    @json_option
    @click.pass_obj
    def queue_ls_command(obj: tuple[str, str | None], limit: int, as_json: bool) -> None:
        """The queue's items, front first, without pulling them (0: all)."""
        queue_ls(Out(as_json), *obj, limit)

    @queue_group.command("peek")
    @json_option
    @click.pass_obj
    def queue_peek_command(obj: tuple[str, str | None], as_json: bool) -> None:
        """The item at the front, without pulling it; exits 1 if the queue is empty."""
        queue_peek(Out(as_json), *obj)

    @queue_group.command("len")
    @json_option
    @click.pass_obj
    def queue_len_command(obj: tuple[str, str | None], as_json: bool) -> None:
        """How many items the queue holds (--json: and its oldest item's age)."""
        queue_len(Out(as_json), *obj)

    @group.group("jobs")
    @directory_arg
    @click.argument("name")
    @click.pass_context
    def jobs_group(ctx: click.Context, target: str, name: str) -> None:
        """The leased jobs (JobQueue) of the job queue NAME: ready (queued), scheduled
        (delayed), leased, and dead letters."""
        ctx.obj = (target, name)

    @jobs_group.command("ls")
    @click.option(
        "--state",
        type=click.Choice(list(STATES)),
        help="Only jobs in this state (queued = ready, delayed = scheduled).",
    )
    @click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True)
    @click.option("--after", type=click.IntRange(min=0), default=0, help="Ids after this one.")
    @json_option
    @click.pass_obj
    def jobs_ls_command(
        obj: tuple[str, str], state: str | None, limit: int, after: int, as_json: bool
    ) -> None:
        """The jobs, by id: state, attempts, age, when due (a leased job: when its lease
        ends), lease age, last error, value."""
        jobs_ls(Out(as_json), *obj, None if state is None else STATES[state], limit, after)

    @jobs_group.command("show")
    @click.argument("job_id", metavar="ID", type=int)
    @json_option
    @click.pass_obj
    def jobs_show_command(obj: tuple[str, str], job_id: int, as_json: bool) -> None:
        """One job, its value in full; exits 1 if there is none."""
        jobs_show(Out(as_json), *obj, job_id)

    @jobs_group.command("retry")
    @click.argument("ids", metavar="[ID]...", type=int, nargs=-1)
    @click.option("--all", "every", is_flag=True, help="Every dead job of the queue.")
    @click.option("--delay", type=click.FloatRange(min=0), default=0.0, help="Seconds.")
    @click.pass_obj
    def jobs_retry_command(
        obj: tuple[str, str], ids: tuple[int, ...], every: bool, delay: float
    ) -> None:
        """Put dead jobs back in the queue, their attempts reset (writes)."""
        jobs_retry(Out(), *obj, ids, every, delay)

    @jobs_group.command("bury")
    @click.argument("ids", metavar="ID...", type=int, nargs=-1, required=True)
    @click.option("--reason", default="buried by an operator", show_default=True)
    @click.pass_obj
    def jobs_bury_command(obj: tuple[str, str], ids: tuple[int, ...], reason: str) -> None:
        """Send ready, scheduled or leased jobs to the dead letters (writes); a worker
        holding one loses its lease."""
        jobs_bury(Out(), *obj, ids, reason)

    @jobs_group.command("purge")
    @click.option("--yes", "-y", is_flag=True, help="Do not ask first.")
    @json_option
    @click.pass_obj
    def jobs_purge_command(obj: tuple[str, str], yes: bool, as_json: bool) -> None:
        """Delete the queue's dead jobs (writes; asks first unless --yes)."""
        jobs_purge(Out(as_json), *obj, yes)

    @group.group("claims")
    @directory_arg
    @click.pass_context
    def claims_group(ctx: click.Context, target: str) -> None:
        """The live claims (compute-once, Claims): key, holder and lease left."""
        ctx.obj = target

    @claims_group.command("ls")
    @click.option("--namespace", help="Only this namespace (default: all).")
    @json_option
    @click.pass_obj
    def claims_ls_command(obj: str, namespace: str | None, as_json: bool) -> None:
        """The live claims: namespace, key, holder (host:pid), held for, lease left."""
        claims_ls(Out(as_json), obj, namespace)

    @claims_group.command("release", epilog=KEY_HELP)
    @click.argument("key")
    @click.option("--namespace", default="default", show_default=True)
    @key_options
    @click.pass_obj
    def claims_release_command(
        obj: str, key: str, namespace: str, as_int: bool, literal: bool
    ) -> None:
        """Break the claim on KEY whoever holds it (writes); exits 1 if there is none."""
        claims_release(Out(), obj, parse_key(key, as_int=as_int, literal=literal), namespace)
