"""What :func:`~diskcache_oxide.migrate` did: :class:`MigrationReport`, the entries and
settings it left behind (:class:`SkippedEntry`, :class:`SkippedSetting`), the error it raises
when it refuses to run (:class:`MigrationError`), and the text helpers that keep every line
of a report short whatever a hostile source holds."""

from __future__ import annotations

import reprlib
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import CacheError

#: What every migration carries exactly, whichever write path it takes.
CARRIED_EXACTLY = ("key", "value", "tag", "insertion order")


#: How much of the skipped entries and settings :meth:`MigrationReport.summary` lists, and
#: how long a reason, a key or a setting may be there (a reason is cut when it is recorded).
_SHOWN = 50
_REASON_LIMIT = 500
_KEY_LIMIT = 80
_WHERE_LIMIT = 40


class MigrationError(CacheError, ValueError):
    """:func:`migrate` refused to run: the destination is (or resolves to) the source or a
    path inside it, or the source cannot be read as it stands (its database is damaged, or
    its database or log claims far more bytes than it has on disk). Nothing was written.

    A ``ValueError`` too, which is what a destination inside the source raised before.
    """


def _said(error: BaseException) -> str:
    """``str(error)``, which cannot fail: an error about a malformed object may quote it."""
    try:
        return _cut(str(error), 200)
    except Exception:
        return "(its message cannot be shown)"


def _cut(text: str, limit: int = _REASON_LIMIT) -> str:
    """``text``, or its first ``limit`` characters and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def _brief(value: Any, limit: int = _KEY_LIMIT) -> str:
    """A repr of ``value`` for a person, at most about ``limit`` characters, that cannot fail:
    a key from a hostile source may be huge, nested deep, or an object whose repr raises."""
    shorter = reprlib.Repr()
    shorter.maxlevel = 3
    shorter.maxstring = shorter.maxother = shorter.maxlong = limit
    try:
        text = shorter.repr(value)
    except Exception as error:  # reprlib guards most objects; this is for the rest
        text = f"<a {type(value).__name__} whose repr fails: {type(error).__name__}>"
    return _cut(text, limit)


@dataclass(frozen=True)
class SkippedEntry:
    """An entry of the source that was not carried over, and why.

    ``key`` is the decoded key, or the key's stored bytes when the key itself could not be
    decoded (a refused or malformed pickle, text that is not UTF-8). ``cache`` is where it
    was: ``''`` for a plain cache, the shard (``'000'``) or the named cache
    (``'index/users'``) of a FanoutCache. ``rowid`` is its row in that source database.
    A reason longer than 500 characters is cut, saying how much was left out.
    """

    key: Any
    reason: str
    cache: str = ""
    rowid: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", _cut(self.reason))


@dataclass(frozen=True)
class SkippedSetting:
    """A row of the source's Settings table that the destination does not carry, and why.

    A name that is not valid UTF-8 is given with its bad bytes escaped (``'a\\xffb'``); a
    reason longer than 500 characters is cut.
    """

    name: str
    value: Any
    reason: str
    cache: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", _cut(self.reason))


@dataclass
class MigrationReport:
    """What :func:`migrate` did.

    :ivar source: the python-diskcache directory read
    :ivar destination: the diskcache_oxide directory written
    :ivar layout: ``'cache'`` or ``'fanout'``
    :ivar shards: the shard count of a FanoutCache (None for a plain cache)
    :ivar total: entries found in the source, over every shard and named cache
    :ivar converted: entries written to the destination
    :ivar skipped: the entries not written, each with its reason
    :ivar bytes: payload bytes of the converted values as the source held them
    :ivar pickled: converted values stored as pickles (only with ``pickle=True``)
    :ivar streamed: converted values over 32 MiB, streamed from their value files instead of
        loaded; their store and access times are the copy's (``approximated`` says so)
    :ivar settings: the destination's settings at the end (of the root, or of shard 000
        with ``size_limit`` for the whole FanoutCache)
    :ivar settings_skipped: source settings that were not carried
    :ivar carried: the fields carried exactly for every converted entry
    :ivar approximated: the fields carried only approximately, with how
    :ivar caches: the relative paths of the cache directories migrated
    :ivar seconds: how long the migration took
    """

    source: str
    destination: str
    layout: Literal["cache", "fanout"]
    shards: int | None = None
    total: int = 0
    converted: int = 0
    skipped: list[SkippedEntry] = field(default_factory=list)
    bytes: int = 0
    pickled: int = 0
    streamed: int = 0
    settings: dict[str, Any] = field(default_factory=dict)
    settings_skipped: list[SkippedSetting] = field(default_factory=list)
    carried: tuple[str, ...] = CARRIED_EXACTLY
    approximated: dict[str, str] = field(default_factory=dict)
    caches: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def entries_per_second(self) -> float:
        """Source entries processed per second of the whole migration."""
        return self.total / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        """The report as a few lines of text: the counts, then the first 50 skipped entries
        and the first 50 settings not carried, each with its reason, and how many more there
        are (``skipped`` and ``settings_skipped`` hold them all). Keys, values and reasons
        are cut short, so a hostile source cannot make it print without end."""
        shape = "Cache" if self.layout == "cache" else f"FanoutCache ({self.shards} shards)"
        lines = [
            f"migrated {self.source} -> {self.destination} ({shape})",
            f"converted {self.converted} of {self.total} entries, {self.bytes} bytes of values, "
            f"in {self.seconds:.2f} s",
        ]
        if self.pickled:
            lines.append(f"{self.pickled} values stored as pickles (open with pickle=True)")
        if self.streamed:
            lines.append(f"{self.streamed} values over 32 MiB streamed from their value files")
        lines.append(f"skipped {len(self.skipped)} entries" + (":" if self.skipped else ""))
        for entry in self.skipped[:_SHOWN]:
            where = f" [{_cut(entry.cache, _WHERE_LIMIT)}]" if entry.cache else ""
            lines.append(f"  {_brief(entry.key)}{where}: {_cut(entry.reason)}")
        if len(self.skipped) > _SHOWN:
            lines.append(f"  ... and {len(self.skipped) - _SHOWN} more (listed in report.skipped)")
        if self.settings_skipped:
            lines.append("settings not carried:")
        for setting in self.settings_skipped[:_SHOWN]:
            where = f" [{_cut(setting.cache, _WHERE_LIMIT)}]" if setting.cache else ""
            name, value = _cut(setting.name, 60), _brief(setting.value, 60)
            lines.append(f"  {name}={value}{where}: {_cut(setting.reason)}")
        if len(self.settings_skipped) > _SHOWN:
            more = len(self.settings_skipped) - _SHOWN
            lines.append(f"  ... and {more} more (listed in report.settings_skipped)")
        if self.approximated:
            lines.append("carried approximately:")
        for name, how in self.approximated.items():
            lines.append(f"  {name}: {how}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


# Named as before the package was split, in tracebacks, reprs and pickles: the package's
# ``diskcache_oxide.migrate.X``, which loads this module when such a name is read.
for _public in (MigrationError, MigrationReport, SkippedEntry, SkippedSetting):
    _public.__module__ = __name__.rpartition(".")[0]
del _public
