"""Clear errors from Redis, as from a directory (issue 29 §5), and the small reply kept for a
repeated write (§6, D-061), against real processes on 127.0.0.1:

- ``rediss://`` to a plain redis-server: ``ServerConnectionError`` naming the TLS handshake,
  within the connect timeout (not ``ServerTimeout`` after the socket timeout);
- a value longer than the server's ``proto-max-bulk-len`` (a redis-server started with 1mb):
  ``ValueTooLargeError`` naming the limit, at once, nothing written, never repeated;
- a server that answers with wrong replies (a tiny RESP speaker in this test, on a thread,
  answering every command with one fixed reply): every public call of ``RedisCache`` and
  ``AsyncRedisCache`` raises ``UnexpectedReplyError`` naming the call with a short escaped
  excerpt, never a ValueError/TypeError, never a silent True;
- ``WRONGTYPE`` and Lua errors: ``WrongTypeError``/``ServerScriptError`` (each a CacheError and
  a redis ``ResponseError``) naming the call and the key;
- after a pop or pull of a large value, what the server keeps for a repeat is a marker of a few
  bytes, while a repeat of a request whose reply was lost still gets the value.

Durations are measured and printed (``-s``); the assertions on them are loose bounds.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import diskcache_oxide as dco
import pytest

redis = pytest.importorskip("redis")

import redis_servers  # noqa: E402
from diskcache_oxide.errors import CacheError, UnexpectedReplyError, ValueTooLargeError  # noqa: E402
from diskcache_oxide.remote import (  # noqa: E402
    AsyncRedisCache,
    RedisCache,
    ServerConnectionError,
)
from diskcache_oxide.remote._errors import ServerScriptError, WrongTypeError  # noqa: E402
from diskcache_oxide.remote._tokens import KEEP_LIMIT  # noqa: E402

pytestmark = pytest.mark.oxide


def _namespace() -> str:
    return "e" + uuid.uuid4().hex[:12]


# ---- a server that speaks RESP wrongly ------------------------------------------------------


class WrongServer:
    """A TCP server on 127.0.0.1 that reads each RESP command (an array of bulk strings) and
    answers it with ``reply``, whatever it was: a proxy or another service speaking RESP. Its
    threads are daemons; ``close()`` stops it."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.commands: list[list[bytes]] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._socks: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while not self._closed:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self._socks.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        stream = sock.makefile("rb")
        try:
            while True:
                line = stream.readline()
                if not line.startswith(b"*"):
                    return
                args = []
                for _ in range(int(line[1:])):
                    size = int(stream.readline()[1:])
                    args.append(stream.read(size + 2)[:-2])
                self.commands.append(args)
                sock.sendall(self.reply)
        except (OSError, ValueError):
            return
        finally:
            sock.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for sock in self._socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


#: Replies no call of the cache ever gets from Redis: a status, a bulk string (with a terminal
#: escape, to see it escaped), an array of five integers, a long bulk string (bounded excerpt).
WRONG = {
    "status": (b"+OK\r\n", "b'OK'"),
    "bulk": (b"$9\r\n\x1b[31mred\x1b\r\n", "b'\\x1b[31mred\\x1b'"),
    "array": (b"*5\r\n:1\r\n:1\r\n:1\r\n:1\r\n:1\r\n", "[1, 1, 1, 1, 1]"),
    "long": (b"$100000\r\n" + b"z" * 100_000 + b"\r\n", "(100000 long)"),
}

#: Replies some calls do get (an integer, nil): a call either reads them as Redis means them or
#: raises a CacheError; never a ValueError or TypeError.
PLAUSIBLE = {"integer": b":1\r\n", "nil": b"$-1\r\n", "empty": b"*0\r\n"}


