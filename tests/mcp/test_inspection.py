"""Variable inspection through MCP: list_python_variables and inspect_python_variable.

Summaries come from the kernel-side helper without a visible cell: In, Out, _ and the
numbering stay as they were, a running cell is answered beside it in a subshell (ipykernel 7),
and a summary that outlives its budget is stopped and degraded to type and size.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream
from anyio.streams.stapled import MultiListener
from mcp import Client

from tests.gates import Gate
from tests.mcp.calls import body, call, call_error, run
from tests.mcp.conftest import FreshClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


async def summary(client: Client, name: str) -> dict[str, Any]:
    """inspect_python_variable's reply: a one-line gist, then the summary as JSON."""
    text = await call(client, "inspect_python_variable", name=name)
    if text.startswith("note: "):  # made beside a running cell
        text = text.partition("\n")[2]
    gist, _, document = text.partition("\n")
    facts = json.loads(document)
    assert gist.startswith(f"{name}: {facts['type']}")
    return facts


async def variables(client: Client, **arguments: Any) -> dict[str, list[str]]:
    """list_python_variables' table as {name: [type, size, shape/len, In]} (blank cells dropped)."""
    text = await call(client, "list_python_variables", **arguments)
    lines = text.splitlines()
    assert lines[0].split() == ["name", "type", "size", "(shallow)", "shape/len", "In"]
    return {line.split()[0]: line.split()[1:] for line in lines[1:-1]}


# -- summaries ----------------------------------------------------------------------------------


async def test_dataframe_summary_has_dtypes_nulls_describe_sample_rows_and_memory(client: Client) -> None:
    number, _ = await run(
        client,
        "import pandas as pd\n"
        "frame_a = pd.DataFrame(\n"
        "    {'x': [1.0, None, 3.0, 4.0], 'label': ['a', 'b', None, 'd'], 'n': [1, 2, 3, 4]}\n"
        ")",
    )
    facts = await summary(client, "frame_a")
    assert (facts["kind"], facts["shape"], facts["summary_status"]) == ("pandas.DataFrame", [4, 3], "ok")
    assert facts["execution"] == number
    assert [(c["name"], c["nulls"]) for c in facts["columns"]] == [("x", 1), ("label", 1), ("n", 0)]
    assert facts["columns"][0]["dtype"] == "float64" and facts["columns"][2]["dtype"] == "int64"
    assert set(facts["describe"]) == {"x", "n"}
    assert facts["describe"]["n"]["mean"] == 2.5 and facts["describe"]["x"]["count"] == 3
    assert facts["sample_rows"][1] == {"x": None, "label": "b", "n": 2}
    assert facts["sample_rows"][2]["label"] is None
    # one size notion in both tools, shallow; the deep one beside it, named as such
    assert facts["size_kind"] == "shallow" and facts["deep_size_bytes"] > facts["size_bytes"] > 0
    assert (await variables(client))["frame_a"][1:3] == [str(facts["size_bytes"]), "B"]


async def test_series_and_index_are_summarized_through_attribute_paths(client: Client) -> None:
    await run(
        client, "import pandas as pd\nframe_b = pd.DataFrame({'v': [2.0, 4.0, None], 'w': list('xyz')})"
    )
    series = await summary(client, "frame_b.v")
    assert (series["kind"], series["length"], series["nulls"]) == ("pandas.Series", 3, 1)
    assert series["describe"]["mean"] == 3.0
    assert series["sample"] == [
        {"index": 0, "value": 2.0},
        {"index": 1, "value": 4.0},
        {"index": 2, "value": None},
    ]
    dtypes = await summary(client, "frame_b.dtypes")  # each dtype beside its column
    assert [pair["index"] for pair in dtypes["sample"]] == ["v", "w"]
    assert dtypes["sample"][0]["value"] == "float64" and dtypes["sample"][1]["value"] in ("object", "str")
    labels = await summary(client, "frame_b.w")
    assert labels["top_values"][0]["count"] == 1 and "describe" not in labels
    index = await summary(client, "frame_b.columns")
    assert (index["kind"], index["length"], index["first"]) == ("pandas.Index", 2, ["v", "w"])


