"""Symbolic dimensions: the dim expression grammar and the three kinds of dim.

Expressions are parsed by a tiny whitelisted recursive-descent parser (integers,
names, ``+ - *`` and parentheses), never ``eval``::

    expr := term (("+" | "-") term)*
    term := unary ("*" unary)*
    unary := "-" unary | INT | NAME | "(" expr ")"

The arithmetic every room needs lives here, once: the sizes a dim allows
(`FreeDim.size_range`, `FreeDim.first_size`), an expression's bounds over intervals
(`Expr.bounds`), its canonical polynomial (`Expr.poly`) and linearity (`Expr.linear`),
solving it for one unbound dim (`solve_linear`), and the one walk over the dependencies
of derived dims (`depends_on`, `derived_order`).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from trajschema.core.scalars import is_int

__all__ = [
    "DerivedDim",
    "DimCycleError",
    "Expr",
    "ExprError",
    "FixedDim",
    "FreeDim",
    "Poly",
    "depends_on",
    "derived_order",
    "dim_spans",
    "parse_expr",
    "provenance",
    "solve_for",
    "solve_linear",
]


class ExprError(ValueError):
    """A dim expression does not parse; the caller adds file and key path."""


#: The largest size a torch tensor can have (sizes are int64).
_MAX_SIZE = 2**63 - 1

#: Each operator of an expression and how many arguments it takes.
_ARITY = {"int": 1, "name": 1, "+": 2, "-": 2, "*": 2, "neg": 1}


def _size_arg(owner: str, arg: str, v: Any, minimum: int = 0, *, optional: bool = False) -> None:
    """Refuse a dim's size argument that is not an int in ``minimum..2**63-1`` (``None`` too when ``optional``)."""
    if v is None and optional:
        return
    if not is_int(v):
        raise TypeError(
            f"{owner}: {arg} must be an int{' or None' if optional else ''}, found {type(v).__name__} {v!r}"
        )
    if not minimum <= int(v) <= _MAX_SIZE:
        raise ValueError(f"{owner}: {arg} must be in {minimum}..2**63-1, found {v}")


def _str_arg(owner: str, arg: str, v: Any) -> None:
    if not isinstance(v, str):
        raise TypeError(f"{owner}: {arg} must be a str, found {type(v).__name__} {v!r}")


#: A polynomial over dim names: ``((monomial, coefficient), ...)``, sorted, no zero terms;
#: a monomial is a sorted tuple of names (``("a", "a", "b")`` is ``a*a*b``).
Poly = tuple[tuple[tuple[str, ...], int], ...]

# Expanding products can grow without bound (``(a+b)*(c+d)*...``, or derived dims
# substituted into each other): past these sizes a polynomial is "too large" (``None``).
_MAX_TERMS = 512
_MAX_DEGREE = 64


class _TooComplex(Exception):
    pass


def _freeze(p: Mapping[tuple[str, ...], int]) -> Poly:
    return tuple(sorted((m, c) for m, c in p.items() if c))


def _poly_mul(a: Poly, b: Poly) -> Poly:
    out: dict[tuple[str, ...], int] = {}
    for ma, ca in a:
        for mb, cb in b:
            m = tuple(sorted(ma + mb))
            if len(m) > _MAX_DEGREE:
                raise _TooComplex
            out[m] = out.get(m, 0) + ca * cb
            if len(out) > _MAX_TERMS:
                raise _TooComplex
    return _freeze(out)


def _poly_add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b:
        out[m] = out.get(m, 0) + sign * c
    if len(out) > _MAX_TERMS:
        raise _TooComplex
    return _freeze(out)


def _poly_of(e: Expr, subst: Mapping[str, Poly | None]) -> Poly:
    if e.op == "int":
        return _freeze({(): e.args[0]})
    if e.op == "name":
        name = e.args[0]
        if name in subst:
            p = subst[name]
            if p is None:
                raise _TooComplex
            return p
        return (((name,), 1),)
    if e.op == "neg":
        return tuple((m, -c) for m, c in _poly_of(e.args[0], subst))
    a, b = (_poly_of(x, subst) for x in e.args)
    if e.op == "+":
        return _poly_add(a, b)
    if e.op == "-":
        return _poly_add(a, b, -1)
    return _poly_mul(a, b)


