"""Text as it may be printed on a terminal or written to a log: the one escape of control
characters that the CLI, the dashboard's server log and the task workers' logs share (ground
floor: it imports nothing of the package)."""

from __future__ import annotations

import re

__all__ = ["shown"]

#: The C0 controls, DEL and the C1 controls: the characters a terminal acts on (ESC starts
#: every escape sequence, U+009B is CSI on its own) instead of showing.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

#: How :func:`shown` writes them: as a Python repr does, so ``\x1b``, ``\x9b``, ``\x7f``.
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shown(text: object, keep: str = "") -> str:
    r"""``text`` (``str()`` of it) as it may be printed on a terminal: every C0 and C1
    control character and DEL escaped as a repr escapes it (``\x1b``, ``\n``, ``\x9b``),
    except those in ``keep`` (``get`` keeps a value's newlines and tabs). A backslash is
    left as it is, so this is for a person to read: ``--json`` and ``repr`` are exact."""
    text = str(text)

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        if char in keep:
            return char
        return _ESCAPES.get(char) or f"\\x{ord(char):02x}"

    return _CONTROL.sub(escape, text)
