"""The Lua scripts of the Redis backend (D-058), each registered once per client and called by
its SHA (redis-py's ``register_script``: EVALSHA, and SCRIPT LOAD on NOSCRIPT).

Every script gets ``KEYS[1]``, the namespace's index key (so a cluster routes it to the
namespace's slot), and ``ARGV[1]``, the namespace's key prefix ``dco:{<namespace>}:``. Every
key a script touches starts with that prefix, so every key of one namespace hashes to one slot
and no script crosses slots. The layout, under the prefix ``B``:

* ``B..'e:'..member``: HASH of one entry: ``v`` the value's frame (the engine's codec), ``e``
  its expiry in ms since the epoch (absent: never), ``r`` its revision; PEXPIREAT at ``e``.
* ``B..'i'``: ZSET of every member, scored by the revision that created it (insertion order).
* ``B..'x'``: ZSET of the members with an expiry, scored by it.
* ``B..'t'``: HASH member -> tag frame; ``B..'g:'..tag``: SET of the members with that tag.
* ``B..'Q:'..qid``: ZSET of a queue's item numbers (member and score the 15-digit number).
* ``B..'w:'..qid``: LIST of wake-up tokens, one per push, for blocked pulls (BLPOP).
* ``B..'r'``: the revision counter; ``B..'s'``: HASH of the statistics (``on``, hits, misses).
* ``B..'c:'..cid..':'..kf``: HASH of one claim (``remote.claims``): ``t`` its token, ``h`` the
  holder's host, ``p`` its pid, ``a`` when it was taken and ``e`` when it runs out (ms since
  the epoch, the server's clock); PEXPIRE the lease, so a claim that runs out is gone.
  ``cid`` is the claims' namespace as ``<length>:<name>``, ``kf`` the key's member (below).
* ``B..'C:'..cid``: ZSET of the claimed members of one claims namespace, scored by ``e``.
* ``B..'K'``: SET of the ``cid`` of every claims namespace with a claim set: added when a
  claim is taken or renewed, removed when a release, a break or a listing leaves the set
  empty (a set whose claims ran out is dropped by the next listing), so the operator's tools
  list the claims namespaces with one read in the namespace's slot (no ``SCAN``).
* ``B..'W:'..kf``: LIST of wake-up tokens for the waiters on a key's claim or value (BLPOP),
  one per waiter counted in ``B..'n:'..kf`` (STRING), pushed by a release, a break or a store.

A member is ``'k:'`` and the key's frame, or, for a key of the D-054 queue shape,
``'q:'..qid..':'..number`` (``qid`` is ``'i'`` for int keys, ``'s'`` and the prefix for str).
"""

from __future__ import annotations

from ._replies import (
    BULK,
    COUNT,
    DIGITS,
    FLAG,
    INT,
    MS,
    NUMBER,
    Shape,
    array,
    array_of,
    expect,
    nil_or,
)

PRELUDE = r"""
local B = ARGV[1]
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function live(member, now)
  local f = redis.call('HMGET', B .. 'e:' .. member, 'v', 'e', 'r')
  if not f[1] then return nil end
  if f[2] and tonumber(f[2]) <= now then return nil end
  return f
end
local function tag_of(member)
  return redis.call('HGET', B .. 't', member) or ''
end
local function remove(member)
  redis.call('DEL', B .. 'e:' .. member)
  local indexed = redis.call('ZREM', B .. 'i', member)
  redis.call('ZREM', B .. 'x', member)
  local tag = redis.call('HGET', B .. 't', member)
  if tag then
    redis.call('SREM', B .. 'g:' .. tag, member)
    redis.call('HDEL', B .. 't', member)
  end
  local qid, num = string.match(member, '^q:(.*):(%d+)$')
  if qid then redis.call('ZREM', B .. 'Q:' .. qid, num) end
  return indexed
end
local function store(member, v, e, tag)
  local ek = B .. 'e:' .. member
  local old = redis.call('HGET', B .. 't', member)
  if old then
    redis.call('SREM', B .. 'g:' .. old, member)
    redis.call('HDEL', B .. 't', member)
  end
  redis.call('DEL', ek)
  local r = redis.call('INCR', B .. 'r')
  if e ~= '' then
    redis.call('HSET', ek, 'v', v, 'e', e, 'r', r)
    redis.call('PEXPIREAT', ek, e)
    redis.call('ZADD', B .. 'x', e, member)
  else
    redis.call('HSET', ek, 'v', v, 'r', r)
    redis.call('ZREM', B .. 'x', member)
  end
  redis.call('ZADD', B .. 'i', 'NX', r, member)
  if tag ~= '' then
    redis.call('HSET', B .. 't', member, tag)
    redis.call('SADD', B .. 'g:' .. tag, member)
  end
  local qid, num = string.match(member, '^q:(.*):(%d+)$')
  if qid then redis.call('ZADD', B .. 'Q:' .. qid, num, num) end
  return r
end
local function expiry(now, ms)
  if ms == '' then return '' end
  return string.format('%d', now + math.floor(tonumber(ms)))
end
local function cull(now, limit)
  local gone = redis.call('ZRANGEBYSCORE', B .. 'x', '-inf', now, 'LIMIT', 0, limit)
  for _, m in ipairs(gone) do remove(m) end
  return #gone
end
local CULL = 10
"""

