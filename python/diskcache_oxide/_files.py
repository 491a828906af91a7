"""Opening value files for ``get(..., read=True)`` (called by the binding)."""

from __future__ import annotations

import os
from typing import BinaryIO

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _opener(path: str, flags: int) -> int:
    return os.open(path, flags | _NOFOLLOW)


def open_value_file(path: str) -> BinaryIO:
    """Open a value file for reading, refusing a symlink put in its place (D-005)."""
    return open(path, "rb", opener=_opener)
