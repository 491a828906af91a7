"""App and worker together: ``python -m reader DIR`` (what ``make reader`` runs).

Binds 127.0.0.1 (port ``READER_PORT``, default 8000, or a free one if that is taken), starts
the web app and the worker (``diskcache-oxide worker`` running the tasks of
``reader.worker``) as two processes sharing DIR, prints the address, and stops both on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``port``, or on a free port if that one is taken."""
    for candidate in (port, 0):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, candidate))
        except OSError:
            sock.close()
            continue
        sock.listen(128)
        return sock
    raise OSError(f"cannot bind {host}")


def wait_until_up(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "api/meter", timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the reader: web app and worker.")
    parser.add_argument("directory", help="the app's directory (created if missing)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("READER_PORT") or 8000))
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    directory = os.path.abspath(args.directory)
    os.makedirs(directory, exist_ok=True)
    sock = listen(args.host, args.port)
    host, port = sock.getsockname()[:2]
    url = f"http://{host}:{port}/"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), env.get("PYTHONPATH")]))
    app = subprocess.Popen(
        [sys.executable, "-m", "reader.app", directory, "--fd", str(sock.fileno())],
        env=env,
        pass_fds=[sock.fileno()],
    )
    sock.close()
    # The worker lane: `diskcache-oxide worker` running the reader's tasks (reader.worker).
    worker = subprocess.Popen(
        [sys.executable, "-m", "diskcache_oxide", "worker", os.path.join(directory, "cache")]
        + ["reader.worker", "--pool", "thread"],
        env={**env, "READER_DATA": directory},
    )
    try:
        wait_until_up(url)
        print(f"\n  The reader is running at {url}\n", flush=True)
        print(f"  data in {directory}; app pid {app.pid}, worker pid {worker.pid}", flush=True)
        print("  Ctrl-C stops both.\n", flush=True)
        while app.poll() is None and worker.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for proc in (worker, app):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in (worker, app):
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