def _calls(cache: RedisCache) -> dict[str, tuple[str, Callable[[], Any]]]:
    """Every public call of RedisCache that talks to the server: the operation its errors
    name, and the call."""

    def memoized() -> Any:
        @cache.memoize()
        def double(x: int) -> int:
            return 2 * x

        return double(4)

    return {
        "set": ("set", lambda: cache.set("k", 1)),
        "__setitem__": ("setitem", lambda: cache.__setitem__("k", 1)),
        "add": ("add", lambda: cache.add("k", 1)),
        "touch": ("touch", lambda: cache.touch("k", 5)),
        "incr": ("incr", lambda: cache.incr("n")),
        "decr": ("decr", lambda: cache.decr("n")),
        "get": ("get", lambda: cache.get("k")),
        "__getitem__": ("getitem", lambda: cache["k"]),
        "read": ("read", lambda: cache.read("k")),
        "__contains__": ("contains", lambda: "k" in cache),
        "pop": ("pop", lambda: cache.pop("k")),
        "__delitem__": ("delitem", lambda: cache.__delitem__("k")),
        "delete": ("delete", lambda: cache.delete("k")),
        "peekitem": ("peekitem", lambda: cache.peekitem()),
        "get_many": ("get_many", lambda: cache.get_many(["a", "b"])),
        "set_many": ("set_many", lambda: cache.set_many({"a": 1, "b": 2})),
        "delete_many": ("delete_many", lambda: cache.delete_many(["a", "b"])),
        "expire": ("expire", lambda: cache.expire()),
        "evict": ("evict", lambda: cache.evict("t")),
        "clear": ("clear", lambda: cache.clear()),
        "stats": ("stats", lambda: cache.stats()),
        "__len__": ("length", lambda: len(cache)),
        "push": ("push", lambda: cache.push(1)),
        "push_many": ("push_many", lambda: cache.push_many([1, 2])),
        "pull": ("pull", lambda: cache.pull()),
        "pull(timeout)": ("pull", lambda: cache.pull(timeout=0.2)),
        "pull_many": ("pull_many", lambda: cache.pull_many(2)),
        "peek": ("peek", lambda: cache.peek()),
        "iterkeys": ("keys_page", lambda: list(cache.iterkeys())),
        "__iter__": ("keys_page", lambda: list(iter(cache))),
        "__reversed__": ("keys_page", lambda: list(reversed(cache))),
        "memoize": ("get", memoized),
        "get_or_compute": ("get", lambda: cache.get_or_compute("g", lambda: 1, timeout=1)),
    }


#: RedisCache's public names that send nothing to a server (or refuse at once, saying so).
_NO_SERVER = {
    "client",
    "close",
    "namespace",
    "on_decode_error",
    "pickle",
    "cull",
    "transact",
}


def test_the_wrong_reply_tests_cover_every_public_call() -> None:
    cache = RedisCache("redis://127.0.0.1:1/0", namespace=_namespace())
    public = {name for name in dir(RedisCache) if not name.startswith("_")}
    dunders = {"__setitem__", "__getitem__", "__contains__", "__delitem__", "__len__"}
    dunders |= {"__iter__", "__reversed__"}
    covered = {name.split("(")[0] for name in _calls(cache)}
    assert public | dunders <= covered | _NO_SERVER, (public | dunders) - covered - _NO_SERVER


@pytest.fixture(params=sorted(WRONG))
def wrong(request: pytest.FixtureRequest) -> Iterator[tuple[WrongServer, str]]:
    reply, shown = WRONG[request.param]
    server = WrongServer(reply)
    yield server, shown
    server.close()


def _assert_named(error: BaseException, call: str, shown: str) -> None:
    text = str(error)
    assert f"{call!r} call" in text, text
    assert shown in text, text
    assert "\x1b" not in text, "a terminal escape from the server reached the message"
    assert len(text) < 1500, len(text)


def test_every_call_on_a_server_with_wrong_replies_raises_unexpected_reply(
    wrong: tuple[WrongServer, str],
) -> None:
    server, shown = wrong
    cache = RedisCache(server.url, namespace=_namespace(), timeout=5, reconnect_for=0.5)
    failures = []
    for name, (call, run) in _calls(cache).items():
        try:
            result = run()
        except UnexpectedReplyError as error:
            _assert_named(error, call, shown)
            continue
        except Exception as error:  # noqa: BLE001 - collected, to report every call at once
            failures.append(f"{name}: {type(error).__name__}: {str(error)[:200]}")
            continue
        failures.append(f"{name}: returned {result!r}")
    cache.close()
    assert not failures, "\n".join(failures)


