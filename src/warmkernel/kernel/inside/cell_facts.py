"""The kernel side of notebook mode: runs inside the user's kernel, never in the server.

Owns, inside the kernel: the version of every user name (the execution that last rebound or
mutated it), the change checks that see in-place mutation, and the files each notebook cell
opened for reading. The server loads this file as text the first time a notebook cell runs
in a kernel (`warmkernel.kernel.inside`), so a session that never binds a notebook pays
nothing for it. Like the inspection program it imports only the standard library, runs on any
Python from 3.10 on, and lives in its own module, outside the user's namespace.

Versions. After every execution (notebook cells and `run_python` alike, also ones that raise
or are interrupted) each name bound to a new object, and each watched name whose fingerprint
changed, gets that execution's number; unbound names are dropped. Names some notebook cell
read or defined are watched. `common` walks the namespace once and tells this program after
every execution; only watched names starting with `_`, which its walk skips, are looked up
here. A fingerprint is bounded, so it is cheap for a big DataFrame: the length and the
identity of up to 32 items of a list, dict, set or tuple (the first and last 16), the
attributes of an object, three levels deep and at most 256 objects per name; for numpy arrays
the shape, dtype, strides, data pointer and 1024 evenly spaced elements; for pandas objects
the shape, labels, dtypes and a value hash of 64 evenly spaced rows (of up to 64 columns).
So a change to one element of a big array or frame outside those samples can go unseen.
Numbers, strings, functions, classes and modules are only checked for rebinding.

What a notebook cell did. For each notebook execution the server learns once: the names it
rebound or mutated (and the names its top level always binds that stayed bound to the same
unchanging object, as `import pandas as pd` run again), the names its source uses that were
unbound when it ended (deleted, or assigned only on a path not taken), and the files it read
and wrote. A notebook function the cell reads looks up its free globals when called, so the
globals such functions load (found in their bytecode, transitively) count as the cell's reads.

Files. A Python audit hook sees every `open` (and `io.open_code`, so imports count) in the
process. It is installed once per kernel and does almost nothing while no cell is tracked.
During a notebook cell it records each regular file opened for reading, by absolute path, with
its size and mtime_ns at the first open; a file the cell also wrote is stamped again at its
end. A cached module's `.pyc` stands for its `.py`. Files under the interpreter's prefixes
(the standard library, site-packages), the kernel's private directories and /proc, /sys and
/dev are left out. A cell also depends on the source file of each module that a name it reads
or defines comes from, as that file was when the module was loaded: so after the file is
edited, re-running `import mod` does not make the cell look fresh while the old module stays
loaded. The server hashes the files; the kernel only stats them.
"""

from __future__ import annotations

import collections
import contextlib
import dis
import importlib.util
import os
import site
import stat
import sys
import sysconfig
import types
from collections.abc import Mapping
from itertools import islice
from typing import Any

ITEMS = 32
NODES = 256
DEPTH = 3
ELEMENTS = 1024
ROWS = 64
COLUMNS = 64
_PSEUDO_FILES = ("/proc/", "/sys/", "/dev/")
_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes, range, type(...))
_UNCHANGING = (*_IMMUTABLE, type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
"""Values that only rebinding can change (as far as a fingerprint could tell): not checked."""
_GLOBAL_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})
"""Instructions that read a global: a name a function only assigns (`global x; x = 1`) is not read."""
_identity = object.__hash__
"""An object's identity, as `id` would give it, without the `builtins.id` audit event that would
call our own audit hook once per fingerprinted item."""

_shell: Any = None
_private_before: dict[str, int] = {}
"""Watched names starting with `_` -> their identity before the execution."""
_versions: dict[str, int] = {}
"""User name -> the execution that last rebound or mutated it (0: bound before tracking began)."""
_watched: set[str] = set()
_watched_private: set[str] = set()
"""Watched names that start with `_`, which `common`'s namespace walk skips."""
_prints: dict[str, int] = {}
"""Watched name -> the fingerprint of its value after the last execution (if it can change)."""
_armed: list[Any] = [None, (), ()]
"""The number of the notebook cell about to run, the names it reads or defines, and the names it
assigns."""
_opened: list[dict[str, tuple[int, int]] | None] = [None]
"""Path -> (size, mtime_ns) at its first read in the tracked cell; None while none is tracked."""
_written: set[str] = set()
_cell_facts: dict[int, dict[str, Any]] = {}
"""Execution number -> what that notebook cell read, wrote and left unbound, until the server
fetches it."""
_changed: list[list[str]] = [[]]
"""The names the tracked cell rebound or mutated (set by `cell_ended` for `_finish_cell`)."""
_module_sources: dict[str, tuple[int, int]] = {}
"""A module's source path -> its (size, mtime_ns) when it was last loaded."""
_excluded: list[str] = []