# ARGV: B, member, count statistics ('1'/'0'). -> {v, e, tag} or false
GET = r"""
local now = now_ms()
local f = live(ARGV[2], now)
if redis.call('HGET', B .. 's', 'on') == '1' then
  redis.call('HINCRBY', B .. 's', f and 'hits' or 'misses', 1)
end
if not f then return false end
return {f[1], f[2] or '', tag_of(ARGV[2])}
"""

# ARGV: B, member -> {v, r} or false (the version incr replaces)
GET_REVISION = r"""
local f = live(ARGV[2], now_ms())
if not f then return false end
return {f[1], f[3]}
"""

# ARGV: B, member, revision ('' = absent), v -> 1 if replaced
REPLACE = r"""
local now = now_ms()
local f = live(ARGV[2], now)
if ARGV[3] == '' then
  if f then return 0 end
  store(ARGV[2], ARGV[4], '', '')
  return 1
end
if not f or f[3] ~= ARGV[3] then return 0 end
local r = redis.call('INCR', B .. 'r')
redis.call('HSET', B .. 'e:' .. ARGV[2], 'v', ARGV[4], 'r', r)
return 1
"""

# ARGV: B, member, v, expire ms ('' = never), tag ('' = none), only if absent ('1'/'0') -> 1/0
# The cleanup runs after the write, as a directory's cull does: an entry stored already expired
# is removed by its own write, and one stored over an expired entry keeps that entry's place.
# An add that stores nothing writes nothing, and cleans up nothing.
SET = r"""
local now = now_ms()
if ARGV[6] == '1' and live(ARGV[2], now) then return 0 end
store(ARGV[2], ARGV[3], expiry(now, ARGV[4]), ARGV[5])
cull(now, CULL)
return 1
"""

# ARGV: B, expire ms, tag, member1, v1, member2, v2, ...
SET_MANY = r"""
local now = now_ms()
local e = expiry(now, ARGV[2])
for i = 4, #ARGV, 2 do store(ARGV[i], ARGV[i + 1], e, ARGV[3]) end
cull(now, CULL)
return 1
"""

# ARGV: B, member... -> number of live entries removed. An expired entry is left for the
# cleanup, as a directory leaves it: len() counts it until then, on both backends.
DELETE = r"""
local now = now_ms()
local n = 0
for i = 2, #ARGV do
  if live(ARGV[i], now) then
    n = n + 1
    remove(ARGV[i])
  end
end
return n
"""

# ARGV: B, member -> {v, e, tag} or false (an expired entry is left, as by DELETE)
POP = r"""
local f = live(ARGV[2], now_ms())
if not f then return false end
local tag = tag_of(ARGV[2])
remove(ARGV[2])
return {f[1], f[2] or '', tag}
"""

# ARGV: B, member... -> {v or false, ...}
GET_MANY = r"""
local now = now_ms()
local out = {}
for i = 2, #ARGV do
  local f = live(ARGV[i], now)
  out[i - 1] = f and f[1] or false
end
return out
"""

