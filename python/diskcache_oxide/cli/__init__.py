"""The ``diskcache-oxide`` command: look inside a cache directory or a Redis namespace, its
queues, job queues and claims, repair and vacuum a directory, migrate a python-diskcache
directory, copy a directory into Redis, and serve the dashboard (docs/guide-cli.md, D-046,
D-062).

Run it as ``diskcache-oxide`` or ``python -m diskcache_oxide``. It needs click and rich,
the ``cli`` extra (``pip install 'diskcache_oxide[cli]'``); the dashboard (``serve``) also
needs Starlette, uvicorn and Jinja2, the ``dashboard`` extra. Without them the package still
imports and works: only the command says what to install. So no module here imports click
or rich at the top: the commands are declared by :func:`build`, on its first call.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._options import CLI_MODULES, INSTALL_CLI, INSTALL_DASHBOARD, absent

if TYPE_CHECKING:
    import click

__all__ = ["INSTALL_CLI", "INSTALL_DASHBOARD", "absent", "build", "main"]


def build() -> click.Group:
    """The ``diskcache-oxide`` command group (needs click and rich); tests invoke it with
    click's ``CliRunner``."""
    from ._app import build_group

    return build_group()


def main(argv: Sequence[str] | None = None, *, prog_name: str = "diskcache-oxide") -> None:
    """The console script: run the command line on ``argv`` (default: ``sys.argv[1:]``)
    and exit with its status."""
    missing = absent(CLI_MODULES)
    if missing:
        sys.stderr.write(
            f"{prog_name}: the command line needs {' and '.join(missing)}, which "
            f"{'is' if len(missing) == 1 else 'are'} not installed: {INSTALL_CLI}\n"
        )
        raise SystemExit(1)
    build().main(args=list(argv) if argv is not None else None, prog_name=prog_name)