def test_every_async_call_on_a_server_with_wrong_replies_raises_unexpected_reply(
    wrong: tuple[WrongServer, str],
) -> None:
    server, shown = wrong

    async def main() -> list[str]:
        acache = AsyncRedisCache(server.url, namespace=_namespace(), timeout=5, reconnect_for=0.5)
        calls: dict[str, tuple[str, Callable[[], Any]]] = {
            "set": ("set", lambda: acache.set("k", 1)),
            "setitem": ("setitem", lambda: acache.setitem("k", 1)),
            "add": ("add", lambda: acache.add("k", 1)),
            "touch": ("touch", lambda: acache.touch("k", 5)),
            "incr": ("incr", lambda: acache.incr("n")),
            "decr": ("decr", lambda: acache.decr("n")),
            "get": ("get", lambda: acache.get("k")),
            "getitem": ("getitem", lambda: acache.getitem("k")),
            "read": ("read", lambda: acache.read("k")),
            "contains": ("contains", lambda: acache.contains("k")),
            "pop": ("pop", lambda: acache.pop("k")),
            "delitem": ("delitem", lambda: acache.delitem("k")),
            "delete": ("delete", lambda: acache.delete("k")),
            "peekitem": ("peekitem", lambda: acache.peekitem()),
            "get_many": ("get_many", lambda: acache.get_many(["a", "b"])),
            "set_many": ("set_many", lambda: acache.set_many({"a": 1})),
            "delete_many": ("delete_many", lambda: acache.delete_many(["a"])),
            "expire": ("expire", lambda: acache.expire()),
            "evict": ("evict", lambda: acache.evict("t")),
            "clear": ("clear", lambda: acache.clear()),
            "stats": ("stats", lambda: acache.stats()),
            "length": ("length", lambda: acache.length()),
            "push": ("push", lambda: acache.push(1)),
            "push_many": ("push_many", lambda: acache.push_many([1, 2])),
            "pull": ("pull", lambda: acache.pull()),
            "pull(timeout)": ("pull", lambda: acache.pull(timeout=0.2)),
            "pull_many": ("pull_many", lambda: acache.pull_many(2)),
            "peek": ("peek", lambda: acache.peek()),
            "keys": ("keys_page", lambda: acache.keys()),
            "get_or_compute": ("get", lambda: acache.get_or_compute("g", lambda: 1, timeout=1)),
        }
        failures = []
        for name, (call, run) in calls.items():
            try:
                result = await run()
            except UnexpectedReplyError as error:
                _assert_named(error, call, shown)
                continue
            except Exception as error:  # noqa: BLE001
                failures.append(f"{name}: {type(error).__name__}: {str(error)[:200]}")
                continue
            failures.append(f"{name}: returned {result!r}")
        await acache.close()
        return failures

    failures = asyncio.run(main())
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("kind", sorted(PLAUSIBLE))
def test_a_reply_some_calls_get_is_read_as_redis_means_it_or_raises_a_cache_error(
    kind: str,
) -> None:
    """An integer, a nil or an empty array is a reply some calls do get (a delete's count, a
    get's miss): those calls read it as Redis means it; the others raise a CacheError, and
    none a bare ValueError or TypeError."""
    server = WrongServer(PLAUSIBLE[kind])
    cache = RedisCache(server.url, namespace=_namespace(), timeout=5, reconnect_for=0.5)
    bare = []
    raised = 0
    try:
        for name, (_call, run) in _calls(cache).items():
            try:
                run()
            except (CacheError, KeyError):
                raised += 1
            except Exception as error:  # noqa: BLE001
                bare.append(f"{name}: {type(error).__name__}: {str(error)[:200]}")
    finally:
        cache.close()
        server.close()
    assert not bare, "\n".join(bare)
    assert raised > 0


