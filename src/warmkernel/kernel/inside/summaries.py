"""The kernel side of variable inspection: runs inside the user's kernel, never in the server.

Owns, inside the kernel: the list of user variables, bounded typed summaries of one variable
(with a time budget that really stops the work), and the registry of user summarizers. Which
execution last rebound each name comes from `common`, handed over at install. The server reads
this file as text and loads it at kernel start (`warmkernel.kernel.inside`), so it imports only
the standard library and runs on any Python from 3.10 on, also where warmkernel is not
installed; it lives in its own module, outside the user's namespace. Every answer is a dict that
`common.answer` turns into JSON, bounded in size: no summary ever returns the whole object.
"""

from __future__ import annotations

import collections
import ctypes
import datetime
import difflib
import functools
import importlib
import inspect
import math
import reprlib
import signal
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from itertools import islice
from typing import Any, cast

Summarizer = Callable[[Any], "Mapping[str, Any] | None"]

LIST_LIMIT = 300
"""Rows of one listing (sorted by name), so that the table stays within an inline reply."""
ITEMS = 10
KEYS = 20
COLUMNS = 50
_sample_rows = 5
SAMPLE_COLUMNS = 20
DESCRIBE_COLUMNS = 20
TYPE_SCAN = 100_000
REPR_CHARS = 200
CELL_CHARS = 80
TEXT_CHARS = 1000
JSON_ITEMS = 100
JSON_DEPTH = 6
DEEP_MEMORY_CELLS = 2_000_000
"""Object-like cells a DataFrame may have for its deep memory usage to count as affordable."""

_ARRAY_MODULES = frozenset({"numpy", "pandas", "polars", "torch", "xarray", "jax", "jaxlib", "cupy"})
_SIZED = (list, tuple, dict, set, frozenset, str, bytes, bytearray, collections.deque)

_shell: Any = None
_rebound: Mapping[str, int] = {}
"""User name -> the execution that last bound it to a new object (`common.rebound`)."""
_registry: dict[str, Summarizer] = {}
"""Summarizers registered with the decorator, by `module:qualname` (a re-run cell replaces its own)."""
_configured: list[str] = []
_resolved: dict[str, Summarizer] = {}


class _Timeout(BaseException):
    """The time budget ran out; BaseException so that user code's `except Exception` lets it pass."""


class _NotFound(Exception):
    """A name or attribute on the requested path does not exist."""


# -- installation ------------------------------------------------------------------------------


def install(shell: Any, rebound: Mapping[str, int], summarizers: list[str], sample_rows: int = 5) -> None:
    """Answer from `shell`'s namespace and offer `from warmkernel.inspection import summarizer`."""
    global _shell, _rebound, _sample_rows
    _shell = shell
    _rebound = rebound
    _sample_rows = sample_rows
    _configured[:] = summarizers
    _offer_decorator()


def summarizer(func: Summarizer) -> Summarizer:
    """Register `func(obj) -> dict | None`; it is tried before the built-in summaries."""
    if not callable(func):
        raise TypeError(f"summarizer needs a function, not {type(func).__name__}")
    _registry[f"{func.__module__}:{func.__qualname__}"] = func
    return func


def _offer_decorator() -> None:
    """Make `warmkernel.inspection` importable; the installed package, if any, finds us itself."""
    try:
        importlib.import_module("warmkernel.inspection")
    except ImportError:
        pass
    else:
        return
    parent = sys.modules.get("warmkernel")  # imported above if it exists at all
    if parent is None:
        parent = types.ModuleType("warmkernel", "Stand-in: warmkernel is not installed in this kernel.")
        parent.__path__ = []
        sys.modules["warmkernel"] = parent
    module = types.ModuleType("warmkernel.inspection", "Register summarizers for inspect_python_variable.")
    module.summarizer = summarizer  # pyright: ignore[reportAttributeAccessIssue]
    sys.modules["warmkernel.inspection"] = module
    parent.inspection = module  # pyright: ignore[reportAttributeAccessIssue]


# -- answers ----------------------------------------------------------------------------------


