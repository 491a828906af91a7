"""Every Python block of the README and the docs runs as pasted.

What is collected: each fenced block whose language is ``python`` (or ``py``, ``python3``) in
``README.md`` and in every ``docs/**/*.md``, except ``docs/decisions/``. A decision record quotes
code as it stood when the decision was taken, and its sketches (a schema, a call that was
rejected) are part of the record, so they are not kept running. Nothing else is left out: the
working spec, the reliability notes (whose reproduction of an open bug runs too) and the guides
are read as a user reads them, and a block there that is not meant to run says so.

The convention, written for doc authors in ``docs/writing-docs.md``:

- A block runs on its own, in a fresh namespace, unless the line ``*continues*`` stands alone
  between it and the document's previous Python block; then it runs after the blocks it
  continues, in their namespace, in order (each test runs the whole chain again, so any one
  of them can be run alone).
- ``<!-- no-run: reason -->`` on the line before the fence keeps a block from running, for a
  real reason such as needing a server. The reason is required; the block must still compile,
  and the no-run blocks are listed at the end of the test run (``conftest.py``).
- Output, shell sessions and pseudo-code are not ``python`` blocks: ``text``, ``console`` or
  ``pycon``.

How a block runs: ``exec`` in this process, in a new module named ``__main__`` (put in
``sys.modules`` meanwhile, so a class defined by the block pickles as it does in a script),
with a temporary directory as the working directory, as ``tempfile``'s directory and as
``TMPDIR``, and a ``pytest-timeout`` limit of ``BLOCK_TIMEOUT`` seconds per block of the chain.
Compiled with the Markdown file's name and line numbers, so a traceback points into the doc.

A block must not write outside its temporary directory. Two guards catch the usual ways: every
cache directory a block opens (``Cache``, and so ``FanoutCache``, ``JobQueue``, ``Deque``,
``Index``, ``DjangoCache``, ``migrate()``) must lie inside it, and an audit hook refuses
Python-level writes elsewhere (``open`` for writing, ``os.mkdir``, ``os.remove``, ``os.rename``,
``shutil.rmtree``, ...), bytecode caches aside, by the thread that runs the block and any it
starts. Either raises in the block and fails its test. (A subprocess the block starts is not
watched; it inherits the working directory and ``TMPDIR``.) Types a block registers with
``register_type`` are unregistered afterwards.

Test ids name the file and the line of the block's opening fence: ``docs/guide-queue.md:27``.
``test_site_builds_strict`` (slow) builds the mkdocs site as ``make docs`` does.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.oxide

ROOT = Path(__file__).resolve().parents[2]

#: Seconds each block of a chain may take (a test runs its block's whole chain).
BLOCK_TIMEOUT = 60

PYTHON_LANGUAGES = frozenset({"python", "py", "python3"})
CONTINUES = "*continues*"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_NO_RUN = re.compile(r"^\s*<!--\s*no-run\b(?P<rest>.*?)-->\s*$")


@dataclass(frozen=True)
class Block:
    path: str  # relative to the repository, with forward slashes
    line: int  # the opening fence's line, counted from 1
    code: str
    continues: bool
    no_run: str | None  # the reason given ('' if none was), or None for a block that runs
    previous: Block | None  # the document's Python block before this one

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    def chain(self) -> list[Block]:
        """The blocks to run, in order: those this block continues, then itself."""
        chain = [self]
        while chain[0].continues and chain[0].previous is not None:
            chain.insert(0, chain[0].previous)
        return chain


def documents() -> list[Path]:
    docs = sorted(
        path
        for path in (ROOT / "docs").rglob("*.md")
        if (ROOT / "docs" / "decisions") not in path.parents
    )
    return [ROOT / "README.md", *docs]


def parse(path: Path) -> tuple[list[Block], list[str]]:
    """The Python blocks of one Markdown file, and what is wrong with its markers."""
    name = path.relative_to(ROOT).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    problems: list[str] = []
    continues = False
    no_run_lines: set[int] = set()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == CONTINUES:
            continues = True
        elif _NO_RUN.match(line):
            no_run_lines.add(i)
        opening = _FENCE.match(line)
        if opening is None or (opening["fence"][0] == "`" and "`" in opening["info"]):
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = i + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        body = [
            text[len(indent) :] if text.startswith(indent) else text for text in lines[i + 1 : end]
        ]
        info = opening["info"].strip()
        language = info.split()[0].lower() if info else ""
        marker = _NO_RUN.match(lines[i - 1]) if i > 0 else None
        if language in PYTHON_LANGUAGES:
            reason = None if marker is None else marker["rest"].lstrip(" :").strip()
            no_run_lines.discard(i - 1)
            if continues and not blocks:
                problems.append(f"{name}:{i + 1}: *continues* before the document's first block")
            blocks.append(
                Block(
                    name,
                    i + 1,
                    "\n".join(body) + "\n",
                    continues,
                    reason,
                    blocks[-1] if blocks else None,
                )
            )
            continues = False
        i = end + 1
    problems += [
        f"{name}:{n + 1}: a no-run marker not on the line before a python fence"
        for n in sorted(no_run_lines)
    ]
    return blocks, problems


BLOCKS: list[Block] = []
PROBLEMS: list[str] = []
for _document in documents():
    _blocks, _problems = parse(_document)
    BLOCKS += _blocks
    PROBLEMS += _problems


# ----------------------------------------------------------------------------- the guards


class OutsideTheTempDir(PermissionError):
    """A block wrote, or opened a cache, outside its temporary directory."""


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_EVENTS = frozenset(
    {
        "open",
        "os.mkdir",
        "os.remove",
        "os.rmdir",
        "os.rename",
        "os.link",
        "os.symlink",
        "os.truncate",
        "shutil.rmtree",
        "shutil.copyfile",
        "shutil.move",
    }
)


class _Guard:
    root: str | None = None  # the temporary directory while a block runs
    hits: list[str] = []
    others: frozenset[int] = frozenset()  # threads that were running before the block: not its
    local = threading.local()
    installed = False


def _outside(path: object) -> str | None:
    """The path, resolved, if it lies outside the block's directory; else None."""
    root = _Guard.root
    if root is None or isinstance(path, int) or path is None:
        return None
    text = os.fsdecode(path)  # type: ignore[arg-type]
    real = os.path.realpath(text)
    if real == os.devnull or real == root or real.startswith(root + os.sep):
        return None
    if "__pycache__" in Path(real).parts:  # bytecode written while the block imports
        return None
    return real


