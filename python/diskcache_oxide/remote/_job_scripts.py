"""The Lua scripts of leased jobs on Redis (issue 21, D-060), after the engine's job table
(D-014, ``crates/engine/src/jobs``).

Each script is registered once per client and called by its SHA through a
:class:`~diskcache_oxide.remote._io.Link`: ``KEYS[1]`` is the namespace's index key (so a
cluster routes the call to the namespace's slot) and ``ARGV[1]`` the namespace's prefix
``dco:{<namespace>}:``, which every key below starts with, so every script touches one slot.
Times are the server's clock (``TIME``) in microseconds since the epoch, written as integers
(a double holds them exactly until the year 2255). The layout, under the prefix ``B``, with
``q`` a queue's name (UTF-8) and ``M`` a job's id as 16 digits (so that the members of a sorted
set of equal scores sort by id):

* ``B..'jn'``: STRING, the id counter (``INCR``): ids are never reused.
* ``B..'jj:'..M``: HASH of one job: ``q`` its queue, ``s`` its state (``0`` ready, ``1``
  leased, ``2`` dead), ``d`` its due time (ready: not before; leased: the lease deadline;
  dead: when it died), ``a`` attempts, ``m`` max_attempts (``0``: no limit), ``l`` the lease
  number (raised by every take, never lowered: the fencing token), ``c`` created, ``e`` the
  last error (absent: none), ``u`` its unique key (absent: none), ``t`` when its current lease
  was taken, ``v`` its value (the engine's frame).
* ``B..'jr:'..q``: ZSET of the queue's ready jobs, scored by due time.
* ``B..'jl:'..q``: ZSET of its leased jobs, scored by lease deadline.
* ``B..'jd:'..q``: ZSET of its dead jobs, scored by id.
* ``B..'ji:'..q``: ZSET of all its jobs, scored by id (the operator's listing by id).
* ``B..'ju:'..q``: HASH unique key -> ``M`` of the ready or leased job holding it.
* ``B..'jq'``: ZSET of the queues that hold jobs (score 0: sorted by name's bytes).
* ``B..'jw:'..q``: LIST of wake-up tokens for blocked takes (BLPOP): one per job made ready
  (at most 64), PEXPIRE 60 s.
* ``B..'jf'``: HASH queue -> how many of its ids were forgotten because their record was
  gone (evicted, deleted or replaced by another program: issue 29), counted once each.

Only the wake-up lists carry a TTL: under a ``volatile-*`` maxmemory-policy no job record is
evicted (losing a wake-up token costs a blocked take one wait slice). A record that is gone
anyway is passed over and forgotten by every script (``sound``, ``lose``), never an error.

None of these keys is in the cache's index (``B..'i'``), so the cache's ``clear()``,
``len()`` and iteration never see a job, as in a directory, where jobs have their own table.
"""

from __future__ import annotations

from ._replies import (
    BULK,
    COUNT,
    DIGITS,
    FLAG,
    INT,
    MS,
    Shape,
    array,
    array_of,
    expect,
    nil_or,
    rows,
)

