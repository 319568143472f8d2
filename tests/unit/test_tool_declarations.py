"""A tool's parameters come from its arguments' fields, and its handler is registered for its
declaration: what a wrong declaration is refused with, at import, never by an `assert`."""

from __future__ import annotations

import dataclasses
from dataclasses import FrozenInstanceError, replace

import pytest

from warmkernel.faces.handlers import HANDLERS
from warmkernel.faces.registry import Handlers, KernelCall
from warmkernel.replies.reply import Reply
from warmkernel.tools.catalog import TOOLS
from warmkernel.tools.cell_tools import INTERRUPT_PYTHON, WAIT_PYTHON, InterruptPythonArgs, WaitPythonArgs
from warmkernel.tools.kernel_tools import LIST_PYTHON_KERNELS, ListPythonKernelsArgs
from warmkernel.tools.kinds import Annotations, DeclarationError, Integer, Tool, arg, arguments
from warmkernel.tools.params import EXECUTION, KNOWN_KERNEL


def _tool(args: type) -> Tool[object]:
    return Tool("probe", "A probe.", args, Annotations(read_only=True), ())


def test_parse_gives_the_tools_frozen_arguments_checked_and_with_defaults() -> None:
    args = WAIT_PYTHON.parse({"execution": 3.0})
    assert args == WaitPythonArgs(execution=3, timeout_seconds=30, silence_seconds=None, kernel=None)
    with pytest.raises(FrozenInstanceError):
        args.execution = 4  # type: ignore[misc]


def test_each_tools_parameters_are_its_arguments_fields_in_order() -> None:
    for tool in TOOLS:
        assert [param.name for param in tool.params] == [each.name for each in dataclasses.fields(tool.args)]
        assert tool.args.__dataclass_params__.frozen, tool.name


def test_a_shared_parameter_keeps_its_declaration() -> None:
    assert WAIT_PYTHON.params[0] is EXECUTION and WAIT_PYTHON.params[-1] is KNOWN_KERNEL


def test_a_field_named_unlike_its_shared_parameter_is_refused() -> None:
    @arguments
    class Misnamed:
        number: int | None = arg(EXECUTION)

    with pytest.raises(DeclarationError, match=r"Misnamed\.number is declared as the parameter 'execution'"):
        _tool(Misnamed)


def test_a_field_that_declares_no_parameter_is_refused() -> None:
    @arguments
    class Undeclared:
        limit: int = arg(Integer("invalid_limit", 1), "How many.", 20)
        extra: int = 0

    with pytest.raises(DeclarationError, match=r"Undeclared\.extra declares no parameter"):
        _tool(Undeclared)


def test_arguments_that_are_no_dataclass_are_refused() -> None:
    class Plain:
        pass

    with pytest.raises(DeclarationError, match="probe's args must be an @arguments class"):
        _tool(Plain)


def test_every_declared_tool_has_exactly_one_handler_and_every_handler_a_declaration() -> None:
    assert sorted(tool.name for tool in HANDLERS.tools()) == sorted(tool.name for tool in TOOLS)
    by_name = {tool.name: tool for tool in TOOLS}
    assert all(by_name[tool.name] is tool for tool in HANDLERS.tools())
    HANDLERS.check(TOOLS)


async def _interrupt(call: KernelCall, args: InterruptPythonArgs) -> Reply:
    return Reply("")


async def _kernels(conn: object, args: ListPythonKernelsArgs) -> Reply:
    return Reply("")


def test_a_declared_tool_without_a_handler_is_refused() -> None:
    handlers = Handlers()
    handlers.on_kernel(INTERRUPT_PYTHON)(_interrupt)
    with pytest.raises(DeclarationError, match="without one: run_python, python_status"):
        handlers.check(TOOLS)


def test_a_handler_of_a_tool_not_declared_is_refused() -> None:
    handlers = Handlers()
    handlers.on_kernel(replace(INTERRUPT_PYTHON, description="another"))(_interrupt)
    with pytest.raises(DeclarationError, match="a handler of no declared tool: interrupt_python"):
        handlers.check([INTERRUPT_PYTHON])


def test_a_second_handler_for_one_tool_is_refused() -> None:
    handlers = Handlers()
    handlers.on_kernel(INTERRUPT_PYTHON)(_interrupt)
    with pytest.raises(DeclarationError, match="interrupt_python has a handler already"):
        handlers.on_kernel(INTERRUPT_PYTHON)(_interrupt)


def test_a_handler_registered_for_the_wrong_place_is_refused() -> None:
    handlers = Handlers()
    with pytest.raises(DeclarationError, match=r"interrupt_python has a kernel parameter; .* on_kernel or"):
        handlers.on_workspace(INTERRUPT_PYTHON)(_kernels)  # type: ignore[arg-type]
    with pytest.raises(
        DeclarationError, match=r"list_python_kernels has no kernel parameter; .* on_workspace"
    ):
        handlers.on_kernel(LIST_PYTHON_KERNELS)(_interrupt)  # type: ignore[arg-type]


def test_a_value_nested_deeper_than_the_recursion_limit_is_refused_not_crashed() -> None:
    import sys

    from warmkernel.errors import CALLER_MISTAKES, WarmkernelError
    from warmkernel.tools.catalog import TOOLS_BY_NAME

    deep: object = 0
    for _ in range(sys.getrecursionlimit() + 100):
        deep = [deep]
    with pytest.raises(WarmkernelError) as caught:
        TOOLS_BY_NAME["read_python_output"].parse({"execution": deep})
    assert caught.value.code in CALLER_MISTAKES
    assert "nested too deep" in caught.value.message


def test_a_lone_surrogate_in_any_text_is_refused_naming_the_parameter() -> None:
    from warmkernel.errors import WarmkernelError
    from warmkernel.tools.catalog import TOOLS_BY_NAME

    with pytest.raises(WarmkernelError) as caught:
        TOOLS_BY_NAME["run_python"].parse({"freeform": "x = '\ud800'"})
    assert caught.value.code == "invalid_arguments"
    assert caught.value.message.startswith("freeform holds a lone surrogate (U+D800) at character 5")