def _written(event: str, args: tuple[Any, ...]) -> list[object]:
    if event == "open":
        path, mode, flags = args
        if mode is None:
            return [path] if flags & _WRITE_FLAGS else []
        return [path] if any(c in mode for c in "wax+") else []
    if event in ("os.rename", "os.link", "shutil.copyfile", "shutil.move"):
        return [args[0], args[1]] if event in ("os.rename", "shutil.move") else [args[1]]
    if event == "os.symlink":
        return [args[1]]
    if event in ("os.mkdir", "os.remove", "os.rmdir") and args[-1] is not None:
        if not isinstance(args[0], int) and not os.path.isabs(os.fsdecode(args[0])):
            return []  # relative to a directory descriptor (shutil.rmtree's steps): not ours
    return [args[0]]


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _Guard.root is None or event not in _EVENTS or getattr(_Guard.local, "busy", False):
        return
    if threading.get_ident() in _Guard.others:
        return
    _Guard.local.busy = True
    try:
        outside = [real for path in _written(event, args) if (real := _outside(path))]
    finally:
        _Guard.local.busy = False
    if outside:
        message = f"{event} {', '.join(outside)}: outside the block's temporary directory"
        _Guard.hits.append(message)
        raise OutsideTheTempDir(message)


@contextmanager
def sandbox(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """A fresh ``__main__`` to exec in, with the guards on and ``tmp`` as the directory."""
    import diskcache_oxide as dc
    from diskcache_oxide import _core, core

    if not _Guard.installed:
        sys.addaudithook(_audit)  # for the rest of the process; idle while no block runs
        _Guard.installed = True
    root = os.path.realpath(tmp)
    monkeypatch.chdir(tmp)
    monkeypatch.setattr(tempfile, "tempdir", root)
    monkeypatch.setenv("TMPDIR", root)
    original = _core.CacheCore._open

    def guarded_open(self: Any, path: str, *args: Any) -> Any:
        outside = _outside(path)
        if outside:
            message = f"a cache in {outside}: outside the block's temporary directory"
            _Guard.hits.append(message)
            raise OutsideTheTempDir(message)
        return original(self, path, *args)

    monkeypatch.setattr(core.Cache, "_open", guarded_open)
    main = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)
    registered = set(dc.registered_types())
    _Guard.hits = []
    _Guard.others = frozenset(t.ident for t in threading.enumerate() if t.ident) - {
        threading.get_ident()
    }
    _Guard.root = root
    try:
        yield main
    finally:
        _Guard.root = None
        for name in set(dc.registered_types()) - registered:
            dc.unregister_type(name)


# ----------------------------------------------------------------------------- the tests


def _param(block: Block) -> Any:
    return pytest.param(
        block, id=block.id, marks=pytest.mark.timeout(BLOCK_TIMEOUT * len(block.chain()))
    )


