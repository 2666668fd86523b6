"""The checking plan: everything about a schema that checks and padding need, derived once.

A `Plan` is built from the schema's declarations alone and cached on the schema
object; it is never pickled (the schema drops it and rebuilds it on first use).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from trajschema.check.binding import DimPlan, ScalarSizes, bind
from trajschema.core import (
    DerivedDim,
    Dim,
    Field,
    FixedDim,
    FreeDim,
    Tag,
    derived_order,
    dtype_name,
    integer_capacity,
    number_label,
)

__all__ = ["DECLARED", "Axis", "Plan", "build_plan", "dtype_overflow"]

#: One axis of a tensor field: the dim it observes (``None`` for a literal size) and the literal.
Axis = tuple[str | None, int]


@dataclasses.dataclass(frozen=True, eq=False)
class Plan:
    """A schema's declarations, arranged for checking.

    Attributes:
        name / description / architectures / lineage / dims / fields / tags / extra /
            padding_sizes: as declared (``lineage``: the schema and its ancestors, in
            resolution order). Every room below the front door reads these here, not on
            the `Schema`.
        tensors: each tensor field with its axes.
        others: the non-tensor fields.
        dim_plan: what `trajschema.check.binding.bind` needs.
        hidden: names of the dims made up for inline shape expressions (``"(a + b)"``).
        valued: the fields with value checks.
        dim_bounded: the tensor fields with a bound written in dims (``max: experts - 1``).
        bound_names: for each of them, the dims its bounds name (a clean sample's check skips
            the field at once while none of them is bound).
        length_tags: tags tied to a dim expression (``seq_len: {equals: seq}``).
        uid_field: the field declared ``pad: uid`` (the GRPO group id), if any.
        padding_default: what an absent ``is_padding`` tag means (its declared default).
    """

    name: str
    description: str
    architectures: tuple[str, ...]
    lineage: tuple[str, ...]
    dims: Mapping[str, Dim]
    fields: Mapping[str, Field]
    tags: Mapping[str, Tag]
    extra: str
    padding_sizes: Mapping[str, int]
    tensors: tuple[tuple[Field, tuple[Axis, ...]], ...]
    others: tuple[Field, ...]
    dim_plan: DimPlan
    hidden: frozenset[str]
    valued: tuple[Field, ...]
    dim_bounded: tuple[Field, ...]
    bound_names: Mapping[str, frozenset[str]]
    length_tags: tuple[Tag, ...]
    uid_field: str | None
    padding_default: bool
    # Fields with their dim bounds at given sizes, one object per (field, bounds), so the
    # value engine's compiled checks (cached per field object) are reused across samples.
    _bounded: dict[tuple[str, Any, Any], Field] = dataclasses.field(default_factory=dict, repr=False)

    def bounded(self, f: Field, env: Mapping[str, Any]) -> Field:
        """``f`` with its dim bounds evaluated at the sizes of ``env`` (see `Field.bounded`); ``f`` itself without any.

        ``env`` holds Python ints (one sample, or sizes every sample shares).
        """
        if not f.has_dim_bounds:
            return f
        lo = f.min_expr.evaluate(env) if f.min_expr is not None else None
        hi = f.max_expr.evaluate(env) if f.max_expr is not None else None
        key = (f.name, lo, hi)
        hit = self._bounded.get(key)
        if hit is None:
            if len(self._bounded) > 1024:
                self._bounded.clear()
            hit = self._bounded[key] = f.bounded(env)
        return hit

    @functools.cached_property
    def fast(self) -> Callable[[Mapping[str, Any]], dict[str, int] | None]:
        """The generated straight-line checker (see `trajschema.check.fastpath`), built on first use."""
        from trajschema.check.fastpath import compile_fast_checker  # it reads torch: a sample check has one

        return compile_fast_checker(self)

    @property
    def declarations(self) -> dict[str, Any]:
        """The declared attributes, as `build_plan` takes them (to rebuild with one changed)."""
        return {k: getattr(self, k) for k in DECLARED}

    def public_dims(self, env: Mapping[str, Any]) -> dict[str, Any]:
        """``env`` without the hidden dims, in declaration order."""
        return {n: env[n] for n in self.dim_plan.dims if n in env and n not in self.hidden}

    def unbindable(self, env: Mapping[str, int], present: Iterable[str], pinned: Mapping[str, int]) -> str | None:
        """Why validation cannot bind the dims of a sample whose sizes are ``env``, or ``None`` when it can.

        ``env`` holds every dim (sizes that satisfy every definition, as the strategies
        draw them), ``present`` names the tensor fields the sample carries, ``pinned`` is
        ``dims=``. Binding sees only what those fields observe, so a derived dim whose
        inputs no field binds may have to be solved, and only one unbound input at a time
        can be: ``a = h * w`` observed alone is refused whatever its size. The reason
        names the first such dim.
        """
        here = set(present)
        obs: dict[str, list[tuple[str, int]]] = {}
        for f, axes in self.tensors:
            if f.name in here:
                for name, _ in axes:
                    if name is not None:
                        obs.setdefault(name, []).append((f.name, env[name]))
        b = bind(self.dim_plan, obs, pinned, ScalarSizes())
        for name, target, _, bad in b.relations:
            if bad:
                d = self.dim_plan.dims[name]
                label = str(d.expr) if name in self.hidden else f"{name} = {d.expr}"
                unbound = [n for n in d.expr.names() if n not in b.env]
                return f"{label} is {target} but validation cannot solve it for {', '.join(unbound) or 'its inputs'}"
        return None


#: What a schema declares, in the order `build_plan` takes it.
DECLARED = ("name", "description", "architectures", "lineage", "dims", "fields", "tags", "extra", "padding_sizes")


def build_plan(
    *,
    name: str,
    description: str,
    architectures: tuple[str, ...],
    lineage: tuple[str, ...],
    dims: Mapping[str, Dim],
    fields: Mapping[str, Field],
    tags: Mapping[str, Tag],
    extra: str,
    padding_sizes: Mapping[str, int],
) -> Plan:
    """Arrange a schema's declarations for checking."""
    all_dims: dict[str, Any] = dict(dims)
    hidden: set[str] = set()
    tensors = []
    for f in fields.values():
        if f.is_tensor:
            tensors.append((f, tuple(_axis(e, all_dims, hidden) for e in f.shape or ())))
    pad_tag = tags.get("is_padding")
    uid = [f.name for f in fields.values() if f.pad.rule == "uid"]
    return Plan(
        name=name,
        description=description,
        architectures=architectures,
        lineage=lineage,
        dims=dims,
        fields=fields,
        tags=tags,
        extra=extra,
        padding_sizes=padding_sizes,
        tensors=tuple(tensors),
        others=tuple(f for f in fields.values() if not f.is_tensor),
        dim_plan=DimPlan(
            dims=all_dims,
            derived=derived_order(all_dims),
            fixed={n: d.size for n, d in all_dims.items() if isinstance(d, FixedDim)},
            free=tuple(d for d in all_dims.values() if isinstance(d, FreeDim)),
        ),
        hidden=frozenset(hidden),
        valued=tuple(f for f in fields.values() if f.has_value_checks),
        dim_bounded=tuple(f for f in fields.values() if f.is_tensor and f.has_dim_bounds),
        bound_names={
            f.name: frozenset(n for e in (f.min_expr, f.max_expr) if e is not None for n in e.names())
            for f in fields.values()
            if f.has_dim_bounds
        },
        length_tags=tuple(t for t in tags.values() if t.equals is not None),
        uid_field=uid[0] if uid else None,
        padding_default=bool(pad_tag.default) if pad_tag is not None and pad_tag.default is not None else False,
    )


