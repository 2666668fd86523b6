"""The dim expression grammar (``parse_expr``, ``Expr``, ``solve_for``) and ``FreeDim``."""

from __future__ import annotations

import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trajschema.core.dims import Expr, ExprError, FreeDim, parse_expr, solve_for

ENV = {"a": 3, "b": 5, "c": 7, "prompt": 11, "response": 4}


# ---------------------------------------------------------------------------
# Parsing and evaluating


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("a + b * 2", 13, id="mul-binds-tighter-than-add"),
        pytest.param("a * 2 + b", 11, id="mul-before-add-on-the-left"),
        pytest.param("(a + b) * 2", 16, id="parentheses-override-precedence"),
        pytest.param("a * (b - c)", -6, id="parentheses-on-the-right"),
        pytest.param("((a))", 3, id="nested-parentheses"),
        pytest.param("a - b - 1", -3, id="subtraction-is-left-associative"),
        pytest.param("a - (b - 1)", -1, id="parenthesized-right-subtraction"),
        pytest.param("c - b + a", 5, id="mixed-add-sub-left-to-right"),
        pytest.param("-a", -3, id="unary-minus"),
        pytest.param("-a + 5", 2, id="unary-minus-binds-tighter-than-add"),
        pytest.param("-a * b", -15, id="unary-minus-then-mul"),
        pytest.param("-(a - 7)", 4, id="unary-minus-of-group"),
        pytest.param("a - -2", 5, id="binary-then-unary-minus"),
        pytest.param("--a", 3, id="double-unary-minus"),
        pytest.param("4", 4, id="integer-literal-text"),
        pytest.param("007", 7, id="leading-zeros"),
        pytest.param("0", 0, id="zero"),
        pytest.param("prompt + response", 15, id="names"),
        pytest.param("prompt+response", 15, id="no-spaces"),
        pytest.param("  prompt   +\tresponse  ", 15, id="extra-whitespace"),
        pytest.param("2 * prompt * response", 88, id="chained-mul"),
    ],
)
def test_evaluate(text: str, expected: int) -> None:
    assert parse_expr(text).evaluate(ENV) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(0, 0, id="zero"),
        pytest.param(4, 4, id="small"),
        pytest.param(131072, 131072, id="large"),
    ],
)
def test_int_literal(value: int, expected: int) -> None:
    e = parse_expr(value)
    assert e.is_int
    assert not e.is_name
    assert e.evaluate({}) == expected
    assert e.names() == ()


def test_precedence_shapes_the_tree() -> None:
    e = parse_expr("a + b * 2")
    assert e.op == "+"
    assert e.args[0] == Expr("name", ("a",))
    assert e.args[1] == Expr("*", (Expr("name", ("b",)), Expr("int", (2,))))


def test_a_lone_name_is_a_name() -> None:
    e = parse_expr("seq_len2")
    assert e.is_name
    assert e.args == ("seq_len2",)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        pytest.param("4", (), id="literal"),
        pytest.param("seq", ("seq",), id="one-name"),
        pytest.param("prompt + response", ("prompt", "response"), id="two-names"),
        pytest.param("b * a + b - a", ("b", "a"), id="first-appearance-order-no-duplicates"),
        pytest.param("-(x_1 * 2) + _y", ("x_1", "_y"), id="underscores-and-digits"),
    ],
)
def test_names(text: str, names: tuple[str, ...]) -> None:
    assert parse_expr(text).names() == names


def test_text_is_kept_stripped_and_ignored_by_equality() -> None:
    e = parse_expr("  prompt  +  response ")
    assert str(e) == "prompt  +  response"
    assert e == parse_expr("prompt+response")
    assert e != parse_expr("response + prompt")


@pytest.mark.parametrize(
    ("text", "env"),
    [
        pytest.param("a + b", {"a": 1}, id="one-of-two-unbound"),
        pytest.param("seq", {}, id="lone-name-unbound"),
        pytest.param("0 * b", {}, id="unbound-even-when-multiplied-by-zero"),
        pytest.param("-(a * 2)", {"b": 1}, id="unbound-under-unary-minus"),
    ],
)
def test_evaluate_with_unbound_names_is_none(text: str, env: dict[str, int]) -> None:
    assert parse_expr(text).evaluate(env) is None