def test_docs_have_blocks() -> None:
    """The collection finds the README's blocks and those of the guides."""
    found = {block.path for block in BLOCKS}
    assert "README.md" in found
    assert {"docs/guide-queue.md", "docs/guide-paying-once.md"} <= found
    assert len(BLOCKS) >= 30


def test_markers_are_well_formed() -> None:
    """No ``*continues*`` before a document's first block, no stray no-run marker."""
    assert PROBLEMS == []


@pytest.mark.parametrize("block", [_param(block) for block in BLOCKS])
def test_block_runs(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    if block.no_run is not None:
        assert block.no_run, f"{block.id}: a no-run block must say why: <!-- no-run: reason -->"
        compile(block.code, block.path, "exec")
        pytest.skip(f"no-run: {block.no_run}")
    chain = block.chain()
    for earlier in chain[:-1]:
        assert earlier.no_run is None, f"{block.id} continues {earlier.id}, which is no-run"
    if any("REDIS_URL" in part.code for part in chain):
        # A block about the Redis backend reads its server from REDIS_URL, as a user's app
        # reads its configuration: here, the session's own redis-server, emptied for it.
        monkeypatch.setenv("REDIS_URL", request.getfixturevalue("redis_url"))
    with sandbox(tmp_path, monkeypatch) as main:
        for part in chain:
            # Padded so that the line numbers of a traceback are the Markdown file's.
            code = compile("\n" * part.line + part.code, str(ROOT / part.path), "exec")
            exec(code, main.__dict__)
    assert _Guard.hits == [], "the block wrote outside its temporary directory"


def test_the_guards_catch_writes_outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block that writes a file or opens a cache outside its directory fails."""
    import diskcache_oxide as dc

    elsewhere = Path(tempfile.mkdtemp())  # before the sandbox: outside its directory
    (tmp_path / "block").mkdir()
    try:
        with sandbox(tmp_path / "block", monkeypatch):
            with pytest.raises(OutsideTheTempDir):
                open(elsewhere / "file", "w").close()
            with pytest.raises(OutsideTheTempDir):
                dc.Cache(str(elsewhere / "cache"))
            dc.Cache("inside").close()  # relative: in the working directory
            dc.Cache().close()  # a temporary directory: inside too
        assert len(_Guard.hits) == 2
        assert not (elsewhere / "file").exists() and not (elsewhere / "cache").exists()
    finally:
        _Guard.hits = []
        shutil.rmtree(elsewhere)


def test_parse_reads_the_convention(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chains, no-run markers, indented fences, longer fences, and the markers' problems."""
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    doc = tmp_path / "doc.md"
    doc.write_text(
        "*continues*\n\n"  # before any block: a problem
        "```python\na = 1\n```\n\n"
        "*continues*\n\n```text\nnot python\n```\n\n"
        "```py\nb = a + 1\n```\n\n"  # continues the python block before the text block
        "````markdown\n```python\nnot a block of its own\n```\n````\n\n"
        "- a list item\n\n  ```python\n  c = 3\n  ```\n\n"
        "<!-- no-run: needs a server -->\n```python\nserve()\n```\n\n"
        "<!-- no-run -->\n```python\nx = 1\n```\n\n"
        "<!-- no-run: stray -->\n\n```python\ny = 2\n```\n",
        encoding="utf-8",
    )
    blocks, problems = parse(doc)
    assert [(b.line, b.code, b.continues, b.no_run) for b in blocks] == [
        (3, "a = 1\n", True, None),
        (13, "b = a + 1\n", True, None),
        (25, "c = 3\n", False, None),
        (30, "serve()\n", False, "needs a server"),
        (35, "x = 1\n", False, ""),
        (41, "y = 2\n", False, None),
    ]
    assert [b.line for b in blocks[1].chain()] == [3, 13]
    assert [b.line for b in blocks[2].chain()] == [25]
    assert problems == [
        "doc.md:3: *continues* before the document's first block",
        "doc.md:39: a no-run marker not on the line before a python fence",
    ]


@pytest.mark.slow
def test_site_builds_strict(tmp_path: Path) -> None:
    """`make docs`: the mkdocs site builds with --strict (no broken link, no page left out)."""
    mkdocs = Path(sys.executable).with_name("mkdocs")
    if not mkdocs.exists():
        pytest.skip("mkdocs is not installed (it needs Python 3.11+; requirements-dev.txt)")
    done = subprocess.run(
        [str(mkdocs), "build", "--strict", "--quiet", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    api = (tmp_path / "site" / "api.html").read_text(encoding="utf-8")
    for anchor in ("diskcache_oxide.Cache.get", "diskcache_oxide.aio.AsyncCache.get"):
        assert f'id="{anchor}"' in api, f"the API page lacks {anchor}"
