"""The kernel slot's moves: the ones its table allows, and a sentence for each it refuses."""

from __future__ import annotations

import pytest

from warmkernel.session.slot import check_move
from warmkernel.types import KernelState as S

ALLOWED = [
    (S.STOPPED, S.STARTING),
    (S.STOPPED, S.ENDING),  # a reset of a stopped kernel
    (S.STARTING, S.READY),
    (S.STARTING, S.FAILED),
    (S.READY, S.ENDING),
    (S.FAILED, S.STARTING),
    (S.FAILED, S.ENDING),
    (S.ENDING, S.STARTING),
    (S.ENDING, S.STOPPED),
]


@pytest.mark.parametrize(("current", "to"), ALLOWED, ids=lambda state: state.value)
def test_an_allowed_move_passes(current: S, to: S) -> None:
    check_move(current, to)


REFUSED = [
    pytest.param(S.READY, S.STOPPED, "a ready kernel is ended before", id="ready kernel stopped unended"),
    pytest.param(S.READY, S.STARTING, "a ready kernel is ended before", id="ready kernel replaced unended"),
    pytest.param(S.STARTING, S.ENDING, "whoever would end it waits", id="a start ended midway"),
    pytest.param(S.STOPPED, S.READY, "a stopped kernel starts", id="ready without a start"),
    pytest.param(S.ENDING, S.READY, "followed by the next generation", id="an ending kernel ready again"),
    pytest.param(S.FAILED, S.READY, "a failed start is tried again", id="a failed start ready"),
]


@pytest.mark.parametrize(("current", "to", "why"), REFUSED)
def test_a_refused_move_says_why(current: S, to: S, why: str) -> None:
    with pytest.raises(RuntimeError, match=f"from {current.value} to {to.value}: .*{why}"):
        check_move(current, to)