async def test_ndarray_summary_has_shape_dtype_stats_and_a_small_sample(client: Client) -> None:
    await run(client, "import numpy as np\ngrid_a = np.arange(1_000_000, dtype=float).reshape(1000, 1000)")
    facts = await summary(client, "grid_a")
    assert (facts["kind"], facts["shape"], facts["dtype"]) == ("numpy.ndarray", [1000, 1000], "float64")
    assert facts["stats"] == {"min": 0.0, "max": 999_999.0, "mean": 500_000.0}  # 6 significant digits
    assert facts["nan_count"] == 0 and facts["sample"] == [float(i) for i in range(10)]
    assert facts["size_bytes"] == facts["nbytes"] == 8_000_000


@dataclass(frozen=True)
class Case:
    id: str
    setup: str
    expected: dict[str, Any]


BUILTIN_CASES = [
    Case("dict", "case_v = {'a': 1, 2: [3]}", {"kind": "dict", "length": 2, "keys": [
        {"key": "'a'", "type": "int", "value": "1"}, {"key": "2", "type": "list", "value": "[3]"}]}),
    Case("dict value reprs are bounded", "case_v = {'long': 'x' * 500}", {"kind": "dict", "keys": [
        {"key": "'long'", "type": "str", "value": "'" + "x" * 76 + "..."}]}),
    Case("list", "case_v = [1, 'two', 3.0, 4]", {"kind": "list", "length": 4, "element_types": {
        "int": 2, "str": 1, "float": 1}, "first_items": ["1", "'two'", "3.0", "4"]}),
    Case("tuple", "case_v = (1, 2)", {"kind": "tuple", "length": 2}),
    Case("set", "case_v = {5}", {"kind": "set", "length": 1, "first_items": ["5"]}),
    Case("str", "case_v = 'line one\\nline two'", {"kind": "str", "length": 17, "lines": 2,
        "head": "line one\nline two"}),
    Case("bytes", "case_v = b'\\x00ab'", {"kind": "bytes", "length": 3, "head": "b'\\x00ab'"}),
    Case("int", "case_v = 42", {"kind": "number", "value": 42}),
    Case("float nan", "case_v = float('nan')", {"kind": "number", "value": None, "repr": "nan"}),
    Case("bool", "case_v = True", {"kind": "bool", "value": True}),
    Case("None", "case_v = None", {"kind": "none", "value": None}),
    Case("function", "def case_v(a, b=2):\n    '''Add things.\n\n    More.'''", {"kind": "function",
        "signature": "(a, b=2)", "doc": "Add things."}),
    Case("class", "class case_v(dict):\n    '''A mapping.'''\n    size = 1", {"kind": "class",
        "bases": ["dict"], "doc": "A mapping.", "attributes": ["size"]}),
    Case("module", "import json as case_v", {"kind": "module", "module_name": "json"}),
    Case("object", "class Thing:\n    def __init__(self): self.depth = 3\ncase_v = Thing()", {
        "kind": "object", "callable": False, "attributes": [{"name": "depth", "type": "int"}]}),
]  # fmt: skip


@pytest.mark.parametrize("case", BUILTIN_CASES, ids=[case.id for case in BUILTIN_CASES])
async def test_builtin_summaries(client: Client, case: Case) -> None:
    await run(client, case.setup)
    facts = await summary(client, "case_v")
    assert {key: facts.get(key) for key in case.expected} == case.expected
    assert facts["summary_status"] == "ok" and isinstance(facts["size_bytes"], int)


async def test_no_summary_returns_the_whole_object(client: Client) -> None:
    await run(
        client,
        "class Loud:\n    def __repr__(self): return 'x' * 1_000_000\n"
        "big_list = list(range(1_000_000)); big_text = 'y' * 1_000_000; loud = Loud()\n"
        "big_dict = {i: [i] * 100 for i in range(10_000)}",
    )
    for name in ("big_list", "big_text", "loud", "big_dict"):
        text = await call(client, "inspect_python_variable", name=name)
        assert len(text) < 5_000, name
    assert len((await summary(client, "big_list"))["first_items"]) == 10
    assert len((await summary(client, "loud"))["repr"]) <= 200


async def test_attribute_paths_walk_nested_attributes(client: Client) -> None:
    await run(
        client,
        "class Config:\n    depth = 12\nclass Model:\n    config = Config()\nmodel_a = Model()",
    )
    facts = await summary(client, "model_a.config.depth")
    assert (facts["name"], facts["value"]) == ("model_a.config.depth", 12)