JOB_PRELUDE = r"""
local B = ARGV[1]
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function num(x) return string.format('%.0f', x) end
local function jkey(m) return B .. 'jj:' .. m end
local function qk(kind, q) return B .. 'j' .. kind .. ':' .. q end
local function wake(q, count)
  if count <= 0 then return end
  local w = qk('w', q)
  for i = 1, math.min(count, 64) do redis.call('RPUSH', w, '1') end
  redis.call('LTRIM', w, -64, -1)
  redis.call('PEXPIRE', w, 60000)
end
-- A job leaving ready-or-leased gives up its unique key (a dead job holds none).
local function drop_unique(q, u, m)
  if u then
    local uk = qk('u', q)
    if redis.call('HGET', uk, u) == m then redis.call('HDEL', uk, u) end
  end
end
local function to_dead(m, q, u, now, err)
  redis.call('ZREM', qk('r', q), m)
  redis.call('ZREM', qk('l', q), m)
  redis.call('ZADD', qk('d', q), m, m)
  redis.call('HSET', jkey(m), 's', '2', 'd', num(now), 'e', err)
  drop_unique(q, u, m)
end
local function to_ready(m, q, due, err)
  redis.call('ZREM', qk('l', q), m)
  redis.call('ZREM', qk('d', q), m)
  redis.call('ZADD', qk('r', q), num(due), m)
  if err then
    redis.call('HSET', jkey(m), 's', '0', 'd', num(due), 'e', err)
  else
    redis.call('HSET', jkey(m), 's', '0', 'd', num(due))
  end
end
local function forget(m, q, u)
  redis.call('DEL', jkey(m))
  for _, kind in ipairs({'r', 'l', 'd', 'i'}) do redis.call('ZREM', qk(kind, q), m) end
  drop_unique(q, u, m)
  if redis.call('ZCARD', qk('i', q)) == 0 then redis.call('ZREM', B .. 'jq', q) end
end
-- The fields {q, s, d, a, m, l, c, v} of job ``m`` if its record is a job's HASH with every
-- field a script relies on, else nil (issue 29): a record evicted, deleted by another program
-- or replaced by a key of another type is no job, and no script may fail on it (a failing
-- take once stalled its queue for good).
local SOUND = {'q', 's', 'd', 'a', 'm', 'l', 'c', 'v'}
local function sound(m)
  local k = jkey(m)
  local t = redis.call('TYPE', k)
  if (t.ok or t) ~= 'hash' then return nil end
  local f = redis.call('HMGET', k, unpack(SOUND))
  for i = 1, #SOUND do if not f[i] then return nil end end
  if f[2] ~= '0' and f[2] ~= '1' and f[2] ~= '2' then return nil end
  for i = 3, 7 do
    if not string.match(f[i], '^%-?%d+$') then return nil end
  end
  return f
end
-- Forget id ``m`` of queue ``q`` whose record is gone (not sound): out of the queue's sets,
-- counted once in ``B..'jf'`` (queue -> how many) and noted in ``lost`` for the caller to
-- log. What is at its key, if anything, is left alone: it is not a job of ours.
local function lose(m, q, lost)
  local removed = 0
  for _, kind in ipairs({'r', 'l', 'd', 'i'}) do
    removed = removed + redis.call('ZREM', qk(kind, q), m)
  end
  if removed > 0 then
    redis.call('HINCRBY', B .. 'jf', q, 1)
    if lost then table.insert(lost, #q .. ':' .. q .. m) end
  end
  if redis.call('ZCARD', qk('i', q)) == 0 then redis.call('ZREM', B .. 'jq', q) end
end
-- A fresh id: the counter's next, passing over any id whose key is taken (a key another
-- program wrote there, or a job's if the counter itself was lost), so a put never writes
-- over a key and never fails on one of another type.
local function new_id()
  while true do
    local m = string.format('%016d', redis.call('INCR', B .. 'jn'))
    if redis.call('EXISTS', jkey(m)) == 0 then return m end
  end
end
-- Whether the unique key ``u`` of queue ``q`` is held by a ready or leased job other than
-- ``m``: an entry naming a job whose record is gone holds nothing.
local function unique_holder(q, u)
  local holder = redis.call('HGET', qk('u', q), u)
  if not holder then return nil end
  local f = sound(holder)
  if f and (f[2] == '0' or f[2] == '1') then return holder end
  return nil
end
local function out_of_attempts(a, m)
  local limit = tonumber(m)
  return limit > 0 and tonumber(a) >= limit
end
-- Expired leases of one queue: back to ready (due now), or dead once out of attempts.
local function sweep_queue(q, now, lost)
  local requeued, dead = 0, 0
  local expired = redis.call('ZRANGEBYSCORE', qk('l', q), '-inf', '(' .. num(now))
  for _, m in ipairs(expired) do
    local f = sound(m)
    if not f then
      lose(m, q, lost)
    elseif out_of_attempts(f[4], f[5]) then
      to_dead(m, q, redis.call('HGET', jkey(m), 'u'), now, 'lease expired')
      dead = dead + 1
    else
      to_ready(m, q, now, 'lease expired')
      requeued = requeued + 1
    end
  end
  wake(q, requeued)
  return requeued, dead
end
-- The held job ``m`` if lease ``l`` still holds it: its fields {q, a, m, u}, else nil.
-- (A job whose record is gone is held by nobody: the next take's sweep forgets it once its
-- lease runs out.)
local function held(m, l)
  local f = sound(m)
  if not f or f[2] ~= '1' or f[6] ~= l then return nil end
  return {f[1], f[4], f[5], redis.call('HGET', jkey(m), 'u')}
end
local FIELDS = {'q', 's', 'd', 'a', 'm', 'c', 'e', 'u', 't', 'v'}
local function record(m, out)
  if not sound(m) then return false end
  local f = redis.call('HMGET', jkey(m), unpack(FIELDS))
  table.insert(out, m)
  for i = 1, #FIELDS do table.insert(out, f[i] or false) end
  return true
end
"""

