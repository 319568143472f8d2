"""The vocabulary of a tool declaration: parameter kinds, `Param`, `Spelling`, `arg`, `Verb`, `Tool`.

A tool's arguments are a frozen dataclass (`@arguments`) whose fields declare its parameters
(`arg`): each field names its parameter, so the names are written once. From a `Param` come its
MCP input schema (`Param.json_schema`), its argument check (`Param.check`) and its command-line
spelling (`Spelling`, read by the CLI); from a `Tool` come the tool's input schema, the check of
a whole call into its arguments (`Tool.parse`) and its verbs (`Verb`). The declarations themselves
are in `tools/catalog.py`. Pure data and checks: the CLI imports this module, so it loads nothing
of the server (no MCP SDK, session or kernel).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import Field, dataclass, field, fields, is_dataclass
from typing import Any, Generic, Literal, TypeVar, dataclass_transform, overload

from warmkernel.errors import ErrorCode, WarmkernelError
from warmkernel.execution.selection import Selection, parse_selection
from warmkernel.types import KERNEL_NAME

JsonType = Literal["string", "integer", "number", "boolean", "array", "object"]

REQUIRED: Any = object()
"""The default of a parameter the caller must give."""
WAIT = "{wait}"
"""Stands in a description for the default wait, which the server's settings say (`Tool.describe`)."""

MAX_PATH_CHARS = 200
_PATH = re.compile(r"[^\W\d]\w*(?:\.[^\W\d]\w*)*")
"""An identifier, or identifiers joined by dots (`df`, `df.columns`, `model.config`)."""


class DeclarationError(TypeError):
    """A tool, its arguments or its handler is declared wrongly: our bug, raised when the module that
    declares it is imported (never a caller's mistake, which is a `WarmkernelError`)."""


def check_path(name: str) -> str:
    """`name` if it is an identifier or a dotted attribute path; `invalid_name` otherwise."""
    if len(name) > MAX_PATH_CHARS or not _PATH.fullmatch(name):
        raise WarmkernelError(
            "invalid_name",
            f"{name[:MAX_PATH_CHARS]!r} is not a variable name; give an identifier or a dotted attribute "
            'path such as "df" or "df.columns" (nothing else is evaluated)',
        )
    return name


def _fail(code: ErrorCode, name: str, value: Any, valid: str) -> WarmkernelError:
    return WarmkernelError(code, f"{name}={_json(value)} is not valid; {name} must be {valid}")


def _json(value: Any) -> str:
    """A value as the caller sent it, in JSON (`null`, `true`, `"3"`), cut at 80 characters."""
    try:
        shown = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        shown = repr(value)
    except RecursionError:
        shown = "(a value nested too deep to show)"
    return shown if len(shown) <= 80 else f"{shown[:80]}…"


def _integer(value: Any) -> int | None:
    """`value` as an int if it is one (JSON may send 5.0 for 5); bools are not integers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _finite(value: Any) -> float | None:
    """`value` as a float if it is a finite JSON number; bools are not numbers."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _nullable(json_type: str, optional: bool) -> str | list[str]:
    return [json_type, "null"] if optional else json_type


# -- kinds: what a parameter's value may be --------------------------------------------------------


@dataclass(frozen=True)
class Text:
    """A string (or null when optional); any string is valid here, its meaning is checked later."""

    code: ErrorCode = "invalid_arguments"
    optional: bool = False

    def schema(self) -> dict[str, Any]:
        return {"type": _nullable("string", self.optional)}

    def check(self, name: str, value: Any) -> str | None:
        if value is None and self.optional:
            return None
        if not isinstance(value, str):
            raise _fail(self.code, name, value, "a string" + (" or null" if self.optional else ""))
        return value


@dataclass(frozen=True)
class Integer:
    """A whole number at least `minimum` (or null when optional)."""

    code: ErrorCode
    minimum: int
    optional: bool = False

    def schema(self) -> dict[str, Any]:
        return {"type": _nullable("integer", self.optional), "minimum": self.minimum}

    def check(self, name: str, value: Any) -> int | None:
        if value is None and self.optional:
            return None
        number = _integer(value)
        if number is None or number < self.minimum:
            valid = f"an integer >= {self.minimum}" + (" or null" if self.optional else "")
            raise _fail(self.code, name, value, valid)
        return number