@pytest.mark.parametrize(
    "name",
    ["df[0]", "df.head()", "1x", "a..b", "", "a.", ".a", "a b", "a;b", "__import__('os')", "a-b", "x" * 201],
)
async def test_anything_but_a_name_or_dotted_path_is_rejected(client: Client, name: str) -> None:
    code, message = await call_error(client, "inspect_python_variable", name=name)
    assert code == "invalid_name"
    assert "dotted attribute path" in message


async def test_a_name_that_is_not_text_is_rejected(client: Client) -> None:
    assert (await call_error(client, "inspect_python_variable", name=3))[0] == "invalid_name"


async def test_missing_names_and_attributes_are_not_found_with_suggestions(client: Client) -> None:
    await run(client, "present_value = 1")
    code, message = await call_error(client, "inspect_python_variable", name="presnt_value")
    assert code == "variable_not_found"
    assert message == (
        "name 'presnt_value' is not defined (did you mean present_value?); "
        "list_python_variables() lists the names"
    )
    code, message = await call_error(client, "inspect_python_variable", name="present_value.reel")
    assert code == "variable_not_found"
    assert message.startswith("present_value (int) has no attribute 'reel' (did you mean real?)")


async def test_an_attribute_that_raises_is_inspection_failed(client: Client) -> None:
    await run(
        client,
        "class Broken:\n    @property\n    def value(self): raise ValueError('no value')\nbroken = Broken()",
    )
    code, message = await call_error(client, "inspect_python_variable", name="broken.value")
    assert code == "inspection_failed"
    assert "ValueError: no value" in message


# -- optional libraries ---------------------------------------------------------------------------


async def test_polars_frame_and_series(client: Client) -> None:
    pytest.importorskip("polars")
    await run(
        client, "import polars as pl\npolars_a = pl.DataFrame({'a': [1, None, 3], 'b': ['x', 'y', 'z']})"
    )
    facts = await summary(client, "polars_a")
    assert (facts["kind"], facts["shape"]) == ("polars.DataFrame", [3, 2])
    assert [(c["name"], c["nulls"]) for c in facts["columns"]] == [("a", 1), ("b", 0)]
    assert facts["sample_rows"][1] == {"a": None, "b": "y"}
    await run(client, "polars_s = polars_a['b']")
    series = await summary(client, "polars_s")
    assert (series["kind"], series["length"], series["sample"]) == ("polars.Series", 3, ["x", "y", "z"])


async def test_xarray_data_array_and_dataset(client: Client) -> None:
    pytest.importorskip("xarray")
    await run(
        client,
        "import numpy as np, xarray as xr\n"
        "xr_a = xr.DataArray(np.zeros((2, 3)), dims=('t', 'x'), name='temp', attrs={'units': 'K'})\n"
        "xr_b = xr.Dataset({'temp': xr_a})",
    )
    array = await summary(client, "xr_a")
    assert (array["kind"], array["dims"], array["attrs"]) == ("xarray.DataArray", {"t": 2, "x": 3}, ["units"])
    dataset = await summary(client, "xr_b")
    assert dataset["data_vars"] == [{"name": "temp", "dims": ["t", "x"], "dtype": "float64"}]


async def test_torch_tensor(client: Client) -> None:
    pytest.importorskip("torch")
    await run(client, "import torch\ntensor_a = torch.zeros(2, 3, requires_grad=True)")
    facts = await summary(client, "tensor_a")
    assert (facts["kind"], facts["shape"], facts["device"], facts["requires_grad"]) == (
        "torch.Tensor",
        [2, 3],
        "cpu",
        True,
    )


# -- listing --------------------------------------------------------------------------------------


