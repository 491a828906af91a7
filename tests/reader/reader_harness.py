"""Running the reader app for its tests: the web app and workers as subprocesses on a socket
bound here (a free port, no race), a temporary directory, and a fake OpenAI-compatible server.

Every process started is tracked by pid and killed in ``stop()``, which the fixtures always call.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
READER_ROOT = REPO / "examples" / "reader"
ARTIFACTS = REPO / "target" / "reader-artifacts"
#: An attacker's name that the test browser resolves to 127.0.0.1 (conftest.py), as after a
#: DNS rebinding: a page of that name reaching the app is "same-origin" to the browser.
REBOUND_NAME = "rebound.test"

# The reader app (examples/reader) is on sys.path through pyproject.toml's `pythonpath`.
from diskcache_oxide import ClaimInfo, Claims  # noqa: E402
from reader.config import Settings  # noqa: E402
from reader.store import Store  # noqa: E402


def wait_for(
    what: str, check: Callable[[], Any], timeout: float = 20.0, every: float = 0.05
) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


class ReaderRun:
    """One run of the app (and its workers) on a directory of its own."""

    def __init__(self, directory: Path, settings: dict[str, str]) -> None:
        self.directory = directory
        self.data = directory / "data"
        self.env = dict(os.environ)
        self.env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(READER_ROOT), os.environ.get("PYTHONPATH")])
        )
        # Every DeprecationWarning is printed to the process's log, once per place, so that
        # the tests can check the app uses none of the deprecated names (deprecations()).
        self.env["PYTHONWARNINGS"] = "default::DeprecationWarning"
        self.env.update(settings)
        self.settings = Settings.from_env(self.env)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.app: subprocess.Popen[bytes] | None = None
        self.url = ""
        self._store: Store | None = None

    # ---- processes --------------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        log = open(self.directory / f"{name}.log", "ab")
        kw.setdefault("env", self.env)
        proc = subprocess.Popen(
            [sys.executable, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            **kw,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def start_app(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/"
        self.app = self._spawn(
            "app",
            ["-m", "reader.app", str(self.data), "--fd", str(sock.fileno())],
            pass_fds=[sock.fileno()],
        )
        sock.close()
        wait_for("the app to answer", self._up, timeout=30)

    def _up(self) -> bool:
        if self.app is not None and self.app.poll() is not None:
            raise AssertionError(f"the app exited ({self.app.returncode}):\n{self.logs()}")
        try:
            with urllib.request.urlopen(self.url + "api/meter", timeout=2):
                return True
        except OSError:
            return False

    def start_worker(self) -> subprocess.Popen[bytes]:
        before = len(self.store.events("worker-start"))
        # `diskcache-oxide worker` running the reader's tasks (reader.worker) on the app's
        # cache, READER_DATA naming the app's directory, as `python -m reader` starts it.
        command = [
            "-m",
            "diskcache_oxide",
            "worker",
            str(self.data / "cache"),
            "reader.worker",
            "--pool",
            "thread",
        ]
        env = {**self.env, "READER_DATA": str(self.data)}
        proc = self._spawn(f"worker-{len(self.procs)}", command, env=env)
        wait_for("the worker to start", lambda: len(self.store.events("worker-start")) > before)
        return proc

    def stop(self) -> None:
        """Stop every process this run started: SIGTERM, then SIGKILL after 10 s."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if self._store is not None:
            self._store.close()
            self._store = None

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.directory.glob("*.log"))
        )

    def deprecations(self) -> list[str]:
        """The DeprecationWarning lines in the processes' logs."""
        return [
            line
            for log in sorted(self.directory.glob("*.log"))
            for line in log.read_text(errors="replace").splitlines()
            if "DeprecationWarning" in line
        ]

    # ---- what happened ----------------------------------------------------------------------

    @property
    def store(self) -> Store:
        """The app's directory, opened from the test process (read it, never write to it)."""
        if self._store is None:
            self._store = Store(self.data, self.settings)
        return self._store

    def payments(self, call: str = "extract") -> list[dict[str, Any]]:
        return [x for x in self.store.payments() if x["call"] == call]

    def events(self, event: str) -> list[dict[str, Any]]:
        return self.store.events(event)

    def cached(self, article_id: int) -> dict[str, Any] | None:
        value: dict[str, Any] | None = self.store.cache.get(("clean", article_id))
        return value

    def holder(self, article_id: int) -> ClaimInfo | None:
        """Who holds the claim on the article's compute-once (None if nobody does)."""
        return Claims(self.store.cache).holder(("clean", article_id))

    def meter(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + "api/meter", timeout=5) as response:
            reading: dict[str, Any] = json.loads(response.read())
        return reading


class FakeLLM:
    """An OpenAI-compatible chat completions endpoint on 127.0.0.1 that answers every request
    with a canned summary and remembers what it was asked."""

    SUMMARY = "A canned two-sentence summary from the fake model. It proves the call was made."

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length))
                fake.requests.append(
                    {
                        "path": self.path,
                        "auth": self.headers.get("Authorization"),
                        "body": body,
                    }
                )
                answer = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "model": body.get("model"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": fake.SUMMARY},
                            "finish_reason": "stop",
                        }
                    ],
                }
                data = json.dumps(answer).encode()
                status = 200 if self.path == "/v1/chat/completions" else 404
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class OtherSite:
    """Another web site on 127.0.0.1: another port, so another origin than the app's (and
    reached as ``localhost``, another site too). It serves the pages it is given and remembers
    the path of every request that reached it: what a script on some page sent home."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}
        self.requests: list[str] = []
        site = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                site.requests.append(self.path)
                page = site.pages.get(self.path)
                data = (page or "not here").encode()
                self.send_response(200 if page is not None else 404)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer  # noqa: N815 (the stdlib's names)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
