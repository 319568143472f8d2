"""Static cell analysis, one snippet per case: what a cell defines, reads and mutates."""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from IPython.core.inputtransformer2 import TransformerManager

from warmkernel.notebook.analysis import CellAnalysis, _CellVisitor, _parse, analyze, unconditional_binds


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    defines: set[str] = field(default_factory=set)
    reads: set[str] = field(default_factory=set)
    mutates: set[str] = field(default_factory=set)
    deferred: set[str] = field(default_factory=set)
    optional: set[str] | None = None
    """Checked only when given: most cells read a builtin or two."""
    conservative: bool = False
    marks: tuple[pytest.MarkDecorator, ...] = ()


def py(version: tuple[int, int]) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        sys.version_info < version, reason=f"syntax of Python {version[0]}.{version[1]}"
    )


def gap(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=reason)


CASES = [
    # order inside a cell
    Case("binding before read is local", "x = 1\nprint(x)", defines={"x"}, optional={"print"}),
    Case("read before binding is a read", "print(x)\nx = 1", defines={"x"}, reads={"x"}),
    Case("value is evaluated before the target", "x = x + 1", defines={"x"}, reads={"x"}),
    Case("augmented assignment reads, defines, mutates", "x += 1", defines={"x"}, reads={"x"}, mutates={"x"}),
    Case(
        "binding on one branch keeps the outside read",
        "if c:\n    x = 1\nprint(x)",
        defines={"x"},
        reads={"c", "x"},
    ),
    Case(
        "binding on both branches hides the outside name",
        "if c:\n    x = 1\nelse:\n    x = 2\nprint(x)",
        defines={"x"},
        reads={"c"},
    ),
    Case("loop body may not run", "for i in r:\n    y = i\nprint(y)", defines={"i", "y"}, reads={"r", "y"}),
    Case("while body may not run", "while c:\n    y = 1\nprint(y)", defines={"y"}, reads={"c", "y"}),
    Case(
        "try body and every handler bind",
        "try:\n    import numpy as np\nexcept ImportError:\n    np = None\nnp.zeros(3)",
        defines={"np"},
        optional={"ImportError"},
    ),
    Case(
        "handler reads what the try body may not have bound",
        "try:\n    y = f()\nexcept E:\n    print(y)",
        defines={"y"},
        reads={"f", "E", "y"},
    ),
    Case("finally runs after every path", "try:\n    pass\nfinally:\n    z = 1\nz", defines={"z"}),
    Case("with target", "with open(p) as f:\n    t = f.read()", defines={"f", "t"}, reads={"p"}),
    Case(
        "except name is bound in its handler",
        "try:\n    pass\nexcept E as e:\n    print(e)",
        defines={"e"},
        reads={"E"},
    ),
    Case("walrus defines", "if (n := len(a)) > 3:\n    print(n)", defines={"n"}, reads={"a"}),
    Case(
        "walrus after a short circuit may not run",
        "ok = c and (m := f())\nprint(m)",
        defines={"ok", "m"},
        reads={"c", "f", "m"},
    ),
    Case(
        "conditional expression branches", "v = (w := 1) if c else 2\nw", defines={"v", "w"}, reads={"c", "w"}
    ),
    # comprehensions and lambdas
    Case("comprehension variable is not a read", "[i * k for i in xs if i]", reads={"xs", "k"}),
    Case("inner iterable sees the outer target", "[j for i in xs for j in i]", reads={"xs"}),
    Case("dict comprehension", "{k: v for k, v in pairs}", reads={"pairs"}),
    Case(
        "walrus in a comprehension binds the cell",
        "[(last := i) for i in xs]",
        defines={"last"},
        reads={"xs"},
    ),
    Case(
        "walrus in a comprehension may not run",
        "[(last := i) for i in xs]\nprint(last)",
        defines={"last"},
        reads={"xs", "last"},
    ),
    Case("comprehension variable does not leak", "[i for i in xs]\ni", reads={"xs", "i"}),
    Case("lambda parameter is local", "f = lambda a: a + b", defines={"f"}, reads={"b"}, deferred={"b"}),
    # functions and classes
    Case(
        "function body free name is a deferred read",
        "def f(a, *args, k=1, **kw):\n    b = 2\n    return a + b + g + k",
        defines={"f"},
        reads={"g"},
        deferred={"g"},
    ),
    Case("function body name bound later in the cell", "def f():\n    return y\ny = 1", defines={"f", "y"}),
    Case(
        "function body name read now as well is not deferred",
        "def f():\n    return y\nprint(y)",
        defines={"f"},
        reads={"y"},
    ),
    Case(
        "decorator, default and annotation are read at definition",
        "@deco\ndef f(a: A = default) -> R:\n    pass",
        defines={"f"},
        reads={"deco", "A", "default", "R"},
    ),
    Case("recursion reads nothing outside", "def f(n):\n    return f(n - 1)", defines={"f"}),
    Case(
        "global assignment in a function defines",
        "def bump():\n    global counter\n    counter += 1",
        defines={"bump", "counter"},
        reads={"counter"},
        deferred={"counter"},
    ),
    Case(
        "nonlocal is no cell read",
        "def outer():\n    n = 0\n    def inner():\n        nonlocal n\n        n += 1\n    return inner",
        defines={"outer"},
    ),
    Case(
        "nested function sees enclosing locals",
        "def outer(a):\n    def inner():\n        return a + z\n    return inner",
        defines={"outer"},
        reads={"z"},
        deferred={"z"},
    ),
    Case(
        "class body names are class-local",
        "class A(Base, metaclass=Meta):\n    size = 3\n    double = size * 2",
        defines={"A"},
        reads={"Base", "Meta"},
    ),
    Case(
        "methods do not see class names",
        "class A:\n    size = 3\n    def get(self):\n        return size",
        defines={"A"},
        reads={"size"},
        deferred={"size"},
    ),
    Case(
        "mutation inside a function body is a read only",
        "def add(v):\n    items.append(v)",
        defines={"add"},
        reads={"items"},
        deferred={"items"},
    ),
    # imports and deletion
    Case("import a.b defines a", "import os.path", defines={"os"}),
    Case("import as", "import numpy as np", defines={"np"}),
    Case("from import", "from math import pi as PI, tau", defines={"PI", "tau"}),
    Case("del unbinds, which defines", "del x", defines={"x"}),
    Case("del then read reads the outside name", "x = 1\ndel x\nx", defines={"x"}, reads={"x"}),
    # mutation hints
    Case("attribute assignment mutates the root", "cfg.opts.level = 3", reads={"cfg"}, mutates={"cfg"}),
    Case("subscript assignment mutates", "d[k] = v", reads={"d", "k", "v"}, mutates={"d"}),
    Case("subscript deletion mutates", "del d[k]", reads={"d", "k"}, mutates={"d"}),
    Case("augmented subscript mutates", "counts[w] += 1", reads={"counts", "w"}, mutates={"counts"}),
    Case("mutating method", "items.append(x)", reads={"items", "x"}, mutates={"items"}),
    Case(
        "mutating method on a nested attribute",
        "model.layers.extend(more)",
        reads={"model", "more"},
        mutates={"model"},
    ),
    Case("inplace=True mutates", "df.dropna(inplace=True)", reads={"df"}, mutates={"df"}),
    Case("inplace=False does not", "df.dropna(inplace=False)", reads={"df"}),
    Case("setattr mutates", "setattr(obj, 'a', 1)", reads={"obj"}, mutates={"obj"}),
    Case("other methods are plain reads", "n = items.count(1)", defines={"n"}, reads={"items"}),
    Case("mutating what the cell bound is no hint", "xs = []\nxs.append(1)", defines={"xs"}),
    Case("mutating a call result is no hint", "make().append(1)", reads={"make"}),
    # builtins
    Case("builtins are optional reads", "print(len(xs))", reads={"xs"}, optional={"print", "len"}),
    Case("IPython names are optional reads", "display(Out[3])\n_", optional={"display", "Out", "_"}),
    Case("history names are optional reads", "_12 + _i3", optional={"_12", "_i3"}),
    Case("a builtin the cell binds is local", "list = [1]\nlist.append(2)", defines={"list"}, optional=set()),
    # conservative
    Case("exec is conservative", "exec(code)", reads={"code"}, conservative=True),
    Case("eval is conservative", "eval('x')", conservative=True),
    Case("globals() is conservative", "globals()['x'] = 1", conservative=True),
    Case("vars() is conservative", "vars()", conservative=True),
    Case("vars(obj) is not", "vars(obj)", reads={"obj"}),
    Case(
        "globals() in a function is conservative",
        "def f():\n    return globals()",
        defines={"f"},
        conservative=True,
    ),
    Case("star import is conservative", "from m import *", conservative=True),
    Case("%run is conservative", "%run -i script.py", conservative=True),
    Case("%store -r is conservative", "%store -r", conservative=True),
    Case("the shell's user_ns is conservative", "get_ipython().user_ns['a'] = 1", conservative=True),
    Case("too deep to analyse is conservative", "x" + "+x" * 3000, conservative=True),
    # IPython syntax
    Case("line magic runs code", "%time x = f()", defines={"x"}, reads={"f"}),
    Case("cell magic runs its body", "%%time\nx = f()\ny = x", defines={"x", "y"}, reads={"f"}),
    Case("magic code sees earlier bindings", "x = 1\n%time y = x", defines={"x", "y"}),
    Case("capture binds its output", "%%capture --no-stderr out\ny = g()", defines={"out", "y"}, reads={"g"}),
    Case("timeit bindings do not persist", "%timeit -n 10 -r 3 y = f(x)", reads={"f", "x"}),
    Case(
        "timeit cell setup is code",
        "%%timeit -n 3 setup = make()\nrun(setup)",
        reads={"make", "run"},
    ),
    Case("timeit mutations persist", "%timeit items.append(1)", reads={"items"}, mutates={"items"}),
    Case("prun options are skipped", "%prun -s cumulative work(data)", reads={"work", "data"}),
    Case("shell escape interpolates", "!echo $name {other.attr}", optional={"name", "other"}),
    Case("shell escape $$ is a dollar", "!echo $$HOME", optional=set()),
    Case("shell output is bound", "files = !ls $pattern", defines={"files"}, optional={"pattern"}),
    Case("line magic interpolates", "%cd $folder", optional={"folder"}),
    Case("help reads its target", "model.fit?", optional={"model"}),
    Case("other line magics are opaque", "%matplotlib inline", optional=set()),
    Case("script magic --out binds", "%%bash --out listing\nls", defines={"listing"}),
    Case("script magic body is opaque", "%%bash\nx = $y", optional=set()),
    Case("pasted IPython prompt is stripped", "In [1]: x = y", defines={"x"}, reads={"y"}),
    Case("pasted classic prompt is stripped", ">>> x = y\n>>> z = x", defines={"x", "z"}, reads={"y"}),
    Case("indented cell is dedented", "    x = y", defines={"x"}, reads={"y"}),
    # other syntax
    Case(
        "match captures",
        "match p:\n    case {'k': v, **rest}:\n        pass\n    case [first, *others]:\n        pass\n"
        "    case Point(x=px) as pt:\n        pass",
        defines={"v", "rest", "first", "others", "px", "pt"},
        reads={"p", "Point"},
    ),
    Case("match value pattern reads", "match p:\n    case Color.RED:\n        pass", reads={"p", "Color"}),
    Case(
        "match capture may not bind",
        "match p:\n    case [a]:\n        pass\na",
        defines={"a"},
        reads={"p", "a"},
    ),
    Case("annotation alone binds nothing", "x: int", optional={"int"}),
    Case("annotated assignment", "x: T = y", defines={"x"}, reads={"T", "y"}),
    Case(
        "except star",
        "try:\n    pass\nexcept* ValueError as eg:\n    print(eg)",
        defines={"eg"},
        marks=(py((3, 11)),),
    ),
    Case("type parameters", "def f[T](a: T) -> T:\n    return a", defines={"f"}, marks=(py((3, 12)),)),
    Case(
        "type alias is lazy",
        "type Alias = list[Item]",
        defines={"Alias"},
        reads={"Item"},
        deferred={"Item"},
        marks=(py((3, 12)),),
    ),
    Case("generic class", "class Box[T]:\n    item: T", defines={"Box"}, marks=(py((3, 12)),)),
    # known gaps
    Case(
        "mutation through an alias (the kernel's change check sees it)",
        "alias = items\nalias.append(1)",
        defines={"alias"},
        reads={"items"},
        mutates={"items"},
        marks=(gap("static hints follow names, not objects"),),
    ),
    Case(
        "function called before the cell binds its global",
        "def f():\n    return y\nprint(f())\ny = 1",
        defines={"f", "y"},
        reads={"y"},
        marks=(gap("function bodies are resolved against the cell's end state"),),
    ),
    Case(
        "unknown cell magic that binds a name",
        "%%sql result <<\nSELECT 1",
        defines={"result"},
        marks=(gap("bodies and lines of unknown cell magics are opaque"),),
    ),
]