def list_variables(include_imports: bool, budget_s: float) -> dict[str, Any]:
    """User names, sorted: no `_` names, no IPython internals, and unless asked no imports
    (modules, and functions and classes defined outside the user's cells)."""
    namespace = _shell.user_ns
    hidden = _shell.user_ns_hidden
    names: list[str] = []
    modules_hidden = imports_hidden = 0
    for name, value in list(namespace.items()):
        if name.startswith("_") or hidden.get(name, _NOT_THERE) is value:
            continue
        if not include_imports and _imported(value):
            imports_hidden += 1
            modules_hidden += isinstance(value, types.ModuleType)
            continue
        names.append(name)
    names.sort()
    rows = [
        {
            "name": name,
            "type": _type_name(namespace[name]),
            "size_bytes": None,
            "shape": None,
            "length": None,
            "execution": _rebound.get(name),
        }
        for name in names[:LIST_LIMIT]
    ]
    # Sizes and shapes may run user code (__sizeof__, properties): they get the budget.
    status = "ok"
    try:
        with _budget(budget_s):
            for row in rows:
                value = namespace[row["name"]]
                row["size_bytes"] = _size_of(value)
                row["shape"], row["length"] = _shape_and_length(value)
    except (_Timeout, KeyboardInterrupt):  # the server interrupts work that outlived the budget
        status = "timeout"
    return {
        "status": "ok",
        "variables": rows,
        "total": len(names),
        "imports_hidden": imports_hidden,
        "modules_hidden": modules_hidden,
        "summary_status": status,
    }


def _imported(value: Any) -> bool:
    """A module, or a function or class that no cell of this kernel defined (its `__module__` is
    not the user's namespace): `import numpy as np`, `from sklearn import LinearRegression`."""
    if isinstance(value, types.ModuleType):
        return True
    if not (isinstance(value, type) or inspect.isroutine(value)):
        return False
    try:
        return getattr(value, "__module__", None) != _shell.user_module.__name__
    except Exception:
        return False


def inspect_variable(path: str, budget_s: float) -> dict[str, Any]:
    """A bounded typed summary of `name` or `name.attr.attr`; nothing else is evaluated."""
    summary: dict[str, Any] = {
        "name": path,
        "type": None,
        "size_bytes": None,
        "size_kind": "shallow",
        "summary_status": "ok",
    }
    if path in _rebound:
        summary["execution"] = _rebound[path]
    try:
        with _budget(budget_s):
            value = _resolve(path)
            summary["type"] = _type_name(value)
            summary["size_bytes"] = _size_of(value)
            details = _summarize(value)
    except (_Timeout, KeyboardInterrupt):  # the server interrupts work that outlived the budget
        summary.update(summary_status="timeout", budget_s=budget_s)
    except _NotFound as exc:
        return {"status": "not_found", "message": str(exc)}
    except Exception as exc:
        return {"status": "error", "message": f"evaluating {path} raised {_exception(exc)}"}
    else:
        summary.update((key, item) for key, item in details.items() if key not in summary)
    return {"status": "ok", "summary": _jsonable(summary)}


_NOT_THERE = object()


def _resolve(path: str) -> Any:
    first, *attributes = path.split(".")
    namespace = _shell.user_ns
    if first not in namespace:
        visible = [name for name in namespace if not name.startswith("_")]
        raise _NotFound(f"name {first!r} is not defined" + _did_you_mean(first, visible))
    value = namespace[first]
    walked = first
    for attribute in attributes:
        try:
            value = getattr(value, attribute)
        except AttributeError:
            try:
                known = [name for name in dir(value) if not name.startswith("_")]
            except Exception:
                known = []
            raise _NotFound(
                f"{walked} ({_type_name(value)}) has no attribute {attribute!r}"
                + _did_you_mean(attribute, known)
            ) from None
        walked = f"{walked}.{attribute}"
    return value