def install(shell: Any, rebound: Mapping[str, int]) -> None:
    """Start versioning names from `common.rebound` and watching opens; called once per kernel.

    `common.follow(cell_started, cell_ended)` then keeps the versions current."""
    global _shell
    _shell = shell
    _versions.update(rebound)
    for name in shell.user_ns:
        if not name.startswith("_"):
            _versions.setdefault(name, 0)
    _excluded[:] = _excluded_roots()
    sys.addaudithook(_audit)


def begin(
    number: int, names: list[str], reads: list[str], assigns: list[str] | None = None
) -> dict[str, Any]:
    """Track the next execution as notebook cell `number`; the versions of the names it reads.

    A function defined in the notebook that the cell reads looks up its free globals when it is
    called, so those count as read too (and those of the functions they name, transitively)."""
    namespace = _shell.user_ns
    reads = [*reads, *_free_globals(reads, namespace)]
    names = [*names, *reads]
    for name in names:
        if name in _watched:
            continue
        _watched.add(name)
        if name.startswith("_"):
            _watched_private.add(name)
        if name in namespace:
            _watch_value(name, namespace[name])
    _armed[:] = [number, tuple(names), tuple(assigns or ())]
    read_versions = {name: _versions[name] for name in reads if name in _versions}
    return {"read_versions": read_versions}


def facts(numbers: list[int]) -> dict[str, Any]:
    """Every name's version, and what the given notebook executions did (handed over once)."""
    done = {str(number): _cell_facts.pop(number) for number in numbers if number in _cell_facts}
    return {"versions": _versions, "cells": done}


def _free_globals(reads: list[str], namespace: Mapping[str, Any]) -> list[str]:
    """The global names used by the notebook's own functions among `reads`, and by the functions
    those name, up to NODES functions."""
    found: dict[str, None] = {}
    pending = [namespace[name] for name in reads if name in namespace]
    seen: set[int] = set()
    while pending and len(seen) < NODES:
        value = pending.pop()
        if not isinstance(value, types.FunctionType) or value.__globals__ is not namespace:
            continue
        if _identity(value) in seen:
            continue
        seen.add(_identity(value))
        codes = [value.__code__]
        while codes:
            code = codes.pop()
            codes.extend(const for const in code.co_consts if isinstance(const, types.CodeType))
            for instruction in dis.get_instructions(code):
                name = instruction.argval
                if instruction.opname in _GLOBAL_LOADS and name in namespace and name not in found:
                    found[name] = None
                    pending.append(namespace[name])
    return [name for name in found if name not in reads]


# -- versions ----------------------------------------------------------------------------------


def _private_ids() -> dict[str, int]:
    namespace = _shell.user_ns
    return {name: _identity(namespace[name]) for name in _watched_private if name in namespace}


def cell_started() -> None:
    """Before an execution: note the watched `_` names, and track file reads of a notebook cell."""
    _private_before.clear()
    _private_before.update(_private_ids())
    if _armed[0] is not None:
        _opened[0] = {}
        _written.clear()


def cell_ended(number: int | None, before: Mapping[str, int], after: Mapping[str, int]) -> None:
    """After an execution (`before` and `after` are `common`'s walks): version what changed."""
    if _watched_private:
        before = {**before, **_private_before}
        after = {**after, **_private_ids()}
    changed: list[str] = []
    if number is not None:
        namespace = _shell.user_ns
        for name, ident in after.items():
            if before.get(name) != ident:
                _versions[name] = number
                changed.append(name)
                if name in _watched:
                    _watch_value(name, namespace[name])
        for name, fingerprint in list(_prints.items()):
            if name in after and after[name] == before.get(name):
                now = _fingerprint(namespace[name])
                if now != fingerprint:
                    _versions[name] = number
                    _prints[name] = now
                    changed.append(name)
        if _armed[0] is not None:
            changed.extend(_reassigned(number, before, after))
    _changed[0] = changed
    for table in (_versions, _prints):
        for name in table.keys() - after.keys():
            del table[name]
    if _armed[0] is not None:
        _finish_cell()