# ---------------------------------------------------------------------------
# Misuse: every mistake raises ExprError (a ValueError) with a hint


@pytest.mark.parametrize(
    ("value", "match"),
    [
        pytest.param(
            "prompt, response", r"contains a comma; list each dim as its own item: \[prompt, response\]", id="comma"
        ),
        pytest.param("a,b,c", r"\[a, b, c\]", id="comma-no-spaces"),
        pytest.param("seq / 2", r"unexpected '/'.*division is not supported", id="division"),
        pytest.param("a ** 2", r"'\*\*' is not supported", id="power"),
        pytest.param("a +", r"'a \+' ends too early", id="dangling-operator"),
        pytest.param("-", r"ends too early", id="lone-minus"),
        pytest.param("()", r"unexpected '\)'", id="empty-parentheses"),
        pytest.param("(a + b", r"missing '\)'", id="unclosed-parenthesis"),
        pytest.param("a + b)", r"unexpected '\)'", id="stray-close-parenthesis"),
        pytest.param("a b", r"unexpected 'b'", id="two-names-no-operator"),
        pytest.param("2 a", r"unexpected 'a'", id="implicit-multiplication"),
        pytest.param("a + 1.5", r"unexpected '\.'", id="float-in-text"),
        pytest.param("a % 2", r"unexpected '%'", id="modulo"),
        pytest.param("", r"^empty dim expression$", id="empty-string"),
        pytest.param("   ", r"^empty dim expression$", id="blank-string"),
        pytest.param(True, r"found True", id="bool-true"),
        pytest.param(False, r"found False", id="bool-false"),
        pytest.param(-1, r"cannot be negative, found -1", id="negative-int"),
        pytest.param(2.0, r"found float 2\.0", id="float"),
        pytest.param(None, r"found NoneType None", id="none"),
        pytest.param(["a"], r"found list", id="list"),
    ],
)
def test_parse_misuse(value: object, match: str) -> None:
    with pytest.raises(ExprError, match=match):
        parse_expr(value)  # type: ignore[arg-type]


def test_expr_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        parse_expr("a / b")


# ---------------------------------------------------------------------------
# solve_for


@pytest.mark.parametrize(
    ("text", "name", "target", "env", "expected"),
    [
        pytest.param("prompt + response", "response", 9, {"prompt": 5}, 4, id="linear-sum"),
        pytest.param("prompt + response", "prompt", 9, {"response": 0}, 9, id="linear-sum-other-side"),
        pytest.param("2 * n + 1", "n", 7, {}, 3, id="linear-with-coefficient"),
        pytest.param("3 - n", "n", 1, {}, 2, id="negative-coefficient"),
        pytest.param("-(n) * 4 + 20", "n", 8, {}, 3, id="unary-minus-coefficient"),
        pytest.param("k * n", "n", 12, {"k": 4}, 3, id="coefficient-from-env"),
        pytest.param("n + 5", "n", 2, {}, None, id="negative-solution-is-no-size"),
        pytest.param("2 * n + 1", "n", 8, {}, None, id="no-integer-solution"),
        pytest.param("n * n", "n", 4, {}, None, id="non-linear-square"),
        pytest.param("n * n + n", "n", 6, {}, None, id="non-linear-quadratic"),
        pytest.param("k * n", "n", 12, {"k": 0}, None, id="zero-coefficient"),
        pytest.param("a + 1", "n", 4, {"a": 3}, None, id="name-absent-from-expression"),
        pytest.param("n + b", "n", 4, {}, None, id="another-name-unbound"),
        pytest.param(
            "n * (n - 1) * (n - 2) + n",
            "n",
            24,
            {},
            None,
            id="cubic-that-looks-linear-at-0-1-2",
        ),
    ],
)
def test_solve_for(text: str, name: str, target: int, env: dict[str, int], expected: int | None) -> None:
    expr = parse_expr(text)
    got = solve_for(expr, name, target, env)
    assert got == expected
    if got is not None:
        assert expr.evaluate({**env, name: got}) == target