def _did_you_mean(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


@contextmanager
def _budget(seconds: float) -> Iterator[None]:
    """Raise `_Timeout` inside the work once `seconds` pass, so the work really stops.

    In the main thread by SIGALRM; in a subshell's thread (ipykernel 7 runs an inspection there
    while a cell runs) by an asynchronous exception, which stops Python code but not a long call
    into C. The alarm fires at most once.
    """
    if seconds <= 0:
        yield
        return
    if threading.current_thread() is not threading.main_thread():
        with _thread_budget(seconds):
            yield
        return
    armed = [True]

    def alarm(signum: int, frame: object) -> None:
        if armed[0]:
            armed[0] = False
            raise _Timeout

    previous_handler = signal.signal(signal.SIGALRM, alarm)
    previous_timer = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        try:
            yield
        finally:
            # An alarm landing here, before `armed` is cleared, ends this block early with
            # `_Timeout`; the outer block still restores the handler.
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_timer[0] > 0:
            signal.setitimer(signal.ITIMER_REAL, *previous_timer)


@contextmanager
def _thread_budget(seconds: float) -> Iterator[None]:
    """`_budget` for a thread other than the main one: a timer raises `_Timeout` in this thread."""
    target = ctypes.c_ulong(threading.get_ident())
    lock = threading.Lock()
    state = {"armed": True, "fired": False}

    def fire() -> None:
        with lock:
            if state["armed"]:
                state["armed"], state["fired"] = False, True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, ctypes.py_object(_Timeout))

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        with lock:
            state["armed"] = False
            if state["fired"]:  # raised already, or still pending: then it is withdrawn
                ctypes.pythonapi.PyThreadState_SetAsyncExc(target, None)


# -- facts every variable has -------------------------------------------------------------------


def _type_name(value: Any) -> str:
    return _qualified(type(value))


def _qualified(kind: type) -> str:
    module = getattr(kind, "__module__", None)
    name = getattr(kind, "__qualname__", None) or kind.__name__
    return name if module in (None, "builtins") else f"{module}.{name}"


def _root_module(value: Any) -> str:
    return (getattr(type(value), "__module__", None) or "").partition(".")[0]


def _size_of(value: Any) -> int | None:
    """Shallow size in bytes: for arrays and frames, their data without following references."""
    try:
        root = _root_module(value)
        if _is_pandas_data(value):
            usage = value.memory_usage(index=True, deep=False)
            return int(usage.sum()) if hasattr(usage, "sum") else int(usage)
        if _is_pandas_index(value):
            return int(value.memory_usage(deep=False))
        if root == "polars" and hasattr(value, "estimated_size"):
            return int(value.estimated_size())
        if root == "torch" and hasattr(value, "element_size"):
            return int(value.element_size() * value.nelement())
        if root in _ARRAY_MODULES and isinstance(getattr(value, "nbytes", None), int):
            return value.nbytes
        return sys.getsizeof(value)
    except _Timeout:
        raise
    except Exception:
        return None


def _shape_and_length(value: Any) -> tuple[list[int] | None, int | None]:
    """Shape of known array types and length of built-in containers: cheap facts only."""
    if _root_module(value) in _ARRAY_MODULES:
        try:
            shape = getattr(value, "shape", None)
        except Exception:
            shape = None
        if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
            return list(shape), None
        return None, None
    if isinstance(value, _SIZED):
        return None, len(value)
    return None, None


# -- summaries --------------------------------------------------------------------------------


def _summarize(value: Any) -> dict[str, Any]:
    """User summarizers first, then the first built-in one that fits; failures are noted."""
    errors: list[str] = []
    for label, func in _user_summarizers(errors):
        try:
            fields = func(value)
        except Exception as exc:
            errors.append(f"{label} raised {_exception(exc)}")
            continue
        if fields is None:
            continue
        if not isinstance(fields, Mapping):
            errors.append(f"{label} returned {type(fields).__name__}, not a dict or None")
            continue
        return {"kind": "custom", **fields, "summarizer": label, **_noted(errors)}
    return {**_builtin_summary(value), **_noted(errors)}


def _noted(errors: list[str]) -> dict[str, Any]:
    return {"summarizer_errors": errors} if errors else {}


def _user_summarizers(errors: list[str]) -> list[tuple[str, Summarizer]]:
    """Configured `module:function` entries (imported on first use), then decorated ones."""
    found: list[tuple[str, Summarizer]] = []
    for spec in _configured:
        func = _resolved.get(spec)
        if func is None:
            try:
                func = _load(spec)
            except Exception as exc:
                errors.append(f"{spec} could not be loaded: {_exception(exc)}")
                continue
            _resolved[spec] = func
        found.append((spec, func))
    found.extend(_registry.items())
    return found


