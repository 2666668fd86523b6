"""Binding dims: one algorithm for one sample (Python ints) and a batch (one size per sample).

Every axis of every tensor field observes the size of a dim. Binding decides each dim's
size and who is at odds with it:

1. a size pinned by the caller (``dims=``) or fixed by the schema wins outright;
2. otherwise the size most observers agree on wins (a majority vote); ties go to a
   derived dim's computed size, then to the first observer in declaration order;
3. derived dims (``seq = prompt + response``) are evaluated from their inputs, or, when
   one input is bound by nothing else, solved for it; a derived dim solved this way
   (``b`` in ``a = b + c`` with ``b = 2 * x``) is then held to its own definition, once
   the other dims are bound, the same way (computed and compared, or solved for its one
   unbound input), so a size no sizes of its inputs give is refused, however deep the
   chain. Only a unique solution
   is a solution: an expression that does not depend on its unbound input at the sizes
   bound (``x * y`` with ``y = 0``) is refused, as one in two unbound inputs is;
4. free dims must lie within their ``min``/``max``/``multiple_of``.

The same code runs on Python ints for `_sample` and on int64 tensors of shape
``(n,)`` for the vectorized batch screen `_screen`; only the three primitives of
`Sizes` differ. The results are masks (a bool, or a bool tensor), never messages:
callers decide whether a mask means a violation record or a row to look at again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from trajschema.core import DerivedDim, FreeDim, is_tensor, solve_linear

if TYPE_CHECKING:
    import torch

__all__ = ["Binding", "DimPlan", "ScalarSizes", "Sizes", "TensorSizes", "bind"]

V = TypeVar("V")  # a size: int, or an int64 tensor with one size per sample


@dataclasses.dataclass(frozen=True)
class DimPlan:
    """What binding needs to know about a schema's dims, derived once per schema."""

    dims: Mapping[str, Any]  # every dim, plus one hidden derived dim per inline expression
    derived: tuple[DerivedDim, ...]  # in dependency order
    fixed: Mapping[str, int]
    free: tuple[FreeDim, ...]


class Sizes(Generic[V]):
    """The primitives binding needs, for one kind of size."""

    def lift(self, x: Any) -> V:
        """A constant (or an already lifted size) as a size."""
        raise NotImplementedError

    def majority(self, sizes: Sequence[V], preferred: V | None) -> V:
        """The size most of ``sizes`` agree on; ties to ``preferred``, then to the first."""
        raise NotImplementedError

    def where(self, cond: Any, a: Any, b: Any) -> V:
        raise NotImplementedError

    def always(self) -> Any:
        """A mask that is set for every sample."""
        raise NotImplementedError


class ScalarSizes(Sizes[int]):
    """Sizes of one sample: Python ints and bools."""

    def lift(self, x: Any) -> int:
        return x

    def majority(self, sizes: Sequence[int], preferred: int | None) -> int:
        counts: dict[int, int] = {}
        for s in sizes:
            counts[s] = counts.get(s, 0) + 1
        if preferred is not None:
            counts[preferred] = counts.get(preferred, 0) + 1
            if counts[preferred] == max(counts.values()):
                return preferred
        best = max(counts.values())
        return next(s for s in sizes if counts[s] == best)

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        return a if cond else b

    def always(self) -> bool:
        return True


class TensorSizes(Sizes["torch.Tensor"]):
    """Sizes of ``n`` samples at once: int64 tensors of shape ``(n,)`` on one device.

    torch is imported in the methods: only a batch check makes one (a plan is built, and a
    schema read, without torch).
    """

    def __init__(self, n: int, device: torch.device) -> None:
        self.n = n
        self.device = device

    def lift(self, x: Any) -> torch.Tensor:
        import torch

        if isinstance(x, torch.Tensor):
            return x
        return torch.full((self.n,), int(x), dtype=torch.int64, device=self.device)

    def majority(self, sizes: Sequence[torch.Tensor], preferred: torch.Tensor | None) -> torch.Tensor:
        import torch

        obs = torch.stack([self.lift(s) for s in ([preferred] if preferred is not None else []) + list(sizes)])
        if obs.shape[0] == 1:
            return obs[0]
        # counts[i, j]: how many observers agree with observer i on sample j; argmax
        # returns the first maximum, so ties go to `preferred`, then declaration order.
        counts = (obs[:, None, :] == obs[None, :, :]).sum(1)
        return obs.gather(0, counts.argmax(0, keepdim=True))[0]

    def where(self, cond: Any, a: Any, b: Any) -> torch.Tensor:
        import torch

        return torch.where(cond, self.lift(a), self.lift(b))

    def always(self) -> torch.Tensor:
        import torch

        return torch.ones(self.n, dtype=torch.bool, device=self.device)