# ARGV: B, member, expire ms ('' = never) -> 1 if the key was there
TOUCH = r"""
local now = now_ms()
if not live(ARGV[2], now) then return 0 end
local ek = B .. 'e:' .. ARGV[2]
local e = expiry(now, ARGV[3])
if e == '' then
  redis.call('HDEL', ek, 'e')
  redis.call('PERSIST', ek)
  redis.call('ZREM', B .. 'x', ARGV[2])
else
  redis.call('HSET', ek, 'e', e)
  redis.call('PEXPIREAT', ek, e)
  redis.call('ZADD', B .. 'x', e, ARGV[2])
end
return 1
"""

# ARGV: B, now ms ('' = the server's), limit -> number removed
EXPIRE = r"""
local now = ARGV[2] == '' and now_ms() or tonumber(ARGV[2])
return cull(now, tonumber(ARGV[3]))
"""

# ARGV: B, tag, limit -> number removed
EVICT = r"""
local members = redis.call('SRANDMEMBER', B .. 'g:' .. ARGV[2], tonumber(ARGV[3]))
for _, m in ipairs(members) do remove(m) end
return #members
"""

# ARGV: B, limit -> number removed
CLEAR = r"""
local members = redis.call('ZRANGE', B .. 'i', 0, tonumber(ARGV[2]) - 1)
for _, m in ipairs(members) do remove(m) end
return #members
"""

# ARGV: B, enable ('1'/'0'), reset ('1'/'0') -> {hits, misses} before a reset
STATS = r"""
local s = B .. 's'
local hits = tonumber(redis.call('HGET', s, 'hits') or '0')
local misses = tonumber(redis.call('HGET', s, 'misses') or '0')
redis.call('HSET', s, 'on', ARGV[2])
if ARGV[3] == '1' then redis.call('HSET', s, 'hits', 0, 'misses', 0) end
return {hits, misses}
"""

# ARGV: B, qid, side ('back'/'front'), expire ms, tag, v1, v2, ... -> the 15-digit numbers, in
# order, or the error reply 'DCO_OVERFLOW' (and nothing written) when the side would run out of
# numbers (D-057)
PUSH = r"""
local now = now_ms()
local qid = ARGV[2]
local q = B .. 'Q:' .. qid
local count = #ARGV - 5
local n = 500000000000000
local step = 1
if ARGV[3] == 'back' then
  local last = redis.call('ZRANGE', q, -1, -1, 'WITHSCORES')
  if #last > 0 then n = tonumber(last[2]) + 1 end
else
  step = -1
  local first = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
  if #first > 0 then n = tonumber(first[2]) - 1 end
end
local final = n + step * (count - 1)
if n > 999999999999999 or n < 0 or final > 999999999999999 or final < 0 then
  return redis.error_reply('DCO_OVERFLOW')
end
-- The numbers come first, from the items there (expired ones included), as a directory
-- numbers them: an expired item keeps its number until it is removed, so a number is never
-- handed out twice while its old item may still be read. Then the usual cleanup.
cull(now, CULL)
local e = expiry(now, ARGV[4])
local out = {}
for i = 1, count do
  local num = string.format('%015d', n)
  store('q:' .. qid .. ':' .. num, ARGV[5 + i], e, ARGV[5])
  out[i] = num
  n = n + step
end
local w = B .. 'w:' .. qid
for i = 1, math.min(count, 64) do redis.call('RPUSH', w, '1') end
redis.call('LTRIM', w, -64, -1)
redis.call('PEXPIRE', w, 60000)
return out
"""

# ARGV: B, last ('1'/'0') -> {member, v, e, tag} of the first or last live entry in insertion
# order, or false; expired entries met on the way are removed (as a directory's peekitem does)
PEEKITEM = r"""
local now = now_ms()
while true do
  local found
  if ARGV[2] == '1' then
    found = redis.call('ZRANGE', B .. 'i', -1, -1)
  else
    found = redis.call('ZRANGE', B .. 'i', 0, 0)
  end
  if #found == 0 then return false end
  local member = found[1]
  local f = live(member, now)
  if f then return {member, f[1], f[2] or '', tag_of(member)} end
  remove(member)
end
"""