async def test_listing_shows_user_names_with_the_execution_that_last_rebound_them(
    fresh_client: FreshClient,
) -> None:
    async with fresh_client(result_mode="structured") as client:
        await run(client, "import os\nimport numpy as np\nrebound = 1\nkept = [1]\n_private = 2")
        await run(client, "arr = np.zeros((2, 3))\nkept.append(2)")
        await run(client, "rebound = 'now text'\nkept\n1 + 1")
        result = await client.call_tool("list_python_variables", {})
        assert result.structured_content is not None
        rows = result.structured_content["variables"]
        assert [(r["name"], r["type"], r["shape"], r["length"], r["execution"]) for r in rows] == [
            ("arr", "numpy.ndarray", [2, 3], None, 2),
            ("kept", "list", None, 2, 1),
            ("rebound", "str", None, 8, 3),
        ]
        assert rows[0]["size_bytes"] == 48
        facts = result.structured_content
        assert (facts["total"], facts["imports_hidden"], facts["modules_hidden"]) == (3, 2, 2)
        table = await variables(client)
        assert table["arr"] == ["numpy.ndarray", "48", "B", "2x3", "2"]
        assert table["kept"][-3:] == ["len", "2", "1"]
        text = await call(client, "list_python_variables")
        assert text.splitlines()[-1].startswith("3 variables; 2 imports not listed")
        with_modules = await variables(client, include_modules=True)
        assert set(with_modules) == {"arr", "kept", "np", "os", "rebound"}
        assert with_modules["np"][0] == "module" and with_modules["np"][-1] == "1"


async def test_imported_functions_and_classes_are_hidden_unless_asked_for(fresh_client: FreshClient) -> None:
    async with fresh_client(result_mode="structured") as client:
        await run(
            client,
            "import json\nfrom collections import OrderedDict\nfrom json import dumps as to_text\n"
            "def mine(): pass\nclass Mine: pass\nseen = OrderedDict(a=1)\nlater = lambda: 1",
        )
        listed = await client.call_tool("list_python_variables", {})
        assert listed.structured_content is not None
        facts = listed.structured_content
        assert [row["name"] for row in facts["variables"]] == ["Mine", "later", "mine", "seen"]
        assert (facts["imports_hidden"], facts["modules_hidden"]) == (3, 1)
        text = await call(client, "list_python_variables")
        assert "3 imports not listed (list_python_variables(include_imports=true) lists them)" in text
        everything = set(await variables(client, include_imports=True))
        assert everything == {"Mine", "OrderedDict", "json", "later", "mine", "seen", "to_text"}
        assert set(await variables(client, include_modules=True)) == everything  # the older name


async def test_a_long_listing_is_cut_and_says_so(fresh_client: FreshClient) -> None:
    async with fresh_client() as client:
        await run(client, "for i in range(305): globals()[f'v{i:03}'] = i")
        text = await call(client, "list_python_variables")
        lines = text.splitlines()
        assert len(lines) == 302 and lines[1].startswith("i ") and lines[-2].startswith("v298 ")
        assert lines[-1].startswith("306 variables; the first 300 by name are shown")


async def test_an_empty_namespace_lists_no_rows(fresh_client: FreshClient) -> None:
    async with fresh_client() as client:
        text = await call(client, "list_python_variables")
        assert text.startswith("0 variables.")


# -- no trace, busy, timeouts ---------------------------------------------------------------------


async def test_inspecting_leaves_in_out_underscore_and_numbering_untouched(fresh_client: FreshClient) -> None:
    async with fresh_client() as client:
        _, text = await run(
            client,
            "count_before, in_before = get_ipython().execution_count, len(In)\nquiet_v = 41\nquiet_v + 1",
        )
        assert body(text) == ["Out[1]: 42"]
        for _ in range(3):
            await summary(client, "quiet_v")
            await call(client, "list_python_variables")
            await call_error(client, "inspect_python_variable", name="not_there")
        number, text = await run(
            client, "(_, dict(Out), len(In) - in_before, get_ipython().execution_count - count_before)"
        )
        assert (number, body(text)) == (2, ["Out[2]: (42, {1: 42}, 1, 1)"])


LOOP = """\
# warmkernel: --wait 0.1
import time
for step in range(1, 100_000):
    training['step'] = step
    training['loss'] = 1 / step
    time.sleep(0.05)
"""


async def step_past(client: Client, number: int, step: int) -> int:
    """The running loop's step once it is past `step`: asked until then, as only the loop moves it."""
    while True:
        facts = await summary(client, "training")
        assert facts["during_execution"] == number and facts["kind"] == "dict"
        if (now := int(facts["keys"][0]["value"])) > step:
            return now
        await anyio.sleep(0.05)