def _load(spec: str) -> Summarizer:
    module_name, _, attribute = spec.partition(":")
    found: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        found = getattr(found, part)
    if not callable(found):
        raise TypeError(f"{spec} is a {type(found).__name__}, not a function")
    return cast(Summarizer, found)


def _builtin_summary(value: Any) -> dict[str, Any]:
    for applies, summarize in _BUILTINS:
        if applies(value):
            return summarize(value)
    return _object_summary(value)


def _instance_of(module: str, *names: str) -> Callable[[Any], bool]:
    """True for instances of `module.name`, checked only once that module is already imported."""

    def applies(value: Any) -> bool:
        loaded = sys.modules.get(module)
        if loaded is None:
            return False
        kinds = tuple(
            kind for kind in (getattr(loaded, name, None) for name in names) if isinstance(kind, type)
        )
        return bool(kinds) and isinstance(value, kinds)

    return applies


_is_pandas_data = _instance_of("pandas", "DataFrame", "Series")
_is_pandas_index = _instance_of("pandas", "Index")


# pandas


def _pandas_frame(frame: Any) -> dict[str, Any]:
    rows, width = frame.shape
    shown = frame.iloc[:, :COLUMNS]
    nulls = shown.isna().sum()
    columns = [
        {"name": label, "dtype": str(dtype), "nulls": int(count)}
        for label, dtype, count in zip(shown.columns, shown.dtypes, nulls, strict=True)
    ]
    numeric = shown.select_dtypes(include="number").iloc[:, :DESCRIBE_COLUMNS]
    describe = {}
    if rows and numeric.shape[1]:
        stats = numeric.describe()
        describe = {
            str(label): _rounded(dict(zip(stats.index, stats.iloc[:, position], strict=True)))
            for position, label in enumerate(stats.columns)
        }
    sample = frame.iloc[:_sample_rows, :SAMPLE_COLUMNS]
    labels = [str(label) for label in sample.columns]
    records = [dict(zip(labels, row, strict=True)) for row in sample.itertuples(index=False, name=None)]
    summary: dict[str, Any] = {
        "kind": "pandas.DataFrame",
        "shape": [rows, width],
        "columns": columns,
        "index": _pandas_index_facts(frame.index),
        "describe": describe,
        "sample_rows": records,
        "sample_index": list(sample.index),
    }
    if width > COLUMNS:
        summary["columns_shown"] = COLUMNS
    summary.update(_pandas_memory(frame, object_columns=sum(dtype.kind == "O" for dtype in frame.dtypes)))
    return summary


def _pandas_memory(value: Any, object_columns: int) -> dict[str, Any]:
    """The deep size (what the objects in object columns hold too) beside the shallow `size_bytes`,
    when the object-like cells are few enough to measure quickly."""
    if object_columns * len(value) > DEEP_MEMORY_CELLS:
        return {"deep_size_bytes": None}
    usage = value.memory_usage(index=True, deep=True)
    return {"deep_size_bytes": int(usage.sum() if hasattr(usage, "sum") else usage)}


def _pandas_index_facts(index: Any) -> dict[str, Any]:
    facts: dict[str, Any] = {"type": type(index).__name__, "dtype": str(index.dtype)}
    if index.nlevels > 1:
        facts["names"] = list(index.names)
    else:
        facts["name"] = index.name
    return facts


def _pandas_series(series: Any) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "kind": "pandas.Series",
        "series_name": series.name,
        "length": len(series),
        "dtype": str(series.dtype),
        "nulls": int(series.isna().sum()),
        "index": _pandas_index_facts(series.index),
    }
    pandas = sys.modules["pandas"]
    if len(series) and pandas.api.types.is_numeric_dtype(series.dtype) and series.dtype.kind != "b":
        summary["describe"] = _rounded(series.describe().to_dict())
    elif len(series):
        counts = series.value_counts(dropna=False).head(ITEMS)
        summary["top_values"] = [{"value": v, "count": int(n)} for v, n in counts.items()]
    head = series.iloc[:ITEMS]  # each value with its label: `df.dtypes` pairs a column with its dtype
    summary["sample"] = [{"index": label, "value": item} for label, item in head.items()]
    summary.update(_pandas_memory(series, object_columns=int(series.dtype.kind == "O")))
    return summary