# ARGV: B, qid, side -> {number, v, e, r, tag} of the first live item from that side, or false.
# Expired items are passed over and left in place (D-037).
PEEK = r"""
local now = now_ms()
local qid = ARGV[2]
local q = B .. 'Q:' .. qid
local start = 0
while true do
  local nums
  if ARGV[3] == 'front' then
    nums = redis.call('ZRANGE', q, start, start + 99)
  else
    nums = redis.call('ZREVRANGE', q, start, start + 99)
  end
  if #nums == 0 then return false end
  for _, num in ipairs(nums) do
    local member = 'q:' .. qid .. ':' .. num
    local f = live(member, now)
    if f then return {num, f[1], f[2] or '', f[3], tag_of(member)} end
  end
  start = start + 100
end
"""

# ARGV: B, member, revision -> 1 if that version of the item was there and is now removed
TAKE = r"""
local f = live(ARGV[2], now_ms())
if not f or f[3] ~= ARGV[3] then return 0 end
remove(ARGV[2])
return 1
"""

# ARGV: B, qid, side, the value kinds the caller cannot read (one byte each: '\6' for a pickle on
# pickle=False, or '') -> false if there is no live item, else {taken, number, v, e, r, tag} of
# the first live item from that side (expired ones passed over and left in place, D-037).
# taken = 1: it is removed, in this one script, so exactly one caller gets it (D-064).
# taken = 0: its frame is of a kind the caller declared unreadable, and it stays at the front
# for a worker that can read it (D-012); the caller decodes it only to raise the exact error.
PULL = r"""
local now = now_ms()
local qid = ARGV[2]
local q = B .. 'Q:' .. qid
local start = 0
while true do
  local nums
  if ARGV[3] == 'front' then
    nums = redis.call('ZRANGE', q, start, start + 99)
  else
    nums = redis.call('ZREVRANGE', q, start, start + 99)
  end
  if #nums == 0 then return false end
  for _, num in ipairs(nums) do
    local member = 'q:' .. qid .. ':' .. num
    local f = live(member, now)
    if f then
      local tag = tag_of(member)
      local v = f[1]
      if ARGV[4] ~= '' and string.sub(v, 1, 4) == 'DCO\1'
          and string.find(ARGV[4], string.sub(v, 5, 5), 1, true) then
        return {0, num, v, f[2] or '', f[3], tag}
      end
      remove(member)
      return {1, num, v, f[2] or '', f[3], tag}
    end
  end
  start = start + 100
end
"""

# ARGV: B, qid, side, number, v, e ('' = never), r, tag ('' = none) -> the number it now has.
# Puts back an item a pull took and could not decode (D-064): at its own number, with its own
# revision (so its place in the queue and in insertion order is the one it had), or, if a push
# took that number meanwhile, at the end of the side it was pulled from (where a pull from that
# side meets it first). The error reply 'DCO_OVERFLOW' if that side has no number left. No
# wake-up token: it would wake the restoring worker's own blocked pull (with
# on_decode_error='miss') into taking and restoring the item again at once, in a loop; a worker
# that blocked while the item was out looks again after its BLPOP slice (at most 2 s).
RESTORE = r"""
local qid = ARGV[2]
local q = B .. 'Q:' .. qid
local num = ARGV[4]
if redis.call('ZSCORE', q, num) then
  local n
  if ARGV[3] == 'front' then
    local first = redis.call('ZRANGE', q, 0, 0, 'WITHSCORES')
    n = tonumber(first[2]) - 1
  else
    local last = redis.call('ZRANGE', q, -1, -1, 'WITHSCORES')
    n = tonumber(last[2]) + 1
  end
  if n < 0 or n > 999999999999999 then return redis.error_reply('DCO_OVERFLOW') end
  num = string.format('%015d', n)
end
local member = 'q:' .. qid .. ':' .. num
local ek = B .. 'e:' .. member
local e, r, tag = ARGV[6], ARGV[7], ARGV[8]
if e ~= '' then
  redis.call('HSET', ek, 'v', ARGV[5], 'e', e, 'r', r)
  redis.call('PEXPIREAT', ek, e)
  redis.call('ZADD', B .. 'x', e, member)
else
  redis.call('HSET', ek, 'v', ARGV[5], 'r', r)
end
redis.call('ZADD', B .. 'i', r, member)
if tag ~= '' then
  redis.call('HSET', B .. 't', member, tag)
  redis.call('SADD', B .. 'g:' .. tag, member)
end
redis.call('ZADD', q, num, num)
return num
"""

