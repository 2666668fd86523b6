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
from typing import Any

import torch

from trajschema.core import Expr, FixedDim, FreeDim, kind_ok

__all__ = ["compile_fast_checker"]

# Exact types that pass a kind without the slower general check.
_EXACT = {"int": "int", "float": "float", "bool": "bool", "str": "str", "mapping": "dict"}


_SERIAL = itertools.count()


def compile_fast_checker(plan: Any) -> Callable[[Mapping[str, Any]], dict[str, int] | None]:
    """Generate the fast checker for a checking plan (see `_plan`)."""
    w = _Source(plan)
    for f, axes in plan.tensors:
        w.tensor(f, axes)
    for f in plan.others:
        w.other(f)
    w.derived()
    w.ranges()
    w.result()
    return w.compile()


class _Source:
    """The generated function's source, written phase by phase; tracks which dims are bound."""

    def __init__(self, plan: Any) -> None:
        self.plan = plan
        self.dims = plan.dim_plan.dims
        self.consts: dict[str, Any] = {"T": torch.Tensor, "STRIDED": torch.strided, "kind_ok": kind_ok}
        self.local = {name: f"d{i}" for i, name in enumerate(self.dims)}
        self.fixed = {n: d.size for n, d in self.dims.items() if isinstance(d, FixedDim)}
        self.state = {n: "no" for n in self.dims if n not in self.fixed}  # bound: "no", "maybe" or "yes"
        self.lines = ["def check(sample):", "    get = sample.get"]
        if self.state:
            self.lines.append("    " + " = ".join(self.local[n] for n in self.state) + " = None")

    def const(self, value: Any) -> str:
        name = f"C{len(self.consts)}"
        self.consts[name] = value
        return name

    def tensor(self, f: Any, axes: Any) -> None:
        add = self.lines.append
        add(f"    v = get({f.name!r})")
        if f.required:
            add("    if v is None: return None")
            ind = "    "
        else:
            add("    if v is not None:")
            ind = "        "
        one = len(f.dtypes) == 1
        dtype = (
            f"v.dtype is not {self.const(f.dtypes[0])}" if one else f"v.dtype not in {self.const(frozenset(f.dtypes))}"
        )
        add(f"{ind}if type(v) is not T or {dtype} or v.is_nested or v.layout is not STRIDED: return None")
        add(f"{ind}s = v.shape")
        add(f"{ind}if len(s) != {len(axes)}: return None")
        for k, (name, lit) in enumerate(axes):
            self.axis(ind, k, name, lit, f.required)

    def axis(self, ind: str, k: int, name: str | None, lit: int, required: bool) -> None:
        add, local, state = self.lines.append, self.local, self.state
        if name is None:
            add(f"{ind}if s[{k}] != {lit}: return None")
        elif name in self.fixed:
            add(f"{ind}if s[{k}] != {self.fixed[name]}: return None")
        elif state[name] == "yes":
            add(f"{ind}if s[{k}] != {local[name]}: return None")
        elif state[name] == "no" and required:
            add(f"{ind}{local[name]} = s[{k}]")
            state[name] = "yes"
        else:
            add(f"{ind}if {local[name]} is None: {local[name]} = s[{k}]")
            add(f"{ind}elif {local[name]} != s[{k}]: return None")
            state[name] = "yes" if required else "maybe"

    def other(self, f: Any) -> None:
        add = self.lines.append
        add(f"    v = get({f.name!r})")
        check = "" if f.kind == "any" else f"type(v) is not {_EXACT[f.kind]} and not kind_ok({f.kind!r}, v)"
        if f.required:
            add("    if v is None: return None")
            if check:
                add(f"    if {check}: return None")
        elif check:
            add(f"    if v is not None and {check}: return None")

    def derived(self) -> None:
        add, local, state, fixed = self.lines.append, self.local, self.state, self.fixed
        for d in self.plan.dim_plan.derived:
            inputs = d.expr.names()
            if any(n not in fixed and state[n] == "no" for n in inputs):
                add("    return None  # an input dim is never bound: the full check solves for it")
                return
            maybe = [local[n] for n in inputs if n not in fixed and state[n] == "maybe"]
            if maybe:
                add(f"    if {' is None or '.join(maybe)} is None: return None")
            add(f"    c = {_emit(d.expr, local, fixed)}")
            target = local[d.name]
            if state[d.name] == "yes":
                add(f"    if {target} != c: return None")
            elif state[d.name] == "no":
                add(f"    {target} = c")
            else:
                add(f"    if {target} is None: {target} = c")
                add(f"    elif {target} != c: return None")
            state[d.name] = "yes"

    def ranges(self) -> None:
        for d in self.dims.values():
            if not isinstance(d, FreeDim) or self.state[d.name] == "no":
                continue
            x = self.local[d.name]
            tests = [f"{x} < {d.min}"] if d.min else []
            if d.max is not None:
                tests.append(f"{x} > {d.max}")
            if d.multiple_of is not None:
                tests.append(f"{x} % {d.multiple_of}")
            if tests:
                guard = f"{x} is not None and " if self.state[d.name] == "maybe" else ""
                self.lines.append(f"    if {guard}({' or '.join(tests)}): return None")

    def result(self) -> None:
        add = self.lines.append
        add("    out = {}")
        for name in self.dims:
            if name in self.plan.hidden:
                continue
            if name in self.fixed:
                add(f"    out[{name!r}] = {self.fixed[name]}")
            elif self.state[name] == "yes":
                add(f"    out[{name!r}] = {self.local[name]}")
            elif self.state[name] == "maybe":
                add(f"    if {self.local[name]} is not None: out[{name!r}] = {self.local[name]}")
        add("    return out")

    def compile(self) -> Callable[[Mapping[str, Any]], dict[str, int] | None]:
        source = "\n".join(self.lines) + "\n"
        # A unique file name, registered in linecache, so that tracebacks show the real lines.
        filename = f"<trajschema fast checker {self.plan.name!r} #{next(_SERIAL)}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        namespace = dict(self.consts)
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