def test_set_on_a_server_answering_ok_is_not_a_silent_true() -> None:
    server = WrongServer(b"+OK\r\n")
    cache = RedisCache(server.url, namespace=_namespace(), timeout=5)
    try:
        with pytest.raises(UnexpectedReplyError, match=r"'set' call's 'set' script with b'OK'"):
            cache.set("k", 1)
    finally:
        cache.close()
        server.close()


# ---- TLS to a plain server ------------------------------------------------------------------


def test_rediss_to_a_plain_server_names_the_tls_handshake_within_the_connect_timeout(
    redis_server: Any,
) -> None:
    url = f"rediss://127.0.0.1:{redis_server.port}/0?socket_connect_timeout=1"
    cache = RedisCache(url, namespace=_namespace(), timeout=8)
    began = time.monotonic()
    with pytest.raises(ServerConnectionError) as caught:
        cache.get("k")
    took = time.monotonic() - began
    print(f"rediss:// to a plain server: {type(caught.value).__name__} after {took:.2f} s")
    assert "TLS handshake" in str(caught.value)
    assert "rediss://" in str(caught.value) and "redis://" in str(caught.value)
    assert took < 5, f"{took:.1f} s: longer than the 1 s connect timeout (socket timeout: 8 s)"


def test_rediss_connect_timeout_defaults_below_the_socket_timeout(redis_server: Any) -> None:
    """Without a socket_connect_timeout in the URL, the handshake is bounded by
    CONNECT_TIMEOUT (10 s), not by the socket timeout (60 s by default)."""
    cache = RedisCache(f"rediss://127.0.0.1:{redis_server.port}/0", namespace=_namespace())
    kwargs = cache.client.connection_pool.connection_kwargs
    assert kwargs["socket_connect_timeout"] == 10.0 and kwargs["socket_timeout"] == 60.0
    began = time.monotonic()
    with pytest.raises(ServerConnectionError, match="TLS handshake"):
        cache.get("k")
    took = time.monotonic() - began
    print(f"rediss:// with the default connect timeout: failed after {took:.2f} s")
    assert took < 30


def test_async_rediss_to_a_plain_server_names_the_tls_handshake(redis_server: Any) -> None:
    url = f"rediss://127.0.0.1:{redis_server.port}/0?socket_connect_timeout=1"

    async def main() -> tuple[BaseException, float]:
        acache = AsyncRedisCache(url, namespace=_namespace(), timeout=8)
        began = time.monotonic()
        try:
            await acache.get("k")
        except Exception as error:  # noqa: BLE001 - checked below
            return error, time.monotonic() - began
        finally:
            await acache.close()
        raise AssertionError("get over rediss:// to a plain server succeeded")

    error, took = asyncio.run(main())
    print(f"async rediss:// to a plain server: {type(error).__name__} after {took:.2f} s")
    assert isinstance(error, ServerConnectionError), repr(error)
    assert "TLS" in str(error)
    assert took < 5


# ---- proto-max-bulk-len ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_bulk_server() -> Iterator[Any]:
    # Skipped, as every Redis test is, where there is no redis-server (`make redis` installs it).
    missing = redis_servers.redis_missing()
    if missing:
        pytest.skip(missing)
    server = redis_servers.RedisServer(extra=["--proto-max-bulk-len", "1mb"], name="bulk")
    yield server
    server.close()


@pytest.mark.parametrize("megabytes", [2, 8])
def test_a_value_over_proto_max_bulk_len_raises_value_too_large_at_once(
    small_bulk_server: Any, megabytes: int
) -> None:
    cache = RedisCache(small_bulk_server.url, namespace=_namespace(), reconnect_for=10)
    big = b"x" * (megabytes * 1024 * 1024)
    for name, run in {
        "set": lambda: cache.set("k", big),
        "add": lambda: cache.add("k", big),
        "push": lambda: cache.push(big),
        "set_many": lambda: cache.set_many({"a": 1, "k": big}),
    }.items():
        began = time.monotonic()
        with pytest.raises(ValueTooLargeError) as caught:
            run()
        took = time.monotonic() - began
        print(f"{name} of {megabytes} MB over a 1 MB proto-max-bulk-len: raised in {took:.3f} s")
        text = str(caught.value)
        assert "proto-max-bulk-len" in text and "1,048,576" in text, text
        assert f"{name!r} call" in text, text
        assert isinstance(caught.value, ValueError)
        assert took < 5, f"{took:.1f} s: repeated as a lost connection (reconnect_for=10)?"
    assert cache.get("k") is None and len(cache) == 0
    cache.set("k", b"y" * (900 * 1024))  # under the limit: stored
    assert len(cache.get("k")) == 900 * 1024


