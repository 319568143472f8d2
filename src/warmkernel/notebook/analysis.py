"""Static facts about one notebook cell: the top-level names it defines, reads and mutates.

`analyze(source)` parses a cell as IPython would run it (after IPython's input transforms,
so magics parse) and returns a frozen `CellAnalysis`. It is pure, cached by source, and
never changes the tree it walks. The rules, each pinned by a row in
tests/unit/test_analysis.py:

- Order matters inside a cell: `x = 1; print(x)` reads no outside x; `print(x); x = 1`
  reads and defines x. Only a binding made on every path hides the outside name: after
  `if c: x = 1` a read of x may still see the outside x, so it is a read.
- Assignments, `def`, `class`, imports, `for`/`with`/`except` targets, walrus, match
  captures and `del` define top-level names; `import a.b` defines `a`.
- Function and lambda bodies run later: their free names are reads of the cell (and
  `deferred_reads` when read nowhere else) unless the cell binds them by its end; their
  parameters and locals are not. Assigning a `global x` inside a function defines x.
  Comprehension and class scopes follow Python's scoping rules.
- Mutation hints: `x.a = ...`, `x[k] = ...`, `del x[k]`, `x += ...`, `x.append(...)` and
  the other `MUTATING_METHODS`, any method call with `inplace=True`, and `setattr(x, ...)`
  mark the root name x as mutated when x comes from outside the cell. A mutated name is
  also a read. Mutations inside function bodies happen when the function is called, so
  they are reads only.
- Builtins and IPython's injected names are not reads but `optional_reads`: a cell above
  matters only if it shadows them.
- `exec`, `eval`, `globals()`, `locals()`, `vars()` and star imports make a cell
  conservative: it may read and define anything. So does a cell too deeply nested to
  analyse.
- Magics and `!commands` do what `warmkernel.notebook.magics` says; the code a magic runs
  is analysed as the cell's, and `%timeit`/`%%timeit`'s as reads only, since their bindings
  do not persist.
- A cell that does not parse has `syntax_error` set and everything else empty.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from warmkernel.notebook.magics import magic_effect, opens_the_namespace

MUTATING_METHODS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "remove",
        "pop",
        "clear",
        "sort",
        "reverse",
        "update",
        "setdefault",
        "popitem",
        "add",
        "discard",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
        "appendleft",
        "extendleft",
        "popleft",
        "rotate",
    }
)
"""Methods that change their receiver in place (list, dict, set, deque)."""

IPYTHON_NAMES = frozenset(
    {"display", "get_ipython", "In", "Out", "_", "__", "___", "_i", "_ii", "_iii", "_ih", "_oh", "_dh"}
    | {"exit", "quit"}
)
"""Names IPython puts in every user namespace."""

_HISTORY_NAME = re.compile(r"_i?\d+")
"""`_12` and `_i12`: IPython's output and input history."""

_BUILTIN_NAMES = frozenset(dir(builtins)) | IPYTHON_NAMES
_CONSERVATIVE_CALLS = frozenset({"exec", "eval", "globals", "locals"})
_PROMPT = re.compile(r"^(?:>>>|In \[\d+\]:|\s*\.{3,}:)", re.MULTILINE)
"""Pasted prompts, which IPython strips even where the rest would parse as Python."""


@dataclass(frozen=True)
class CellAnalysis:
    """What a cell does to the top-level namespace, as far as its source tells."""

    defines: frozenset[str] = frozenset()
    """Names it binds or unbinds."""
    reads: frozenset[str] = frozenset()
    """Outside names it reads, including mutated ones and free names of its functions."""
    mutates: frozenset[str] = frozenset()
    """Outside names whose value it changes in place (a subset of `reads`)."""
    optional_reads: frozenset[str] = frozenset()
    """Builtins and interpolated names: reads only if some cell above binds them."""
    deferred_reads: frozenset[str] = frozenset()
    """The `reads` made only inside function bodies: they resolve when called."""
    conservative: bool = False
    """It may read and define any name (exec, star import, %run, ...)."""
    syntax_error: str | None = None


@functools.lru_cache(maxsize=4096)
def analyze(source: str) -> CellAnalysis:
    """Analyse one cell; cached, since status is asked after every edit of a large notebook."""
    try:
        tree = _parse(source)
    except SyntaxError as exc:
        return CellAnalysis(syntax_error=f"line {exc.lineno}: {exc.msg}" if exc.lineno else exc.msg)
    except ValueError as exc:  # null bytes, before Python 3.12 made them a SyntaxError
        return CellAnalysis(syntax_error=str(exc))
    except RecursionError:
        return CellAnalysis(conservative=True)
    try:
        return _CellVisitor().analyse(tree)
    except RecursionError:
        return CellAnalysis(conservative=True)


