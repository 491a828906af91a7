"""Exceptions and warnings raised by diskcache_oxide.

Every exception the package defines derives from :class:`CacheError`. The binding
(``diskcache_oxide._core``) imports these classes and raises them for engine errors
(see docs/decisions/D-008-binding-and-python-layer.md).
"""

from __future__ import annotations

__all__ = [
    "CacheError",
    "ClaimTimeout",
    "CorruptValueError",
    "DatabaseError",
    "DecodeError",
    "EmptyDirWarning",
    "FormatVersionError",
    "LayoutMismatchError",
    "NotACacheError",
    "ReadOnlyError",
    "Timeout",
    "UnexpectedReplyError",
    "UnknownFileWarning",
    "UnknownTypeError",
    "UnsafeValueError",
    "UnsupportedError",
    "UnsupportedTypeError",
    "ValueTooLargeError",
]


class CacheError(Exception):
    """Base class of every diskcache_oxide exception."""


class Timeout(CacheError):
    """The cache database stayed locked by another connection past the handle's timeout.

    Raised by calls made with ``retry=False`` (the default), as python-diskcache does. From
    ``expire``, ``evict``, ``clear`` and ``cull``, ``args[0]`` is how many entries were removed
    before the timeout (python-diskcache's ``Timeout(count)``), and ``args[1]`` says what to do.
    """

    def __str__(self) -> str:
        if len(self.args) == 2 and isinstance(self.args[0], int):
            return str(self.args[1])
        return super().__str__()


class DecodeError(CacheError):
    """A stored value (or key) could not be turned back into a Python object."""


class CorruptValueError(DecodeError):
    """Stored bytes failed their checksum or are not valid in the safe format."""


class UnsafeValueError(DecodeError):
    """The stored value is a pickle and the handle was opened with ``pickle=False``."""


class UnknownTypeError(DecodeError):
    """The stored value names a custom type this process has not registered."""


class UnsupportedTypeError(CacheError, TypeError):
    """The safe format cannot express an object of this type (and pickling is off)."""


class FormatVersionError(CacheError):
    """The directory was written by a newer format than this build reads."""


class NotACacheError(CacheError):
    """The directory holds something that is not a diskcache_oxide cache."""


class DatabaseError(CacheError):
    """SQLite failed for a reason other than a lock timeout (a full disk, damage, ...)."""


class ReadOnlyError(CacheError):
    """A write was attempted on a handle opened with ``read_only=True``.

    The directory was not touched. Open another handle without ``read_only=True`` to write
    (see docs/decisions/D-019-read-only-handles.md).
    """


class LayoutMismatchError(CacheError):
    """The directory holds another kind of store than the one being opened.

    A ``Cache`` opened on a ``FanoutCache`` root, a ``FanoutCache`` opened on a ``Cache``'s
    directory, or a ``FanoutCache`` opened with another shard count than the recorded one.
    Nothing on disk was changed (see docs/decisions/D-018-layout-records.md).
    """


class ValueTooLargeError(CacheError, ValueError):
    """A value (or another argument of a call) is larger than the store accepts: on Redis,
    more bytes in one argument than the server's ``proto-max-bulk-len``. Nothing was written;
    the call was not repeated (D-061)."""


class UnexpectedReplyError(CacheError):
    """A server answered a call with a reply that call never gets from Redis (a proxy or
    another service speaking RESP on that port, a damaged connection). The message names the
    call and shows a short, escaped excerpt of the reply; nothing was decoded from it, and a
    write may or may not have been applied (D-061)."""


class ClaimTimeout(CacheError, TimeoutError):
    """A claim could not be taken, or a computed value did not appear, within ``timeout``.

    Not to be confused with :class:`~diskcache_oxide.Timeout`, which means the database
    stayed locked.
    """


class UnsupportedError(CacheError, NotImplementedError):
    """A call or setting a directory has and Redis cannot hold (D-058); the message names the
    alternative."""


class UnknownFileWarning(UserWarning):
    """Issued by :meth:`Cache.check` for a file the cache does not know."""


class EmptyDirWarning(UserWarning):
    """Issued by :meth:`Cache.check` for an empty directory inside the cache."""


#: What a durable handle swallows (D-020): failures of the disk, the database or a stored
#: value. Bad arguments (TypeError, ValueError, UnsupportedTypeError) are not among them.
OPERATIONAL: tuple[type[BaseException], ...] = (
    Timeout,
    DatabaseError,
    DecodeError,
    ReadOnlyError,
    OSError,
)