def _pandas_index(index: Any) -> dict[str, Any]:
    summary = {"kind": "pandas.Index", "length": len(index), **_pandas_index_facts(index)}
    summary["first"] = list(index[:KEYS])
    return summary


# numpy


def _ndarray(array: Any) -> dict[str, Any]:
    numpy = sys.modules["numpy"]
    summary: dict[str, Any] = {
        "kind": "numpy.ndarray",
        "shape": list(array.shape),
        "dtype": str(array.dtype),
        "nbytes": int(array.nbytes),
    }
    if array.size and array.dtype.kind in "biuf":
        with warnings.catch_warnings(), numpy.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            if array.dtype.kind == "f":
                summary["nan_count"] = int(numpy.isnan(array).sum())
                low, high, mean = numpy.nanmin(array), numpy.nanmax(array), numpy.nanmean(array)
            else:
                low, high, mean = array.min(), array.max(), array.mean()
        summary["stats"] = _rounded({"min": low, "max": high, "mean": mean})
    summary["sample"] = array.flat[:ITEMS].tolist()
    return summary


def _numpy_scalar(value: Any) -> dict[str, Any]:
    return {"kind": "numpy.scalar", "dtype": str(value.dtype), "value": value.item(), "repr": _repr(value)}


# polars, xarray, torch


def _polars_frame(frame: Any) -> dict[str, Any]:
    shown = frame.select(frame.columns[:COLUMNS])
    nulls = shown.null_count().row(0)
    columns = [
        {"name": name, "dtype": str(dtype), "nulls": int(count)}
        for name, dtype, count in zip(shown.columns, shown.dtypes, nulls, strict=True)
    ]
    sample = frame.select(frame.columns[:SAMPLE_COLUMNS]).head(_sample_rows)
    summary = {
        "kind": "polars.DataFrame",
        "shape": list(frame.shape),
        "columns": columns,
        "sample_rows": sample.rows(named=True),
        "estimated_bytes": int(frame.estimated_size()),
    }
    if frame.width > COLUMNS:
        summary["columns_shown"] = COLUMNS
    return summary


def _polars_series(series: Any) -> dict[str, Any]:
    return {
        "kind": "polars.Series",
        "series_name": series.name,
        "length": len(series),
        "dtype": str(series.dtype),
        "nulls": int(series.null_count()),
        "sample": series.head(ITEMS).to_list(),
    }


def _xarray_data_array(array: Any) -> dict[str, Any]:
    return {
        "kind": "xarray.DataArray",
        "array_name": array.name,
        "shape": list(array.shape),
        "dims": {str(dim): int(size) for dim, size in array.sizes.items()},
        "dtype": str(array.dtype),
        "coords": [str(name) for name in islice(array.coords, KEYS)],
        "attrs": [str(name) for name in islice(array.attrs, KEYS)],
        "nbytes": int(array.nbytes),
    }


def _xarray_dataset(dataset: Any) -> dict[str, Any]:
    variables = [
        {"name": str(name), "dims": [str(dim) for dim in var.dims], "dtype": str(var.dtype)}
        for name, var in islice(dataset.data_vars.items(), COLUMNS)
    ]
    return {
        "kind": "xarray.Dataset",
        "dims": {str(dim): int(size) for dim, size in dataset.sizes.items()},
        "data_vars": variables,
        "data_vars_total": len(dataset.data_vars),
        "coords": [str(name) for name in islice(dataset.coords, KEYS)],
        "attrs": [str(name) for name in islice(dataset.attrs, KEYS)],
        "nbytes": int(dataset.nbytes),
    }


def _torch_tensor(tensor: Any) -> dict[str, Any]:
    return {
        "kind": "torch.Tensor",
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype),
        "device": str(tensor.device),
        "requires_grad": bool(tensor.requires_grad),
    }


# the standard library