def test_async_value_over_proto_max_bulk_len_raises_value_too_large(
    small_bulk_server: Any,
) -> None:
    async def main() -> float:
        acache = AsyncRedisCache(small_bulk_server.url, namespace=_namespace())
        began = time.monotonic()
        try:
            with pytest.raises(ValueTooLargeError, match="proto-max-bulk-len"):
                await acache.set("k", b"x" * (8 * 1024 * 1024))
            return time.monotonic() - began
        finally:
            await acache.close()

    took = asyncio.run(main())
    print(f"async set of 8 MB over a 1 MB proto-max-bulk-len: raised in {took:.3f} s")
    assert took < 5


def test_the_limit_is_learnt_again_after_a_refusal(small_bulk_server: Any) -> None:
    """A limit lowered after the link learnt it: the server's refusal makes the link ask again,
    and it says the value is too large instead of repeating the write."""
    cache = RedisCache(small_bulk_server.url, namespace=_namespace(), reconnect_for=10)
    small_bulk_server.command("CONFIG", "SET", "proto-max-bulk-len", "8mb")
    try:
        cache.set("k", b"x" * (2 * 1024 * 1024))  # fits: the link learns 8 MB
        small_bulk_server.command("CONFIG", "SET", "proto-max-bulk-len", "1mb")
        began = time.monotonic()
        with pytest.raises(ValueTooLargeError, match="1,048,576"):
            cache.set("k2", b"x" * (4 * 1024 * 1024))
        took = time.monotonic() - began
        print(f"set of 4 MB after the limit was lowered to 1 MB: raised in {took:.3f} s")
        assert took < 5
    finally:
        small_bulk_server.command("CONFIG", "SET", "proto-max-bulk-len", "1mb")


# ---- WRONGTYPE and Lua errors ---------------------------------------------------------------


def test_wrongtype_names_the_call_and_the_key(redis_url: str) -> None:
    namespace = _namespace()
    cache = RedisCache(redis_url, namespace=namespace)
    raw = redis.Redis.from_url(redis_url)
    base = f"dco:{{{namespace}}}:".encode()
    entry = base + b"e:" + cache._member("k")
    raw.set(entry, b"not a hash")
    for name, run in {
        "get": lambda: cache.get("k"),
        "add": lambda: cache.add("k", 1),
        "pop": lambda: cache.pop("k"),
        "delete": lambda: cache.delete("k"),
        "touch": lambda: cache.touch("k"),
        "incr": lambda: cache.incr("k"),
        "contains": lambda: "k" in cache,
        "get_many": lambda: cache.get_many(["k"]),
    }.items():
        with pytest.raises(WrongTypeError) as caught:
            run()
        error = caught.value
        assert isinstance(error, CacheError) and isinstance(error, redis.ResponseError)
        text = str(error)
        assert f"{name!r} call" in text and "WRONGTYPE" in text, text
        assert "the cache key 'k'" in text, text
        assert error.key == entry
    # set replaces whatever the entry's key held (a DEL first), as it replaces an entry.
    assert cache.set("k", 1) and cache.get("k") == 1

    index = base + b"i"
    raw.delete(entry, index)
    raw.rpush(index, b"a list")
    for name, run in {
        "length": lambda: len(cache),
        "keys_page": lambda: list(iter(cache)),
        "set": lambda: cache.set("j", 1),
    }.items():
        with pytest.raises(WrongTypeError) as caught:
            run()
        text = str(caught.value)
        assert f"{name!r} call" in text and "the namespace's index" in text, text
        assert caught.value.key == index
    raw.delete(index, base + b"e:" + cache._member("k"))
    raw.set(base + b"Q:i", b"not a zset")
    for name, run in {
        "push": lambda: cache.push(1),
        "pull": lambda: cache.pull(),
        "peek": lambda: cache.peek(),
    }.items():
        with pytest.raises(WrongTypeError, match=rf"'{name}' call.*a queue's index"):
            run()
    raw.close()