# ARGV: B, queue, value, delay us, max_attempts[, unique] -> {id, added 1/0}
JOB_PUT = r"""
local q, u = ARGV[2], ARGV[6]
if u then
  local existing = unique_holder(q, u)
  if existing then return {existing, 0} end
end
local now = now_us()
local m = new_id()
local due = now + tonumber(ARGV[4])
redis.call('HSET', jkey(m), 'q', q, 's', '0', 'd', num(due), 'a', '0', 'm', ARGV[5],
  'l', '0', 'c', num(now), 'v', ARGV[3])
if u then
  redis.call('HSET', jkey(m), 'u', u)
  redis.call('HSET', qk('u', q), u, m)
end
redis.call('ZADD', qk('r', q), num(due), m)
redis.call('ZADD', qk('i', q), m, m)
redis.call('ZADD', B .. 'jq', 0, q)
wake(q, 1)
return {m, 1}
"""

# ARGV: B, queue, delay us, max_attempts, value... -> {id...}
JOB_PUT_MANY = r"""
local q = ARGV[2]
local now = now_us()
local due = num(now + tonumber(ARGV[3]))
local created = num(now)
local out = {}
for i = 5, #ARGV do
  local m = new_id()
  redis.call('HSET', jkey(m), 'q', q, 's', '0', 'd', due, 'a', '0', 'm', ARGV[4],
    'l', '0', 'c', created, 'v', ARGV[i])
  redis.call('ZADD', qk('r', q), due, m)
  redis.call('ZADD', qk('i', q), m, m)
  table.insert(out, m)
end
if #out > 0 then redis.call('ZADD', B .. 'jq', 0, q) end
wake(q, #out)
return out
"""

# ARGV: B, lease us, n, queue... (priority order) -> {now, next due ('' none), lost, then per
# job taken: id, queue, attempts, lease number, max_attempts, deadline, created, error, value}
# ``lost`` names the ids this take forgot because their record was gone (see ``lose``), as
# per id its queue's byte length, ':', the queue and the id ('' none): the caller logs them.
# Every queue's expired leases are moved first (back to ready, or dead), so a lease that runs
# out needs no sweeper. ``next due`` is the earliest due time or lease deadline in these
# queues after the take: a blocked take sleeps no longer than that.
JOB_TAKE = r"""
local now = now_us()
local lease, n = tonumber(ARGV[2]), tonumber(ARGV[3])
local out = {num(now), '', ''}
local taken = 0
local lost = {}
for i = 4, #ARGV do
  local q = ARGV[i]
  sweep_queue(q, now, lost)
  -- Each round removes every id it read from the ready set (taken, or forgotten), so a
  -- record that is gone costs one round trip of the loop, never the jobs behind it.
  while taken < n do
    local due = redis.call('ZRANGEBYSCORE', qk('r', q), '-inf', num(now), 'LIMIT', 0, n - taken)
    if #due == 0 then break end
    for _, m in ipairs(due) do
      local f = sound(m)
      if not f then
        lose(m, q, lost)
      else
        local k = jkey(m)
        local a = redis.call('HINCRBY', k, 'a', 1)
        local l = redis.call('HINCRBY', k, 'l', 1)
        local deadline = num(now + lease)
        redis.call('HSET', k, 's', '1', 'd', deadline, 't', num(now))
        redis.call('ZREM', qk('r', q), m)
        redis.call('ZADD', qk('l', q), deadline, m)
        local e = redis.call('HGET', k, 'e')
        for _, x in ipairs({m, q, a, l, f[5], deadline, f[7], e or false, f[8]}) do
          table.insert(out, x)
        end
        taken = taken + 1
      end
    end
  end
end
out[3] = table.concat(lost)
local next_due = nil
for i = 4, #ARGV do
  for _, kind in ipairs({'r', 'l'}) do
    local first = redis.call('ZRANGE', qk(kind, ARGV[i]), 0, 0, 'WITHSCORES')
    if first[2] then
      local at = tonumber(first[2])
      if not next_due or at < next_due then next_due = at end
    end
  end
end
if next_due then out[2] = num(next_due) end
return out
"""

