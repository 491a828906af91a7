"""Value files for ``get(..., read=True)`` (called by the binding)."""

from __future__ import annotations

import os
from typing import BinaryIO


def open_value_file(fd: int, path: str | os.PathLike[str]) -> BinaryIO:
    """A binary file object over ``fd``, a value file the engine opened and verified.

    The engine opened it without following symlinks or blocking, checked that it is a regular
    file of the length its row records and verified its checksum through this descriptor
    (D-035), so nothing is opened by name here: a concurrent delete or overwrite cannot make
    the read fail or change what it returns. ``name`` is the path as a ``str``, as from
    ``open(path, 'rb')`` (the binding passes a ``pathlib.Path``).
    """
    handle = open(fd, "rb")
    handle.raw.name = os.fspath(path)  # type: ignore[attr-defined]
    return handle