@pytest.mark.parametrize("expected", [pytest.param(case, id=case.name, marks=case.marks) for case in CASES])
def test_cell_analysis(expected: Case) -> None:
    got = analyze(expected.source)
    assert got.syntax_error is None
    assert set(got.defines) == expected.defines
    assert set(got.reads) == expected.reads
    assert set(got.mutates) == expected.mutates
    assert set(got.deferred_reads) == expected.deferred
    assert got.conservative == expected.conservative
    if expected.optional is not None:
        assert set(got.optional_reads) == expected.optional


@pytest.mark.parametrize(
    "source",
    [
        pytest.param("def f(:\n    pass", id="invalid syntax"),
        pytest.param("s = 'unterminated\nx = 1", id="unterminated string"),
        pytest.param("x = 1\x00", id="null byte"),
        pytest.param('=%"""', id="input IPython's transforms cannot handle"),
        pytest.param("(" * 300 + ")" * 300, id="too many parentheses"),
    ],
)
def test_cell_that_does_not_parse_has_only_a_syntax_error(source: str) -> None:
    got = analyze(source)
    assert got.syntax_error
    assert got == CellAnalysis(syntax_error=got.syntax_error)


def test_syntax_error_names_the_line() -> None:
    assert analyze("x = 1\ny = (").syntax_error == "line 2: '(' was never closed"