def test_solve_for_does_not_mutate_env() -> None:
    env = {"prompt": 5}
    solve_for(parse_expr("prompt + response"), "response", 9, env)
    assert env == {"prompt": 5}


# ---------------------------------------------------------------------------
# FreeDim.allows


@pytest.mark.parametrize(
    ("dim", "size", "allowed"),
    [
        pytest.param(FreeDim("x"), 0, True, id="unbounded-zero"),
        pytest.param(FreeDim("x"), 10**9, True, id="unbounded-large"),
        pytest.param(FreeDim("x", min=1), 0, False, id="below-min"),
        pytest.param(FreeDim("x", min=1), 1, True, id="at-min"),
        pytest.param(FreeDim("x", max=8), 8, True, id="at-max"),
        pytest.param(FreeDim("x", max=8), 9, False, id="above-max"),
        pytest.param(FreeDim("x", multiple_of=4), 0, True, id="zero-is-a-multiple"),
        pytest.param(FreeDim("x", multiple_of=4), 12, True, id="multiple"),
        pytest.param(FreeDim("x", multiple_of=4), 6, False, id="not-a-multiple"),
        pytest.param(FreeDim("x", min=2, max=10, multiple_of=4), 4, True, id="all-bounds-ok"),
        pytest.param(FreeDim("x", min=5, max=10, multiple_of=4), 4, False, id="multiple-but-below-min"),
        pytest.param(FreeDim("x", min=2, max=10, multiple_of=4), 12, False, id="multiple-but-above-max"),
        pytest.param(FreeDim("x", min=2, max=10, multiple_of=4), 6, False, id="in-range-not-multiple"),
    ],
)
def test_free_dim_allows(dim: FreeDim, size: int, allowed: bool) -> None:
    assert dim.allows(size) is allowed


@pytest.mark.parametrize(
    ("dim", "text"),
    [
        pytest.param(FreeDim("x"), "any size", id="unbounded"),
        pytest.param(FreeDim("x", min=1), ">= 1", id="min"),
        pytest.param(FreeDim("x", min=1, max=8, multiple_of=2), ">= 1 and <= 8 and a multiple of 2", id="all"),
    ],
)
def test_free_dim_describe(dim: FreeDim, text: str) -> None:
    assert dim.describe() == text


# ---------------------------------------------------------------------------
# Property: the parser agrees with Python on random expression trees

NAMES = ("a", "b", "c")
_PREC = {"+": 1, "-": 1, "*": 2}

leaves = st.one_of(
    st.integers(min_value=0, max_value=50).map(lambda n: ("int", n)),
    st.sampled_from(NAMES).map(lambda n: ("name", n)),
)


def _extend(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        children.map(lambda t: ("neg", t)),
        st.tuples(st.sampled_from(["+", "-", "*"]), children, children),
    )


trees = st.recursive(leaves, _extend, max_leaves=10)


def _tree_value(t: tuple, env: dict[str, int]) -> int:
    if t[0] == "int":
        return t[1]
    if t[0] == "name":
        return env[t[1]]
    if t[0] == "neg":
        return -_tree_value(t[1], env)
    ops = {"+": operator.add, "-": operator.sub, "*": operator.mul}
    return ops[t[0]](_tree_value(t[1], env), _tree_value(t[2], env))


def _render_full(t: tuple) -> str:
    """Every binary node in parentheses."""
    if t[0] in ("int", "name"):
        return str(t[1])
    if t[0] == "neg":
        return f"-{_render_full(t[1])}"
    return f"({_render_full(t[1])} {t[0]} {_render_full(t[2])})"


def _render_min(t: tuple, parent: int = 0, right: bool = False) -> str:
    """As few parentheses as precedence and left-associativity allow."""
    if t[0] in ("int", "name"):
        return str(t[1])
    if t[0] == "neg":
        return "-" + _render_min(t[1], 3)
    prec = _PREC[t[0]]
    text = f"{_render_min(t[1], prec)} {t[0]} {_render_min(t[2], prec, right=True)}"
    needs = prec < parent or (right and prec == parent)
    return f"({text})" if needs else text