def _axis(e: Any, dims: dict[str, Any], hidden: set[str]) -> Axis:
    if e.is_int:
        return (None, e.args[0])
    name = e.args[0] if e.is_name else f"({e})"
    if not e.is_name and name not in dims:
        dims[name] = DerivedDim(name, e)
        hidden.add(name)
    return (name, -1)


def dtype_overflow(f: Field, dtype: Any, env: Mapping[str, Any]) -> tuple[str, str] | None:
    """Why ``dtype`` cannot hold every integer ``f``'s dim bounds allow at the sizes of ``env``, or ``None``.

    Only a bound written in dims is held to the dtype (``max: experts - 1`` with
    ``experts=300`` on ``uint8``: ids would wrap around, prime-rl #3051); a literal bound
    is the schema author's own, and float dtypes are not integer ids. The answer is
    ``(expected, why)``: ``("a dtype holding 299 (max experts - 1)", "cannot hold 299, the
    largest value max experts - 1 allows (experts=300); uint8 holds 0..255")``.
    """
    cap = integer_capacity(dtype)
    if cap is None or not f.has_dim_bounds:
        return None
    lo = f.min_expr.evaluate(env) if f.min_expr is not None else None
    hi = f.max_expr.evaluate(env) if f.max_expr is not None else None
    low = lo if f.min is None or lo is None else max(lo, f.min)
    high = hi if f.max is None or hi is None else min(hi, f.max)
    if low is not None and high is not None and low > high:
        return None  # nothing passes: the value check says so, whatever the dtype
    ends = ((high, hi, f.max_expr, cap[1], "largest"), (low, lo, f.min_expr, cap[0], "smallest"))
    for value, bound, e, end, what in ends:
        if e is None or bound is None or value != bound or (value <= end if what == "largest" else value >= end):
            continue  # unbound, the literal end is the tighter one, or the dtype holds it
        sizes = ", ".join(f"{n}={env[n]}" for n in e.names())
        key = "max" if what == "largest" else "min"
        return (
            f"a dtype holding {number_label(value)} ({key} {e})",
            f"cannot hold {number_label(value)}, the {what} value {key} {e} allows ({sizes}); "
            f"{dtype_name(dtype)} holds {cap[0]}..{cap[1]}",
        )
    return None