def _times(x: float, y: float) -> float:
    """``x * y`` over the extended integers, where a zero factor wins (``0 * inf`` is 0: the size 0 times any size)."""
    return 0 if x == 0 or y == 0 else x * y


@dataclasses.dataclass(frozen=True)
class Expr:
    """A parsed dim expression: a small tree of (op, args) nodes.

    ``op`` is ``"int"`` (args: the value), ``"name"`` (args: the name) or one of
    ``+ - * neg`` (args: sub-expressions). Build one with ``parse_expr``; constructing
    one directly checks the tree's shape.

    Raises:
        ValueError: an unknown ``op``.
        TypeError: ``args`` that do not fit ``op`` (the wrong count, or not an int >= 0,
            a name or sub-expressions), or a ``text`` that is not a str.
    """

    op: str
    args: tuple
    text: str = dataclasses.field(default="", compare=False)

    def __post_init__(self) -> None:
        arity = _ARITY.get(self.op) if isinstance(self.op, str) else None
        if arity is None:
            raise ValueError(f"Expr: op must be one of {', '.join(_ARITY)}, found {self.op!r}")
        if not isinstance(self.args, tuple) or len(self.args) != arity:
            raise TypeError(f"Expr: op {self.op!r} takes a tuple of {arity} args, found {self.args!r}")
        if self.op == "int":
            v = self.args[0]  # no upper bound here: the loader names a literal too large for torch itself
            if not is_int(v) or v < 0:
                raise TypeError(f"Expr: an int's value must be an int >= 0 (write neg of it), found {v!r}")
        elif self.op == "name":
            _str_arg("Expr", "a name", self.args[0])
        elif not all(isinstance(a, Expr) for a in self.args):
            raise TypeError(f"Expr: the args of {self.op!r} must be Exprs, found {self.args!r}")
        _str_arg("Expr", "text", self.text)

    @property
    def is_name(self) -> bool:
        return self.op == "name"

    @property
    def is_int(self) -> bool:
        return self.op == "int"

    def names(self) -> tuple[str, ...]:
        """The dim names used, in order of first appearance."""
        if self.op == "name":
            return (self.args[0],)
        if self.op == "int":
            return ()
        out: dict[str, None] = {}
        for a in self.args:
            out.update(dict.fromkeys(a.names()))
        return tuple(out)

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """The value under ``env``, or ``None`` when a name is unbound.

        Sizes are Python ints, or anything with ``+ - *`` (tensors of per-sample sizes).
        """
        op = self.op
        if op == "int":
            return self.args[0]
        if op == "name":
            return env.get(self.args[0])
        vals = [a.evaluate(env) for a in self.args]
        if any(v is None for v in vals):
            return None
        if op == "+":
            return vals[0] + vals[1]
        if op == "-":
            return vals[0] - vals[1]
        if op == "*":
            return vals[0] * vals[1]
        return -vals[0]  # neg

    def bounds(self, span: Mapping[str, tuple[float, float]]) -> tuple[float, float]:
        """The smallest and largest value over the box ``span`` (name -> ``(lo, hi)``, ends may be ±inf).

        Plain interval arithmetic: exact for an expression that uses each name once, wider
        otherwise (``n - n`` gives ``[lo - hi, hi - lo]``), never narrower. A name ``span``
        lacks may be anything. The cost is that of the integers involved: a caller
        feeding results back in (derived dims of derived dims) keeps its ends small.
        """
        if self.op == "int":
            return self.args[0], self.args[0]
        if self.op == "name":
            return span.get(self.args[0], (-math.inf, math.inf))
        if self.op == "neg":
            lo, hi = self.args[0].bounds(span)
            return -hi, -lo
        (alo, ahi), (blo, bhi) = (a.bounds(span) for a in self.args)
        if self.op == "+":
            return alo + blo, ahi + bhi
        if self.op == "-":
            return alo - bhi, ahi - blo
        products = [_times(x, y) for x in (alo, ahi) for y in (blo, bhi)]
        return min(products), max(products)

    def poly(self, subst: Mapping[str, Poly | None] | None = None) -> Poly | None:
        """The canonical polynomial (``prompt + response`` and ``response + prompt`` give one),
        names in ``subst`` replaced by theirs; ``None`` when too large to expand (or a
        substituted name's polynomial is ``None``)."""
        try:
            return _poly_of(self, subst or {})
        except _TooComplex:
            return None

    def linear(self, names: Sequence[str], env: Mapping[str, int]) -> tuple[int, dict[str, int]] | None:
        """``(a, {name: c})`` such that the expression is ``a + sum(c * name)`` for every size of ``names``,
        every other dim at its size in ``env``.

        Exact (read off the polynomial, not probed): ``None`` when it is not linear in
        ``names`` (``n * n``, ``x * y``), uses a dim that is neither in ``names`` nor in
        ``env``, or is too large to expand.
        """
        subst: dict[str, Poly | None] = {n: _freeze({(): v}) for n, v in env.items() if n not in names}
        p = self.poly(subst)
        if p is None:
            return None
        a, coef = 0, dict.fromkeys(names, 0)
        for mono, c in p:
            if not mono:
                a = c
            elif len(mono) == 1 and mono[0] in coef:
                coef[mono[0]] = c
            else:
                return None
        return a, coef

    def __str__(self) -> str:
        return self.text or _render(self)