def _tree_names(t: tuple) -> list[str]:
    if t[0] == "int":
        return []
    if t[0] == "name":
        return [t[1]]
    return [n for child in t[1:] for n in _tree_names(child)]


envs = st.fixed_dictionaries({n: st.integers(min_value=0, max_value=1000) for n in NAMES})


@settings(deadline=None)
@given(tree=trees, env=envs, minimal=st.booleans())
def test_parser_agrees_with_python(tree: tuple, env: dict[str, int], minimal: bool) -> None:
    text = _render_min(tree) if minimal else _render_full(tree)
    expr = parse_expr(text)
    expected = _tree_value(tree, env)
    assert expr.evaluate(env) == expected
    assert eval(text, {"__builtins__": {}}, dict(env)) == expected  # the oracle, on text we rendered
    assert expr.names() == tuple(dict.fromkeys(_tree_names(tree)))
    # The parsed tree renders back to text that parses to the same tree.
    assert parse_expr(str(Expr(expr.op, expr.args))) == expr


@settings(deadline=None)
@given(tree=trees, env=envs, drop=st.sampled_from(NAMES))
def test_evaluate_is_none_exactly_when_a_used_name_is_unbound(tree: tuple, env: dict[str, int], drop: str) -> None:
    expr = parse_expr(_render_full(tree))
    partial = {k: v for k, v in env.items() if k != drop}
    got = expr.evaluate(partial)
    if drop in expr.names():
        assert got is None
    else:
        assert got == _tree_value(tree, env)


# --- the public dim classes check what they are built from (issue 14)

import re  # noqa: E402

import trajschema as ts  # noqa: E402

_N = parse_expr("n")

#: id -> (constructor call, exception type (exactly), message regex naming the class and argument).
REFUSED_DIM_PARTS = {
    "fixed-size-negative": (
        lambda: ts.FixedDim("r", -1),
        ValueError,
        r"^FixedDim: size must be in 0\.\.2\*\*63-1, found -1$",
    ),
    "fixed-size-bool": (lambda: ts.FixedDim("r", True), TypeError, r"^FixedDim: size must be an int, found bool True$"),
    "fixed-size-float": (
        lambda: ts.FixedDim("r", 4.0),
        TypeError,
        r"^FixedDim: size must be an int, found float 4\.0$",
    ),
    "fixed-size-huge": (lambda: ts.FixedDim("r", 2**63), ValueError, r"^FixedDim: size must be in 0\.\.2\*\*63-1"),
    "fixed-name-int": (lambda: ts.FixedDim(3, 4), TypeError, r"^FixedDim: name must be a str, found int 3$"),
    "fixed-description-none": (lambda: ts.FixedDim("r", 4, None), TypeError, r"^FixedDim: description must be a str"),
    "free-min-negative": (
        lambda: ts.FreeDim("n", -1),
        ValueError,
        r"^FreeDim: min must be in 0\.\.2\*\*63-1, found -1$",
    ),
    "free-min-none": (lambda: ts.FreeDim("n", None), TypeError, r"^FreeDim: min must be an int, found NoneType None$"),
    "free-max-below-min": (
        lambda: ts.FreeDim("n", 5, 3),
        ValueError,
        r"^FreeDim: max must be in 5\.\.2\*\*63-1, found 3$",
    ),
    "free-max-float": (
        lambda: ts.FreeDim("n", 0, 3.5),
        TypeError,
        r"^FreeDim: max must be an int or None, found float",
    ),
    "free-multiple-of-zero": (
        lambda: ts.FreeDim("n", multiple_of=0),
        ValueError,
        r"^FreeDim: multiple_of must be in 1\.\.2\*\*63-1, found 0$",
    ),
    "free-multiple-of-str": (
        lambda: ts.FreeDim("n", multiple_of="8"),
        TypeError,
        r"^FreeDim: multiple_of must be an int",
    ),
    "derived-expr-str": (
        lambda: ts.DerivedDim("seq", "prompt + response"),
        TypeError,
        r"^DerivedDim: expr must be an Expr, found str 'prompt \+ response'$",
    ),
    "derived-name-none": (lambda: ts.DerivedDim(None, _N), TypeError, r"^DerivedDim: name must be a str"),
    "expr-op-typo": (
        lambda: ts.Expr("plus", (_N, _N)),
        ValueError,
        r"^Expr: op must be one of int, name, \+, -, \*, neg",
    ),
    "expr-op-unhashable": (lambda: ts.Expr(["+"], (_N, _N)), ValueError, r"^Expr: op must be one of"),
    "expr-wrong-arity": (lambda: ts.Expr("+", (_N,)), TypeError, r"^Expr: op '\+' takes a tuple of 2 args"),
    "expr-args-a-list": (lambda: ts.Expr("neg", [_N]), TypeError, r"^Expr: op 'neg' takes a tuple of 1 args"),
    "expr-args-not-exprs": (lambda: ts.Expr("*", ("n", 2)), TypeError, r"^Expr: the args of '\*' must be Exprs"),
    "expr-negative-int": (lambda: ts.Expr("int", (-3,)), TypeError, r"^Expr: an int's value must be an int >= 0"),
    "expr-bool-int": (lambda: ts.Expr("int", (True,)), TypeError, r"^Expr: an int's value must be an int >= 0"),
    "expr-name-int": (lambda: ts.Expr("name", (3,)), TypeError, r"^Expr: a name must be a str, found int 3$"),
}