@dataclass(frozen=True)
class Seconds:
    """A finite number of seconds, >= 0 (> 0 when `positive`: a silence of 0 would end every wait)."""

    optional: bool = False
    positive: bool = False

    def schema(self) -> dict[str, Any]:
        bound = "exclusiveMinimum" if self.positive else "minimum"
        return {"type": _nullable("number", self.optional), bound: 0}

    def check(self, name: str, value: Any) -> float | None:
        if value is None and self.optional:
            return None
        seconds = _finite(value)
        if seconds is not None and (seconds > 0 if self.positive else seconds >= 0):
            return seconds
        valid = f"a finite number of seconds {'>' if self.positive else '>='} 0"
        raise _fail("invalid_timeout", name, value, valid + (" or null" if self.optional else ""))


@dataclass(frozen=True)
class Flag:
    """True or false."""

    def schema(self) -> dict[str, Any]:
        return {"type": "boolean"}

    def check(self, name: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise _fail("invalid_arguments", name, value, "true or false")
        return value


@dataclass(frozen=True)
class Choice:
    """One of a few strings."""

    code: ErrorCode
    choices: tuple[str, ...]
    optional: bool = False

    def schema(self) -> dict[str, Any]:
        if self.optional:
            return {"type": ["string", "null"], "enum": [*self.choices, None]}
        return {"type": "string", "enum": list(self.choices)}

    def check(self, name: str, value: Any) -> str | None:
        if value is None and self.optional:
            return None
        if value not in self.choices:
            valid = "one of " + ", ".join(f'"{choice}"' for choice in self.choices)
            raise _fail(self.code, name, value, valid + (" or null" if self.optional else ""))
        return value


@dataclass(frozen=True)
class Cell:
    """A notebook cell: its id, or its 0-based index among the code cells (or null when optional)."""

    optional: bool = False

    def schema(self) -> dict[str, Any]:
        return {"type": ["string", "integer", "null"] if self.optional else ["string", "integer"]}

    def check(self, name: str, value: Any) -> str | int | None:
        if value is None and self.optional:
            return None
        if isinstance(value, str):
            return value
        index = _integer(value)
        if index is None:
            raise _fail("invalid_arguments", name, value, "a cell id or a 0-based code-cell index")
        return index


@dataclass(frozen=True)
class Cells:
    """Which notebook cells: "stale", "all", or a non-empty list of cells (also written as one
    cell, or as `"0,3,load"`: a cell id has no comma)."""

    def schema(self) -> dict[str, Any]:
        one = ["string", "integer"]
        return {"anyOf": [{"type": one}, {"type": "array", "items": {"type": one}}]}

    def check(self, name: str, value: Any) -> str | list[str | int]:
        if isinstance(value, str):
            return [cell.strip() for cell in value.split(",")] if "," in value else value
        if (index := _integer(value)) is not None:
            return [index]
        if isinstance(value, list) and value and all(Cell().check(name, item) is not None for item in value):
            return value
        raise _fail(
            "invalid_arguments",
            name,
            value,
            '"stale", "all", or cell ids and 0-based code-cell indices: a list, or one, or "0,3,load"',
        )


@dataclass(frozen=True)
class Executions:
    """Execution numbers: `"3,5-9"` (numbers and inclusive ranges) or one number (or null when optional)."""

    optional: bool = False

    def schema(self) -> dict[str, Any]:
        return {"type": ["string", "integer", "null"] if self.optional else ["string", "integer"]}

    def check(self, name: str, value: Any) -> Selection | None:
        if value is None and self.optional:
            return None
        number = _integer(value)
        if number is not None and number >= 1:
            return ((number, number),)
        if isinstance(value, str):
            return parse_selection(value)
        valid = 'execution numbers and ranges such as "3,5-9", or one number' + (
            " or null" if self.optional else ""
        )
        raise _fail("invalid_executions", name, value, valid)


@dataclass(frozen=True)
class VariablePath:
    """A variable name or a dotted attribute path; nothing else is ever evaluated."""

    def schema(self) -> dict[str, Any]:
        return {"type": "string"}

    def check(self, name: str, value: Any) -> str:
        if not isinstance(value, str):
            raise _fail(
                "invalid_name", name, value, 'a variable name or dotted attribute path such as "df.columns"'
            )
        return check_path(value)


@dataclass(frozen=True)
class KernelName:
    """A kernel's name: short, lower case (`main`, `train`, `nb-sales`); null when optional."""

    optional: bool = True

    def schema(self) -> dict[str, Any]:
        return {"type": _nullable("string", self.optional), "pattern": f"^{KERNEL_NAME.pattern}$"}

    def check(self, name: str, value: Any) -> str | None:
        if value is None and self.optional:
            return None
        if not isinstance(value, str) or not KERNEL_NAME.fullmatch(value):
            valid = '1 to 32 of a-z, 0-9, _ and -, starting with a letter or digit (e.g. "train")'
            raise _fail("invalid_kernel", name, value, valid)
        return value


Kind = Text | Integer | Seconds | Flag | Choice | Cell | Cells | Executions | VariablePath | KernelName


# -- parameters, tools and verbs -----------------------------------------------------------------


@dataclass(frozen=True)
class Spelling:
    """How a parameter is written on the command line.

    No `flags`: a positional argument named `metavar`. `consts`: flags that each store one choice
    (`--regex` for query_mode="regex"). `from_cwd`: a path the CLI makes absolute, because the
    tools resolve relative paths against the workspace, not the caller's directory.
    """

    flags: tuple[str, ...] = ()
    metavar: str | None = None
    consts: tuple[tuple[str, str, str], ...] = ()
    """(flag, value, help) per flag."""
    from_cwd: bool = False
    help: str | None = None
    """The command line's own words, where the tool's description does not fit it (a flag that
    turns a default off, a path from the current directory); None: the description."""


@dataclass(frozen=True)
class Param:
    """One tool parameter, declared once."""

    name: str
    kind: Kind
    description: str
    default: Any = REQUIRED
    cli: Spelling = Spelling()

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def json_schema(self) -> dict[str, Any]:
        schema = self.kind.schema() | {"description": self.description}
        if not self.required:
            schema["default"] = self.default
        return schema

    def check(self, value: Any) -> Any:
        return self.kind.check(self.name, value)


@dataclass(frozen=True)
class _Unnamed:
    """A parameter declared by a field of a tool's arguments, which gives it its name."""

    kind: Kind
    description: str
    default: Any
    cli: Spelling

    def named(self, name: str) -> Param:
        return Param(name, self.kind, self.description, self.default, self.cli)


_DECLARES = "warmkernel.tools.param"
"""The key of a field's metadata that holds the parameter it declares."""


@overload
def arg(declared: Param, /) -> Any: ...
@overload
def arg(declared: Kind, /, description: str, default: Any = REQUIRED, cli: Spelling = Spelling()) -> Any: ...
def arg(
    declared: Param | Kind, /, description: str = "", default: Any = REQUIRED, cli: Spelling = Spelling()
) -> Any:
    """A field of a tool's arguments, declaring its parameter: a shared `Param` (the field takes its
    name), or one of this kind, description, default and spelling, named by the field."""
    param = declared if isinstance(declared, Param) else _Unnamed(declared, description, default, cli)
    metadata = {_DECLARES: param}
    if param.default is REQUIRED:
        return field(metadata=metadata)
    return field(default=param.default, metadata=metadata)


T = TypeVar("T")


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(arg,))
def arguments(cls: type[T]) -> type[T]:
    """A tool's arguments, as its handler gets them: a frozen, keyword-only dataclass whose fields,
    in order, each declare one parameter with `arg`."""
    return dataclass(frozen=True, kw_only=True)(cls)