def _render(e: Expr) -> str:
    if e.op in ("int", "name"):
        return str(e.args[0])
    if e.op == "neg":
        return f"-{_render(e.args[0])}"
    return f"({_render(e.args[0])} {e.op} {_render(e.args[1])})"


_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z_0-9]*)|(\S))")


def parse_expr(text: str | int) -> Expr:
    """Parse a dim expression such as ``"prompt + response"`` or ``4``.

    Raises:
        ExprError: with a hint for the usual mistakes (a comma, ``/``, ``**``).
    """
    if isinstance(text, bool):
        raise ExprError(f"expected a dim name, expression or integer, found {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ExprError(f"a dim size cannot be negative, found {text}")
        return Expr("int", (text,), str(text))
    if not isinstance(text, str):
        raise ExprError(f"expected a dim name, expression or integer, found {type(text).__name__} {text!r}")
    if "," in text:
        parts = ", ".join(p.strip() for p in text.split(","))
        raise ExprError(f"dim expression {text!r} contains a comma; list each dim as its own item: [{parts}]")
    tokens: list[tuple[str, str]] = []
    pos = 0
    stripped = text.rstrip()
    while pos < len(stripped):
        m = _TOKEN.match(stripped, pos)
        if m is None:  # only trailing whitespace can fail to match
            break
        num, name, sym = m.groups()
        if num is not None:
            tokens.append(("int", num))
        elif name is not None:
            tokens.append(("name", name))
        else:
            if sym not in "+-*()":
                hint = ""
                if sym == "/":
                    hint = "; division is not supported (declare the quotient as a free dim)"
                raise ExprError(f"unexpected {sym!r} in dim expression {text!r}{hint}")
            tokens.append(("sym", sym))
        pos = m.end()
    if not tokens:
        raise ExprError("empty dim expression")
    for i in range(len(tokens) - 1):
        if tokens[i] == ("sym", "*") and tokens[i + 1] == ("sym", "*"):
            raise ExprError(f"'**' is not supported in dim expression {text!r}")
    parser = _Parser(tokens, text)
    expr = parser.expr()
    if parser.i != len(tokens):
        raise ExprError(f"unexpected {tokens[parser.i][1]!r} in dim expression {text!r}")
    return dataclasses.replace(expr, text=text.strip())


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], text: str) -> None:
        self.tokens = tokens
        self.text = text
        self.i = 0

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def expr(self) -> Expr:
        left = self.term()
        while (t := self._peek()) in (("sym", "+"), ("sym", "-")):
            self.i += 1
            left = Expr(t[1], (left, self.term()))
        return left

    def term(self) -> Expr:
        left = self.unary()
        while self._peek() == ("sym", "*"):
            self.i += 1
            left = Expr("*", (left, self.unary()))
        return left

    def unary(self) -> Expr:
        t = self._peek()
        if t is None:
            raise ExprError(f"dim expression {self.text!r} ends too early")
        self.i += 1
        if t == ("sym", "-"):
            return Expr("neg", (self.unary(),))
        if t[0] == "int":
            return Expr("int", (int(t[1]),))
        if t[0] == "name":
            return Expr("name", (t[1],))
        if t == ("sym", "("):
            inner = self.expr()
            if self._peek() != ("sym", ")"):
                raise ExprError(f"missing ')' in dim expression {self.text!r}")
            self.i += 1
            return inner
        raise ExprError(f"unexpected {t[1]!r} in dim expression {self.text!r}")