# ARGV: B, then per job a take could not use: id, lease, kind ('p' pass over, 'b' bury),
# error, delay us (pass) -> {state or false, ...} ('0' ready, '2' dead; false: lease lost).
# A pass (D-047) keeps the attempt and lease number the take counted; out of attempts, dead.
JOB_REFUSE = r"""
local now = now_us()
local out = {}
for i = 2, #ARGV, 5 do
  local m, kind, err = ARGV[i], ARGV[i + 2], ARGV[i + 3]
  local f = held(m, ARGV[i + 1])
  if not f then
    table.insert(out, false)
  elseif kind == 'b' or out_of_attempts(f[2], f[3]) then
    to_dead(m, f[1], f[4], now, err)
    table.insert(out, '2')
  else
    to_ready(m, f[1], now + tonumber(ARGV[i + 4]), err)
    table.insert(out, '0')
  end
end
return out
"""

# ARGV: B, id, lease -> 1 if finished (deleted)
JOB_FINISH = r"""
local f = held(ARGV[2], ARGV[3])
if not f then return 0 end
forget(ARGV[2], f[1], f[4])
return 1
"""

# ARGV: B, id, lease, error, retry_in us -> 'ready', 'dead', or false (lease lost)
JOB_FAIL = r"""
local m = ARGV[2]
local f = held(m, ARGV[3])
if not f then return false end
local now = now_us()
if out_of_attempts(f[2], f[3]) then
  to_dead(m, f[1], f[4], now, ARGV[4])
  return 'dead'
end
to_ready(m, f[1], now + tonumber(ARGV[5]), ARGV[4])
wake(f[1], 1)
return 'ready'
"""

# ARGV: B, id, lease, lease us -> the new deadline (us), or false (lease lost)
JOB_EXTEND = r"""
local m = ARGV[2]
local f = held(m, ARGV[3])
if not f then return false end
local deadline = num(now_us() + tonumber(ARGV[4]))
redis.call('HSET', jkey(m), 'd', deadline)
redis.call('ZADD', qk('l', f[1]), deadline, m)
return deadline
"""

# ARGV: B, id, lease, delay us -> 1 if released (the attempt is not counted)
JOB_RELEASE = r"""
local m = ARGV[2]
local f = held(m, ARGV[3])
if not f then return 0 end
redis.call('HINCRBY', jkey(m), 'a', -1)
to_ready(m, f[1], now_us() + tonumber(ARGV[4]), nil)
wake(f[1], 1)
return 1
"""

# ARGV: B, queue ('' every queue) -> {requeued, dead, lost (as the take's)}
JOB_SWEEP = r"""
local now = now_us()
local queues = {ARGV[2]}
if ARGV[2] == '' then queues = redis.call('ZRANGE', B .. 'jq', 0, -1) end
local requeued, dead = 0, 0
local lost = {}
for _, q in ipairs(queues) do
  local r, d = sweep_queue(q, now, lost)
  requeued, dead = requeued + r, dead + d
end
return {requeued, dead, table.concat(lost)}
"""