def _parse(source: str) -> ast.Module:
    """Parse a cell as IPython runs it; plain Python skips the costly transforms."""
    if not _PROMPT.search(source):
        with contextlib.suppress(SyntaxError):
            return ast.parse(source)
    # Imported here, for the few cells that need it: IPython would add about 60 ms to the
    # daemon's start, which comes before any notebook.
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        with warnings.catch_warnings():
            # Lines split at \x1c or \u2028 make IPython warn; the analysis should not.
            warnings.simplefilter("ignore")
            transformed = TransformerManager().transform_cell(source)
    except Exception as exc:  # IPython's token transforms index past odd input, e.g. `=%"""`
        raise SyntaxError(f"IPython cannot transform this cell ({type(exc).__name__})") from exc
    return ast.parse(transformed)


def _is_builtin(name: str) -> bool:
    return name in _BUILTIN_NAMES or _HISTORY_NAME.fullmatch(name) is not None


def _is_true(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


ScopeKind = Literal["module", "class", "function", "comprehension", "type_params"]
Resolution = Literal["local", "read", "builtin", "late"]
"""How a name load resolves: bound inside the cell, an outside read, a builtin, or in a
function body (decided at the end of the cell)."""


@dataclass
class _Scope:
    kind: ScopeKind
    bound: set[str] = field(default_factory=set)
    """Module, class, comprehension: names bound on every path so far. Function: all its locals."""
    declared_global: frozenset[str] = frozenset()


class _LocalNames(ast.NodeVisitor):
    """The names a function body binds, which Python makes local to the whole function."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.declared_global: set[str] = set()
        self.declared_nonlocal: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.bound.add(node.id)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.bound.add(node.name)  # its body is another scope

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        pass  # another scope

    def visit_comprehension(self, node: ast.comprehension) -> None:
        self.visit(node.iter)  # the target is the comprehension's own; a walrus is ours
        for condition in node.ifs:
            self.visit(condition)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        self.bound.update(alias.asname or alias.name.partition(".")[0] for alias in node.names)

    visit_ImportFrom = visit_Import

    def visit_Global(self, node: ast.Global) -> None:
        self.declared_global.update(node.names)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.declared_nonlocal.update(node.names)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self.bound.add(node.name)
        self.generic_visit(node)

    def visit_MatchAs(self, node: ast.MatchAs | ast.MatchStar) -> None:
        if node.name:
            self.bound.add(node.name)
        self.generic_visit(node)

    visit_MatchStar = visit_MatchAs

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        if node.rest:
            self.bound.add(node.rest)
        self.generic_visit(node)


class _CellVisitor(ast.NodeVisitor):
    """One walk over a cell's tree, in execution order, collecting a `CellAnalysis`."""

    def __init__(self) -> None:
        self._scopes = [_Scope("module")]
        self._deferred = 0
        """How many function or lambda bodies enclose the current node."""
        self._defines: set[str] = set()
        self._reads: set[str] = set()
        self._mutates: set[str] = set()
        self._optional: set[str] = set()
        self._late: set[str] = set()
        """Global names loaded in function bodies, resolved against the cell's end state."""
        self._conservative = False

    def analyse(self, tree: ast.Module) -> CellAnalysis:
        self._visit_all(tree.body)
        late = self._late - self._scopes[0].bound
        late_reads = {name for name in late if not _is_builtin(name)}
        return CellAnalysis(
            defines=frozenset(self._defines),
            reads=frozenset(self._reads | late_reads),
            mutates=frozenset(self._mutates),
            optional_reads=frozenset(self._optional | (late - late_reads)),
            deferred_reads=frozenset(late_reads - self._reads),
            conservative=self._conservative,
        )

    # names

    def _resolve(self, name: str) -> Resolution:
        innermost = self._scopes[-1]
        for scope in reversed(self._scopes[1:]):
            if scope.kind == "function":
                if name in scope.declared_global:
                    break
                if name in scope.bound:
                    return "local"
            elif (scope.kind != "class" or scope is innermost) and name in scope.bound:
                return "local"  # a class body's names are invisible to its nested scopes
        if self._deferred:
            return "late"
        if name in self._scopes[0].bound:
            return "local"
        return "builtin" if _is_builtin(name) else "read"

    def _load(self, name: str) -> None:
        resolution = self._resolve(name)
        if resolution == "read":
            self._reads.add(name)
        elif resolution == "builtin":
            self._optional.add(name)
        elif resolution == "late":
            self._late.add(name)

    def _bind(self, name: str, *, bind: bool = True, walrus: bool = False) -> None:
        """Bind (or with `bind=False` unbind) a name in the scope the statement runs in."""
        scope = self._scopes[-1]
        if walrus:  # binds in the nearest scope that is not a comprehension
            scope = next(s for s in reversed(self._scopes) if s.kind != "comprehension")
        if scope.kind == "function":
            if name in scope.declared_global:
                self._defines.add(name)
            return
        if scope.kind == "module":
            self._defines.add(name)
        if bind:
            scope.bound.add(name)
        else:
            scope.bound.discard(name)

    def _hint(self, target: ast.expr) -> None:
        """Mark the root name of `x.a[k]` as mutated, if it is an outside name."""
        while isinstance(target, (ast.Attribute, ast.Subscript)):
            target = target.value
        if isinstance(target, ast.Name) and self._resolve(target.id) == "read":
            self._mutates.add(target.id)

    # control flow

    def _visit_all(self, nodes: Iterable[ast.AST]) -> None:
        for node in nodes:
            self.visit(node)

    def _branches(self, *branches: Callable[[], object]) -> None:
        """Run alternative paths; afterwards only what every path bound counts as bound."""
        scope = self._scopes[-1]
        if scope.kind not in ("module", "class"):
            for branch in branches:
                branch()
            return
        before = scope.bound
        after: list[set[str]] = []
        for branch in branches:
            scope.bound = set(before)
            branch()
            after.append(scope.bound)
        scope.bound = set.intersection(*after)

    def _maybe(self, branch: Callable[[], object]) -> None:
        self._branches(branch, lambda: None)

    @contextlib.contextmanager
    def _scope(self, scope: _Scope, *, deferred: bool = False) -> Iterator[None]:
        self._scopes.append(scope)
        self._deferred += deferred
        try:
            yield
        finally:
            self._deferred -= deferred
            self._scopes.pop()

    @contextlib.contextmanager
    def _type_params(self, node: ast.AST) -> Iterator[None]:
        """PEP 695 `def f[T]`, `class C[T]`, `type A[T]`: T is visible inside only."""
        names = {param.name for param in getattr(node, "type_params", ())}
        if not names:
            yield
            return
        with self._scope(_Scope("type_params", names)):
            yield

    # statements

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)  # the value is evaluated before any target is bound
        self._visit_all(node.targets)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self._load(node.target.id)
            self._hint(node.target)
            self._bind(node.target.id)
        else:
            self.visit(node.target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.visit(node.annotation)
        if node.value is not None:
            self.visit(node.value)
            self.visit(node.target)  # `x: int` alone binds nothing

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._bind(alias.asname or alias.name.partition(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name == "*":
                self._conservative = True
            else:
                self._bind(alias.asname or alias.name)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._visit_all(node.decorator_list)
        self._function(node, node.body)
        self._bind(node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._function(node, [node.body])

    def _function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, body: Sequence[ast.AST]
    ) -> None:
        """Defaults and annotations now, the body later, against the function's own locals."""
        args = node.args
        self._visit_all(args.defaults)
        self._visit_all(default for default in args.kw_defaults if default is not None)
        every_arg = [*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg]
        params = {arg.arg for arg in every_arg if arg is not None}
        local_names = _LocalNames()
        for statement in body:
            local_names.visit(statement)
        with self._type_params(node):
            if not isinstance(node, ast.Lambda):
                self._visit_all(arg.annotation for arg in every_arg if arg is not None and arg.annotation)
                if node.returns is not None:
                    self.visit(node.returns)
            scope = _Scope(
                "function",
                (params | local_names.bound) - local_names.declared_global - local_names.declared_nonlocal,
                frozenset(local_names.declared_global),
            )
            with self._scope(scope, deferred=True):
                self._visit_all(body)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._visit_all(node.decorator_list)
        with self._type_params(node):
            self._visit_all(node.bases)
            self._visit_all(node.keywords)
            with self._scope(_Scope("class")):
                self._visit_all(node.body)
        self._bind(node.name)

    def visit_TypeAlias(self, node: ast.AST) -> None:
        """`type A = ...` (Python 3.12+): the value is evaluated lazily, like a function body."""
        with self._type_params(node), self._scope(_Scope("function"), deferred=True):
            self.visit(getattr(node, "value"))  # noqa: B009  # ast.TypeAlias is unknown to 3.10 typing
        self.visit(getattr(node, "name"))  # noqa: B009

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        self._branches(lambda: self._visit_all(node.body), lambda: self._visit_all(node.orelse))

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._maybe(lambda: self._visit_all([node.target, *node.body]))
        self._maybe(lambda: self._visit_all(node.orelse))

    visit_AsyncFor = visit_For

    def visit_While(self, node: ast.While) -> None:
        self.visit(node.test)
        self._maybe(lambda: self._visit_all(node.body))
        self._maybe(lambda: self._visit_all(node.orelse))

    def visit_Try(self, node: ast.Try | ast.TryStar) -> None:
        self._branches(
            lambda: self._visit_all([*node.body, *node.orelse]),
            *(functools.partial(self.visit, handler) for handler in node.handlers),
        )
        self._visit_all(node.finalbody)

    visit_TryStar = visit_Try

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self._bind(node.name)
        self._visit_all(node.body)
        if node.name:
            self._bind(node.name, bind=False)  # Python deletes the name when the handler ends

    def visit_Match(self, node: ast.Match) -> None:
        self.visit(node.subject)
        self._branches(*(functools.partial(self.visit, case) for case in node.cases), lambda: None)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.pattern is not None:
            self.visit(node.pattern)
        if node.name:
            self._bind(node.name)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name:
            self._bind(node.name)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        self.generic_visit(node)
        if node.rest:
            self._bind(node.rest)

    # expressions

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self._load(node.id)
        else:
            self._bind(node.id, bind=isinstance(node.ctx, ast.Store))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.visit(node.value)
        if not isinstance(node.ctx, ast.Load):
            self._hint(node.value)
        elif opens_the_namespace(node):
            self._conservative = True

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.visit(node.value)
        self.visit(node.slice)
        if not isinstance(node.ctx, ast.Load):
            self._hint(node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind(node.target.id, walrus=True)

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        first, *rest = node.values
        self.visit(first)
        self._maybe(lambda: self._visit_all(rest))  # short-circuit: the rest may not run

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self.visit(node.test)
        self._branches(functools.partial(self.visit, node.body), functools.partial(self.visit, node.orelse))

    def visit_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp) -> None:
        self._comprehension(node.generators, [node.elt])

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node.generators, [node.key, node.value])

    def _comprehension(self, generators: list[ast.comprehension], results: list[ast.expr]) -> None:
        """The first iterable runs in the enclosing scope, the rest in the comprehension's."""

        def inner() -> None:
            with self._scope(_Scope("comprehension")):
                for position, generator in enumerate(generators):
                    if position:
                        self.visit(generator.iter)
                    self.visit(generator.target)
                    self._visit_all(generator.ifs)
                self._visit_all(results)

        self.visit(generators[0].iter)
        self._maybe(inner)  # it may loop zero times, so a walrus inside binds maybe

    def visit_Call(self, node: ast.Call) -> None:
        if self._magic(node):
            return
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute):
            inplace = any(keyword.arg == "inplace" and _is_true(keyword.value) for keyword in node.keywords)
            if inplace or func.attr in MUTATING_METHODS:
                self._hint(func.value)
        elif isinstance(func, ast.Name) and _is_builtin(func.id) and self._resolve(func.id) != "local":
            if func.id in _CONSERVATIVE_CALLS or (func.id == "vars" and not node.args):
                self._conservative = True
            elif func.id in ("setattr", "delattr") and node.args:
                self._hint(node.args[0])

    # IPython

    def _magic(self, node: ast.Call) -> bool:
        """Apply a call that IPython's transforms made of a magic or `!command`; True if it is one."""
        effect = magic_effect(node)
        if effect is None:
            return False
        self._conservative |= effect.conservative
        self._optional.update(name for name in effect.mentions if self._resolve(name) != "local")
        if effect.code is not None:
            self._code(effect.code, persists=effect.persists)
        for name in effect.binds:
            self._bind(name)
        return True

    def _code(self, source: str, *, persists: bool = True) -> None:
        """Analyse code a magic runs in the user namespace, in this cell's state."""
        try:
            tree = _parse(source)
        except (SyntaxError, ValueError):
            return  # the magic fails when run; nothing to learn
        if persists:
            self._visit_all(tree.body)
            return
        defines = set(self._defines)
        self._maybe(lambda: self._visit_all(tree.body))
        self._defines = defines


@functools.lru_cache(maxsize=4096)
def unconditional_binds(source: str) -> frozenset[str]:
    """Names a statement at the top level of the cell binds, so every successful run binds them:
    the kernel credits such a name to the cell even when it is bound again to the very same object
    (`import pandas as pd` twice). A binding under `if`, `for` or `try` may not have run. The code
    of `%time`, `%prun` and `%%time`, `%%prun`, `%%capture` counts as the cell's top level, and
    `%%capture out` binds `out`."""
    try:
        tree = _parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return frozenset()
    found: set[str] = set()
    for statement in tree.body:
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.add(statement.name)
        elif isinstance(statement, ast.Import | ast.ImportFrom):
            found.update((alias.asname or alias.name).partition(".")[0] for alias in statement.names)
        elif isinstance(statement, ast.Assign):
            found.update(target.id for target in statement.targets if isinstance(target, ast.Name))
        elif isinstance(statement, ast.AnnAssign | ast.AugAssign) and isinstance(statement.target, ast.Name):
            found.add(statement.target.id)
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            effect = magic_effect(statement.value)
            if effect is not None and effect.code is not None and effect.persists:
                found |= unconditional_binds(effect.code) | set(effect.binds)
    found.discard("*")
    return frozenset(found)