def _scalar(value: Any) -> dict[str, Any]:
    kind = "none" if value is None else "bool" if isinstance(value, bool) else "number"
    return {"kind": kind, "value": value, "repr": _repr(value)}


def _text(value: str | bytes | bytearray) -> dict[str, Any]:
    summary: dict[str, Any] = {"kind": "str" if isinstance(value, str) else "bytes", "length": len(value)}
    if isinstance(value, str):
        summary["lines"] = value.count("\n") + 1 if value else 0
        summary["head"] = value[:TEXT_CHARS]
    else:
        summary["head"] = repr(bytes(value[:TEXT_CHARS]))
    summary["truncated"] = len(value) > TEXT_CHARS
    return summary


def _dict(value: dict[Any, Any]) -> dict[str, Any]:
    """The first items: each key's repr, its value's type and a bounded repr of the value."""
    keys = [
        {"key": _repr(key), "type": _type_name(item), "value": _repr(item)}
        for key, item in islice(value.items(), KEYS)
    ]
    return {"kind": "dict", "length": len(value), "keys": keys}


_COLLECTIONS = (list, tuple, set, frozenset, collections.deque)


def _collection(value: Any) -> dict[str, Any]:
    counts = collections.Counter(_type_name(item) for item in islice(value, TYPE_SCAN))
    summary: dict[str, Any] = {
        "kind": next(kind.__name__ for kind in _COLLECTIONS if isinstance(value, kind)),
        "length": len(value),
        "element_types": dict(counts.most_common(KEYS)),
        "first_items": [_repr(item) for item in islice(value, ITEMS)],
    }
    if len(value) > TYPE_SCAN:
        summary["element_types_scanned"] = TYPE_SCAN
    return summary


def _module(value: types.ModuleType) -> dict[str, Any]:
    public = [name for name in vars(value) if not name.startswith("_")]
    return {
        "kind": "module",
        "module_name": value.__name__,
        "file": getattr(value, "__file__", None),
        "doc": _first_line(value.__doc__),
        "public_names": len(public),
        "first_names": sorted(public)[:KEYS],
    }


def _class(value: type) -> dict[str, Any]:
    public = [name for name in vars(value) if not name.startswith("_")]
    return {
        "kind": "class",
        "module": value.__module__,
        "qualname": value.__qualname__,
        "bases": [_qualified(base) for base in value.__bases__],
        "signature": _signature(value),
        "doc": _first_line(value.__doc__),
        "attributes": public[:KEYS],
        "attributes_total": len(public),
    }


def _routine(value: Any) -> dict[str, Any]:
    return {
        "kind": "function",
        "qualname": getattr(value, "__qualname__", None) or getattr(value, "__name__", None),
        "module": getattr(value, "__module__", None),
        "signature": _signature(value),
        "doc": _first_line(getattr(value, "__doc__", None)),
    }


def _object_summary(value: Any) -> dict[str, Any]:
    summary: dict[str, Any] = {
        "kind": "object",
        "repr": _repr(value, REPR_CHARS),
        "callable": callable(value),
    }
    try:
        attributes = vars(value)
    except TypeError:
        return summary
    public = [(name, item) for name, item in attributes.items() if not str(name).startswith("_")]
    summary["attributes"] = [{"name": name, "type": _type_name(item)} for name, item in public[:KEYS]]
    summary["attributes_total"] = len(public)
    return summary


def _signature(value: Any) -> str | None:
    try:
        return _clip(str(inspect.signature(value)), REPR_CHARS)
    except (TypeError, ValueError):
        return None


def _first_line(doc: object) -> str | None:
    if not isinstance(doc, str) or not doc.strip():
        return None
    return _clip(doc.strip().splitlines()[0], REPR_CHARS)