@pytest.mark.parametrize(("call", "exc", "match"), list(REFUSED_DIM_PARTS.values()), ids=list(REFUSED_DIM_PARTS))
def test_dims_and_expressions_refuse_parts_that_would_break_later(call, exc, match):
    """Before, these were built, then failed far away: ZeroDivisionError in allows(), IndexError in evaluate()."""
    with pytest.raises(Exception) as info:
        call()
    assert type(info.value) is exc
    assert re.search(match, str(info.value)), str(info.value)


@settings(deadline=None)
@given(
    lo=st.one_of(st.integers(-5, 2**64), st.none(), st.booleans(), st.floats()),
    hi=st.one_of(st.integers(-5, 2**64), st.none(), st.floats()),
    step=st.one_of(st.integers(-5, 2**64), st.none(), st.booleans()),
)
def test_a_free_dim_is_built_exactly_when_its_bounds_make_sense(lo, hi, step):
    def is_size(v, low=0):
        return isinstance(v, int) and not isinstance(v, bool) and low <= v < 2**63

    sound = is_size(lo) and (hi is None or is_size(hi, lo)) and (step is None or is_size(step, 1))
    if sound:
        d = ts.FreeDim("n", lo, hi, step)
        assert d.allows(lo) == (step is None or lo % step == 0)  # never ZeroDivisionError
        return
    with pytest.raises((TypeError, ValueError), match=r"^FreeDim: (min|max|multiple_of) must be"):
        ts.FreeDim("n", lo, hi, step)


def test_parsing_still_builds_every_expression():
    for text in ["n", "4", "a + b * 2", "-(a - 1)", "a*b*c + 0"]:
        e = parse_expr(text)
        assert isinstance(e, Expr) and str(e) == text


# ---------------------------------------------------------------------------
# Dim arithmetic as methods (issue 15): sizes a dim allows, bounds, polynomials, linearity, the one walk

import itertools  # noqa: E402
import math  # noqa: E402

from trajschema.core.dims import (  # noqa: E402
    DerivedDim,
    DimCycleError,
    FixedDim,
    depends_on,
    derived_order,
)


@given(
    lo=st.integers(0, 40),
    extra=st.one_of(st.none(), st.integers(0, 40)),
    step=st.one_of(st.none(), st.integers(1, 9)),
    at_least=st.integers(-5, 60),
    at_most=st.one_of(st.none(), st.integers(-5, 60)),
)
def test_size_range_is_the_first_and_last_size_allowed_counted_by_hand(lo, extra, step, at_least, at_most):
    d = FreeDim("n", lo, None if extra is None else lo + extra, step)
    box = 200  # past every bound drawn, so "no end" shows as sizes up to it
    top = box if at_most is None else at_most
    sizes = [s for s in range(max(at_least, 0), top + 1) if d.allows(s)]
    got = d.size_range(at_least, at_most)
    if not sizes:
        assert got is None and d.first_size(at_least) in (None, *range(top + 1, 10**4))
        return
    first, last = got
    assert first == sizes[0] == d.first_size(at_least)
    if d.max is None and at_most is None:
        assert last is None and sizes[-1] > box - d.step  # no end: every step-th size up to the box
    else:
        assert last == sizes[-1]
    assert sizes == list(range(first, sizes[-1] + 1, d.step))


