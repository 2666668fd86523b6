"""Symbolic dimensions: the dim expression grammar and the three kinds of dim.

Expressions are parsed by a tiny whitelisted recursive-descent parser (integers,
names, ``+ - *`` and parentheses), never ``eval``::

    expr := term (("+" | "-") term)*
    term := unary ("*" unary)*
    unary := "-" unary | INT | NAME | "(" expr ")"
"""

from __future__ import annotations

import dataclasses
import numbers
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "DerivedDim",
    "Expr",
    "ExprError",
    "FixedDim",
    "FreeDim",
    "parse_expr",
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
    if not isinstance(v, numbers.Integral) or isinstance(v, bool):
        raise TypeError(
            f"{owner}: {arg} must be an int{' or None' if optional else ''}, found {type(v).__name__} {v!r}"
        )
    if not minimum <= int(v) <= _MAX_SIZE:
        raise ValueError(f"{owner}: {arg} must be in {minimum}..2**63-1, found {v}")


def _str_arg(owner: str, arg: str, v: Any) -> None:
    if not isinstance(v, str):
        raise TypeError(f"{owner}: {arg} must be a str, found {type(v).__name__} {v!r}")


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
            if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 0:
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