async def test_both_tools_answer_beside_a_running_loop_without_a_trace(fresh_client: FreshClient) -> None:
    async with fresh_client(result_mode="structured") as client:
        await run(
            client,
            "count_before, in_before = get_ipython().execution_count, len(In)\n"
            "training = {'step': 0, 'loss': 1.0}",
        )
        number, _ = await run(client, LOOP)
        try:
            with anyio.fail_after(30):
                steps = [await step_past(client, number, 0)]
                steps.append(await step_past(client, number, steps[0]))
                assert steps[1] > steps[0] > 0  # the loop went on meanwhile: nothing waited for it
                listed = (await client.call_tool("list_python_variables", {})).structured_content
                assert listed is not None and listed["during_execution"] == number
                assert "training" in {row["name"] for row in listed["variables"]}
                text = await call(client, "inspect_python_variable", name="training")
                assert (
                    text.splitlines()[0] == f"note: In [{number}] is running; these values may be mid-update"
                )
                code, _ = await call_error(client, "inspect_python_variable", name="not_there")
                assert code == "variable_not_found"
                state = await client.call_tool("python_execution_status", {"execution": number})
                assert state.structured_content is not None and state.structured_content["state"] == "running"
        finally:
            await call(client, "interrupt_python")
            await call(client, "wait_python", execution=number)
        later, text = await run(client, "(len(In) - in_before, get_ipython().execution_count - count_before)")
        assert (later, body(text)) == (number + 1, [f"Out[{number + 1}]: (2, 2)"])


async def test_a_slow_inspection_beside_a_cell_stops_at_its_budget(
    fresh_client: FreshClient, gate: Gate
) -> None:
    async with fresh_client(result_mode="structured", inspect_timeout_s=1.0) as client:
        await run(client, SPINNING_REPR)
        number, _ = await run(client, f"# warmkernel: --wait 0.1\n{gate.wait}")
        try:
            with anyio.fail_after(30):
                facts = await summary(client, "spinning")
            assert (facts["summary_status"], facts["during_execution"]) == ("timeout", number)
            state = await client.call_tool("python_execution_status", {"execution": number})
            assert state.structured_content is not None and state.structured_content["state"] == "running"
        finally:
            await call(client, "interrupt_python")
            await call(client, "wait_python", execution=number)
        assert (await run(client, "len(spun)"))[1].endswith(f"Out[{number + 1}]: 0")


SPINNING_REPR = """\
import time
spun = []
class Spinning:
    def __repr__(self):
        end = time.monotonic() + 60
        while time.monotonic() < end:  # Python code: the budget's exception reaches it in any thread
            pass
        spun.append(True)
        return 'spun'
spinning = Spinning()
"""


SLOW_REPR = """\
import time
finished = []
class Slow:
    def __repr__(self):
        time.sleep(60)
        finished.append(True)
        return 'slow'
slow = Slow()
"""


async def test_a_summary_past_its_budget_is_stopped_and_degraded(fresh_client: FreshClient) -> None:
    async with fresh_client(inspect_timeout_s=0.5) as client:
        await run(client, SLOW_REPR)
        with anyio.fail_after(10):
            text = await call(client, "inspect_python_variable", name="slow")
        gist, _, document = text.partition("\n")
        facts = json.loads(document)
        assert gist.endswith("· bound by In [1] · summary timed out after 0.5 s: type and size only")
        assert facts == {
            "name": "slow",
            "type": "__main__.Slow",
            "size_bytes": facts["size_bytes"],
            "size_kind": "shallow",
            "summary_status": "timeout",
            "execution": 1,
            "budget_s": 0.5,
        }
        assert isinstance(facts["size_bytes"], int)
        # The repr was stopped, not left running: the kernel answers at once and it never finished.
        assert (await run(client, "len(finished)"))[1].endswith("Out[2]: 0")
        assert (await summary(client, "finished"))["length"] == 0


async def test_a_summary_that_swallows_the_timeout_is_interrupted_by_the_server(
    fresh_client: FreshClient,
) -> None:
    stubborn = (
        "import time\n"
        "class Stubborn:\n"
        "    def __repr__(self):\n"
        "        try:\n"
        "            time.sleep(60)\n"
        "        except BaseException:\n"
        "            time.sleep(60)\n"
        "        return 'never'\n"
        "stubborn = Stubborn()"
    )
    async with fresh_client(inspect_timeout_s=0.5) as client:
        await run(client, stubborn)
        with anyio.fail_after(15):
            facts = await summary(client, "stubborn")
        assert (facts["summary_status"], facts["type"]) == ("timeout", "__main__.Stubborn")
        assert (await run(client, "1 + 1"))[1].endswith("Out[2]: 2")