# ---- claims (remote.claims): ARGV[2] the claims namespace id, ARGV[3] the key's member -----

CLAIM_PRELUDE = r"""
local claim = B .. 'c:' .. ARGV[2] .. ':' .. ARGV[3]
local claimed = B .. 'C:' .. ARGV[2]
local claim_sets = B .. 'K'
-- After a removal from the claim set: drop its claims namespace from B..'K' once empty.
local function forget_if_empty()
  if redis.call('ZCARD', claimed) == 0 then redis.call('SREM', claim_sets, ARGV[2]) end
end
local function wake(kf)
  local n = B .. 'n:' .. kf
  local count = tonumber(redis.call('GET', n) or '0')
  if count <= 0 then return end
  if count > 64 then count = 64 end
  local w = B .. 'W:' .. kf
  for _ = 1, count do redis.call('LPUSH', w, '1') end
  redis.call('PEXPIRE', w, 2000)
  redis.call('DEL', n)
end
"""

# ARGV: ..., lease ms, token, host, pid -> 1 if taken
CLAIM_ACQUIRE = r"""
if redis.call('EXISTS', claim) == 1 then return 0 end
local now = now_ms()
local lease = tonumber(ARGV[4])
redis.call('HSET', claim, 't', ARGV[5], 'h', ARGV[6], 'p', ARGV[7], 'a', now, 'e', now + lease)
redis.call('PEXPIRE', claim, lease)
redis.call('ZREMRANGEBYSCORE', claimed, '-inf', now)
redis.call('ZADD', claimed, now + lease, ARGV[3])
redis.call('SADD', claim_sets, ARGV[2])
return 1
"""

# ARGV: ..., token, lease ms -> 1 if the live claim was the token's and now runs out later
CLAIM_EXTEND = r"""
if redis.call('HGET', claim, 't') ~= ARGV[4] then return 0 end
local now = now_ms()
local lease = tonumber(ARGV[5])
redis.call('HSET', claim, 'e', now + lease)
redis.call('PEXPIRE', claim, lease)
redis.call('ZADD', claimed, now + lease, ARGV[3])
redis.call('SADD', claim_sets, ARGV[2])
return 1
"""

# ARGV: ..., token -> 1 if the live claim was the token's and is now removed (waiters woken)
CLAIM_RELEASE = r"""
if redis.call('HGET', claim, 't') ~= ARGV[4] then return 0 end
redis.call('DEL', claim)
redis.call('ZREM', claimed, ARGV[3])
forget_if_empty()
wake(ARGV[3])
return 1
"""

# -> 1 if there was a live claim (whoever held it) and it is now removed
CLAIM_BREAK = r"""
local gone = redis.call('DEL', claim)
redis.call('ZREM', claimed, ARGV[3])
forget_if_empty()
if gone == 0 then return 0 end
wake(ARGV[3])
return 1
"""

# After a store: wake the key's waiters.
CLAIM_WAKE = r"""
wake(ARGV[3])
return 1
"""

# -> the claim's PTTL in ms; if it is held, the caller is counted as a waiter first
CLAIM_WAIT = r"""
local left = redis.call('PTTL', claim)
if left <= 0 then return left end
local n = B .. 'n:' .. ARGV[3]
redis.call('INCR', n)
redis.call('PEXPIRE', n, 60000)
return left
"""

# A waiter that timed out is no longer counted (never below zero).
CLAIM_UNWAIT = r"""
local n = B .. 'n:' .. ARGV[3]
if tonumber(redis.call('GET', n) or '0') > 0 then redis.call('DECR', n) end
return 1
"""

