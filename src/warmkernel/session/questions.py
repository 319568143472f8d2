"""Questions to the kernel, asked silently (variables, notebook facts), and the helper's answers, read once.

A question leaves no trace in the kernel (no `In`, `Out` or history). While a cell runs it is
asked in a subshell where the kernel has them (ipykernel 7), else refused `busy`. Every question
has a budget: the helper stops itself at it; past it and a grace the kernel is interrupted, and a
kernel that answers neither is replaced, so no later cell is sent into it.
"""

from __future__ import annotations

import json
from typing import Any

import anyio

from warmkernel.errors import WarmkernelError
from warmkernel.kernel import inside, inspector
from warmkernel.kernel.base import Kernel
from warmkernel.kernel.channel import ExpressionValue, Reply
from warmkernel.kernel.inspector import Summary, VariableListing
from warmkernel.replies import refusals
from warmkernel.replies.status import kernel_lost_notice
from warmkernel.session.admission import Admission
from warmkernel.session.notices import Notices
from warmkernel.session.slot import KernelSlot
from warmkernel.settings.model import Settings
from warmkernel.types import ExecutionNumber, KernelState

INSPECT_GRACE_S = 1.0
"""Past the helper's own budget plus this, the kernel is interrupted."""
INSPECT_GIVE_UP_S = 5.0
"""Past the interrupt plus this, the question is given up (and a silent kernel replaced)."""


class Questions:
    """The questions one kernel is asked beside its cells: variables, and the notebook's facts."""

    def __init__(
        self, name: str, settings: Settings, slot: KernelSlot, admission: Admission, notices: Notices
    ) -> None:
        self._name = name
        self._budget_s = settings.inspect_timeout_s
        self._slot = slot
        self._admission = admission
        self._notices = notices

    async def list(self, *, include_imports: bool) -> VariableListing:
        """The user's variables: type, size, shape or length, and the execution that bound them."""
        expression = inspector.list_expression(include_imports, self._budget_s)
        answer, during = await self._ask(expression, "listed")
        listing = _read_listing(answer)
        listing["during_execution"] = during
        return listing

    async def inspect(self, name: str) -> Summary:
        """A bounded typed summary of a name or dotted attribute path (nothing else is evaluated)."""
        expression = inspector.inspect_expression(name, self._budget_s)
        answer, during = await self._ask(expression, "inspected")
        summary = _read_summary(answer)
        return summary | {"during_execution": during} if during is not None else summary

    async def _ask(self, expression: str, done: str) -> tuple[ExpressionValue, ExecutionNumber | None]:
        """Evaluate one question to the kernel-side helper, silently, and the execution it ran
        beside: while a cell runs, in a subshell where the kernel has them, else `busy` at once."""
        if self._slot.state is KernelState.STOPPED:
            raise refusals.no_namespace(self._name, self._slot.stopped_reason, done)
        give_up_s = self._budget_s + INSPECT_GRACE_S + INSPECT_GIVE_UP_S
        async with self._admission.turn_by(anyio.current_time() + give_up_s, self._name):
            kernel = await self._slot.ready()
            running = self._admission.running_record
            if running is None:
                return await self.evaluate_silently(kernel, expression, "inspection"), None
            if not kernel.has_subshells:
                raise refusals.busy(
                    running,
                    f"variables cannot be {done} while a cell runs in this kernel (it has no subshells, "
                    "which ipykernel 7 and later have)",
                )
            return await self._in_subshell(kernel, expression), running.number

    async def _in_subshell(self, kernel: Kernel, expression: str) -> ExpressionValue:
        """Evaluate `expression` beside the running cell, within the same budget as any inspection
        (the helper stops itself; the running cell is never interrupted for it)."""
        give_up_s = self._budget_s + INSPECT_GRACE_S + INSPECT_GIVE_UP_S
        reply = await kernel.run_in_subshell(
            user_expressions={"answer": expression}, give_up_after_s=give_up_s
        )
        if reply is None:
            if kernel.exited.is_set():
                raise WarmkernelError("inspection_failed", "the kernel exited during the inspection")
            raise WarmkernelError(
                "inspection_failed",
                f"the inspection beside the running cell did not end within {give_up_s:g} s (its subshell "
                "may be stuck in native code); it was abandoned, the running cell goes on",
            )
        return _answer_of(reply)

    async def evaluate_silently(
        self, kernel: Kernel, expression: str, what: str, code: str = ""
    ) -> ExpressionValue:
        """Run `code`, then evaluate `expression`, leaving no trace; stopped past the budget. The
        caller holds the admission turn, with no cell running."""
        give_up_s = self._budget_s + INSPECT_GRACE_S + INSPECT_GIVE_UP_S
        reply: Reply | None = None
        with anyio.move_on_after(give_up_s):
            reply = await kernel.run_silently(
                code,
                user_expressions={"answer": expression},
                interrupt_after_s=self._budget_s + INSPECT_GRACE_S,
            )
        if reply is None:
            if kernel.exited.is_set():
                raise WarmkernelError(
                    "inspection_failed", f"the kernel exited during the {what}; its namespace is gone"
                )
            await self._slot.replace(self._tell_wedged, expected=kernel)
            raise refusals.unresponsive(give_up_s, kernel.generation)
        return _answer_of(reply)

    def _tell_wedged(self, kernel: Kernel | None) -> None:
        """A kernel that answers no interrupt is replaced: a cell sent into it would be numbered and
        never run."""
        if kernel is not None:
            self._notices.tell(
                kernel_lost_notice(
                    kernel.generation, "answered neither an inspection nor an interrupt and was restarted"
                )
            )


def _answer_of(reply: Reply) -> ExpressionValue:
    answer = reply.user_expressions.get("answer")
    if answer is None:
        raise WarmkernelError("inspection_failed", f"the kernel replied {reply.status} without an answer")
    return answer


def _read_listing(value: ExpressionValue) -> VariableListing:
    answer = _helper_answer(value)
    return VariableListing(
        variables=answer["variables"],
        total=answer["total"],
        imports_hidden=answer["imports_hidden"],
        modules_hidden=answer["modules_hidden"],
        summary_status=answer["summary_status"],
        during_execution=None,
    )


def _read_summary(value: ExpressionValue) -> Summary:
    summary = _helper_answer(value)["summary"]
    if not isinstance(summary, dict):
        raise WarmkernelError("internal_error", f"the kernel-side helper sent a summary of {type(summary)}")
    return summary


def _helper_answer(value: ExpressionValue) -> dict[str, Any]:
    """The helper's JSON answer, once; its refusals as coded errors."""
    if value.status != "ok":
        if inside.is_not_loaded(value.ename, value.evalue, "summaries"):
            raise refusals.helper_not_loaded()
        raise WarmkernelError("inspection_failed", f"the inspection raised {value.ename}: {value.evalue}")
    try:
        answer = json.loads(value.text)
    except ValueError as exc:
        raise WarmkernelError(
            "internal_error", f"the kernel-side helper sent no JSON: {value.text[:200]!r}"
        ) from exc
    match answer.get("status"):
        case "ok":
            return answer
        case "not_found":
            raise refusals.variable_not_found(answer["message"])
        case _:
            raise WarmkernelError("inspection_failed", answer.get("message", "the kernel-side helper failed"))