async def test_a_kernel_that_ignores_every_interrupt_during_an_inspection_is_restarted(
    fresh_client: FreshClient,
) -> None:
    wedged = (
        "import time\n"
        "class S:\n"
        "    def __sizeof__(self):\n"
        "        while True:\n"
        "            try:\n"
        "                time.sleep(.5)\n"
        "            except BaseException:\n"
        "                pass\n"
        "s = S()"
    )
    async with fresh_client(inspect_timeout_s=0.5) as client:
        await run(client, wedged)
        with anyio.fail_after(30):
            code, message = await call_error(client, "list_python_variables")
        assert code == "inspection_failed"
        assert "it was restarted as generation 2, and its namespace was lost" in message
        with anyio.fail_after(60):
            number, text = await run(client, "'answered'")
        assert number == 2 and "Out[2]: 'answered'" in text
        assert "answered neither an inspection nor an interrupt and was restarted" in text
        assert "generation 2" in await call(client, "python_status")


async def test_a_users_own_import_name_does_not_break_inspection_or_notebooks(
    fresh_client: FreshClient, tmp_path: Path
) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    notebook = new_notebook(cells=[new_code_cell("y = 2", id="a")])
    (tmp_path / "nb.ipynb").write_text(nbformat.writes(notebook), encoding="utf-8")
    async with fresh_client() as client:
        await run(client, "__import__ = None\nsys = 'mine'\nx = 1")
        assert "x" in await call(client, "list_python_variables")
        assert '"type": "int"' in await call(client, "inspect_python_variable", name="x")
        # the notebook in the kernel whose namespace has the user's `__import__`
        ran = await call(client, "run_notebook_cells", path="nb.ipynb", timeout_seconds=60, kernel="main")
        assert "In [2]" in ran
        assert "fresh" in await call(client, "notebook_status", path="nb.ipynb", kernel="main")


async def test_a_cell_sent_during_an_inspection_runs_after_it_with_the_next_number(
    fresh_client: FreshClient,
) -> None:
    connected = anyio.Event()

    async def hold(stream: SocketStream) -> None:
        connected.set()
        async with stream:
            await anyio.sleep_forever()

    listener: MultiListener[SocketStream] = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.listeners[0].extra(anyio.abc.SocketAttribute.local_port)
    blocks = (
        "import socket\n"
        "class Blocks:\n"
        "    def __repr__(self):\n"
        f"        with socket.create_connection(('127.0.0.1', {port})) as connection:\n"
        "            connection.recv(1)  # until the summary's budget stops it\n"
        "blocks = Blocks()"
    )
    async with fresh_client(inspect_timeout_s=2) as client, listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, hold)
        await run(client, blocks)
        inspected: list[dict[str, Any]] = []

        async def inspect_blocks() -> None:
            inspected.append(await summary(client, "blocks"))

        with anyio.fail_after(30):
            tg.start_soon(inspect_blocks)
            await connected.wait()  # the inspection is now running inside the kernel
            number, text = await run(client, "1 + 1")
        assert (number, body(text)) == (2, ["Out[2]: 2"])
        assert inspected[0]["summary_status"] == "timeout"
        tg.cancel_scope.cancel()


# -- kernel lifecycle and other interpreters ------------------------------------------------------


async def test_the_helper_is_back_after_a_reset_and_after_a_death(fresh_client: FreshClient) -> None:
    async with fresh_client() as client:
        await call(client, "reset_python")
        await run(client, "after_reset = [1, 2]")
        assert (await summary(client, "after_reset"))["execution"] == 1
        await run(client, "import os; os._exit(1)")
        await run(client, "after_death = 3")
        assert (await variables(client)) == {"after_death": ["int", "28", "B", "3"]}