@dataclasses.dataclass
class Binding(Generic[V]):
    """What binding found; every mask is a bool (one sample) or a bool tensor (a batch).

    Attributes:
        env: the size of every dim that could be bound (hidden dims included).
        odd: ``(field, dim, mask)`` per observation: where the field's axis disagrees
            with the dim's bound size.
        relations: ``(dim, target, computed, mask)`` per derived dim whose observers
            agree on ``target`` where its expression gives ``computed`` (``None``: the
            expression could not be evaluated or solved), broken where ``mask``.
        ranges: ``(dim, mask)`` per bound free dim, out of its bounds where ``mask``.
        solved_from: dim -> the derived dim whose relation solved it (its size came
            from there, not from a field).
    """

    env: dict[str, V]
    odd: list[tuple[str, str, Any]]
    relations: list[tuple[str, V, V | None, Any]]
    ranges: list[tuple[FreeDim, Any]]
    solved_from: dict[str, str] = dataclasses.field(default_factory=dict)


def bind(
    plan: DimPlan, obs: Mapping[str, Sequence[tuple[str, V]]], pinned: Mapping[str, int], sizes: Sizes[V]
) -> Binding[V]:
    """Bind every dim of ``plan`` from the observations ``obs`` (dim -> [(field, size)])."""
    out: Binding[V] = Binding({}, [], [], [])
    for name, d in plan.dims.items():
        if isinstance(d, DerivedDim):
            continue
        seen = obs.get(name, ())
        ref = pinned.get(name, plan.fixed.get(name))
        if ref is not None:
            out.env[name] = sizes.lift(ref)
        elif seen:
            out.env[name] = sizes.majority([s for _, s in seen], None)
        else:
            continue
        out.odd.extend((f, name, s != out.env[name]) for f, s in seen)
    held: list[str] = []  # derived dims solved from another's relation, held to their own definitions last
    for d in plan.derived:
        _bind_derived(plan, d, obs.get(d.name, ()), pinned.get(d.name), sizes, out, held)
    _hold_solved(plan, held, sizes, out)
    for d in plan.free:
        v = out.env.get(d.name)
        if v is not None:
            out.ranges.append((d, _out_of_bounds(d, v)))
    return out


def _bind_derived(
    plan: DimPlan,
    d: DerivedDim,
    seen: Sequence[tuple[str, V]],
    pin: int | None,
    sizes: Sizes[V],
    out: Binding[V],
    held: list[str],
) -> None:
    env = out.env
    value = d.expr.evaluate(env)
    computed: V | None = None if value is None else sizes.lift(value)
    if pin is not None:
        target: V | None = sizes.lift(pin)
    elif seen:
        target = sizes.majority([s for _, s in seen], computed)
    else:
        target = None
    if target is None:
        if computed is not None:
            env[d.name] = computed
        return
    env[d.name] = target
    out.odd.extend((f, d.name, s != target) for f, s in seen)
    _relate(plan, d, target, computed, sizes, out, held)


def _relate(
    plan: DimPlan, d: DerivedDim, target: V, computed: V | None, sizes: Sizes[V], out: Binding[V], held: list[str]
) -> None:
    """Record whether ``d``, bound to ``target``, agrees with its definition.

    Computed and compared, or solved for its one unbound input; a derived input solved
    so joins ``held``, and its own definition is checked in turn.
    """
    if computed is not None:
        out.relations.append((d.name, target, computed, computed != target))
        return
    env = out.env
    unbound = [m for m in d.expr.names() if m not in env]
    if len(unbound) != 1:
        out.relations.append((d.name, target, None, sizes.always()))
        return
    u = unbound[0]
    sol, ok = solve_linear(d.expr, u, target, env, lift=sizes.lift, where=sizes.where)
    if not is_tensor(ok) and not ok:
        out.relations.append((d.name, target, None, True))
        return
    env[u] = sol  # where unsolved (a tensor) the size is 0 and the relation says so
    out.solved_from[u] = d.name
    out.relations.append((d.name, target, None, ~ok if is_tensor(ok) else False))
    if isinstance(plan.dims[u], DerivedDim):
        held.append(u)


def _hold_solved(plan: DimPlan, held: list[str], sizes: Sizes[V], out: Binding[V]) -> None:
    """Hold each derived dim solved from another's relation to its own definition.

    Done once every other dim is bound, since its inputs may be bound by then (by a
    field observed later in the order, or by another solve): ``b = 2 * x`` solved as 3
    from ``a = b + c`` is refused, whether ``x`` is bound or still to be solved for.
    Iterative: a hold that solves a derived input appends it.
    """
    i = 0
    while i < len(held):
        d = plan.dims[held[i]]
        i += 1
        value = d.expr.evaluate(out.env)
        _relate(plan, d, out.env[d.name], None if value is None else sizes.lift(value), sizes, out, held)


def _out_of_bounds(d: FreeDim, v: Any) -> Any:
    bad = v < d.min
    if d.max is not None:
        bad = bad | (v > d.max)
    if d.multiple_of is not None:
        bad = bad | (v % d.multiple_of != 0)
    return bad