def _declared(owner: type, each: Field[Any]) -> Param:
    """The parameter a field of a tool's arguments declares, named by the field."""
    declared = each.metadata.get(_DECLARES)
    if declared is None:
        raise DeclarationError(
            f"{owner.__name__}.{each.name} declares no parameter; write it as {each.name}: TYPE = arg(...)"
        )
    if isinstance(declared, _Unnamed):
        return declared.named(each.name)
    if declared.name != each.name:
        raise DeclarationError(
            f"{owner.__name__}.{each.name} is declared as the parameter {declared.name!r}; a field has its "
            "parameter's name"
        )
    return declared


@dataclass(frozen=True)
class Annotations:
    """MCP tool annotations as plain data (the world a tool touches is always closed)."""

    read_only: bool
    destructive: bool = False
    idempotent: bool = True


@dataclass(frozen=True)
class Verb:
    """A CLI verb that calls the tool: `words` like ("read",) or ("nb", "run").

    `fixed` are arguments the verb always sends (its parser does not offer them); `defaults`
    replace a tool default on the command line only.
    """

    words: tuple[str, ...]
    help: str
    example: str
    """`warmkernel ...` lines, each with what it does."""
    fixed: Mapping[str, Any] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return " ".join(self.words)


A = TypeVar("A")
"""A tool's arguments (an `@arguments` class)."""


