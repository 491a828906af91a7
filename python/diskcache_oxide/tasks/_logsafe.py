"""What the worker may write to its log (issue 29, D-063): a store URL without its password,
and text that came from the store (a task's name, a job's id, an exception's message) with
its control characters escaped, so that a job cannot forge a log line (a newline followed by
a fake ``... succeeded``) nor drive the terminal that shows the log (ESC, BEL).

The escaping is the command line's own (:func:`diskcache_oxide.cli._output.shown`), imported
from there so that the CLI, the dashboard and the worker escape alike; that module imports
neither click nor rich at its top, nor anything of the tasks package, so there is no cycle.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import unquote, unquote_plus, urlsplit

from .._open import PASSWORD_MASK as MASK
from .._open import is_password_pair, without_password
from .._shown import shown

__all__ = ["Redactor", "one_line", "secrets_of", "shown", "shown_url"]

#: How many characters of a task's error the worker's line keeps (the whole text is in the
#: job and its result record).
DETAIL_WIDTH = 200

#: The shortest password :class:`Redactor` looks for in free text.
SCRUB_MIN = 4


def shown_url(target: Any) -> str:
    """``target`` as the worker names it in its log: a URL with its password written as
    ``***`` (:func:`diskcache_oxide._open.without_password`) and its control characters
    escaped; a path as it is (escaped); a store object by its type."""
    if not isinstance(target, str):
        if hasattr(target, "directory"):
            return shown(target.directory)
        return f"<{type(target).__name__}>"
    if "://" not in target:
        return shown(target)
    return shown(without_password(target))


def secrets_of(target: Any) -> list[str]:
    """The passwords in a store URL, as written and as decoded (the longest first), so that
    :class:`Redactor` can take them out of any text (an error message that quotes the URL)."""
    if not isinstance(target, str) or "://" not in target:
        return []
    found: set[str] = set()
    try:
        parts = urlsplit(target)
        if parts.password:
            found.add(parts.password)
        query = parts.query
    except ValueError:
        rest = target.partition("://")[2]
        userinfo = rest.rpartition("@")[0]
        if ":" in userinfo:
            found.add(userinfo.partition(":")[2])
        query = rest.partition("?")[2]
    for pair in query.split("&"):
        if is_password_pair(pair):
            found.add(pair.partition("=")[2])
            found.add(unquote_plus(pair.partition("=")[2]))
    found |= {unquote(secret) for secret in found}
    # A password of a few characters would mask every such run of letters or digits in
    # every line (job ids too); the URL itself is masked by shown_url whatever its length.
    return sorted((s for s in found if len(s) >= SCRUB_MIN), key=len, reverse=True)


def one_line(text: object, width: int = DETAIL_WIDTH) -> str:
    """``text`` escaped (:func:`shown`: a newline becomes ``\\n``, ESC ``\\x1b``) and cut to
    ``width`` characters with an ellipsis: the detail of a task's log line."""
    escaped = shown(text)
    return escaped if len(escaped) <= width else escaped[: width - 1] + "…"


class Redactor(logging.Filter):
    """A filter of the worker's logger that replaces each of ``secrets`` with ``***`` in a
    record's message and exception text: the last guard, should an error quote the URL."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def scrub(self, text: str) -> str:
        """``text`` without the secrets."""
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record in place (its message formatted now); always keep it."""
        if not self.secrets:
            return True
        message = record.getMessage()
        record.msg, record.args = self.scrub(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.scrub(record.exc_text)
        return True