def _reassigned(number: int, before: Mapping[str, int], after: Mapping[str, int]) -> list[str]:
    """Names the tracked cell always binds (at its top level) that are bound to the very same
    unchanging object as before (`import pandas as pd` again, `x = 1` when x was 1): the value is
    what the cell gives, so the cell is taken to have written it."""
    namespace = _shell.user_ns
    found = []
    for name in _armed[2]:
        same = name in after and after[name] == before.get(name)
        if same and _versions.get(name) != number and isinstance(namespace.get(name), _UNCHANGING):
            _versions[name] = number
            found.append(name)
    return found


def _watch_value(name: str, value: Any) -> None:
    """Check the value for in-place changes from now on, unless it cannot change in place."""
    if isinstance(value, _UNCHANGING):
        _prints.pop(name, None)
    else:
        _prints[name] = _fingerprint(value)


def _fingerprint(value: Any) -> int:
    """A bounded structural hash that changes when the value is changed in place (mostly)."""
    try:
        return hash(_shape(value, DEPTH, [NODES]))
    except Exception as exc:  # user code (properties, __len__) may raise anything
        return hash(("unreadable", type(exc).__name__))


def _shape(value: Any, depth: int, budget: list[int]) -> Any:
    budget[0] -= 1
    if depth < 0 or budget[0] < 0 or isinstance(value, _IMMUTABLE):
        return None
    if isinstance(value, tuple):
        return tuple(_shape(item, depth - 1, budget) for item in _ends(value))
    if isinstance(value, list | collections.deque):
        items = _ends(value)
        return ("l", len(value), tuple((_identity(item), _shape(item, depth - 1, budget)) for item in items))
    if isinstance(value, dict):
        entries = _ends(value)
        return (
            "d",
            len(value),
            tuple(
                (_identity(key), _identity(value[key]), _shape(value[key], depth - 1, budget))
                for key in entries
            ),
        )
    if isinstance(value, set | frozenset):
        return ("s", len(value), tuple(_identity(item) for item in islice(value, ITEMS)))
    if isinstance(value, bytearray):
        return ("b", len(value), bytes(value[: ITEMS * 32]), bytes(value[-ITEMS * 32 :]))
    root = (getattr(type(value), "__module__", None) or "").partition(".")[0]
    if root == "pandas" and _pandas_kind(value):
        return _pandas_shape(value)
    if root == "numpy" and _numpy_array(value):
        return _array_shape(value)
    if isinstance(value, type | types.ModuleType | types.FunctionType | types.BuiltinFunctionType):
        return None
    attributes = getattr(value, "__dict__", None)
    if not isinstance(attributes, dict):
        return None
    return (
        "o",
        len(attributes),
        tuple(
            (name, _identity(item), _shape(item, depth - 1, budget))
            for name, item in islice(attributes.items(), ITEMS)
        ),
    )


def _ends(items: Any) -> list[Any]:
    """All items of a small container; the first and last ITEMS/2 of a big one."""
    if len(items) <= ITEMS:
        return list(items)
    half = ITEMS // 2
    return [*islice(items, half), *islice(reversed(items), half)]


def _pandas_kind(value: Any) -> bool:
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(value, pandas.DataFrame | pandas.Series | pandas.Index)