# ARGV: B, queue -> {ready, scheduled, leased, dead}
JOB_COUNTS = r"""
local now = num(now_us())
local q = ARGV[2]
return {
  redis.call('ZCOUNT', qk('r', q), '-inf', now),
  redis.call('ZCOUNT', qk('r', q), '(' .. now, '+inf'),
  redis.call('ZCARD', qk('l', q)),
  redis.call('ZCARD', qk('d', q)),
}
"""

# ARGV: B, id -> {now, id, q, s, d, a, m, c, e, u, t, v} or false
JOB_INFO = r"""
local out = {num(now_us())}
if not record(ARGV[2], out) then return false end
return out
"""

# ARGV: B, queue, state ('' all, 'ready', 'scheduled', 'leased', 'dead'), after id, limit
# -> {now, then per job: id, q, s, d, a, m, c, e, u, t, v}, by id after ``after``.
# A state held in a set scored by time is read from that set when it is small, and otherwise
# by walking the queue's ids in order, so a page costs what it lists plus what it passes.
JOB_LIST = r"""
local now = now_us()
local q, state, after, limit = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local out = {num(now)}
local ids
if state == '' then
  ids = redis.call('ZRANGEBYSCORE', qk('i', q), '(' .. after, '+inf', 'LIMIT', 0, limit)
elseif state == 'dead' then
  ids = redis.call('ZRANGEBYSCORE', qk('d', q), '(' .. after, '+inf', 'LIMIT', 0, limit)
else
  local set, lo, hi, code = qk('r', q), '-inf', num(now), '0'
  if state == 'scheduled' then lo, hi = '(' .. num(now), '+inf' end
  if state == 'leased' then set, lo, hi, code = qk('l', q), '-inf', '+inf', '1' end
  ids = {}
  if redis.call('ZCOUNT', set, lo, hi) <= 5000 then
    local floor = tonumber(after)
    local all = redis.call('ZRANGEBYSCORE', set, lo, hi)
    table.sort(all)
    for _, m in ipairs(all) do
      if #ids >= limit then break end
      if tonumber(m) > floor then table.insert(ids, m) end
    end
  else
    local from = '(' .. after
    while #ids < limit do
      local page = redis.call('ZRANGEBYSCORE', qk('i', q), from, '+inf', 'LIMIT', 0, 500)
      if #page == 0 then break end
      for _, m in ipairs(page) do
        -- A record that is gone is not listed (a take or a sweep forgets it).
        local f = sound(m) or {}
        local due = tonumber(f[3])
        local match = f[2] == code
        if state == 'ready' then match = match and due <= now end
        if state == 'scheduled' then match = match and due > now end
        if match and #ids < limit then table.insert(ids, m) end
      end
      from = '(' .. page[#page]
    end
  end
end
for _, m in ipairs(ids) do record(m, out) end
return out
"""

# -> the names of the queues holding jobs, sorted by their bytes
JOB_QUEUES = r"""
return redis.call('ZRANGE', B .. 'jq', 0, -1)
"""

# ARGV: B, id, error -> 1 if a ready or leased job was sent to the dead-letter list
JOB_BURY_ANY = r"""
local m = ARGV[2]
local f = sound(m)
if not f or f[2] == '2' then return 0 end
redis.call('HINCRBY', jkey(m), 'l', 1)
to_dead(m, f[1], redis.call('HGET', jkey(m), 'u'), now_us(), ARGV[3])
return 1
"""

# ARGV: B, queue, batch -> {how many dead jobs were deleted, how many ids were read (at most
# ``batch``), lost (as the take's)}
JOB_PURGE_DEAD = r"""
local q = ARGV[2]
local ids = redis.call('ZRANGE', qk('d', q), 0, tonumber(ARGV[3]) - 1)
local deleted, lost = 0, {}
for _, m in ipairs(ids) do
  if sound(m) then
    forget(m, q, redis.call('HGET', jkey(m), 'u'))
    deleted = deleted + 1
  else
    lose(m, q, lost)
  end
end
return {deleted, #ids, table.concat(lost)}
"""

