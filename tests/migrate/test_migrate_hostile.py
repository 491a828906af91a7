"""A hostile source (issue 19.2): a python-diskcache directory altered from another process by
someone who can write to it. Whatever it holds, migrate() and ``diskcache-oxide migrate``
either skip and report the rows they cannot carry or refuse the whole source in one line;
they never write into the source, never print a traceback, and never read or copy more than
the directory really holds on disk."""

from __future__ import annotations

import copyreg
import hashlib
import json
import os
import pathlib
import pickle
import subprocess
import sys
import uuid
from typing import Any

import diskcache
import diskcache_oxide as dco
import pytest
from migrate_support import cli, cli_peak_rss, fingerprint, migration, one_line_error, tamper

pytestmark = pytest.mark.oxide

GiB = 1 << 30
MiB = 1 << 20

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="measures memory with Linux's ru_maxrss"
)
posix_only = pytest.mark.skipif(
    os.name != "posix", reason="makes sparse files with truncate(1) and measures st_blocks"
)


def _source(directory: pathlib.Path, **entries: Any) -> str:
    """A python-diskcache Cache in ``directory`` holding ``entries``, closed."""
    with diskcache.Cache(str(directory)) as source:
        for key, value in entries.items():
            source[key] = value
    return str(directory)


def _query(directory: str, sql: str) -> list[list[Any]]:
    """The rows ``sql`` selects from the source database in ``directory``, read by another
    process (so that this one holds nothing open on the source)."""
    script = (
        "import json, sqlite3, sys\n"
        "db = sqlite3.connect(sys.argv[1])\n"
        "print(json.dumps(db.execute(sys.argv[2]).fetchall()))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", script, os.path.join(directory, "cache.db"), sql],
        capture_output=True,
        text=True,
        check=True,
    )
    rows: list[list[Any]] = json.loads(found.stdout)
    return rows


def _value_files(directory: str) -> dict[str, str]:
    """key -> value file name, for the source's rows that have one."""
    rows = _query(directory, "SELECT key, filename FROM Cache WHERE filename IS NOT NULL")
    return {key: name for key, name in rows}


# ----- the destination ---------------------------------------------------------------------


def test_a_destination_that_resolves_into_the_source_is_refused(tmp_path: pathlib.Path) -> None:
    src = _source(tmp_path / "src", a=1)
    os.mkdir(os.path.join(src, "sub"))
    before = fingerprint(src)
    os.symlink(src, tmp_path / "link")
    os.symlink(os.path.join(src, "sub"), tmp_path / "sublink")
    for dst in (tmp_path / "link" / "new", tmp_path / "sublink" / "deeper" / "new"):
        message = one_line_error(cli("migrate", src, dst))
        assert "inside the source" in message and src in message
        with pytest.raises(migration.MigrationError, match="inside the source"):
            dco.migrate(src, dst)
    assert fingerprint(src) == before  # no new/, no .new.migrating-*, no snapshot


def test_a_destination_equal_to_or_inside_the_source_is_one_line(tmp_path: pathlib.Path) -> None:
    src = _source(tmp_path / "src", a=1)
    before = fingerprint(src)
    for dst in (src, os.path.join(src, "new"), os.path.join(src, "a", "b")):
        message = one_line_error(cli("migrate", src, dst))
        assert "inside the source" in message or "is the source" in message
    assert fingerprint(src) == before