_BUILTINS: list[tuple[Callable[[Any], bool], Callable[[Any], dict[str, Any]]]] = [
    (_instance_of("pandas", "DataFrame"), _pandas_frame),
    (_instance_of("pandas", "Series"), _pandas_series),
    (_is_pandas_index, _pandas_index),
    (_instance_of("numpy", "ndarray"), _ndarray),
    (_instance_of("numpy", "generic"), _numpy_scalar),
    (_instance_of("polars", "DataFrame"), _polars_frame),
    (_instance_of("polars", "Series"), _polars_series),
    (_instance_of("xarray", "DataArray"), _xarray_data_array),
    (_instance_of("xarray", "Dataset"), _xarray_dataset),
    (_instance_of("torch", "Tensor"), _torch_tensor),
    (lambda value: value is None or isinstance(value, bool | int | float | complex), _scalar),
    (lambda value: isinstance(value, str | bytes | bytearray), _text),
    (lambda value: isinstance(value, dict), _dict),
    (lambda value: isinstance(value, _COLLECTIONS), _collection),
    (lambda value: isinstance(value, types.ModuleType), _module),
    (lambda value: isinstance(value, type), _class),
    (lambda value: inspect.isroutine(value) or isinstance(value, functools.partial), _routine),
]


# -- bounded values ---------------------------------------------------------------------------


def _make_repr() -> reprlib.Repr:
    bounded = reprlib.Repr()
    bounded.maxlevel = 3
    bounded.maxtuple = bounded.maxlist = bounded.maxarray = ITEMS
    bounded.maxdict = bounded.maxset = bounded.maxfrozenset = bounded.maxdeque = ITEMS
    bounded.maxstring = bounded.maxother = REPR_CHARS
    bounded.maxlong = 60
    return bounded


_REPR = _make_repr()


def _repr(value: Any, limit: int = CELL_CHARS) -> str:
    """repr() within `limit` characters; a failing repr says how it failed."""
    try:
        text = _REPR.repr(value)
    except _Timeout:
        raise
    except Exception as exc:
        text = f"<repr failed: {_exception(exc)}>"
    return _clip(text, limit)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _exception(exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:
        message = "?"
    return _clip(f"{type(exc).__name__}: {message}" if message else type(exc).__name__, REPR_CHARS)


def _rounded(stats: dict[Any, Any]) -> dict[Any, Any]:
    """Statistics to 6 significant digits (whole numbers stay exact): the rest is noise here."""
    return {
        key: float(f"{value:.6g}") if isinstance(value, float) and not value.is_integer() else value
        for key, value in ((key, _jsonable(value)) for key, value in stats.items())
    }


def _missing(value: Any) -> bool:
    """NaN, NaT, pandas.NA and None: what a table shows as missing (JSON null)."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    pandas = sys.modules.get("pandas")
    if pandas is not None and (value is pandas.NA or value is pandas.NaT):
        return True
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.floating | numpy.datetime64 | numpy.timedelta64):
        return bool(numpy.isnat(value) if value.dtype.kind in "mM" else numpy.isnan(value))
    return False


def _is_dtype(value: Any) -> bool:
    """A numpy dtype or a pandas extension dtype (`StringDtype`, `CategoricalDtype`, ...)."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.dtype):
        return True
    pandas = sys.modules.get("pandas")
    extension = getattr(getattr(getattr(pandas, "api", None), "extensions", None), "ExtensionDtype", None)
    return isinstance(extension, type) and isinstance(value, extension)


def _jsonable(value: Any, depth: int = JSON_DEPTH) -> Any:
    """A JSON value bounded in depth, items and characters; missing values become null and
    anything else that JSON cannot hold becomes a short repr."""
    if _missing(value):
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return _clip(value, TEXT_CHARS)
    if isinstance(value, int):
        return int(value) if value.bit_length() <= 64 else _repr(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.generic):
        return _jsonable(value.item(), depth) if value.dtype.kind in "biuf" else _repr(value)
    if isinstance(value, datetime.date | datetime.time | datetime.timedelta):
        return str(value)
    if _is_dtype(value):
        return str(value)  # `df.dtypes` holds dtypes: "int64", not "dtype('int64')"
    if depth <= 0:
        return _repr(value)
    if isinstance(value, Mapping):
        return {
            (key if isinstance(key, str) else _repr(key)): _jsonable(item, depth - 1)
            for key, item in islice(value.items(), JSON_ITEMS)
        }
    if isinstance(value, list | tuple):
        return [_jsonable(item, depth - 1) for item in value[:JSON_ITEMS]]
    return _repr(value)