def solve_linear(
    expr: Expr,
    name: str,
    target: Any,
    env: Mapping[str, Any],
    *,
    lift: Callable[[Any], Any] = lambda v: v,
    where: Callable[[Any, Any, Any], Any] = lambda cond, a, b: a if cond else b,
) -> tuple[Any, Any]:
    """Solve ``expr == target`` for the one unbound ``name``: ``(solution, solved)``.

    Generic over what a size is: Python ints (the defaults), or tensors holding one size
    per sample (pass ``lift`` to turn a constant into such a tensor and ``where`` to
    select elementwise, e.g. ``torch.where``). ``solved`` is false (elementwise) where
    there is no non-negative integer solution or ``expr`` is not linear in ``name``
    (``n * n``); the solution there is 0.
    """
    probe = dict(env)
    values = []
    for x in (0, 1, 2):
        probe[name] = x
        values.append(lift(expr.evaluate(probe)))
    a, b, c = values[0], values[1] - values[0], values[2] - values[0]
    ok = (b != 0) & (c == 2 * b)
    safe_b = where(ok, b, 1)
    sol = (target - a) // safe_b
    ok = ok & (sol * safe_b == target - a) & (sol >= 0)
    sol = where(ok, sol, 0)
    # Three probes cannot prove linearity (x**3 - 3x**2 + 3x agrees with x at 0, 1, 2): check.
    probe[name] = sol
    ok = ok & (lift(expr.evaluate(probe)) == target)
    return sol, ok


def solve_for(expr: Expr, name: str, target: int, env: Mapping[str, int]) -> int | None:
    """Solve ``expr == target`` for the one unbound ``name``, if expr is linear in it.

    Returns ``None`` when there is no non-negative integer solution or expr is not
    linear in name (e.g. ``n * n``).
    """
    if any(n not in env for n in expr.names() if n != name):
        return None
    sol, ok = solve_linear(expr, name, target, env)
    return int(sol) if ok else None


@dataclasses.dataclass(frozen=True)
class FixedDim:
    """A dim with one fixed size, e.g. ``rope_rows: 4``.

    Raises:
        TypeError: ``name``, ``description`` or ``source`` is not a str, or ``size`` not an int.
        ValueError: ``size`` is outside ``0..2**63-1``.
    """

    name: str
    size: int
    description: str = ""
    #: Where a pinned size came from (``"dims"``, ``"config: num_experts"``; see
    #: ``Schema.with_dims``); ``""`` for a size the schema declares. Not compared: two
    #: dims of one size check the same samples wherever the size came from.
    source: str = dataclasses.field(default="", compare=False)

    def __post_init__(self) -> None:
        _str_arg("FixedDim", "name", self.name)
        _size_arg("FixedDim", "size", self.size)
        _str_arg("FixedDim", "description", self.description)
        _str_arg("FixedDim", "source", self.source)

    def describe(self) -> str:
        return str(self.size)

    @property
    def step(self) -> int:
        """The distance between two sizes the dim allows (it allows one: 1)."""
        return 1

    def size_range(self, at_least: int = 0, at_most: int | None = None) -> tuple[int, int] | None:
        """``(size, size)`` when ``at_least <= size <= at_most``, else ``None`` (see `FreeDim.size_range`)."""
        if self.size < at_least or (at_most is not None and self.size > at_most):
            return None
        return self.size, self.size

    def first_size(self, at_least: int = 0) -> int | None:
        """The size, when it is at least ``at_least``."""
        return self.size if self.size >= at_least else None