def test_a_lua_error_is_a_server_script_error_naming_the_call(redis_url: str) -> None:
    """An entry whose expiry field is not a number (written by something else): the script
    fails comparing it; the caller gets a ServerScriptError naming the call, with the server's
    words escaped."""
    namespace = _namespace()
    cache = RedisCache(redis_url, namespace=namespace)
    cache.set("k", 1)
    raw = redis.Redis.from_url(redis_url)
    raw.hset(f"dco:{{{namespace}}}:e:".encode() + cache._member("k"), "e", "\x1b[2Jsoon")
    with pytest.raises(ServerScriptError) as caught:
        cache.get("k")
    text = str(caught.value)
    assert "'get' call's 'get' script failed" in text and "compare" in text, text
    assert "\x1b" not in text
    assert isinstance(caught.value, redis.ResponseError)
    with pytest.raises(ServerScriptError, match="'pop' call's 'pop' script failed"):
        cache.pop("k")
    raw.close()


def test_async_wrongtype_names_the_call_and_the_key(redis_url: str) -> None:
    namespace = _namespace()
    raw = redis.Redis.from_url(redis_url)
    raw.set(f"dco:{{{namespace}}}:i".encode(), b"not a zset")

    async def main() -> None:
        acache = AsyncRedisCache(redis_url, namespace=namespace)
        try:
            with pytest.raises(WrongTypeError, match=r"'set' call.*the namespace's index"):
                await acache.set("k", 1)
            with pytest.raises(WrongTypeError, match=r"'length' call.*the namespace's index"):
                await acache.length()
        finally:
            await acache.close()

    asyncio.run(main())
    raw.close()


def test_the_queue_overflow_refusal_still_reaches_its_operation(redis_url: str) -> None:
    """A script's own refusal (DCO_OVERFLOW) is not mapped: push turns it into its
    OverflowError, as before."""
    namespace = _namespace()
    cache = RedisCache(redis_url, namespace=namespace)
    cache.push(1)
    raw = redis.Redis.from_url(redis_url)
    key = f"dco:{{{namespace}}}:Q:i".encode()
    member = raw.zrange(key, 0, 0)[0]
    raw.zadd(key, {b"999999999999999": 999999999999999})
    raw.zrem(key, member)
    with pytest.raises(OverflowError, match="used every number"):
        cache.push(2)
    raw.close()


# ---- the reply kept for a repeated write (§6) -----------------------------------------------


def _kept(url: str, namespace: str) -> dict[bytes, int]:
    raw = redis.Redis.from_url(url)
    try:
        keys = list(raw.scan_iter(match=f"dco:{{{namespace}}}:o:*".encode()))
        return {key: int(raw.strlen(key)) for key in keys}
    finally:
        raw.close()


def test_a_popped_large_value_is_not_kept_on_the_server(redis_url: str) -> None:
    namespace = _namespace()
    cache = RedisCache(redis_url, namespace=namespace)
    big = b"v" * (1024 * 1024)
    cache.set("k", big)
    assert cache.pop("k") == big
    cache.push(big)
    assert cache.pull()[1] == big
    kept = _kept(redis_url, namespace)
    print(f"kept after a pop and a pull of 1 MiB: {kept}")
    assert kept and all(size < 64 for size in kept.values()), kept
    # A small reply is kept as it was (a repeat needs it, and it costs nothing).
    cache.set("s", b"small")
    assert cache.pop("s") == b"small"
    assert any(64 > size > 1 for size in _kept(redis_url, namespace).values())


