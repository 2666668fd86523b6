"""A straight-line checker generated per schema: the fast "clean, or look closer" path.

Checking one sample is dominated by interpreter overhead, not by torch: a generic loop
over fields, axes and dims costs several µs per field. Like attrs and dataclasses
generate ``__init__``, this module generates one small function per schema that
unrolls those loops. The generated source contains no text from the schema file: field
names appear only as ``repr()`` string constants, dims become locals ``d0, d1, ...``,
dtypes and sizes are passed in as constants, and dim expressions are emitted from
their parsed trees (integers, locals, ``+ - *``).

The generated function returns the bound dims for a sample that is clean as far as
presence, kinds, dtypes, ranks, shapes, dim consistency and dim ranges go, and
``None`` whenever anything is off or uncertain. It never explains: the caller then
runs the full check, which writes the violation records.
"""

from __future__ import annotations

import itertools
import linecache
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import torch

from ._dims import Expr, FixedDim, FreeDim
from ._kinds import kind_ok

if TYPE_CHECKING:
    from ._plan import Plan

__all__ = ["compile_fast_checker"]

# Exact types that pass a kind without the slower general check.
_EXACT = {"int": "int", "float": "float", "bool": "bool", "str": "str", "mapping": "dict"}


_SERIAL = itertools.count()


def compile_fast_checker(plan: Plan) -> Callable[[Mapping[str, Any]], dict[str, int] | None]:
    """Generate the fast checker for a checking plan (see :mod:`._plan`)."""
    dims = plan.dim_plan.dims
    consts: dict[str, Any] = {"T": torch.Tensor, "STRIDED": torch.strided, "kind_ok": kind_ok}
    local = {name: f"d{i}" for i, name in enumerate(dims)}
    fixed = {n: d.size for n, d in dims.items() if isinstance(d, FixedDim)}
    state = {n: "no" for n in dims if n not in fixed}  # bound: "no", "maybe" or "yes"
    lines = ["def check(sample):", "    get = sample.get"]
    if state:
        lines.append("    " + " = ".join(local[n] for n in state) + " = None")

    def const(value: Any) -> str:
        name = f"C{len(consts)}"
        consts[name] = value
        return name

    for f, axes in plan.tensors:
        lines.append(f"    v = get({f.name!r})")
        if f.required:
            lines.append("    if v is None: return None")
            ind = "    "
        else:
            lines.append("    if v is not None:")
            ind = "        "
        dtype = (
            f"v.dtype is not {const(f.dtypes[0])}"
            if len(f.dtypes) == 1
            else f"v.dtype not in {const(frozenset(f.dtypes))}"
        )
        lines.append(f"{ind}if type(v) is not T or {dtype} or v.is_nested or v.layout is not STRIDED: return None")
        lines.append(f"{ind}s = v.shape")
        lines.append(f"{ind}if len(s) != {len(axes)}: return None")
        for k, (name, lit) in enumerate(axes):
            if name is None:
                lines.append(f"{ind}if s[{k}] != {lit}: return None")
            elif name in fixed:
                lines.append(f"{ind}if s[{k}] != {fixed[name]}: return None")
            elif state[name] == "yes":
                lines.append(f"{ind}if s[{k}] != {local[name]}: return None")
            elif state[name] == "no" and f.required:
                lines.append(f"{ind}{local[name]} = s[{k}]")
                state[name] = "yes"
            else:
                lines.append(f"{ind}if {local[name]} is None: {local[name]} = s[{k}]")
                lines.append(f"{ind}elif {local[name]} != s[{k}]: return None")
                state[name] = "yes" if f.required else "maybe"
    for f in plan.others:
        lines.append(f"    v = get({f.name!r})")
        check = "" if f.kind == "any" else f"type(v) is not {_EXACT[f.kind]} and not kind_ok({f.kind!r}, v)"
        if f.required:
            lines.append("    if v is None: return None")
            if check:
                lines.append(f"    if {check}: return None")
        elif check:
            lines.append(f"    if v is not None and {check}: return None")
    for d in plan.dim_plan.derived:
        inputs = d.expr.names()
        if any(n not in fixed and state[n] == "no" for n in inputs):
            lines.append("    return None  # an input dim is never bound: the full check solves for it")
            break
        maybe = [local[n] for n in inputs if n not in fixed and state[n] == "maybe"]
        if maybe:
            lines.append(f"    if {' is None or '.join(maybe)} is None: return None")
        lines.append(f"    c = {_emit(d.expr, local, fixed)}")
        target = local[d.name]
        if state[d.name] == "yes":
            lines.append(f"    if {target} != c: return None")
        elif state[d.name] == "no":
            lines.append(f"    {target} = c")
        else:
            lines.append(f"    if {target} is None: {target} = c")
            lines.append(f"    elif {target} != c: return None")
        state[d.name] = "yes"
    for d in dims.values():
        if not isinstance(d, FreeDim) or state[d.name] == "no":
            continue
        x = local[d.name]
        tests = [f"{x} < {d.min}"] if d.min else []
        if d.max is not None:
            tests.append(f"{x} > {d.max}")
        if d.multiple_of is not None:
            tests.append(f"{x} % {d.multiple_of}")
        if tests:
            guard = f"{x} is not None and " if state[d.name] == "maybe" else ""
            lines.append(f"    if {guard}({' or '.join(tests)}): return None")
    lines.append("    out = {}")
    for name in dims:
        if name in plan.hidden:
            continue
        if name in fixed:
            lines.append(f"    out[{name!r}] = {fixed[name]}")
        elif state[name] == "yes":
            lines.append(f"    out[{name!r}] = {local[name]}")
        elif state[name] == "maybe":
            lines.append(f"    if {local[name]} is not None: out[{name!r}] = {local[name]}")
    lines.append("    return out")
    source = "\n".join(lines) + "\n"
    # A unique file name, registered in linecache, so that tracebacks show the real lines.
    filename = f"<trajschema fast checker {plan.name!r} #{next(_SERIAL)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = dict(consts)
    exec(compile(source, filename, "exec"), namespace)
    check = namespace["check"]
    check.__source__ = source  # for debugging: print(plan.fast.__source__)
    return check


def _emit(e: Expr, local: Mapping[str, str], fixed: Mapping[str, int]) -> str:
    if e.op == "int":
        return str(int(e.args[0]))
    if e.op == "name":
        n = e.args[0]
        return str(fixed[n]) if n in fixed else local[n]
    if e.op == "neg":
        return f"(-{_emit(e.args[0], local, fixed)})"
    if e.op in ("+", "-", "*"):
        return f"({_emit(e.args[0], local, fixed)} {e.op} {_emit(e.args[1], local, fixed)})"
    raise AssertionError(e.op)