@dataclass(frozen=True)
class Tool(Generic[A]):
    """One tool, declared once: what `tools/list` says of it, its arguments, and its CLI verbs."""

    name: str
    description: str
    args: type[A]
    """What `parse` returns: the `@arguments` class whose fields declare the parameters, in order."""
    annotations: Annotations
    verbs: tuple[Verb, ...]
    output: Mapping[str, JsonType] = field(default_factory=dict)
    """The fields of its structured result and their JSON types. A field may be absent or null
    where the reply's state has no such fact (a running cell has no output yet)."""
    starts_daemon: bool = False
    """Its verbs start the workspace's daemon when none is live (they act); the others only look
    at a live one, and without one say so and start nothing."""
    params: tuple[Param, ...] = field(init=False)
    """One per field of `args`, in order, named by it."""

    def __post_init__(self) -> None:
        if not is_dataclass(self.args):
            raise DeclarationError(f"{self.name}'s args must be an @arguments class, not {self.args!r}")
        params = tuple(_declared(self.args, each) for each in fields(self.args))
        object.__setattr__(self, "params", params)  # derived once, here: the dataclass is frozen

    def output_schema(self) -> dict[str, Any]:
        """The JSON schema of the structured result (also every reply's one-time `notice`)."""
        facts = {**self.output, "notice": "string"}
        return {
            "type": "object",
            "properties": {name: {"type": [kind, "null"]} for name, kind in facts.items()},
        }

    def describe(self, wait: str) -> str:
        """The description, saying the default wait as `wait`."""
        return self.description.replace(WAIT, wait)

    def input_schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {p.name: p.json_schema() for p in self.params},
            "additionalProperties": False,
        }
        required = [p.name for p in self.params if p.required]
        if required:
            schema["required"] = required
        return schema

    def parse(self, arguments: Mapping[str, Any]) -> A:
        """The call's arguments, each checked and the omitted ones filled with their defaults; unknown
        or missing ones are `invalid_arguments`."""
        known = {p.name for p in self.params}
        unknown = sorted(set(arguments) - known)
        if unknown:
            raise WarmkernelError(
                "invalid_arguments",
                f"{self.name} has no parameter {', '.join(unknown)}; its parameters are "
                + (", ".join(sorted(known)) or "none"),
            )
        values: dict[str, Any] = {}
        for param in self.params:
            if param.name in arguments:
                values[param.name] = param.check(_text_encodable(param.name, arguments[param.name]))
            elif param.required:
                raise WarmkernelError("invalid_arguments", f"{self.name} needs the parameter {param.name}")
            else:
                values[param.name] = param.default
        return self.args(**values)


def _text_encodable(name: str, value: Any) -> Any:
    """`value` if every string in it can be written as UTF-8 (kernels, files and the wire need it);
    `invalid_arguments` naming `name` for a lone surrogate. Iterative: deep JSON cannot overflow."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise WarmkernelError(
                    "invalid_arguments",
                    f"{name} holds a lone surrogate (U+{ord(item[exc.start]):04X}) at character {exc.start}; "
                    "text must be valid Unicode",
                ) from None
        elif isinstance(item, list | tuple):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
    return value
