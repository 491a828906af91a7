"""What every command module of the command line shares: the options declared alike, the
install hints and the check for missing libraries. Below ``_app`` (which builds the group)
and the command modules it adds (``_queues``, ``_tools``), so that they share it without
importing one another. Like the rest of ``cli``, it imports click only inside a function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = [
    "CLI_MODULES",
    "INSTALL_CLI",
    "INSTALL_DASHBOARD",
    "KEY_HELP",
    "absent",
    "json_option",
    "key_options",
    "target_argument",
]

F = TypeVar("F", bound=Callable[..., Any])

#: What to run when the command line's libraries are missing.
INSTALL_CLI = "pip install 'diskcache_oxide[cli]'"
#: What to run when the dashboard's libraries are missing.
INSTALL_DASHBOARD = "pip install 'diskcache_oxide[dashboard]'"

CLI_MODULES = ("click", "rich")


def absent(modules: Sequence[str]) -> list[str]:
    """The names in ``modules`` that cannot be imported here."""
    missing = []
    for name in modules:
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    return missing


KEY_HELP = (
    "KEY is a str as typed. --int reads it as an int; --literal as a Python literal, "
    "such as ('user', 1), b'raw', 1.5 or None: the form `keys` prints. (--json is the "
    "output format, as everywhere.)"
)


def json_option(func: F) -> F:
    """The ``--json`` flag: print machine-readable JSON."""
    import click

    return click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")(
        func
    )


def target_argument() -> Callable[[F], F]:
    """The TARGET argument: a cache directory or a Redis URL."""
    import click

    return click.argument("target", metavar="TARGET")


def key_options(func: F) -> F:
    """The ``--int`` and ``--literal`` flags: how KEY is read (:data:`KEY_HELP`)."""
    import click

    func = click.option("--literal", is_flag=True, help="KEY is a Python literal.")(func)
    return click.option("--int", "as_int", is_flag=True, help="KEY is an int.")(func)