def _numpy_array(value: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(value, numpy.ndarray)


def _positions(count: int, wanted: int) -> list[int]:
    if count <= wanted:
        return list(range(count))
    return sorted({round(step * (count - 1) / (wanted - 1)) for step in range(wanted)})


def _pandas_shape(value: Any) -> Any:
    pandas = sys.modules["pandas"]
    sample = value.take(_positions(len(value), ROWS))
    labels: Any = ()
    if isinstance(value, pandas.DataFrame):
        columns = _positions(value.shape[1], COLUMNS)
        sample = sample.iloc[:, columns]
        labels = (tuple(value.columns[columns]), tuple(str(dtype) for dtype in sample.dtypes))
    try:
        values: Any = pandas.util.hash_pandas_object(sample).to_numpy().tobytes()
    except TypeError:  # unhashable cells, e.g. lists: their identities will do
        values = tuple(_identity(item) for item in sample.to_numpy(dtype=object).ravel())
    return ("p", type(value).__name__, value.shape, str(getattr(value, "dtype", "")), labels, values)


def _array_shape(array: Any) -> Any:
    numpy = sys.modules["numpy"]
    if array.size <= ELEMENTS:
        sample = array.tobytes()
    else:
        sample = array.flat[numpy.linspace(0, array.size - 1, ELEMENTS).astype(numpy.intp)].tobytes()
    pointer = array.__array_interface__["data"][0]
    return ("a", array.shape, array.dtype.str, array.strides, pointer, sample)


# -- files ------------------------------------------------------------------------------------


def _excluded_roots() -> list[str]:
    """Directories whose files are the interpreter's or the kernel's, never the user's data."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots.update(path for path in sysconfig.get_paths().values() if path)
    roots.update(site.getsitepackages() if hasattr(site, "getsitepackages") else ())
    roots.add(site.getusersitepackages())
    if os.environ.get("IPYTHONDIR"):
        roots.add(os.path.dirname(os.environ["IPYTHONDIR"]))  # the kernel's private home
    found = {os.path.join(os.path.realpath(root), "") for root in roots if root}
    found.update(os.path.join(os.path.abspath(root), "") for root in roots if root)
    return sorted(found)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event != "open":
        return
    opened = _opened[0]
    path = args[0]
    if opened is None and not (isinstance(path, str) and path.endswith((".py", ".pyc"))):
        return
    with contextlib.suppress(Exception):  # never let the tracking break the user's open
        _record_open(path, args[1], args[2], opened)


def _record_open(path: Any, mode: str | None, flags: int, opened: dict[str, tuple[int, int]] | None) -> None:
    if isinstance(path, int):
        return
    path = _normalized(os.fsdecode(path))
    if path is None:
        return
    if mode is None:  # os.open: only the flags say
        access = flags & os.O_ACCMODE
        reads, writes = access != os.O_WRONLY, access != os.O_RDONLY
    else:
        reads, writes = "r" in mode or "+" in mode, any(letter in mode for letter in "wax+")
    if reads:
        stamp = _stamp(path)
        if stamp is not None:
            if path.endswith(".py"):
                _module_sources[path] = stamp
            if opened is not None:
                opened.setdefault(path, stamp)
    if writes and opened is not None:
        _written.add(path)


def _normalized(path: str) -> str | None:
    """The absolute path that matters, or None for files that are never the user's data."""
    path = os.path.abspath(path)
    if path.endswith(".pyc"):
        with contextlib.suppress(ValueError):  # a sourceless .pyc is itself what was loaded
            path = importlib.util.source_from_cache(path)
    if path.startswith(_PSEUDO_FILES) or any(path.startswith(root) for root in _excluded):
        return None
    return path


def _stamp(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return (info.st_size, info.st_mtime_ns) if stat.S_ISREG(info.st_mode) else None


def _finish_cell() -> None:
    """Hand the tracked cell's file reads over to `_cell_files` and stop tracking."""
    number, names, _ = _armed
    opened = _opened[0] or {}
    _armed[:] = [None, (), ()]
    _opened[0] = None
    written = sorted(_written)
    for path in _written & opened.keys():
        stamp = _stamp(path)
        if stamp is None:
            del opened[path]
        else:
            opened[path] = stamp
    _written.clear()
    namespace = _shell.user_ns
    for name in names:
        source = _module_source(namespace[name]) if name in namespace else None
        if source is not None and source not in opened:
            stamp = _module_sources[source] if source in _module_sources else _stamp(source)
            if stamp is not None:
                opened[source] = stamp
    unbound = sorted(name for name in set(names) if name not in namespace)
    _cell_facts[number] = {
        "files": opened,
        "wrote": _changed[0],
        "unbound": unbound,
        "files_written": written,
    }


def _module_source(value: Any) -> str | None:
    """The source file of the module a value is, or that its function, class or type comes from."""
    if isinstance(value, types.ModuleType):
        module: Any = value
    else:
        owner = value if isinstance(value, type | types.FunctionType) else type(value)
        name = getattr(owner, "__module__", None)
        module = sys.modules.get(name) if isinstance(name, str) else None
    file = getattr(module, "__dict__", {}).get("__file__")
    return _normalized(file) if isinstance(file, str) else None
