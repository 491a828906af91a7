"""What the command sends to a terminal when the directory holds text meant to drive it: an
OSC 52 clipboard write, a screen clear, hidden text, C1 controls, DEL, rich markup. Every
command runs as a real process on a pseudo-terminal (cli_support.in_terminal), and nothing
from the directory may reach the terminal as a control character: it arrives escaped
(``\\x1b``, ``\\x9b``, ``\\x7f``, as a repr writes them). ``--json`` stays strict JSON."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_support import in_terminal
from diskcache_oxide import Cache, JobQueue

#: A clipboard write (OSC 52, ended by BEL), a screen clear, hidden text, CSI as the C1
#: control U+009B, DEL, and rich markup and an emoji code that must print as they are.
HOSTILE = (
    "a\x1b]52;c;SGVsbG8=\x07b\x1b[2Jc\x1b[8mhidden\x1b[0md\x9b31me\x7ff [bold]g[/bold] :smile:"
)
#: How HOSTILE is printed: escaped as its repr escapes it, the markup left as it is.
SHOWN = repr(HOSTILE)[1:-1]
#: The start of SHOWN, which a listing cut to its column's width still shows.
SHOWN_START = SHOWN[:30]

#: The control sequences of HOSTILE, which must never arrive as they are.
RAW = [b"\x1b]52", b"\x1b[2J", b"\x1b[8m", b"\x1b[0md", b"\xc2\x9b", b"\x7f", b"\x07"]

#: rich's own styling (bold headers): the only escape sequences the command may send.
SGR = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Hostile:
    directory: Path
    dead: int
    ready: int


def fill_hostile(directory: Path) -> Hostile:
    """HOSTILE everywhere a command prints text from the directory: a value, a queue
    prefix, a job queue's name, a job's error and unique key, a claim's namespace, key and
    host, and the name of a file `check` reports."""
    with Cache(str(directory), eviction_policy="none") as cache:
        cache["v"] = HOSTILE
        cache["t"] = (HOSTILE, 1)
        cache.push("item", prefix=HOSTILE)
        jobs = JobQueue(cache, HOSTILE, max_attempts=1)
        jobs.put("doomed")
        doomed = jobs.take()
        assert doomed is not None
        jobs.fail(doomed, HOSTILE)
        ready = jobs.put("waiting", unique=HOSTILE)
        # A claim as a process on another host would record it (the binding's own call,
        # since Claims records this host's name).
        assert cache._claims.acquire(HOSTILE, HOSTILE, 600.0, "f" * 32, HOSTILE, 4242)
    # check reports the files in values/ that no entry names, by their path.
    (directory / "values").mkdir(exist_ok=True)
    (directory / "values" / ("junk" + HOSTILE.replace("/", "_"))).write_text("x")
    return Hostile(directory, doomed.id, ready)


@pytest.fixture
def hostile(tmp_path: Path) -> Hostile:
    return fill_hostile(tmp_path / "hostile")


def _assert_nothing_raw(received: bytes) -> str:
    """The text that reached the terminal, once it is shown to hold no control character
    but the terminal's CR LF, rich's own styling and the tab `queue peek` puts between
    a key and its value (HOSTILE holds no tab)."""
    for raw in RAW:
        assert raw not in received, (raw, received)
    text = received.decode("utf-8")
    assert not [c for c in text if 0x80 <= ord(c) <= 0x9F or c == "\x7f"], text
    plain = SGR.sub("", text)
    controls = {c for c in plain if ord(c) < 0x20} - {"\r", "\n", "\t"}
    assert not controls, (controls, text)
    return plain


# (arguments after the directory, the text that must be shown, expected exit status)
PLAIN = {
    "get": (["get", "{d}", "v"], SHOWN, 0),
    "get-tuple": (["get", "{d}", "t"], SHOWN, 0),
    "info": (["info", "{d}"], SHOWN, 0),
    "keys": (["keys", "{d}", "--limit", "0"], SHOWN, 0),
    "queue-ls": (["queue", "{d}", HOSTILE, "ls"], SHOWN, 0),
    "queue-peek": (["queue", "{d}", HOSTILE, "peek"], SHOWN, 0),
    "jobs-ls": (["jobs", "{d}", HOSTILE, "ls"], SHOWN_START, 0),
    "jobs-show-dead": (["jobs", "{d}", HOSTILE, "show", "{dead}"], SHOWN, 0),
    "jobs-show-unique": (["jobs", "{d}", HOSTILE, "show", "{ready}"], SHOWN, 0),
    "claims-ls": (["claims", "{d}", "ls"], SHOWN, 0),
    "check": (["check", "{d}"], SHOWN_START, 1),
    "unknown-job-queue": (["jobs", "{d}", "nosuch", "ls"], SHOWN_START, 1),
}


def _args(args: list[str], hostile: Hostile) -> list[str]:
    values = {"d": str(hostile.directory), "dead": str(hostile.dead), "ready": str(hostile.ready)}
    return [a.format(**values) if a.startswith("{") else a for a in args]


@pytest.mark.parametrize("case", list(PLAIN))
def test_directory_text_reaches_the_terminal_escaped(hostile: Hostile, case: str) -> None:
    args, shown, status = PLAIN[case]
    code, received = in_terminal(*_args(args, hostile), columns=1000)
    plain = _assert_nothing_raw(received)
    assert code == status, plain
    assert shown in plain, plain


@pytest.mark.parametrize(
    "args",
    [
        ["get", "{d}", "v"],
        ["info", "{d}"],
        ["keys", "{d}", "--limit", "0"],
        ["queue", "{d}", HOSTILE, "ls"],
        ["jobs", "{d}", HOSTILE, "ls"],
        ["jobs", "{d}", HOSTILE, "show", "{dead}"],
        ["claims", "{d}", "ls"],
    ],
    ids=["get", "info", "keys", "queue-ls", "jobs-ls", "jobs-show", "claims-ls"],
)
def test_json_reaches_the_terminal_escaped_and_strict(hostile: Hostile, args: list[str]) -> None:
    code, received = in_terminal(*_args(args, hostile), "--json")
    assert code == 0, received
    for raw in RAW:
        assert raw not in received, (raw, received)
    text = received.decode("utf-8").replace("\r\n", "\n")
    # JSON escapes C0 itself; DEL and C1 must come as \u escapes too, with no styling.
    assert not [c for c in text if ord(c) < 0x20 and c != "\n" or 0x7F <= ord(c) <= 0x9F]
    data = json.loads(text, parse_constant=_no_constants)
    assert any(HOSTILE in text for text in _strings(data))  # the exact text, once parsed


def _no_constants(name: str) -> Any:
    raise AssertionError(f"not JSON: {name}")


def _strings(data: Any) -> list[str]:
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [s for k, v in data.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(data, list):
        return [s for item in data for s in _strings(item)]
    return []


def test_rich_markup_from_the_directory_prints_as_it_is(hostile: Hostile) -> None:
    # Markup and emoji codes in stored text are text, in a line and in a table.
    for args in (["get", "{d}", "v"], ["jobs", "{d}", HOSTILE, "show", "{dead}"]):
        code, received = in_terminal(*_args(args, hostile), columns=1000)
        plain = _assert_nothing_raw(received)
        assert code == 0 and "[bold]g[/bold] :smile:" in plain, plain