def test_first_size_is_exact_for_sizes_floats_would_round():
    d = FreeDim("n", min=2**62 + 1, multiple_of=3)
    assert d.first_size() == next(s for s in range(2**62 + 1, 2**62 + 10) if s % 3 == 0)
    assert FreeDim("n", 3, 3, 4).size_range() is None  # built by hand: no size, and it says so
    assert FixedDim("k", 4).size_range() == (4, 4) and FixedDim("k", 4).size_range(5) is None
    assert FixedDim("k", 4).first_size(4) == 4 and FixedDim("k", 4).first_size(5) is None


def _single_use(t: tuple, seen: set[str]) -> bool:
    if t[0] == "int":
        return True
    if t[0] == "name":
        if t[1] in seen:
            return False
        seen.add(t[1])
        return True
    return all(_single_use(c, seen) for c in t[1:])


spans = st.fixed_dictionaries({n: st.tuples(st.integers(0, 4), st.integers(0, 3)) for n in NAMES})


@given(tree=trees, box=spans)
def test_bounds_hold_every_value_over_the_box_and_are_exact_when_each_name_is_used_once(tree, box):
    expr = parse_expr(_render_full(tree))
    span = {n: (lo, lo + w) for n, (lo, w) in box.items()}
    values = [
        expr.evaluate(dict(zip(span, combo)))
        for combo in itertools.product(*(range(lo, hi + 1) for lo, hi in span.values()))
    ]
    lo, hi = expr.bounds(span)
    assert lo <= min(values) and max(values) <= hi
    if _single_use(tree, set()):
        assert (lo, hi) == (min(values), max(values))


def test_bounds_of_an_unbounded_dim_times_zero_is_zero():
    assert parse_expr("n * 0").bounds({"n": (0, math.inf)}) == (0, 0)
    assert parse_expr("n - m").bounds({"n": (0, math.inf), "m": (2, 3)}) == (-3, math.inf)
    assert parse_expr("n").bounds({}) == (-math.inf, math.inf)  # a name the box lacks may be anything


def _poly_value(poly, env: dict[str, int]) -> int:
    return sum(c * math.prod(env[n] for n in mono) for mono, c in poly)


@given(tree=trees, env=envs)
def test_the_polynomial_evaluates_to_the_expression(tree, env):
    expr = parse_expr(_render_min(tree))
    p = expr.poly()
    assert p is not None  # ten leaves never reach the expansion limits
    assert _poly_value(p, env) == expr.evaluate(env)
    assert p == parse_expr(_render_full(tree)).poly()  # one polynomial however it is written


def test_the_polynomial_is_canonical_and_gives_up_on_blow_ups():
    assert parse_expr("a + b").poly() == parse_expr("b + a").poly() == ((("a",), 1), (("b",), 1))
    assert parse_expr("a - a").poly() == ()
    assert parse_expr("2 * (a + 1)").poly(subst={"a": ((("b",), 3),)}) == (((), 2), (("b",), 6))
    wide = " * ".join(f"(x{i} + y{i})" for i in range(10))  # 2**10 terms
    assert parse_expr(wide).poly() is None


