"""Compiling merged declarations into a Schema: dims, expressions, fields, pad rules and fills, tags, padding sizes."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from trajschema.core import (
    DTYPE_NAMES,
    KINDS,
    MAX_SIZE,
    PAD_RULES,
    SPREAD,
    DerivedDim,
    DimCycleError,
    DType,
    Expr,
    ExprError,
    Field,
    FixedDim,
    FreeDim,
    PadRule,
    Poly,
    Tag,
    ValueSet,
    as_dtype,
    depends_on,
    derived_order,
    did_you_mean,
    dim_spans,
    dtype_name,
    fits_dtype,
    float_max,
    integer_capacity,
    is_int,
    number_label,
    parse_expr,
    round_to,
    value_failures,
    values_label,
)
from trajschema.files import (
    DTYPE_HINTS,
    MAX_DIM_CHAIN,
    MAX_EXPR_CHARS,
    MAX_EXPR_DEPTH,
    SIZE_LIMIT_TEXT,
    Consequence,
    ErrorsMode,
    Problems,
    is_number,
    num,
    refuse,
    shown,
    string_hint,
)
from trajschema.load.syntax import (
    _DerivedDimDecl,
    _DimDecl,
    _FieldDecl,
    _FixedDimDecl,
    _FreeDimDecl,
    _SchemaDecl,
    _TagDecl,
)
from trajschema.schema import Schema

# ---------------------------------------------------------------------------
# Pad fills and dtypes


def fill_fits_dtype(value: Any, dtype: Any) -> bool:
    """Whether a pad fill is exactly a value of ``dtype``, so padding stores what the schema says.

    * a boolean fills only ``bool``: YAML 1.1 reads ``on``/``off``/``yes``/``no`` as
      booleans, so ``pad: off`` on an int64 field is a slip, not a way to write 0;
    * ``bool`` holds ``true``, ``false`` and the numbers equal to them, 0 and 1;
    * integer dtypes hold the integers (``int``, or a ``float`` with an integral value)
      of their range;
    * floating dtypes hold NaN, ±inf and the finite numbers they represent exactly — no
      rounding (``0.1`` is not a float32; ``0.5`` is), no overflow (``1e40`` is not a
      float32), no underflow; an ``int`` only when exact (``2**24 + 1`` is not a float32).

    Exactness is the value engine's (`trajschema.core.values.fits_dtype`); the boolean
    rules are the loader's own. Non-numbers are simply ``False``. ``dtype`` is a name, a
    `DType` or a ``torch.dtype``.

    Examples:
        >>> fill_fits_dtype(300, torch.int8), fill_fits_dtype(0.5, torch.float16), fill_fits_dtype(0.1, torch.float32)
        (False, True, False)
        >>> fill_fits_dtype(True, torch.int64), fill_fits_dtype(1, torch.bool), fill_fits_dtype(2, torch.bool)
        (False, True, False)
    """
    dtype = as_dtype(dtype)
    if isinstance(value, bool):
        return dtype.is_bool
    if not isinstance(value, (int, float)) or dtype.is_complex:
        return False
    return fits_dtype(value, dtype)


def _misfit(value: Any, dtype: DType) -> str:
    """Why ``fill_fits_dtype(value, dtype)`` is false, for a message."""
    name = dtype.name
    if isinstance(value, bool):
        return f"a boolean fills only a bool tensor; write {int(value)} for the number"
    if dtype.is_bool:
        return "bool holds only true and false, which equal 1 and 0"
    ints = integer_capacity(dtype)
    if ints is not None:
        if isinstance(value, float) and not value.is_integer():
            return "it is not an integer"
        return f"{name} holds {ints[0]}..{ints[1]}"
    largest = float_max(dtype)
    if abs(value) > largest:
        return f"beyond {name}'s largest value {largest!r}"
    if isinstance(value, float):  # float64 -> dtype is a plain cast: it never raises
        return f"not exactly a {name} value (the nearest is {round_to(value, dtype)!r})"
    return f"not exactly a {name} value"


# ---------------------------------------------------------------------------
# Compiling merged declarations: dims, expressions


class _Blame:
    """Which file to name for a problem that entries of several files make together.

    Every merged entry keeps the file that declared it. A check that reads several entries
    (a padding size against its dim's bounds, a shape over dims, a cycle of derived dims)
    names the most basic schema whose lineage holds all of them: there they first met, so
    that is where the fix belongs. Along one line of inheritance that is the newest of
    them (the child that redeclared a dim, not the packaged parent whose padding size the
    new bounds refuse), named at its own entry. Entries of parents extended side by side
    meet in the schema that extends them together, named at the entry checked, which it
    can redeclare to choose.
    """

    def __init__(self, mro: list[str], sources: list[str], ancestors: Mapping[str, set[str]], merged) -> None:
        self.mro = mro
        self.file = dict(zip(mro, sources, strict=True))
        self.owner = dict(zip(sources, mro, strict=True))
        self.ancestors = ancestors
        self.merged = merged

    def source(self, entry: tuple[str, str]) -> str:
        return self.merged[entry[0]][entry[1]][1]

    def _owner(self, entry: tuple[str, str]) -> str:
        return self.owner[self.source(entry)]

    def culprit(self, entries: Sequence[tuple[str, str]]) -> tuple[str, tuple[str, str] | None]:
        """The schema where ``entries`` first meet, and the first of them it declares itself (if any)."""
        owners = {self._owner(e) for e in entries}
        # A schema comes before its ancestors in C3 order, so the last that holds them all is the most basic.
        joiner = next(n for n in reversed(self.mro) if owners <= {n, *self.ancestors[n]})
        return joiner, next((e for e in entries if self._owner(e) == joiner), None)

    def fail(self, checked: tuple[str, str], path: str, involved: Sequence[tuple[str, str]], problem: str) -> NoReturn:
        """Raise ``problem`` (found at ``path``, inside the entry ``checked``) where the entries first meet."""
        entries = [checked, *involved]
        joiner, own = self.culprit(entries)
        src, checked_key = self.source(checked), f"{checked[0]}.{checked[1]}"
        if own == checked:
            refuse(src, path, problem)
        if own is not None:
            key = f"{own[0]}.{own[1]}"
            refuse(
                self.file[joiner],
                key,
                f"this declaration breaks {path}, which {self._owner(checked)!r} declares ({src}): {problem}; "
                f"change {key} here, or redeclare {checked_key} here too",
            )
        refuse(
            self.file[joiner],
            path,
            f"{problem}: {_combined(self, entries)}, which {joiner!r} extends together; "
            f"declare {checked_key} in {joiner!r} to choose",
        )

    def dims_of(self, names: Sequence[str], dims: Mapping[str, Any], padding: bool = False) -> list[tuple[str, str]]:
        """The dim entries ``names`` rest on (through derived dims), with their padding sizes when asked."""
        entries = [("dims", n) for n in depends_on(dims, names)]
        if padding:
            entries += [("padding", n) for _, n in entries if n in self.merged["padding"]]
        return entries


def _combined(blame: _Blame, entries: Sequence[tuple[str, str]]) -> str:
    """``'l' declares dims.response and 'r' padding.response``: who declares what, a few at most."""
    by_owner: dict[str, list[str]] = {}
    for e in dict.fromkeys(entries):
        by_owner.setdefault(blame._owner(e), []).append(f"{e[0]}.{e[1]}")
    parts = [
        f"{owner!r} declares {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}" for owner, keys in by_owner.items()
    ]
    return " and ".join(parts[:4]) + (" ..." if len(parts) > 4 else "")


def _compile(
    decl: _SchemaDecl, mro: list[str], sources: list[str], ancestors, merged, extra: str, errors: ErrorsMode = "all"
) -> Schema:
    """The Schema of merged entries, or every independent problem they have (``errors="all"``).

    ``sources[i]`` is the file of ``mro[i]`` (the one loaded is ``sources[0]``), and
    ``ancestors[n]`` the names schema ``n`` extends, directly or not. Each dim, field, tag
    and padding size is compiled on its own; an entry that rests on one with a problem
    (a field over a dim that did not compile) is left out without a word.
    """
    problems = Problems(errors, decl.problems)
    blame = _Blame(mro, sources, ancestors, merged)
    dims = _compile_dims(merged["dims"], blame, problems, decl.broken.get("dims", frozenset()))
    spans = _dim_spans(dims, blame, problems)
    fields: dict[str, Field] = {}
    for name, (f, src) in merged["fields"].items():
        with problems.each():
            fields[name] = _compile_field(name, f, src, dims, spans, problems)
    tags: dict[str, Tag] = {}
    for name, (t, src) in merged["tags"].items():
        with problems.each():
            tags[name] = _compile_tag(name, t, src, dims)
    padding: dict[str, int] = {}
    for name, (size, src) in merged["padding"].items():
        with problems.each():
            padding[name] = _compile_padding(name, size, src, dims, blame)
    sound = _check_never_negative(dims, fields, blame, spans, problems)
    _check_padding_defaults(dims, sound, padding, blame, problems)
    problems.raise_if_any()
    return Schema(
        name=decl.name,
        description=decl.description,
        architectures=decl.architectures,
        lineage=mro,
        dims=dict(dims),
        fields=fields,
        tags=tags,
        padding_sizes=padding,
        extra=extra,
        source=sources[0],
    )


class _Dims(dict):
    """The dims that compiled, by name; ``broken`` are declared ones that did not (or rest on
    one that did not), so that what uses them is a consequence, not an unknown dim."""

    def __init__(self, declared) -> None:
        super().__init__()
        self.declared = list(declared)
        self.broken: set[str] = set()

    def drop(self, name: str) -> None:
        self.pop(name, None)
        self.broken.add(name)


def _compile_dims(
    decls: Mapping[str, tuple[_DimDecl, str]], blame: _Blame, problems: Problems, broken: frozenset[str]
) -> _Dims:
    """The dims that compile; ``broken`` are the file's own dims refused before (left out of ``decls``)."""
    dims = _Dims([*decls, *broken])
    dims.broken.update(broken)
    for name, (d, src) in decls.items():
        with problems.each():
            dims[name] = _compile_dim(name, d, src)
    dims.broken.update(n for n in decls if n not in dims)
    for derived in [d for d in dims.values() if isinstance(d, DerivedDim)]:
        checked = False
        with problems.each():
            _check_names(derived.expr, dims, decls[derived.name][1], f"dims.{derived.name}")
            checked = True
        if not checked:
            dims.drop(derived.name)
    _drop_dependents(dims)
    graph = False
    with problems.each():
        _check_dim_graph(dims, blame)
        graph = True
    if not graph:  # which derived dims are sound is not known: leave them all out
        for n in [n for n, d in dims.items() if isinstance(d, DerivedDim)]:
            dims.drop(n)
    for name, (decl, src) in decls.items():
        if name in dims and isinstance(decl, _FreeDimDecl) and "from_config" in decl.model_fields_set:
            with problems.each():
                keys = _config_keys(decl.from_config, src, f"dims.{name}.from_config")
                dims[name] = dataclasses.replace(dims[name], from_config=keys)
    return dims


def _compile_dim(name: str, d: _DimDecl, src: str) -> Any:
    path = f"dims.{name}"
    if isinstance(d, _FixedDimDecl):
        return FixedDim(name, d.size, description=d.description)
    if isinstance(d, _DerivedDimDecl):
        return DerivedDim(name, _expr(d.expr, src, path), description=d.description)
    assert isinstance(d, _FreeDimDecl)
    if d.max is not None and d.max < d.min:
        refuse(src, path, f"max {d.max} is below min {d.min}")
    free = FreeDim(name, d.min, d.max, d.multiple_of, description=d.description)
    if free.size_range() is None:
        refuse(src, path, f"no size is >= {d.min}, <= {d.max} and a multiple of {d.multiple_of}")
    return free


def _drop_dependents(dims: _Dims) -> None:
    """Leave out the derived dims that use a dim left out, until none does."""
    while True:
        using = [n for n, d in dims.items() if isinstance(d, DerivedDim) and not dims.broken.isdisjoint(d.expr.names())]
        if not using:
            return
        for n in using:
            dims.drop(n)


def _config_keys(texts: Sequence[str], source: str, path: str) -> tuple[Expr, ...]:
    """A free dim's ``from_config:`` alternatives, parsed; their names are config keys, not dims."""
    if not texts:
        refuse(source, path, "lists no config key; name one (num_experts) or drop from_config")
    keys: list[Expr] = []
    for i, text in enumerate(texts):
        at = f"{path}[{i}]" if len(texts) > 1 else path
        if "," in text:
            items = ", ".join(t.strip() for t in text.split(","))
            refuse(source, at, f"{text!r} contains a comma; list each config key as its own item: [{items}]")
        e = _expr(text, source, at)
        if not e.names():
            refuse(source, at, f"{text!r} names no config key; a size the config does not give is size: (a fixed dim)")
        if e in keys:
            refuse(source, at, f"{str(e)!r} is listed twice")
        keys.append(e)
    return tuple(keys)


def _expr(text: Any, source: str, path: str) -> Expr:
    """Parse a dim expression, refusing what would overflow torch sizes or the recursion limit."""
    if isinstance(text, str) and len(text) > MAX_EXPR_CHARS:
        refuse(source, path, f"a dim expression of {len(text)} characters; the limit is {MAX_EXPR_CHARS}")
    try:
        expr = parse_expr(text)
    except ExprError as exc:
        refuse(source, path, str(exc))
    stack = [(expr, 1)]
    while stack:  # iterative: Expr's own methods recurse
        e, depth = stack.pop()
        if depth > MAX_EXPR_DEPTH:
            refuse(source, path, f"dim expression {str(expr)!r} nests more than {MAX_EXPR_DEPTH} levels deep")
        if e.is_int and e.args[0] > MAX_SIZE:
            refuse(source, path, f"the integer {num(e.args[0])} is larger than {SIZE_LIMIT_TEXT}")
        if not e.is_int and not e.is_name:
            stack.extend((a, depth + 1) for a in e.args)
    if not expr.names():
        value = expr.evaluate({})
        if not 0 <= value <= MAX_SIZE:
            refuse(source, path, f"dim expression {str(expr)!r} is always {num(value)}, not a size")
    return expr


def _unknown(what: str, found: str, known) -> str:
    return f"unknown {what} {found!r}{did_you_mean(found, map(str, known))} (known: {', '.join(map(str, known))})"


def _check_names(expr: Expr, dims: Mapping[str, Any], source: str, path: str) -> None:
    for n in expr.names():
        if n not in dims:
            _no_dim(n, dims, source, path, "; declare it under dims:")


def _no_dim(name: str, dims: Mapping[str, Any], source: str, path: str, note: str = "") -> NoReturn:
    """Refuse a dim name ``dims`` lacks: unknown, or declared with a problem of its own (reported there)."""
    if name in getattr(dims, "broken", ()):
        raise Consequence(name)
    refuse(source, path, _unknown("dim", name, getattr(dims, "declared", list(dims))) + note)


def _check_dim_graph(dims: Mapping[str, Any], blame: _Blame) -> None:
    """No cycles among derived dims, and no chain longer than ``MAX_DIM_CHAIN``."""
    try:
        order = derived_order(dims)
    except DimCycleError as exc:
        _cycle(exc.loop, blame)
    height: dict[str, int] = {}
    for d in order:  # each after the derived dims it uses
        inputs = d.expr.names()
        height[d.name] = 1 + max(height.get(m, 0) for m in inputs) if inputs else 0
        if height[d.name] > MAX_DIM_CHAIN:
            chain = [("dims", m) for m in depends_on(dims, [d.name]) if isinstance(dims[m], DerivedDim)]
            blame.fail(chain[0], f"dims.{d.name}", chain[1:], f"derived dims chain more than {MAX_DIM_CHAIN} deep")


def _cycle(loop: list[str], blame: _Blame) -> NoReturn:
    """A cycle of derived dims, named where its declarations first meet and read from there."""
    joiner, own = blame.culprit([("dims", n) for n in loop])
    first = own[1] if own is not None else loop[0]
    at = loop.index(first)
    loop = loop[at:] + loop[:at]
    text = f"dims depend on each other in a cycle: {' -> '.join([*loop, first])}"
    src = blame.file[joiner]
    others = [f"{n} as {blame.owner[s]!r} declares it" for n in loop if (s := blame.source(("dims", n))) != src]
    if own is None:
        refuse(
            src,
            f"dims.{first}",
            f"{text} ({', '.join(others)}), which {joiner!r} extends together; redeclare one of them in {joiner!r}",
        )
    refuse(src, f"dims.{first}", text + (f" ({', '.join(others)})" if others else ""))


# ---------------------------------------------------------------------------
# Compiling fields: type (kind, shape, dtypes), pad rule, value checks, the fill vs the checks


def _compile_field(
    name: str, f: _FieldDecl, src: str, dims, spans: Mapping[str, tuple[float, float]], problems: Problems
) -> Field:
    """A field, each of its keys checked on its own: a problem in one is reported, and the checks
    that need it (the pad rule needs the dtypes) are left out."""
    path = f"fields.{name}"
    before = len(problems.found)
    if f.pad is None:
        with problems.each():
            refuse(
                src,
                f"{path}.pad",
                f"field {name!r} has no pad rule; every field needs one (a number, or one of {', '.join(PAD_RULES)})",
            )
    typed: tuple[str, Any, tuple[DType, ...]] | None = None
    with problems.each():
        typed = _field_type(name, f, src, path, dims, problems)
    if typed is None:
        with problems.each():
            _check_pad_name(f.pad, src, f"{path}.pad")  # a rule's name is checked on its own
        raise Consequence(path)
    kind, shape, dtypes = typed
    parts: dict[str, Any] = {}
    with problems.each():
        if f.pad is not None:
            parts["pad"] = _compile_pad(f.pad, kind, shape, dtypes, src, f"{path}.pad", dims)
    with problems.each():
        parts["values"] = _compile_values(f.values, kind, dtypes, src, f"{path}.values")
    with problems.each():
        parts["bounds"] = _compile_bounds(f, kind, dtypes, src, path)
    for key in ("min", "max"):
        with problems.each():
            parts[f"{key}_expr"] = _dim_bound(f, key, dims, src, path)
    with problems.each():
        if f.finite and kind not in ("tensor", "float"):
            refuse(src, f"{path}.finite", f"finite applies to tensors and float, not {kind!r}")
    if len(problems.found) > before:
        raise Consequence(path)
    (lo, hi), pad, values = parts["bounds"], parts["pad"], parts["values"]
    _check_fill(pad, values, lo, hi, f.finite, src, f"{path}.pad")
    field = Field(
        name=name,
        kind=kind,
        shape=shape,
        dtypes=dtypes,
        required=f.required,
        pad=pad,
        values=values,
        min=lo,
        max=hi,
        finite=f.finite,
        description=f.description,
        min_expr=parts["min_expr"],
        max_expr=parts["max_expr"],
        distinct=f.distinct,
    )
    if field.has_dim_bounds:
        _check_dim_bounds(field, spans, src, path)
    if field.distinct:
        _check_distinct(field, spans, src, path)
    return field


def _field_type(
    name: str, f: _FieldDecl, src: str, path: str, dims, problems: Problems
) -> tuple[str, Any, tuple[DType, ...]]:
    """The kind, the shape and the dtypes; each axis of the shape and the dtype checked on its own."""
    if f.kind is not None and f.kind != "tensor":
        if f.kind not in KINDS:
            refuse(src, f"{path}.kind", _unknown("kind", f.kind, ("tensor", *KINDS)))
        if f.shape is not None or f.dtype is not None:
            refuse(src, path, f"a {f.kind!r} field has no shape or dtype; drop them or drop kind")
        return f.kind, None, ()
    if f.shape is None or f.dtype is None:
        missing = "shape" if f.shape is None else "dtype"
        refuse(
            src,
            path,
            f"a tensor field needs both shape and dtype ({missing} is missing), or a kind: one of {', '.join(KINDS)}",
        )
    before = len(problems.found)
    shape: list[Expr] = []
    for i, text in enumerate(f.shape):
        with problems.each():
            e = _expr(text, src, f"{path}.shape[{i}]")
            _check_names(e, dims, src, f"{path}.shape[{i}]")
            shape.append(e)
    dtypes: tuple[DType, ...] = ()
    with problems.each():
        dtypes = _compile_dtypes(f.dtype, src, f"{path}.dtype")
    if len(shape) < len(f.shape) or len(problems.found) > before:
        raise Consequence(path)
    return "tensor", tuple(shape), dtypes


def _compile_dtypes(raw: Any, src: str, path: str) -> tuple[DType, ...]:
    names = list(raw) if isinstance(raw, (list, tuple)) else [raw]
    if not names:
        refuse(src, path, "an empty dtype list allows nothing")
    dtypes: list[DType] = []
    for i, n in enumerate(names):
        at = f"{path}[{i}]" if isinstance(raw, (list, tuple)) else path
        d = _compile_dtype(n, src, at)
        if d in dtypes:
            refuse(src, path, f"dtype {dtype_name(d)} is listed twice")
        dtypes.append(d)
    return tuple(dtypes)


def _compile_dtype(name: Any, source: str, path: str) -> DType:
    if not isinstance(name, str):
        refuse(source, path, f"expected a torch dtype name, found {shown(name)}")
    name = name.removeprefix("torch.")
    if name in DTYPE_HINTS and name not in DTYPE_NAMES:
        refuse(source, path, f"ambiguous dtype {name!r}; did you mean {DTYPE_HINTS[name]}?")
    if name not in DTYPE_NAMES:
        refuse(source, path, _unknown("dtype", name, list(DTYPE_NAMES)))
    return DType(name)


_RULE_KINDS = {
    "eos": ("tensor", "int"),
    "positions": ("tensor",),
    "uid": ("str",),
    "index": ("int", "any"),
    "empty": ("mapping", "any"),
    "copy": ("tensor", *KINDS),
}


def _check_pad_name(pad: Any, src: str, path: str) -> None:
    """A pad rule written as a name must be one (``spread`` takes its dim: a mapping)."""
    if not isinstance(pad, str):
        return
    if pad == SPREAD:  # the one rule that needs an argument: written as a mapping
        refuse(src, path, f"pad rule {SPREAD!r} needs the dim that counts the ids: write {{{SPREAD}: experts}}")
    if pad not in PAD_RULES:
        refuse(src, path, _unknown("pad rule", pad, PAD_RULES) + string_hint(pad))


def _compile_pad(pad: Any, kind: str, shape, dtypes, src: str, path: str, dims: Mapping[str, Any]) -> PadRule:
    if isinstance(pad, Mapping):
        return _compile_spread(pad, kind, shape, dtypes, src, path, dims)
    if isinstance(pad, str):
        _check_pad_name(pad, src, path)
        if kind not in _RULE_KINDS[pad]:
            refuse(src, path, f"pad rule {pad!r} does not fit a {kind!r} field (it fits {', '.join(_RULE_KINDS[pad])})")
        if pad in ("eos", "positions") and any(d.is_bool for d in dtypes):
            refuse(src, path, f"pad rule {pad!r} fills integers, which a bool tensor cannot hold")
        if pad == "positions" and not shape:
            refuse(src, path, "pad rule 'positions' counts along the last dim; a 0-d field has none")
        return PadRule(pad)
    if not is_number(pad):
        refuse(
            src,
            path,
            f"expected a number or a pad rule ({', '.join(PAD_RULES)}), found {shown(pad)} "
            f"(or {{{SPREAD}: <dim>}}, ids spread over a dim)",
        )
    if kind == "tensor":
        for d in dtypes:
            if not fill_fits_dtype(pad, d):
                refuse(src, path, f"fill {num(pad)} does not fit dtype {dtype_name(d)}: {_misfit(pad, d)}")
        if isinstance(pad, int) and not -(2**63) <= pad <= MAX_SIZE:  # only float dtypes get here
            refuse(
                src,
                path,
                f"fill {num(pad)} is an integer beyond int64, which torch cannot take as a scalar; "
                f"write it as a float ({float(pad)!r})",
            )
    elif kind in ("str", "mapping"):
        refuse(
            src,
            path,
            f"a {kind!r} field cannot be filled with the number {num(pad)}; "
            f"use one of {', '.join(r for r, k in _RULE_KINDS.items() if kind in k)}",
        )
    elif kind == "int" and not (is_int(pad)):
        refuse(src, path, f"an 'int' field needs an integer fill, found {num(pad)}")
    elif kind == "float" and isinstance(pad, bool):
        refuse(src, path, f"a 'float' field needs a number fill, found {num(pad)}")
    elif kind == "bool" and not isinstance(pad, bool):
        refuse(src, path, f"a 'bool' field needs true or false, found {num(pad)}")
    return PadRule("fill", pad)


def _compile_spread(
    pad: Mapping[Any, Any], kind: str, shape, dtypes, src: str, path: str, dims: Mapping[str, Any]
) -> PadRule:
    """``pad: {spread: experts}``: integer ids spread over ``0 .. experts - 1``, distinct along the last axis."""
    keys = list(pad)
    if len(keys) != 1 or keys[0] != SPREAD:
        odd = next((k for k in keys if k != SPREAD), None)
        problem = _unknown("pad rule", odd, (SPREAD,)) + "; " if odd is not None else ""
        refuse(src, path, f"{problem}a pad mapping has exactly one key, {SPREAD} ({{{SPREAD}: experts}})")
    over = pad[SPREAD]
    at = f"{path}.{SPREAD}"
    if not isinstance(over, str):
        refuse(src, at, f"expected the name of the dim that counts the ids (experts), found {shown(over)}")
    if over not in dims:
        _no_dim(over, dims, src, at, "; declare it under dims:")
    rule = f"{{{SPREAD}: {over}}}"
    if kind != "tensor":
        refuse(src, path, f"pad rule {rule} spreads ids along a tensor's last axis; a {kind!r} field has none")
    if not shape:
        refuse(src, path, f"pad rule {rule} spreads ids along the last axis (a token's slots); a 0-d field has none")
    floats = [d.name for d in dtypes if d.is_bool or d.is_floating_point or d.is_complex]
    if floats:
        refuse(src, path, f"pad rule {rule} fills integer ids, which dtype {', '.join(floats)} does not hold")
    return PadRule(SPREAD, over=over)


def _value_misfit(v: Any, kind: str, dtypes: tuple[DType, ...]) -> str | None:
    """Why an entry of ``values`` is refused: no value of the field equals it, or it is a boolean
    in a field that holds none (YAML 1.1 reads ``yes``/``no``/``on``/``off`` as booleans)."""
    holds_bools = kind in ("bool", "any") or any(d.is_bool for d in dtypes)
    if isinstance(v, bool) and not holds_bools:
        return f"it is a boolean, but the field holds none; write {int(v)} for the number"
    if kind == "int" and not (isinstance(v, int) or v.is_integer()):
        return "no value of an 'int' field equals it"
    if kind == "bool" and v not in (0, 1):
        return "a 'bool' field holds only true and false"
    as_number = int(v) if isinstance(v, bool) else v  # the value checks compare by ==: true == 1
    if dtypes and not any(fill_fits_dtype(as_number, d) for d in dtypes):
        return "; ".join(f"no {dtype_name(d)} value equals it ({_misfit(as_number, d)})" for d in dtypes)
    return None


def _compile_values(values: list[Any] | None, kind: str, dtypes, src: str, path: str) -> tuple[Any, ...] | None:
    if values is None:
        return None
    if kind in ("str", "mapping"):
        refuse(src, path, f"values lists numbers; it does not apply to a {kind!r} field")
    if not values:
        refuse(src, path, "an empty values list allows nothing")
    seen: set[Any] = set()
    for i, v in enumerate(values):
        at = f"{path}[{i}]"
        if not is_number(v):
            refuse(src, at, f"expected a number, found {shown(v)}{string_hint(v)}")
        if isinstance(v, float) and math.isnan(v):
            refuse(src, at, "nan equals nothing, not even itself; drop it")
        if v in seen:  # hashing agrees with ==: true == 1 == 1.0
            refuse(src, at, f"{num(v)} is listed twice (as Python compares: true == 1, 0.0 == 0)")
        seen.add(v)
        problem = _value_misfit(v, kind, dtypes)
        if problem:
            refuse(src, at, f"{num(v)} can never match: {problem}")
    return tuple(values)


def _compile_bounds(f: _FieldDecl, kind: str, dtypes, src: str, path: str) -> tuple[Any, Any]:
    out = []
    for key in ("min", "max"):
        v = getattr(f, key)
        at = f"{path}.{key}"
        if v is not None and kind not in ("tensor", "int", "float"):
            refuse(src, at, f"{key} applies to tensors, int and float, not {kind!r}")
        if isinstance(v, str) and not string_hint(v):
            v = None  # a dim expression (experts - 1): _dim_bound reads it
        if v is not None and (isinstance(v, bool) or not is_number(v)):
            refuse(src, at, f"expected a number or a dim expression (experts - 1), found {shown(v)}{string_hint(v)}")
        if isinstance(v, float) and not math.isfinite(v):
            refuse(src, at, f"{key} must be finite, found {v!r}; leave {key} out for no bound")
        out.append(v)
    lo, hi = out
    if lo is not None and hi is not None and lo > hi:
        refuse(src, path, f"min {num(lo)} is above max {num(hi)}; no value passes")
    # The value engine's own sets: a float dtype holds +-inf, so only integer dtypes run out of values.
    if dtypes and lo is not None and all(not ValueSet.at_least(lo, d).spans for d in dtypes):
        refuse(src, f"{path}.min", f"min {num(lo)} is above every value of {_names(dtypes)}; no element passes")
    if dtypes and hi is not None and all(not ValueSet.at_most(hi, d).spans for d in dtypes):
        refuse(src, f"{path}.max", f"max {num(hi)} is below every value of {_names(dtypes)}; no element passes")
    return lo, hi


def _dim_bound(f: _FieldDecl, key: str, dims: Mapping[str, Any], src: str, path: str) -> Expr | None:
    """``min`` / ``max`` written in dims (``max: experts - 1``), parsed; ``None`` for a number or nothing."""
    text = getattr(f, key)
    if not isinstance(text, str) or string_hint(text):  # a number YAML read as a string: _compile_bounds says so
        return None
    at = f"{path}.{key}"
    e = _expr(text, src, at)
    if not e.names():
        refuse(
            src,
            at,
            f"{text!r} names no dim; write the number {num(e.evaluate({}))} for a bound that never changes",
        )
    _check_names(e, dims, src, at)
    return e


def _check_dim_bounds(f: Field, spans: Mapping[str, tuple[float, float]], src: str, path: str) -> None:
    """What a bound written in dims is refused for at load time: breaking a literal bound, the dtypes
    or the fill for every size the dims allow (``spans``). A break at some sizes only is left to the
    sizes: `Schema.with_dims` refuses it when they are pinned, validation and padding when bound.
    """
    lo_span = f.min_expr.bounds(spans) if f.min_expr is not None else None
    hi_span = f.max_expr.bounds(spans) if f.max_expr is not None else None
    if hi_span is not None and f.min is not None and hi_span[1] < f.min:
        refuse(
            src,
            f"{path}.max",
            f"max {f.max_expr} is at most {num(hi_span[1])}, below min {num(f.min)}, "
            "for every size the dims allow; no value passes",
        )
    if f.min_expr is not None and f.max_expr is not None:
        _check_bound_gap(f, spans, src, path)
    if lo_span is not None and f.max is not None and lo_span[0] > f.max:
        refuse(
            src,
            f"{path}.min",
            f"min {f.min_expr} is at least {num(lo_span[0])}, above max {num(f.max)}, "
            "for every size the dims allow; no value passes",
        )
    for d in f.dtype_names:
        cap = integer_capacity(d)
        if cap is None:
            continue
        if hi_span is not None and hi_span[0] > cap[1]:
            refuse(
                src,
                f"{path}.dtype",
                f"{dtype_name(d)} cannot hold {num(hi_span[0])}, the smallest value max "
                f"{f.max_expr} takes for the sizes the dims allow ({dtype_name(d)} holds {cap[0]}..{cap[1]}); "
                "drop the dtype or bound the dims",
            )
        if hi_span is not None and hi_span[1] < cap[0] and all(integer_capacity(x) for x in f.dtype_names):
            refuse(
                src,
                f"{path}.max",
                f"max {f.max_expr} is at most {num(hi_span[1])}, below every value of "
                f"{_names(f.dtype_names)}, for every size the dims allow; no element passes",
            )
    _check_fill_at_every_size(f, lo_span, hi_span, src, f"{path}.pad")


def _check_bound_gap(f: Field, spans: Mapping[str, tuple[float, float]], src: str, path: str) -> None:
    """Refuse ``min`` and ``max`` both in dims when ``max - min`` is negative at every size (``experts - 1``
    against ``experts``): exactly from the canonical polynomial where it is a constant, else over the spans."""
    assert f.min_expr is not None and f.max_expr is not None
    gap = Expr("-", (f.max_expr, f.min_expr))
    p = gap.poly()
    # Term by term over the canonical polynomial, so that experts - 2 * experts is -experts, not
    # (1 - inf, inf - 2) as intervals of the two sides would give; sizes are never negative.
    top = _poly_top(p, spans) if p is not None else gap.bounds(spans)[1]
    top = int(top) if math.isfinite(top) else top
    if top < 0:
        refuse(
            src,
            f"{path}.max",
            f"max {f.max_expr} is below min {f.min_expr} (by {num(-top)} or more) for every size the dims "
            "allow; no value passes",
        )


def _poly_top(p: Poly, spans: Mapping[str, tuple[float, float]]) -> float:
    """An upper bound of polynomial ``p`` over ``spans`` (each a dim's sizes, all >= 0), term by term."""
    top = 0.0
    for mono, c in p:
        ends = [spans.get(n, (0.0, math.inf))[0 if c < 0 else 1] for n in mono]
        term = math.prod(ends) if not (0 in ends and math.inf in ends) else math.inf
        top += c * term if term != math.inf else (math.inf if c > 0 else 0.0)
    return top


def _check_fill_at_every_size(f: Field, lo_span, hi_span, src: str, path: str) -> None:
    """A constant fill (or the 0 that positions and index start from) must not break a dim bound at every size."""
    if f.pad.rule == "index" and hi_span is not None:
        refuse(
            src,
            path,
            f"pad rule 'index' numbers padding samples 0, 1, 2, ... without bound, which max "
            f"{f.max_expr} cannot keep to; drop it or pad with a number",
        )
    if f.pad.rule not in ("fill", "positions", "index", SPREAD):
        return
    v = f.pad.value if f.pad.rule == "fill" else 0
    what = f"fill {num(v)}" if f.pad.rule == "fill" else f"pad rule {f.pad} starts at 0, which"
    if hi_span is not None and not v <= hi_span[1]:
        refuse(src, path, f"{what} breaks max {f.max_expr} (at most {num(hi_span[1])}) for every size the dims allow")
    if lo_span is not None and not v >= lo_span[0]:
        refuse(src, path, f"{what} breaks min {f.min_expr} (at least {num(lo_span[0])}) for every size the dims allow")


def _check_distinct(f: Field, spans: Mapping[str, tuple[float, float]], src: str, path: str) -> None:
    """``distinct`` needs a tensor with a last axis, and a pad rule that can fill one without a repeat."""
    at = f"{path}.distinct"
    if not f.is_tensor:
        refuse(src, at, f"distinct applies along a tensor's last axis, not to a {f.kind!r} field")
    if not f.shape:
        refuse(src, at, "distinct applies along the last axis; a 0-d field has none")
    if f.pad.rule in ("fill", "eos") and f.shape[-1].bounds(spans)[1] > 1:
        filled = f"fill {num(f.pad.value)}" if f.pad.rule == "fill" else "pad rule 'eos'"
        refuse(
            src,
            f"{path}.pad",
            f"{filled} puts one value in every slot, which repeats along the last axis "
            f"({f.shape[-1]}) when it has 2+ slots; spread ids over a dim instead (pad: {{spread: experts}})",
        )


def _names(dtypes: tuple[Any, ...]) -> str:
    return " and ".join(dtype_name(d) for d in dtypes)


def _check_fill(pad: PadRule, values, lo, hi, finite: bool, src: str, path: str) -> None:
    """The fill must itself pass the field's value checks, as Python's arithmetic compares."""
    if pad.rule == "empty" and values is not None:
        refuse(src, path, "pad rule 'empty' fills an empty mapping, which no number in values equals")
    if pad.rule not in ("fill", "positions", "index", SPREAD):
        return  # eos is the caller's; copy copies real data; uid fills strings (no values on str)
    if pad.rule == "index" and (values is not None or hi is not None):
        refuse(
            src,
            path,
            f"pad rule 'index' numbers padding samples 0, 1, 2, ... without bound, which "
            f"{'values' if values is not None else f'max {num(hi)}'} cannot keep to; drop it or pad with a number",
        )
    # positions (and index) fill 0, 1, 2, ...: how far depends on the sizes, but 0 always comes.
    v = pad.value if pad.rule == "fill" else 0
    failed = value_failures(v, values=values, lo=lo, hi=hi, finite=finite)
    # The engine's labels, in the words of the schema file (which key says so).
    in_file = {f">= {number_label(lo)}": f">= min {num(lo)}", f"<= {number_label(hi)}": f"<= max {num(hi)}"}
    if values is not None:
        in_file[f"one of {values_label(values)}"] = f"in values {'[' + ', '.join(map(num, values)) + ']'}"
    broken = in_file.get(failed[0], failed[0]) if failed else None
    if broken and pad.rule != "fill":
        # positions, index and spread ids all start at 0 (spread: in the first slot of the first padding token)
        rule = pad if pad.rule == SPREAD else repr(pad.rule)
        refuse(src, path, f"pad rule {rule} fills 0, 1, 2, ..., and 0 breaks the field's value checks (be {broken})")
    if broken:
        refuse(src, path, f"fill {num(v)} must itself pass the field's value checks (be {broken})")


# ---------------------------------------------------------------------------
# Compiling tags and padding sizes


def _tag_default_misfit(v: Any, kind: str | None) -> str | None:
    if v is None:
        return None
    if not isinstance(v, (bool, int, float, str)):
        return f"a tag default is a number, a boolean or a string, found {shown(v)}"
    fits = {
        "int": is_int(v),
        "float": isinstance(v, (int, float)) and not isinstance(v, bool),
        "bool": isinstance(v, bool),
        "str": isinstance(v, str),
        "mapping": False,
    }.get(kind or "any", True)
    return None if fits else f"the tag is {kind!r} but its default is {shown(v)}"


def _compile_tag(name: str, t: _TagDecl, src: str, dims) -> Tag:
    path = f"tags.{name}"
    if t.kind is not None and t.kind not in KINDS:
        refuse(src, f"{path}.kind", _unknown("kind", t.kind, KINDS))
    eq = None
    if t.equals is not None:
        eq = _expr(t.equals, src, f"{path}.equals")
        _check_names(eq, dims, src, f"{path}.equals")
        if t.kind not in (None, "int", "any"):
            refuse(src, f"{path}.kind", f"a tag with equals holds a dim size, an int, not {t.kind!r}")
        if t.default is not None:
            refuse(src, f"{path}.default", "a tag with equals takes its value from the dims; drop default")
    problem = _tag_default_misfit(t.default, t.kind)
    if problem:
        refuse(src, f"{path}.default", problem)
    if name == "is_padding" and (
        t.kind not in (None, "bool", "any") or eq is not None or t.default not in (None, False)
    ):
        refuse(
            src,
            path,
            "padding samples carry is_padding: true and real ones may omit it, so this tag is "
            "{kind: bool, default: false}",
        )
    return Tag(name, t.kind or ("int" if eq is not None else None), t.default, eq, t.description)


def _dim_spans(dims: _Dims, blame: _Blame, problems: Problems) -> dict[str, tuple[float, float]]:
    """The sizes each dim may take, as a span ``(lo, hi)`` (``hi`` may be inf), refusing a derived
    dim that is negative for every size the dims allow (interval arithmetic).

    Cheap for any expression a file can write: each derived dim's span is kept small
    before the dims built on it use it (see `_size_span`), so a chain of squarings
    compares ints of a few hundred bits instead of computing ``x**(2**30)``.
    """

    def derived(d: DerivedDim, span: Mapping[str, tuple[float, float]]) -> tuple[float, float] | None:
        if not dims.broken.isdisjoint(d.expr.names()):
            dims.drop(d.name)  # over a dim refused just before
            return None
        found = None
        with problems.each():
            lo, hi = d.expr.bounds(span)
            _refuse_negative(d.expr, hi, blame, ("dims", d.name), f"dims.{d.name}", dims)
            found = _size_span(lo, hi)
        if found is None:
            dims.drop(d.name)
        return found

    return dim_spans(dims, derived)


def _check_never_negative(
    dims: Mapping[str, Any],
    fields: Mapping[str, Field],
    blame: _Blame,
    span: Mapping[str, tuple[float, float]],
    problems: Problems,
) -> dict[str, Field]:
    """No shape axis is negative for every size the dims allow (``span``: `_dim_spans`); the fields that pass."""
    passed = {}
    for name, f in fields.items():
        with problems.each():
            for i, e in enumerate(f.shape or ()):
                _refuse_negative(e, e.bounds(span)[1], blame, ("fields", name), f"fields.{name}.shape[{i}]", dims)
            passed[name] = f
    return passed


def _size_span(lo: float, hi: float) -> tuple[float, float]:
    """A derived dim's span as the dims built on it see it: a size, and never a huge int.

    A valid sample's derived dim is a size, so it is at least 0 (as before). Ends past
    the largest size are widened (``hi`` to ``inf``, ``lo`` down to ``2**63``): a wider
    span only ever refuses less, and keeps every end below ``2**64``.
    """
    lo = min(max(lo, 0), MAX_SIZE + 1)
    return lo, (hi if hi <= MAX_SIZE else math.inf)


def _refuse_negative(e: Expr, hi: float, blame: _Blame, checked: tuple[str, str], path: str, dims) -> None:
    if hi < 0:
        problem = f"{e} is at most {num(hi)} for every size the dims allow; a size cannot be negative"
        blame.fail(checked, path, blame.dims_of(e.names(), dims), problem)


def _padding_env(dims: Mapping[str, Any], padding: Mapping[str, int], blame: _Blame) -> dict[str, int]:
    """The sizes padding uses by default: fixed dims, ``padding:`` sizes, and the derived dims they give."""
    env = {n: d.size for n, d in dims.items() if isinstance(d, FixedDim)}
    env.update(padding)
    for d in derived_order(dims):  # each after the derived dims it uses
        if all(n in env for n in d.expr.names()):
            env[d.name] = _padding_size_of(d.expr, env, blame, ("dims", d.name), f"dims.{d.name}", (dims, padding))
    return env  # derived dims of free dims without a padding size stay unknown


def _padding_size_of(e: Expr, env: Mapping[str, int], blame: _Blame, checked, path: str, known) -> int:
    """``e`` at the padding sizes; ``known`` is ``(dims, padding sizes)``."""
    v = e.evaluate(env)
    if v is not None and not 0 <= v <= MAX_SIZE:
        dims, padding = known
        sizes = ", ".join(f"{n}={k}" for n, k in padding.items()) or "none"
        problem = f"{e} is {num(v)} with the padding sizes ({sizes}); padding needs a size >= 0 and <= 2**63 - 1"
        blame.fail(checked, path, blame.dims_of(e.names(), dims, padding=True), problem)
    return v


def _check_padding_defaults(
    dims, fields: Mapping[str, Field], padding: Mapping[str, int], blame: _Blame, problems: Problems
) -> None:
    """Padding with the schema's own sizes must work: every axis a size, positions that fit."""
    env: dict[str, int] | None = None
    with problems.each():
        env = _padding_env(dims, padding, blame)
    if env is None:  # a derived dim is no size at the padding sizes: reported just now
        return
    for f in fields.values():
        with problems.each():
            _check_field_padding(f, env, dims, padding, blame)


def _check_field_padding(f: Field, env: Mapping[str, int], dims, padding: Mapping[str, int], blame: _Blame) -> None:
    """Padding ``f`` with the padding sizes ``env`` gives valid values: every axis a size, a fill
    within the bounds, positions that fit."""
    for i, e in enumerate(f.shape or ()):
        _padding_size_of(e, env, blame, ("fields", f.name), f"fields.{f.name}.shape[{i}]", (dims, padding))
    if f.has_dim_bounds:
        _check_fill_at_padding_sizes(f, env, dims, padding, blame)
        f = f.bounded(env)  # positions below keep to the bounds at these sizes
    if f.pad.rule != "positions" or not f.shape:
        return
    n = f.shape[-1].evaluate(env)
    last_dim = dims.get(f.shape[-1].args[0]) if f.shape[-1].is_name else None
    if n is None and isinstance(last_dim, FreeDim):  # no padding size: at least the smallest size
        n = last_dim.first_size()
    if not n:
        return
    last = n - 1
    broken = next((f"{last} does not fit {d}" for d in f.dtype_names if not fill_fits_dtype(last, d)), None)
    if f.max is not None and not last <= f.max:
        broken = broken or f"{last} breaks max {num(f.max)}"
    missing = next((k for k in range(min(n, len(f.values) + 1)) if k not in f.values), None) if f.values else None
    if missing is not None:
        broken = broken or f"{missing} is not in values"
    if broken:
        problem = f"pad rule 'positions' fills 0..{last} (at the padding size), and {broken}"
        involved = blame.dims_of(f.shape[-1].names(), dims, padding=True)
        blame.fail(("fields", f.name), f"fields.{f.name}.pad", involved, problem)


def _check_fill_at_padding_sizes(f: Field, env: Mapping[str, int], dims, padding, blame: _Blame) -> None:
    """A constant fill must keep to a dim bound at the padding sizes (padding with them must give valid samples)."""
    if f.pad.rule != "fill":
        return
    bounded = f.bounded(env)
    lo = bounded.min if f.min_expr is not None else None
    hi = bounded.max if f.max_expr is not None else None
    failed = value_failures(f.pad.value, values=None, lo=lo, hi=hi, finite=False)
    if failed:
        e = f.max_expr if failed[0].startswith("<=") else f.min_expr
        assert e is not None
        sizes = ", ".join(f"{n}={env[n]}" for n in e.names())
        problem = (
            f"fill {num(f.pad.value)} breaks {'max' if e is f.max_expr else 'min'} {e} at the padding sizes ({sizes})"
        )
        blame.fail(("fields", f.name), f"fields.{f.name}.pad", blame.dims_of(e.names(), dims, padding=True), problem)


def _compile_padding(name: str, size: int, src: str, dims, blame: _Blame) -> int:
    path = f"padding.{name}"
    if name not in dims:
        _no_dim(name, dims, src, path)
    d = dims[name]
    if not isinstance(d, FreeDim):
        refuse(src, path, f"only free dims take a padding size; {name!r} is {type(d).__name__}")
    if not d.allows(size):  # a child that redeclared the dim with new bounds is named, not the padding's file
        blame.fail(
            ("padding", name), path, [("dims", name)], f"padding size {size} breaks the dim's bounds ({d.describe()})"
        )
    return size