@pytest.mark.parametrize(
    "source",
    [pytest.param(case.source, id=case.name) for case in CASES if not case.conservative],
)
def test_plain_python_shortcut_parses_as_ipython_would(source: str) -> None:
    try:
        ipython = ast.dump(ast.parse(TransformerManager().transform_cell(source)))
    except SyntaxError:
        pytest.skip("syntax of a newer Python")
    assert ast.dump(_parse(source)) == ipython


def test_analysis_leaves_the_tree_unchanged() -> None:
    tree = ast.parse("x = [i for i in y]\ndef f(a):\n    return a + x\nclass C:\n    z = f(1)\n")
    before = ast.dump(tree, include_attributes=True)
    _CellVisitor().analyse(tree)
    assert ast.dump(tree, include_attributes=True) == before


_WORDS = r"""x y = 1 ( ) [ ] { } : , ' " \ # % %% ! ? $ * .append += -n >>> def class lambda for in if
global del import time timeit capture"""
_IPYTHONISH = st.sampled_from(
    [*_WORDS.split(), '"""', "\n", " ", "    ", "In [1]: ", "\x00", "\x1c", "\u2028"]
)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(_IPYTHONISH, max_size=25).map("".join)))
def test_analysis_of_any_text_is_consistent_and_never_raises(source: str) -> None:
    got = analyze(source)
    assert got.mutates <= got.reads
    assert got.deferred_reads <= got.reads
    assert not got.reads & got.optional_reads
    if got.syntax_error is not None:
        assert got == CellAnalysis(syntax_error=got.syntax_error)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import pandas as pd\nimport os.path\nfrom json import loads as parse", {"pd", "os", "parse"}),
        ("x = 1\ny: int = 2\nz += 1\na.b = 3\nc[0] = 4", {"x", "y", "z"}),
        ("def f():\n    pass\nclass K:\n    pass", {"f", "K"}),
        (
            "if flag:\n    y = 1\nfor i in range(3):\n    pass\ntry:\n    w = 1\nexcept Exception:\n    pass",
            set(),
        ),
        ("%time x = 1", {"x"}),  # the code of a magic that runs it in the user namespace counts
        ("%prun -l 3 -q w = 1", {"w"}),
        ("%%time\ntimed = 5\nif flag:\n    maybe = 1", {"timed"}),
        ("%%capture --no-stderr out\nseen = 1", {"out", "seen"}),
        ("%%timeit\nkept = 1", set()),  # timeit's bindings do not persist
        ("%%bash\nx=1", set()),
        ("x = (", set()),
    ],
)
def test_unconditional_binds_are_the_top_level_bindings(source: str, expected: set[str]) -> None:
    assert unconditional_binds(source) == expected