@given(tree=trees, env=envs, free=st.sets(st.sampled_from(NAMES), min_size=1, max_size=2))
def test_linear_is_exactly_whether_the_expression_is_affine_in_the_names(tree, env, free):
    expr = parse_expr(_render_full(tree))
    names = sorted(free)
    fixed = {n: v for n, v in env.items() if n not in free}
    got = expr.linear(names, fixed)
    degree = len(_tree_names(tree))  # no variable's degree is higher
    grid = list(itertools.product(range(degree + 1), repeat=len(names)))
    if got is not None:
        a, coef = got
        for point in grid:
            at = dict(zip(names, point))
            assert expr.evaluate({**fixed, **at}) == a + sum(coef[n] * at[n] for n in names)
        return
    # Not affine: the affine function through 0 and the unit points misses somewhere on the grid
    # (a non-zero polynomial of degree <= d in each variable cannot vanish on d + 1 points per variable).
    zero = expr.evaluate({**fixed, **dict.fromkeys(names, 0)})
    slope = {n: expr.evaluate({**fixed, **dict.fromkeys(names, 0), n: 1}) - zero for n in names}
    assert any(
        expr.evaluate({**fixed, **dict(zip(names, p))}) != zero + sum(slope[n] * v for n, v in zip(names, p))
        for p in grid
    )


def test_linear_refuses_a_dim_neither_free_nor_known():
    assert parse_expr("x + y").linear(["x"], {}) is None
    assert parse_expr("x * y").linear(["x"], {"y": 0}) == (0, {"x": 0})
    assert parse_expr("x * x - x * x + 3 * x").linear(["x"], {}) == (0, {"x": 3})


def _chain_dims(n: int) -> dict:
    dims: dict = {"x": FreeDim("x")}
    for i in range(n):
        dims[f"d{i}"] = DerivedDim(f"d{i}", parse_expr(f"{'x' if i == 0 else f'd{i - 1}'} + 1"))
    return dims


def test_derived_order_puts_each_derived_dim_after_what_it_uses_without_recursing():
    dims = dict(reversed(list(_chain_dims(5000).items())))  # declared top first
    order = derived_order(dims)
    assert [d.name for d in order] == [f"d{i}" for i in range(5000)]
    assert depends_on(dims, ["d2"]) == ["d2", "d1", "d0", "x"]
    assert depends_on(dims, ["nope", "x"]) == ["x"]  # an undeclared name is skipped


def test_derived_order_names_a_cycle():
    dims = {
        "x": FreeDim("x"),
        "a": DerivedDim("a", parse_expr("b + x")),
        "b": DerivedDim("b", parse_expr("c * 2")),
        "c": DerivedDim("c", parse_expr("a - 1")),
    }
    with pytest.raises(DimCycleError, match=r"a -> b -> c -> a") as info:
        derived_order(dims)
    assert info.value.loop == ["a", "b", "c"]
    assert depends_on(dims, ["a"]) == ["a", "b", "c", "x"]  # the walk is safe on a cycle


# -- dim_spans: the one walk over a schema's dim sizes --------------------------------------------


@given(
    size=st.integers(0, 50),
    lo=st.integers(0, 20),
    width=st.one_of(st.none(), st.integers(0, 20)),
    top=st.sampled_from([math.inf, 2**63 - 1]),
)
def test_dim_spans_reads_fixed_and_free_sizes_and_hands_derived_dims_the_spans_before_them(size, lo, width, top):
    from trajschema.core.dims import DerivedDim, FixedDim, dim_spans

    dims = {
        "total": DerivedDim("total", parse_expr("f + a")),
        "f": FixedDim("f", size),
        "a": FreeDim("a", min=lo, max=None if width is None else lo + width),
        "twice": DerivedDim("twice", parse_expr("2 * total")),
    }
    seen = []

    def derived(d, spans):
        seen.append((d.name, dict(spans)))
        return d.expr.bounds(spans)

    spans = dim_spans(dims, derived, top=top)
    a_hi = top if width is None else lo + width
    assert spans["f"] == (size, size) and spans["a"] == (lo, a_hi)
    assert spans["total"] == (size + lo, size + a_hi) and spans["twice"] == (2 * (size + lo), 2 * (size + a_hi))
    assert [name for name, _ in seen] == ["total", "twice"]  # in derived order, each after what it names
    assert "total" in seen[1][1] and "total" not in seen[0][1]
    assert dim_spans(dims, lambda d, spans: None, top=top).keys() == {"f", "a"}  # None: no span for it