def test_paths_are_taken_as_given(tmp_path: pathlib.Path) -> None:
    # A directory literally named "$MIGRATE_ROOT" (and one named "~") next to another that
    # the variable (and HOME) point at: the command must read and write the literal ones.
    _source(tmp_path / "$MIGRATE_ROOT" / "src", where="literal")
    _source(tmp_path / "elsewhere" / "src", where="expanded")
    (tmp_path / "home").mkdir()
    env = dict(os.environ, MIGRATE_ROOT=str(tmp_path / "elsewhere"), HOME=str(tmp_path / "home"))
    done = cli("migrate", "$MIGRATE_ROOT/src", "~/dst", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert not os.path.exists(tmp_path / "home" / "dst")
    with dco.Cache(tmp_path / "~" / "dst") as cache:
        assert cache["where"] == "literal"


# ----- rows ---------------------------------------------------------------------------------


def test_text_in_numeric_columns_is_skipped_and_reported(tmp_path: pathlib.Path) -> None:
    names = ["store_time", "expire_time", "access_time", "access_count", "raw", "mode", "size"]
    entries: dict[str, Any] = {name: f"value of {name}" for name in names}
    entries["size"] = os.urandom(40_000)  # a value file, whose size is checked against its row
    entries["float count"] = 1
    entries["negative count"] = 1
    entries["good"] = "still here"
    src = _source(tmp_path / "src", **entries)
    statements = [f"UPDATE Cache SET {name} = 'soon' WHERE key = '{name}';" for name in names]
    statements.append("UPDATE Cache SET access_count = 2.5 WHERE key = 'float count';")
    statements.append("UPDATE Cache SET access_count = -3 WHERE key = 'negative count';")
    statements.append("UPDATE Settings SET value = 'lots' WHERE key = 'size_limit';")
    statements.append("UPDATE Settings SET value = NULL WHERE key = 'eviction_policy';")
    tamper(src, "\n".join(statements))
    report = dco.migrate(src, tmp_path / "dst")
    settings = {s.name: s.reason for s in report.settings_skipped}
    assert "lots" in settings["size_limit"] and "NULL" in settings["eviction_policy"]
    with dco.Cache(tmp_path / "dst") as cache:  # our defaults, not what the copy filled under
        assert cache.reset("eviction_policy") == "least-recently-stored"
        assert cache.reset("size_limit") == 2**30
    reasons = {s.key: s.reason for s in report.skipped}
    assert set(reasons) == set(entries) - {"good"}
    for name in names:
        assert name in reasons[name] and "'soon'" in reasons[name], reasons[name]
    assert "access_count" in reasons["float count"] and "2.5" in reasons["float count"]
    assert "access_count" in reasons["negative count"]
    assert report.converted == 1
    summary = report.summary()
    done = cli("migrate", src, tmp_path / "dst2")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "converted 1 of 10 entries" in done.stdout and "converted 1 of 10" in summary


def test_invalid_utf8_anywhere_is_skipped_and_reported(tmp_path: pathlib.Path) -> None:
    src = _source(
        tmp_path / "src",
        key="k",
        value="v",
        tag="t",
        file=os.urandom(40_000),
        good="still here",
    )
    bad = "CAST(x'61ff62' AS TEXT)"  # 'a', an invalid byte, 'b'
    tamper(
        src,
        f"""
        UPDATE Cache SET key = {bad} WHERE key = 'key';
        UPDATE Cache SET value = {bad} WHERE key = 'value';
        UPDATE Cache SET tag = {bad} WHERE key = 'tag';
        UPDATE Cache SET filename = {bad} WHERE key = 'file';
        INSERT INTO Settings (key, value) VALUES ({bad}, 1);
        UPDATE Settings SET value = {bad} WHERE key = 'eviction_policy';
        """,
    )
    report = dco.migrate(src, tmp_path / "dst")
    reasons = {s.key: s.reason for s in report.skipped}
    assert set(reasons) == {b"a\xffb", "value", "tag", "file"}
    assert all("UTF-8" in reason for reason in reasons.values()), reasons
    assert "its key" in reasons[b"a\xffb"] and "its tag" in reasons["tag"]
    assert report.converted == 1
    settings = {s.name: s.reason for s in report.settings_skipped}
    assert "eviction_policy" in settings and "UTF-8" in settings["eviction_policy"]
    assert "UTF-8" in settings["a\\xffb"]  # the name as far as it can be read
    with dco.Cache(tmp_path / "dst") as cache:
        assert cache["good"] == "still here"
        assert cache.reset("eviction_policy") == "least-recently-stored"
    report.summary()
    done = cli("migrate", src, tmp_path / "dst2", "--json")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["converted"] == 1


class _Reduced:
    """Pickles as whatever ``reduced`` says (a callable, its arguments, a state to BUILD), so
    that a test can write the pickles a tampering writer would."""

    def __init__(self, *reduced: Any) -> None:
        self.reduced = reduced

    def __reduce__(self) -> tuple[Any, ...]:
        return self.reduced


def _uuid_with(state: Any) -> bytes:
    return pickle.dumps(_Reduced(copyreg._reconstructor, (uuid.UUID, object, None), state), 2)


#: Pickles the restricted unpickler admits (they name only allowed globals) whose objects are
#: malformed. Each would reach the engine, the FanoutCache's shard hash or the report's repr.
MALFORMED = {
    "uuid int is text": _uuid_with({"int": "not a number"}),
    "uuid int too big": _uuid_with({"int": 2**200}),
    "uuid int negative": _uuid_with({"int": -1}),
    "uuid without int": pickle.dumps(
        _Reduced(copyreg._reconstructor, (uuid.UUID, object, None)), 2
    ),
    "path with a forged slot": pickle.dumps(
        _Reduced(pathlib.PurePosixPath, ("/a",), (None, {"_str": 42})), 2
    ),
    "path with a forged text slot": pickle.dumps(
        _Reduced(pathlib.PurePosixPath, ("/a",), (None, {"_str": "/b"})), 2
    ),
    "a stand-in object": b"\x80\x02c__builtin__\nobject\n)R.",
    "a class as a value": b"\x80\x02cdatetime\ndatetime\n.",
    "nested too deep": b"\x80\x02" + b"]" * 100_000 + b"a" * 99_999 + b".",
    "tuples nested too deep": b"\x80\x02)" + b"\x85" * 5_000 + b".",
}


def _plant(directory: str, pickles: dict[str, bytes], as_keys: bool) -> None:
    """Replace the rows named after ``pickles`` with them, as pickled keys or values."""
    statements = []
    for name, data in pickles.items():
        if as_keys:
            statements.append(
                f"UPDATE Cache SET key = x'{data.hex()}', raw = 0 WHERE key = '{name}';"
            )
        else:
            statements.append(
                f"UPDATE Cache SET value = x'{data.hex()}', mode = 4 WHERE key = '{name}';"
            )
    tamper(directory, "\n".join(statements))


def _check_malformed_report(report: Any, as_keys: bool) -> None:
    assert report.converted == 1, report.summary()
    assert len(report.skipped) == len(MALFORMED)
    by_row = {(s.cache, s.rowid): s for s in report.skipped}
    assert len(by_row) == len(MALFORMED)
    for skipped in report.skipped:
        # A key that could not be decoded into plain data is reported as its stored bytes.
        assert (type(skipped.key) is bytes) if as_keys else (skipped.key in MALFORMED)
        assert skipped.reason
    summary = report.summary()
    assert "Traceback" not in summary


@pytest.mark.parametrize("as_keys", [False, True], ids=["values", "keys"])
def test_malformed_objects_the_unpickler_admits_are_skipped(
    tmp_path: pathlib.Path, as_keys: bool
) -> None:
    src = _source(tmp_path / "src", good="still here", **{name: 0 for name in MALFORMED})
    _plant(src, MALFORMED, as_keys)
    report = dco.migrate(src, tmp_path / "dst")
    _check_malformed_report(report, as_keys)
    reasons = {s.rowid: s.reason for s in report.skipped}
    assert any("UUID" in reason for reason in reasons.values())
    assert any("deeper than" in reason for reason in reasons.values())
    for how in ([], ["--json"]):
        done = cli("migrate", src, tmp_path / f"dst-cli{len(how)}", *how)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        assert "Traceback" not in done.stdout
    with dco.Cache(tmp_path / "dst") as cache:
        assert list(cache) == ["good"]


def test_malformed_keys_of_a_fanout_cache_are_skipped(tmp_path: pathlib.Path) -> None:
    src = str(tmp_path / "src")
    with diskcache.FanoutCache(src, shards=2) as source:
        source["good"] = "still here"
        for name in MALFORMED:
            source[name] = 0
    for shard in ("000", "001"):
        here = os.path.join(src, shard)
        present = {key for (key,) in _query(here, "SELECT key FROM Cache")}
        _plant(here, {n: p for n, p in MALFORMED.items() if n in present}, as_keys=True)
    report = dco.migrate(src, tmp_path / "dst")
    _check_malformed_report(report, as_keys=True)
    done = cli("migrate", src, tmp_path / "dst-cli")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


class Opaque:
    """A class the restricted unpickler refuses."""

    def __init__(self, n: int) -> None:
        self.n = n


def test_the_summary_is_bounded(tmp_path: pathlib.Path) -> None:
    # First (so listed): a key 50,000 characters long, and a row whose refusal is long.
    entries: dict[str, Any] = {"k" * 50_000: Opaque(-1), "long reason": 0}
    entries.update({f"opaque {n}": Opaque(n) for n in range(3000)})
    entries["good"] = 1
    src = _source(tmp_path / "src", **entries)
    # A pickle naming a module 100,000 characters long: its refusal quotes the name.
    named = b"\x80\x02c" + b"m" * 100_000 + b"\nname\n."
    _plant(src, {"long reason": named}, as_keys=False)
    junk = ",".join(f"('junk {n}', {n})" for n in range(5000))
    tamper(src, f"INSERT INTO Settings (key, value) VALUES {junk};")
    report = dco.migrate(src, tmp_path / "dst")
    assert len(report.skipped) == 3002 and report.converted == 1  # the report keeps them all
    assert len(report.settings_skipped) == 5000
    for summary in (report.summary(), cli("migrate", src, tmp_path / "dst2").stdout):
        lines = summary.splitlines()
        assert len(lines) < 150, len(lines)
        assert max(len(line) for line in lines) < 700
        assert "more characters" in summary  # the long key and the long reason, cut
        assert "2952 more" in summary  # the entries not listed are counted
        assert "4950 more" in summary


# ----- the schema ---------------------------------------------------------------------------

_COLUMNS = (
    "rowid, key, raw, store_time, expire_time, access_time, access_count, tag, size, mode, "
    "filename, value"
)


def _recreate(definition: str) -> str:
    """SQL that rebuilds the Cache table with ``definition`` and the same rows."""
    return f"""
    ALTER TABLE Cache RENAME TO Old;
    CREATE TABLE Cache ({definition});
    INSERT INTO Cache ({_COLUMNS}) SELECT {_COLUMNS} FROM Old;
    DROP TABLE Old;
    """


_DEFINITION = (
    "rowid INTEGER PRIMARY KEY, key BLOB, raw INTEGER, store_time REAL, expire_time REAL, "
    "access_time REAL, access_count INTEGER DEFAULT 0, tag BLOB, size INTEGER DEFAULT 0, "
    "mode INTEGER DEFAULT 0, filename TEXT, value BLOB"
)

_GENERATED = f"""
    ALTER TABLE Cache RENAME TO Old;
    CREATE TABLE Cache ({
    _DEFINITION.replace(
        "value BLOB", "value BLOB GENERATED ALWAYS AS (zeroblob(100000000)) VIRTUAL"
    )
});
    INSERT INTO Cache ({_COLUMNS[: -len(", value")]}) SELECT {_COLUMNS[: -len(", value")]} FROM Old;
    DROP TABLE Old;
"""

#: Tamperings of the schema -> what the refusal must name.
SCHEMAS = {
    "Cache a view": (
        "ALTER TABLE Cache RENAME TO Hidden; CREATE VIEW Cache AS SELECT * FROM Hidden;",
        "Cache is a view",
    ),
    "Settings a view": (
        "ALTER TABLE Settings RENAME TO Hidden; CREATE VIEW Settings AS SELECT * FROM Hidden;",
        "Settings is a view",
    ),
    "a generated value": (_GENERATED, "generated"),
    "a column missing": ("ALTER TABLE Cache DROP COLUMN tag;", "tag"),
    "a column more": ("ALTER TABLE Cache ADD COLUMN extra BLOB;", "extra"),
    "a column of another type": (
        _recreate(_DEFINITION.replace("store_time REAL", "store_time TEXT")),
        "store_time",
    ),
    "rowid not the key": (
        _recreate(_DEFINITION.replace("INTEGER PRIMARY KEY", "INTEGER")),
        "rowid",
    ),
    "without rowid": (
        _recreate(_DEFINITION).replace("value BLOB)", "value BLOB) WITHOUT ROWID"),
        "WITHOUT ROWID",
    ),
}


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_tables_of_another_shape_are_refused(tmp_path: pathlib.Path, name: str) -> None:
    sql, named = SCHEMAS[name]
    src = _source(tmp_path / "src", a=1, b=b"x" * 40_000)
    tamper(src, sql)
    with pytest.raises(dco.NotACacheError, match="python-diskcache") as refused:
        dco.migrate(src, tmp_path / "dst")
    assert named in str(refused.value)
    assert not os.path.exists(tmp_path / "dst")
    assert [p for p in os.listdir(tmp_path) if p != "src"] == []
    assert named in one_line_error(cli("migrate", src, tmp_path / "dst"))


def test_a_view_that_never_ends_is_refused_at_once(tmp_path: pathlib.Path) -> None:
    src = _source(tmp_path / "src", a=1)
    tamper(
        src,
        f"""
        DROP TABLE Cache;
        CREATE VIEW Cache ({_COLUMNS}) AS
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)
            SELECT i, 'k' || i, 1, 0.0, NULL, 0.0, 0, NULL, 0, 1, NULL, zeroblob(1000000)
            FROM n;
        """,
    )
    message = one_line_error(cli("migrate", src, tmp_path / "dst", timeout=30))
    assert "Cache is a view" in message


def test_a_damaged_database_is_refused_in_one_line(tmp_path: pathlib.Path) -> None:
    src = _source(tmp_path / "src", **{f"k{n}": "v" * 500 for n in range(2000)})
    size = os.path.getsize(os.path.join(src, "cache.db"))
    # The middle half of the file overwritten with 0xff from another process: table pages
    # whose type byte no SQLite page has.
    middle = size // 4096 // 4 * 4096
    script = (
        "import sys\n"
        "with open(sys.argv[1], 'r+b') as db:\n"
        "    db.seek(int(sys.argv[2]))\n"
        "    db.write(b'\\xff' * int(sys.argv[3]))\n"
    )
    subprocess.run(
        [sys.executable, "-c", script, os.path.join(src, "cache.db"), str(middle), str(size // 2)],
        check=True,
    )
    # Found while copying, once the progress bar may have started: the last line is the error.
    done = cli("migrate", src, tmp_path / "dst")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines()[-1].startswith("Error: cannot read"), done.stderr
    assert "damaged" in done.stderr.splitlines()[-1]
    with pytest.raises(migration.MigrationError, match="damaged"):
        dco.migrate(src, tmp_path / "dst")
    assert [p for p in os.listdir(tmp_path) if p != "src"] == []


# ----- reads bounded by the disk ------------------------------------------------------------


def _sparse(directory: str, key: str, length: int) -> None:
    """Grow ``key``'s value file to ``length`` bytes without writing them (a file with a hole),
    and set its row's size to match, from another process."""
    path = os.path.join(directory, _value_files(directory)[key])
    subprocess.run(["truncate", "-s", str(length), path], check=True)
    tamper(directory, f"UPDATE Cache SET size = {length} WHERE key = '{key}';")


@linux_only
def test_a_sparse_value_file_is_not_read(tmp_path: pathlib.Path) -> None:
    src = _source(
        tmp_path / "src",
        binary=os.urandom(100_000),
        text="line\n" * 20_000,
        pickled=list(range(20_000)),
        good="still here",
    )
    for key in ("binary", "text", "pickled"):
        _sparse(src, key, GiB)
    done, peak = cli_peak_rss("migrate", src, tmp_path / "dst", "--json")
    assert done.returncode == 0, done.stderr
    assert peak < 300 * MiB, f"peak RSS {peak / MiB:.0f} MiB"
    report = json.loads(done.stdout)
    reasons = {s["key"]: s["reason"] for s in report["skipped"]}
    assert set(reasons) == {"binary", "text", "pickled"}
    for reason in reasons.values():
        assert "on disk" in reason, reason
    assert report["converted"] == 1


@linux_only
def test_a_large_value_file_is_streamed(tmp_path: pathlib.Path) -> None:
    big = tmp_path / "big.bin"
    digest = hashlib.sha256()
    with open(big, "wb") as writer:
        for _ in range(320):
            chunk = os.urandom(MiB)
            digest.update(chunk)
            writer.write(chunk)
    src = str(tmp_path / "src")
    with diskcache.Cache(src) as source, open(big, "rb") as reader:
        source.set("big", reader, read=True)
        source["small"] = b"s" * 40_000
    big.unlink()
    done, peak = cli_peak_rss("migrate", src, tmp_path / "dst", "--json")
    assert done.returncode == 0, done.stderr
    assert peak < 200 * MiB, f"peak RSS {peak / MiB:.0f} MiB"
    report = json.loads(done.stdout)
    assert report["converted"] == 2 and report["skipped"] == [] and report["streamed"] == 1
    assert "streamed" in report["approximated"]["store_time"]
    assert "store_time" not in report["carried"]
    with dco.Cache(tmp_path / "dst") as cache:
        copied = hashlib.sha256()
        with cache.get("big", read=True) as reader:
            for chunk in iter(lambda: reader.read(MiB), b""):
                copied.update(chunk)
        assert copied.hexdigest() == digest.hexdigest()
        assert cache["small"] == b"s" * 40_000


_LEAVE_A_LOG = """
import os, sys, diskcache
cache = diskcache.Cache(sys.argv[1])
for n in range(100):
    cache[n] = n
os._exit(0)  # never closed: the writes stay in cache.db-wal
"""


@posix_only
def test_a_sparse_log_is_not_copied(tmp_path: pathlib.Path) -> None:
    src = str(tmp_path / "src")
    subprocess.run([sys.executable, "-c", _LEAVE_A_LOG, src], check=True)
    wal = os.path.join(src, "cache.db-wal")
    assert os.path.getsize(wal) > 0
    subprocess.run(["truncate", "-s", str(2 * GiB), wal], check=True)
    message = one_line_error(cli("migrate", src, tmp_path / "dst", timeout=60))
    assert "cache.db-wal" in message and "on disk" in message
    assert [p for p in os.listdir(tmp_path) if p != "src"] == []
    with pytest.raises(migration.MigrationError, match="on disk"):
        dco.migrate(src, tmp_path / "dst")
