"""What makes a write safe to repeat (D-061), and what lets a script's error name its key: the
Lua wrappers a link (``_io``) puts around each script's source when it registers it, and the
request tokens they read.

:func:`once` wraps a write script: its last ``ARGV`` is a request token,
``<session>:<sequence>``, and the script's reply is kept under ``<prefix>o:<session>`` for
:data:`REPLAY_MS`, so the same token sent again returns the kept reply and writes nothing. A
link takes one session (``_Sessions``) per concurrent caller, so each keeps only its last
reply, and replaces a reply longer than :data:`KEEP_LIMIT` (``_reply_size``) by a marker once
it has arrived. :func:`guard` wraps every script so that a command's error reply names the key
it was about; ``_KEY_IN_ERROR`` reads that back, and ``_errors`` uses it to name the key.

Its own module, below the links and the errors, which both read what it defines (the errors
parse the wrappers' error replies); it needs neither.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

from ._replies import _array

__all__ = ["KEEP_LIMIT", "REPLAY_MS", "guard", "once"]


#: How long (ms) a write's reply is kept for a repeat of the same request token: longer than any
#: retry window (this link's, redis-py's backoff, a cluster's failover); the key is one per
#: concurrent caller and holds only its last reply.
REPLAY_MS = 120_000


#: A write's reply longer than this (bytes of strings in it) is kept on the server only until
#: it has arrived: the link then replaces the kept reply with a marker, so a popped 100 MB
#: value does not stay on the server for REPLAY_MS after its caller has it (issue 29).
KEEP_LIMIT = 16 * 1024


_ONCE_HEAD = """\
local __token = table.remove(ARGV)
local __session, __seq = string.match(__token, '^(.+):(%d+)$')
local __done = ARGV[1] .. 'o:' .. __session
local __kept = redis.call('GET', __done)
if __kept then
  if string.sub(__kept, 1, 1) == 'd' then
    -- 'd' .. sequence: that request's (large) reply reached its caller, who replaced it with
    -- this marker; the same token again would be a bug, never a lost reply: run nothing
    if string.sub(__kept, 2) == __seq then
      return redis.error_reply('DCO_DELIVERED')
    end
  else
    local __was, __reply = cmsgpack.unpack(__kept)
    if __was == __seq then
      -- a repeat: the reply it already had, and one write, so that a WAIT on this connection
      -- covers the first run's writes too (they precede it in the replication stream)
      redis.call('PEXPIRE', __done, {ttl})
      return __reply
    end
  end
end
local function __op()
"""

_ONCE_TAIL = """
end
local __reply = __op()
redis.call('SET', __done, cmsgpack.pack(__seq, __reply), 'PX', {ttl})
return __reply
"""


def once(source: str) -> str:
    """``source`` made safe to repeat: its last ``ARGV`` is a request token
    ``<session>:<sequence>``, and a token seen before returns the reply it had (D-061)."""
    ttl = str(REPLAY_MS)
    return _ONCE_HEAD.replace("{ttl}", ttl) + source + _ONCE_TAIL.replace("{ttl}", ttl)


#: Every ``redis.call`` of a script goes through this (``guard``): an error reply of a command
#: (WRONGTYPE above all) is raised with the key it was about, hex-encoded (a key may hold any
#: byte, an error reply may not), so that the caller's error can name it.
_GUARD = """\
local function __dco_call(...)
  local __r = redis.pcall(...)
  if type(__r) == 'table' and __r.err then
    local __k = select(2, ...)
    if type(__k) == 'string' then
      local __hex = string.gsub(string.sub(__k, 1, 512), '.', function(c)
        return string.format('%02x', string.byte(c))
      end)
      error({err = __r.err .. ' (DCO_KEY ' .. __hex .. ')'})
    end
    error(__r)
  end
  return __r
end
"""

#: The key a guarded script's error reply names (hex), and the rest of the reply.
_KEY_IN_ERROR = re.compile(r" \(DCO_KEY ([0-9a-f]*)\)")


def guard(source: str) -> str:
    """``source`` with each ``redis.call`` made to name its key in an error reply."""
    return _GUARD + source.replace("redis.call(", "__dco_call(")


class _Session:
    __slots__ = ("name", "seq")

    def __init__(self) -> None:
        self.name = os.urandom(9).hex()
        self.seq = 0

    def token(self) -> str:
        self.seq += 1
        return f"{self.name}:{self.seq}"


class _Sessions:
    """Request-token sessions, one per concurrent caller: a call takes a free one and gives it
    back, so each session's calls are sequential and its kept reply is only ever the last."""

    __slots__ = ("_free", "_lock")

    def __init__(self) -> None:
        self._free: list[_Session] = []
        self._lock = threading.Lock()

    def take(self) -> _Session:
        with self._lock:
            return self._free.pop() if self._free else _Session()

    def give(self, session: _Session) -> None:
        with self._lock:
            self._free.append(session)


def _reply_size(reply: Any, limit: int = KEEP_LIMIT) -> int:
    """How many bytes of strings ``reply`` holds, counted until it passes ``limit``."""
    if isinstance(reply, (bytes, str)):
        return len(reply)
    total = 0
    if _array(reply):
        for item in reply:
            total += _reply_size(item, limit - total)
            if total > limit:
                break
    return total