# -> {token, host, pid, acquired ms, expires ms} of the live claim, or nil
CLAIM_HOLDER = r"""
local f = redis.call('HMGET', claim, 't', 'h', 'p', 'a', 'e')
if not f[1] then return false end
return f
"""

# ARGV[3] unused -> {kf, token, host, pid, acquired, expires, kf, ...} of the live claims;
# a claim set left empty drops its claims namespace from B..'K'
CLAIM_LIST = r"""
redis.call('ZREMRANGEBYSCORE', claimed, '-inf', now_ms())
forget_if_empty()
local out = {}
for _, kf in ipairs(redis.call('ZRANGE', claimed, 0, -1)) do
  local f = redis.call('HMGET', B .. 'c:' .. ARGV[2] .. ':' .. kf, 't', 'h', 'p', 'a', 'e')
  if f[1] then
    table.insert(out, kf)
    for i = 1, 5 do table.insert(out, f[i]) end
  end
end
return out
"""

CLAIM_SCRIPTS = {
    name: PRELUDE + CLAIM_PRELUDE + body
    for name, body in {
        "acquire": CLAIM_ACQUIRE,
        "extend": CLAIM_EXTEND,
        "release": CLAIM_RELEASE,
        "break": CLAIM_BREAK,
        "wake": CLAIM_WAKE,
        "wait": CLAIM_WAIT,
        "unwait": CLAIM_UNWAIT,
        "holder": CLAIM_HOLDER,
        "list": CLAIM_LIST,
    }.items()
}

SCRIPTS = {
    name: PRELUDE + body
    for name, body in {
        "get": GET,
        "get_revision": GET_REVISION,
        "replace": REPLACE,
        "set": SET,
        "set_many": SET_MANY,
        "delete": DELETE,
        "pop": POP,
        "get_many": GET_MANY,
        "touch": TOUCH,
        "expire": EXPIRE,
        "evict": EVICT,
        "clear": CLEAR,
        "stats": STATS,
        "push": PUSH,
        "peekitem": PEEKITEM,
        "peek": PEEK,
        "take": TAKE,
        "pull": PULL,
        "restore": RESTORE,
    }.items()
}


#: What each script answers (issue 29): the link checks every reply against its shape before an
#: operation decodes it, so a server or proxy that answers otherwise raises
#: ``UnexpectedReplyError`` naming the call, never a ValueError or a silent True. Each line is
#: the script's ``-> ...`` comment above, as redis-py hands it over (a Lua number is an int, a
#: string bytes, false nil, a table a list).
_ENTRY = array(BULK, MS, BULK)
REPLIES: dict[str, Shape] = {
    "get": nil_or(_ENTRY),
    "get_revision": nil_or(array(BULK, DIGITS)),
    "replace": FLAG,
    "set": FLAG,
    "set_many": FLAG,
    "delete": COUNT,
    "pop": nil_or(_ENTRY),
    # one value or nil per member asked for (ARGV after the prefix)
    "get_many": array_of(nil_or(BULK), length=len),
    "touch": FLAG,
    "expire": COUNT,
    "evict": COUNT,
    "clear": COUNT,
    "stats": array(COUNT, COUNT),
    # one number per value pushed (ARGV: qid, side, expire, tag, then the values)
    "push": array_of(NUMBER, length=lambda args: len(args) - 4),
    "peekitem": nil_or(array(BULK, BULK, MS, BULK)),
    "peek": nil_or(array(NUMBER, BULK, MS, DIGITS, BULK)),
    "take": FLAG,
    "pull": nil_or(array(FLAG, NUMBER, BULK, MS, DIGITS, BULK)),
    "restore": NUMBER,
}
CLAIM_REPLIES: dict[str, Shape] = {
    "acquire": FLAG,
    "extend": FLAG,
    "release": FLAG,
    "break": FLAG,
    "wake": FLAG,
    "wait": INT,
    "unwait": FLAG,
    "holder": nil_or(array(BULK, BULK, DIGITS, DIGITS, DIGITS)),
    "list": array_of(BULK, multiple=6),
}
expect(SCRIPTS, REPLIES)
expect(CLAIM_SCRIPTS, CLAIM_REPLIES)
