"""The restricted unpickler: :class:`SafeUnpickler` and :func:`safe_loads` build the data types
the safe format stores and refuse every other global a pickle names, so a hostile pickle in
the source is reported and skipped without running anything (CVE-2025-69872, D-003)."""

from __future__ import annotations

import datetime
import decimal
import io
import pathlib
import pickle
import uuid
import zoneinfo
from typing import Any

from ._report import _cut

#: The built-in types a pickle may name as they are. Each builds plain data the safe format
#: stores (D-002), and each is immutable, so a pickle cannot change it for the loads that
#: follow (``BUILD`` on a class sets its attributes when the class allows it).
_IMMUTABLE_GLOBALS: dict[tuple[str, str], type] = {
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("datetime", "datetime"): datetime.datetime,
    ("datetime", "date"): datetime.date,
    ("datetime", "time"): datetime.time,
    ("datetime", "timedelta"): datetime.timedelta,
    ("datetime", "timezone"): datetime.timezone,
    ("decimal", "Decimal"): decimal.Decimal,
}

#: The other globals pickles of the safe types name. Each gets a stand-in made afresh for
#: every load (so one pickle cannot tamper with what the next one gets) that accepts only
#: the arguments the pickler itself writes for that type.
_STAND_INS = frozenset(
    {
        ("_codecs", "encode"),  # bytes, protocols 0-2
        ("builtins", "getattr"),  # ZoneInfo._unpickle, every protocol
        ("builtins", "object"),  # with copyreg._reconstructor, protocols 0-1
        ("copyreg", "_reconstructor"),  # objects such as UUID, protocols 0-1
        ("uuid", "UUID"),
        ("zoneinfo", "ZoneInfo"),
        ("zoneinfo", "ZoneInfo._unpickle"),
        ("pathlib", "PurePosixPath"),
        ("pathlib", "PureWindowsPath"),
        ("pathlib", "PosixPath"),
        ("pathlib", "WindowsPath"),
    }
)

#: How pickles of protocols 0-2 spell the modules (Python 2 names).
_PYTHON2_MODULES = {"__builtin__": "builtins", "copy_reg": "copyreg"}

#: Every global a pickle may name under :class:`SafeUnpickler`, as ``(module, name)``.
SAFE_GLOBALS = frozenset(_IMMUTABLE_GLOBALS) | _STAND_INS


def _refuse(what: str) -> pickle.UnpicklingError:
    return pickle.UnpicklingError(f"refused to unpickle: {what}")


class SafeUnpickler(pickle.Unpickler):
    """An unpickler that builds data and nothing else.

    A pickle is a small program: each global it names is looked up and may be called with
    arguments of the pickle's choosing, which is how loading one can run any code
    (CVE-2025-69872). This unpickler resolves only the globals of :data:`SAFE_GLOBALS`,
    those that pickles of the types the safe format stores name (the containers, the date
    and time types, ``Decimal``, ``UUID``, ``ZoneInfo`` and paths), and raises
    :class:`pickle.UnpicklingError` naming any other before anything is called. Mutable
    classes and helper functions are replaced by stand-ins made for this load alone, which
    accept only the arguments the pickler writes. Persistent ids are refused.

    One instance loads one pickle: make a new one (or call :func:`safe_loads`) for each.
    """

    def find_class(self, module: str, name: str) -> Any:
        """The object for global ``module.name``, if it is on the allow-list.

        :raises pickle.UnpicklingError: for any other global
        """
        module = _PYTHON2_MODULES.get(module, module)
        if module == "pathlib._local":  # where Python 3.13 defines the path classes
            module = "pathlib"
        found = _IMMUTABLE_GLOBALS.get((module, name))
        if found is not None:
            return found
        if (module, name) in _STAND_INS:
            return self._stand_in(module, name)
        raise _refuse(
            # The names come from the pickle: a hostile one can make them any length.
            f"the pickle names {_cut(module, 60)}.{_cut(name, 60)}, which is not a data type "
            "the safe format stores"
        )

    def persistent_load(self, pid: Any) -> Any:
        """Refuse persistent ids: python-diskcache never writes them."""
        raise _refuse("the pickle uses a persistent id")

    def _stand_in(self, module: str, name: str) -> Any:
        made: dict[tuple[str, str], Any] = self.__dict__.setdefault("_made", {})
        if (module, name) not in made:
            made[(module, name)] = self._make(module, name)
        return made[(module, name)]

    def _make(self, module: str, name: str) -> Any:
        if (module, name) == ("_codecs", "encode"):

            def encode(text: object, encoding: object = "latin1") -> bytes:
                if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
                    raise _refuse("_codecs.encode with anything but (str, 'latin1')")
                return text.encode("latin-1")

            return encode
        if module == "zoneinfo":

            def zone(key: object, from_cache: object = True) -> zoneinfo.ZoneInfo:
                if not isinstance(key, str):
                    raise _refuse("a ZoneInfo whose key is not a str")
                return zoneinfo.ZoneInfo(key)

            return zone
        if (module, name) == ("builtins", "getattr"):
            zone_class = self._stand_in("zoneinfo", "ZoneInfo")

            def attribute(obj: object, attr: object) -> Any:
                # Pickle reaches ZoneInfo._unpickle through getattr; nothing else may use it.
                if obj is zone_class and attr == "_unpickle":
                    return self._stand_in("zoneinfo", "ZoneInfo._unpickle")
                raise _refuse("getattr on anything but ZoneInfo._unpickle")

            return attribute
        if (module, name) == ("builtins", "object"):
            return type("object_stand_in", (), {})
        if (module, name) == ("uuid", "UUID"):

            def new_uuid(cls: object, *args: object) -> uuid.UUID:
                # NEWOBJ calls cls.__new__(cls); the UUID's state follows (BUILD).
                if args:
                    raise _refuse("a UUID made with arguments")
                return object.__new__(uuid.UUID)

            return type("UUID_stand_in", (), {"__new__": new_uuid})
        if (module, name) == ("copyreg", "_reconstructor"):
            uuid_class = self._stand_in("uuid", "UUID")
            base = self._stand_in("builtins", "object")

            def reconstruct(cls: object, of: object, state: object) -> uuid.UUID:
                if cls is not uuid_class or of is not base or state is not None:
                    raise _refuse("copyreg._reconstructor for anything but a UUID")
                return object.__new__(uuid.UUID)

            return reconstruct
        path_class: type[pathlib.PurePath] = getattr(pathlib, name)

        def path(*parts: object) -> pathlib.PurePath:
            if not all(isinstance(part, str) for part in parts):
                raise _refuse(f"a {name} made of anything but str parts")
            return path_class(*parts)  # type: ignore[arg-type]

        return path


def safe_loads(data: bytes) -> Any:
    """Decode a pickle with :class:`SafeUnpickler`.

    :raises pickle.UnpicklingError: if it names a global that is not plain data
    """
    return SafeUnpickler(io.BytesIO(data)).load()


# Named as the package's ``diskcache_oxide.migrate.SafeUnpickler`` (see ``_report``).
SafeUnpickler.__module__ = __name__.rpartition(".")[0]