async def test_summarizers_registered_in_the_kernel_come_first_and_failures_fall_back(
    client: Client,
) -> None:
    await run(
        client,
        "from warmkernel.inspection import summarizer\n"
        "class Point:\n    def __init__(self, x): self.x = x\n"
        "@summarizer\n"
        "def point_summary(obj):\n"
        "    if isinstance(obj, Point):\n"
        "        return {'kind': 'point', 'x': obj.x, 'type': 'not overridden'}\n"
        "@summarizer\n"
        "def picky_summary(obj):\n"
        "    if isinstance(obj, bytearray): raise RuntimeError('cannot do bytearrays')\n"
        "point_a = Point(7)\nraw_a = bytearray(b'ab')",
    )
    facts = await summary(client, "point_a")
    assert (facts["kind"], facts["x"], facts["summarizer"]) == ("point", 7, "__main__:point_summary")
    assert facts["type"] == "__main__.Point"
    fallback = await summary(client, "raw_a")
    assert (fallback["kind"], fallback["length"]) == ("bytes", 2)
    assert fallback["summarizer_errors"] == [
        "__main__:picky_summary raised RuntimeError: cannot do bytearrays"
    ]


async def test_configured_summarizers_are_imported_in_the_kernel(
    fresh_client: FreshClient, tmp_path: Path
) -> None:
    (tmp_path / "team_summaries.py").write_text(
        "def tagged(obj):\n    return {'kind': 'tagged', 'tag': obj.tag} if hasattr(obj, 'tag') else None\n"
    )
    async with fresh_client(summarizers=("team_summaries:tagged", "missing_pkg.mod:func")) as client:
        await run(client, "class T:\n    tag = 'blue'\nt = T()")
        facts = await summary(client, "t")
        assert (facts["kind"], facts["tag"], facts["summarizer"]) == (
            "tagged",
            "blue",
            "team_summaries:tagged",
        )
        assert facts["summarizer_errors"] == [
            "missing_pkg.mod:func could not be loaded: ModuleNotFoundError: No module named 'missing_pkg'"
        ]


@pytest.fixture
def python_without_warmkernel(tmp_path: Path) -> str:
    """A venv that sees this interpreter's packages (ipykernel, pandas) but not warmkernel."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    python = tmp_path / "bare" / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    shared = tmp_path / "shared"
    shared.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not re.match(r"(_*warmkernel|__editable__)", entry.name):
            os.symlink(entry, shared / entry.name)
    Path(site, "shared.pth").write_text(f"{shared}\n")
    probe = subprocess.run([python, "-c", "import warmkernel"], capture_output=True, text=True)
    assert "No module named 'warmkernel'" in probe.stderr
    return str(python)


async def test_a_kernel_in_an_interpreter_without_warmkernel_is_inspected_too(
    fresh_client: FreshClient, python_without_warmkernel: str
) -> None:
    async with fresh_client(python=python_without_warmkernel) as client:
        await run(
            client,
            "import pandas as pd\nframe_c = pd.DataFrame({'a': [1, 2]})\n"
            "from warmkernel.inspection import summarizer\n"
            "@summarizer\ndef mine(obj): return {'kind': 'mine'} if obj == 'special' else None\n"
            "special = 'special'",
        )
        assert (await summary(client, "frame_c"))["shape"] == [2, 1]
        assert (await summary(client, "special"))["kind"] == "mine"
        assert set(await variables(client)) == {"frame_c", "mine", "special"}  # summarizer is an import


async def test_a_helper_answer_that_is_not_json_is_an_internal_error_logged_with_its_traceback(
    fresh_client: FreshClient, caplog: pytest.LogCaptureFixture
) -> None:
    async with fresh_client() as client:
        await run(client, "x = 1")
        # The user's own code can reach the kernel-side helper; what it breaks is our bug to report.
        await run(client, "import sys; sys.modules['_warmkernel_common'].answer = lambda fields: 'garbage'")
        code, message = await call_error(client, "inspect_python_variable", name="x")
    assert code == "internal_error"
    assert "sent no JSON" in message
    logged = [r for r in caplog.records if r.levelname == "ERROR" and r.exc_info is not None]
    assert logged, "an internal_error is logged with its traceback"


async def test_the_sample_of_a_dataframe_has_inspect_sample_rows_rows(fresh_client: FreshClient) -> None:
    async with fresh_client(inspect_sample_rows=2) as client:
        await run(client, "import pandas as pd\nframe = pd.DataFrame({'n': range(10)})")
        facts = await summary(client, "frame")
        assert facts["sample_rows"] == [{"n": 0}, {"n": 1}]