# ARGV: B, id, delay us -> 1 if a dead job was made ready (attempts reset), 0 if it is not
# dead; an error DCO_UNIQUE if another ready or leased job holds its unique key.
JOB_REQUEUE = r"""
local m = ARGV[2]
local f = sound(m)
if not f or f[2] ~= '2' then return 0 end
local q, u = f[1], redis.call('HGET', jkey(m), 'u')
if u then
  local holder = unique_holder(q, u)
  if holder and holder ~= m then return redis.error_reply('DCO_UNIQUE') end
  redis.call('HSET', qk('u', q), u, m)
end
redis.call('HSET', jkey(m), 'a', '0')
to_ready(m, q, now_us() + tonumber(ARGV[3]), nil)
wake(q, 1)
return 1
"""

# ARGV: B, id -> 1 if a job was deleted
JOB_DELETE = r"""
local m = ARGV[2]
local f = sound(m)
if not f then return 0 end
forget(m, f[1], redis.call('HGET', jkey(m), 'u'))
return 1
"""

JOB_SCRIPTS = {
    name: JOB_PRELUDE + body
    for name, body in {
        "put": JOB_PUT,
        "put_many": JOB_PUT_MANY,
        "take": JOB_TAKE,
        "refuse": JOB_REFUSE,
        "finish": JOB_FINISH,
        "fail": JOB_FAIL,
        "extend": JOB_EXTEND,
        "release": JOB_RELEASE,
        "sweep": JOB_SWEEP,
        "counts": JOB_COUNTS,
        "info": JOB_INFO,
        "list": JOB_LIST,
        "queues": JOB_QUEUES,
        "bury_any": JOB_BURY_ANY,
        "purge_dead": JOB_PURGE_DEAD,
        "requeue": JOB_REQUEUE,
        "delete": JOB_DELETE,
    }.items()
}


#: What each job script answers (issue 29), as redis-py hands it over (a Lua number an int, a
#: string bytes, false nil, a table a list): every link checks the reply before the jobs' code
#: decodes it, so a server or proxy that answers otherwise raises ``UnexpectedReplyError``
#: naming the call (``_replies.expect``). Each line is the script's ``->`` comment above.
_ID = Shape(lambda reply, args: type(reply) is bytes and reply.isdigit(), "a job id")
_FIELD = nil_or(BULK)
#: A record as ``record`` lists it: the id, then its ten fields (each a string or nil).
_RECORD = (_ID, *([_FIELD] * 10))
_STATE = Shape(lambda reply, args: reply in (b"0", b"2"), "'0' or '2'")
_OUTCOME = Shape(lambda reply, args: reply in (b"ready", b"dead"), "'ready' or 'dead'")
JOB_REPLIES: dict[str, Shape] = {
    "put": array(_ID, FLAG),
    # one id per value (ARGV after B: queue, delay, max_attempts, then the values)
    "put_many": array_of(_ID, length=lambda args: len(args) - 3),
    # now, next due ('' none), lost, then per job: id, queue, attempts, lease number,
    # max_attempts, deadline, created, error (nil none), value
    "take": rows(
        (DIGITS, MS, BULK),
        (_ID, BULK, INT, INT, DIGITS, DIGITS, DIGITS, _FIELD, BULK),
    ),
    # a state or nil per job refused (five ARGV each)
    "refuse": array_of(nil_or(_STATE), length=lambda args: len(args) // 5),
    "finish": FLAG,
    "fail": nil_or(_OUTCOME),
    "extend": nil_or(DIGITS),
    "release": FLAG,
    "sweep": array(COUNT, COUNT, BULK),
    "counts": array(COUNT, COUNT, COUNT, COUNT),
    "info": nil_or(array(DIGITS, *_RECORD)),
    "list": rows((DIGITS,), _RECORD),
    "queues": array_of(BULK),
    "bury_any": FLAG,
    "purge_dead": array(COUNT, COUNT, BULK),
    "requeue": FLAG,
    "delete": FLAG,
}
expect(JOB_SCRIPTS, JOB_REPLIES)