@dataclasses.dataclass(frozen=True)
class FreeDim:
    """A dim bound from data, optionally bounded (``min``, ``max``, ``multiple_of``).

    Raises:
        TypeError: ``name`` or ``description`` is not a str, a bound not an int
            (``max`` and ``multiple_of`` may be ``None``), or ``from_config`` not a tuple
            of ``Expr``.
        ValueError: ``min`` outside ``0..2**63-1``, ``max`` below ``min``, or
            ``multiple_of`` below 1.
    """

    name: str
    min: int = 0
    max: int | None = None
    multiple_of: int | None = None
    description: str = ""
    #: The model-config keys that give the size (``from_config:``), in order of preference:
    #: each a key (``num_experts``) or an expression over keys
    #: (``num_hidden_layers - first_k_dense_replace``). ``schema_for_config`` reads them.
    from_config: tuple[Expr, ...] = ()

    def __post_init__(self) -> None:
        _str_arg("FreeDim", "name", self.name)
        _size_arg("FreeDim", "min", self.min)
        _size_arg("FreeDim", "max", self.max, self.min, optional=True)
        _size_arg("FreeDim", "multiple_of", self.multiple_of, 1, optional=True)
        _str_arg("FreeDim", "description", self.description)
        if not isinstance(self.from_config, tuple) or not all(isinstance(e, Expr) for e in self.from_config):
            raise TypeError(
                f"FreeDim: from_config must be a tuple of Expr (parse text with parse_expr), found {self.from_config!r}"
            )

    def describe(self) -> str:
        parts = [f">= {self.min}"] if self.min else []
        if self.max is not None:
            parts.append(f"<= {self.max}")
        if self.multiple_of is not None:
            parts.append(f"a multiple of {self.multiple_of}")
        return " and ".join(parts) if parts else "any size"

    def allows(self, size: int) -> bool:
        if size < self.min:
            return False
        if self.max is not None and size > self.max:
            return False
        return self.multiple_of is None or size % self.multiple_of == 0

    @property
    def step(self) -> int:
        """The distance between two sizes the dim allows: ``multiple_of``, or 1."""
        return self.multiple_of or 1

    def size_range(self, at_least: int = 0, at_most: int | None = None) -> tuple[int, int | None] | None:
        """The first and the last size the dim allows from ``at_least`` to ``at_most``; ``None`` when it allows none.

        The last is ``None`` when there is no end (no ``max`` and no ``at_most``). The sizes
        between are every ``step``-th from the first. Exact for any ints (no float
        division): ``FreeDim("n", min=3, multiple_of=4).size_range()`` is ``(4, None)``.
        """
        m = self.step
        first = -(-max(at_least, self.min) // m) * m  # the one ceiling division of a size in the package
        top = self.max if at_most is None else at_most if self.max is None else min(at_most, self.max)
        last = None if top is None else top // m * m
        if last is not None and first > last:
            return None
        return first, last

    def first_size(self, at_least: int = 0) -> int | None:
        """The smallest size the dim allows that is at least ``at_least`` (``None``: there is none).

        Examples:
            >>> FreeDim("seq", min=129, multiple_of=64).first_size()
            192
        """
        found = self.size_range(at_least)
        return None if found is None else found[0]


@dataclasses.dataclass(frozen=True)
class DerivedDim:
    """A dim defined by an expression over other dims, e.g. ``seq: prompt + response``.

    Raises:
        TypeError: ``name`` or ``description`` is not a str, or ``expr`` not an
            ``Expr`` (parse text with ``parse_expr``).
    """

    name: str
    expr: Expr
    description: str = ""

    def __post_init__(self) -> None:
        _str_arg("DerivedDim", "name", self.name)
        if not isinstance(self.expr, Expr):
            raise TypeError(f"DerivedDim: expr must be an Expr, found {type(self.expr).__name__} {self.expr!r}")
        _str_arg("DerivedDim", "description", self.description)

    def describe(self) -> str:
        return str(self.expr)


# -- the dependencies of derived dims ---------------------------------------------------


class DimCycleError(ValueError):
    """Derived dims depend on each other in a cycle; ``loop`` lists it, from where the walk met it."""

    def __init__(self, loop: list[str]) -> None:
        self.loop = loop
        super().__init__(f"dims depend on each other in a cycle: {' -> '.join([*loop, loop[0]])}")


def _inputs(dims: Mapping[str, Any], name: str) -> tuple[str, ...]:
    d = dims[name]
    return tuple(n for n in d.expr.names() if n in dims) if isinstance(d, DerivedDim) else ()


def depends_on(dims: Mapping[str, Any], roots: Iterable[str]) -> list[str]:
    """``roots`` and every dim they depend on through derived dims, in first-seen order.

    Names ``dims`` does not declare are skipped. Iterative, and safe on a cycle.
    """
    seen: dict[str, None] = {}
    todo = list(reversed(list(roots)))
    while todo:
        n = todo.pop()
        if n in seen or n not in dims:
            continue
        seen[n] = None
        todo.extend(reversed(_inputs(dims, n)))
    return list(seen)


def derived_order(dims: Mapping[str, Any]) -> tuple[DerivedDim, ...]:
    """Every derived dim of ``dims``, each after the derived dims it uses (declaration order otherwise).

    Iterative, so a chain of any length is walked without recursion.

    Raises:
        DimCycleError: derived dims depend on each other in a cycle.
    """
    order: list[DerivedDim] = []
    done: set[str] = set()
    for root in dims:
        if root in done:
            continue
        trail, on_trail, todo = [root], {root}, [iter(_inputs(dims, root))]
        while todo:
            nxt = next(todo[-1], None)
            if nxt is None:
                n = trail.pop()
                on_trail.discard(n)
                todo.pop()
                done.add(n)
                if isinstance(dims[n], DerivedDim):
                    order.append(dims[n])
            elif nxt in on_trail:
                raise DimCycleError(trail[trail.index(nxt) :])
            elif nxt not in done:
                trail.append(nxt)
                on_trail.add(nxt)
                todo.append(iter(_inputs(dims, nxt)))
    return tuple(order)


def provenance(d: object) -> str:
    """Where a dim's size comes from, as `Schema.describe` and ``trajschema show`` print it
    beside the dim: ``" (pinned by config: num_experts)"``, ``" (from config: a | b)"``, or ``""``."""
    if isinstance(d, FixedDim) and d.source:
        return f" (pinned by {d.source})"
    if isinstance(d, FreeDim) and d.from_config:
        return f" (from config: {' | '.join(map(str, d.from_config))})"
    return ""


Span = tuple[float, float]


def dim_spans(
    dims: Mapping[str, Any], derived: Callable[[DerivedDim, dict[str, Span]], Span | None], *, top: float = math.inf
) -> dict[str, Span]:
    """``{dim: (lo, hi)}``: the sizes each dim allows, the one walk every span reader shares.

    A fixed dim spans its size; a free dim its `size_range`, up to ``top`` without ``max``;
    each derived dim (in `derived_order`) what ``derived(d, spans so far)`` says, or none
    when it returns ``None`` (the loader drops a dim it refused; compatibility clips to
    sizes). ``derived`` is where each reader decides what a derived span means.
    """
    out: dict[str, Span] = {}
    for n, d in dims.items():
        if isinstance(d, (FixedDim, FreeDim)):
            sizes = d.size_range()
            if sizes is not None:
                out[n] = (sizes[0], top if sizes[1] is None else sizes[1])
    for d in derived_order(dims):
        span = derived(d, out)
        if span is not None:
            out[d.name] = span
    return out
