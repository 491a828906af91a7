"""Every public class and every public method of the package has a docstring that `help()`
shows, and the compiled core's stubs match it (stubtest runs in `make lint`)."""

from __future__ import annotations

import inspect
from typing import Any

import diskcache_oxide as dco
import diskcache_oxide.aio
import diskcache_oxide.recipes
import pytest

pytestmark = pytest.mark.oxide


def _public_classes() -> list[type]:
    seen: dict[str, type] = {}
    modules = [dco, dco.aio, dco.recipes]
    for module in modules:
        for name in getattr(module, "__all__", dir(module)):
            obj = getattr(module, name, None)
            if isinstance(obj, type) and not name.startswith("_"):
                if issubclass(obj, BaseException):
                    continue  # exceptions document themselves in errors.py's module docstring
                seen[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [seen[k] for k in sorted(seen)]


def _undocumented(cls: type) -> list[str]:
    missing = []
    if not (cls.__doc__ or "").strip():
        missing.append(cls.__qualname__)
    for name, member in inspect.getmembers(cls):
        if name.startswith("_") and name not in ("__getitem__", "__setitem__", "__delitem__"):
            continue
        if not (callable(member) or isinstance(member, property)):
            continue
        if isinstance(member, type):
            continue
        doc: Any = getattr(member, "__doc__", None)
        if not (doc or "").strip():
            missing.append(f"{cls.__qualname__}.{name}")
    return missing


@pytest.mark.parametrize("cls", _public_classes(), ids=lambda c: c.__qualname__)
def test_every_public_method_has_a_docstring(cls: type) -> None:
    assert _undocumented(cls) == []