def test_async_popped_large_value_is_not_kept_on_the_server(redis_url: str) -> None:
    namespace = _namespace()
    big = b"v" * (KEEP_LIMIT * 4)

    async def main() -> None:
        acache = AsyncRedisCache(redis_url, namespace=namespace)
        try:
            await acache.set("k", big)
            assert await acache.pop("k") == big
        finally:
            await acache.close()

    asyncio.run(main())
    kept = _kept(redis_url, namespace)
    assert kept and all(size < 64 for size in kept.values()), kept


def test_a_lost_reply_of_a_large_pop_is_still_answered_by_the_repeat(
    make_redis_server: Callable[..., Any],
) -> None:
    """The value is kept until its reply arrives: a pop cut after it ran is repeated with its
    token and gets the value; only then is the kept reply made a marker."""
    server = make_redis_server()
    namespace = _namespace()
    with redis_servers.CuttingProxy(server.port) as proxy:
        cache = RedisCache(proxy.url, namespace=namespace)
        big = b"p" * (512 * 1024)
        cache.set("k", big)
        for script in cache._link._scripts.values():
            cache.client.script_load(script.script)
        proxy.cut(str(cache._link._scripts["pop"].sha).encode())
        assert cache.pop("k") == big
        assert proxy.cut_count == 1
        assert cache.get("k") is None
        kept = _kept(server.url, namespace)
        assert kept and all(size < 64 for size in kept.values()), kept
        cache.close()


def test_a_token_repeated_after_its_reply_was_delivered_runs_nothing(redis_url: str) -> None:
    """The marker answers the same token with an error, never a second run (which would pop
    another value): that repeat cannot come from the link, whose caller already has the reply."""
    namespace = _namespace()
    cache = RedisCache(redis_url, namespace=namespace)
    big = b"q" * (KEEP_LIMIT * 2)
    cache.set("a", big)
    link = cache._link
    session = link._sessions.take()
    token = session.token()
    script = link._scripts["pop"]
    member = cache._member("a")
    reply = script(keys=link.keys, args=[link.base, member, token])
    assert reply is not None and len(reply[0]) > len(big)  # the value's frame
    assert cache.get("a") is None
    link._forget(session)
    cache.set("a", b"again")
    with pytest.raises(redis.ResponseError, match="DCO_DELIVERED"):
        script(keys=link.keys, args=[link.base, member, token])
    assert cache.get("a") == b"again"


def test_the_new_errors_are_exported() -> None:
    assert dco.UnexpectedReplyError is UnexpectedReplyError
    assert dco.ValueTooLargeError is ValueTooLargeError
    assert issubclass(ValueTooLargeError, CacheError) and issubclass(ValueTooLargeError, ValueError)


def test_every_job_call_on_a_server_with_wrong_replies_raises_unexpected_reply(
    wrong: tuple[WrongServer, str],
) -> None:
    """The job queue's scripts have declared replies too (remote._job_scripts.JOB_REPLIES):
    a JobQueue on a server that answers otherwise raises UnexpectedReplyError naming the call,
    never a bare ValueError or TypeError, and no take hands out a job made of junk."""
    server, shown = wrong
    cache = RedisCache(server.url, namespace=_namespace(), timeout=5, reconnect_for=0.5)
    queue = dco.JobQueue(cache, "q")
    calls: dict[str, Callable[[], Any]] = {
        "put": lambda: queue.put({"a": 1}),
        "put_many": lambda: queue.put_many([1, 2]),
        "take": lambda: queue.take(timeout=0),
        "take_many": lambda: queue.take_many(2, timeout=0),
        "counts": lambda: queue.counts(),
        "get": lambda: queue.get(1),
        "requeue": lambda: queue.requeue(1),
        "delete": lambda: queue.delete(1),
        "sweep": lambda: queue.sweep(),
    }
    failures = []
    for name, run in calls.items():
        try:
            result = run()
        except UnexpectedReplyError as error:
            assert shown in str(error), str(error)
            assert "\x1b" not in str(error)
            continue
        except Exception as error:  # noqa: BLE001 - collected, to report every call at once
            failures.append(f"{name}: {type(error).__name__}: {str(error)[:200]}")
            continue
        failures.append(f"{name}: returned {result!r}")
    cache.close()
    assert not failures, "\n".join(failures)
