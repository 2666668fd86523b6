"""Valid routings: every token's ``topk`` experts distinct, every id below the expert count.

A real router never sends one token to the same expert twice, so a sample whose
``routed_experts`` repeat an expert within a token is not a routing at all (and a
schema declaring ``distinct: true`` refuses it). ``torch.randint(0, E, (S, L, K))``
makes such tokens all the time; [`random_routes`][trajschema.testing.random_routes]
draws valid ones, and `distinct_rows` is the seeded draw the strategies use for large
tensors of any ``distinct`` field.
"""

from __future__ import annotations

from typing import Any

import torch

from trajschema.core import is_int

__all__ = ["distinct_rows", "random_routes"]

#: The largest value set `distinct_rows` draws from (``torch.randint`` takes int64 ends).
MAX_COUNT = 2**62


def distinct_rows(rows: int, k: int, count: int, generator: torch.Generator) -> torch.Tensor:
    """A ``(rows, k)`` int64 tensor: in each row ``k`` distinct ints of ``[0, count)``, in random order.

    Each row is a uniformly random ``k``-subset (Floyd's algorithm, vectorized over the
    rows: ``k`` draws, never a rejection loop), then shuffled, so the cost is
    ``rows * k**2`` comparisons whatever ``count`` is. Deterministic for one generator
    state.

    Raises:
        ValueError: ``k > count`` (no row can hold ``k`` distinct values), a negative
            size, or ``count`` above 2**62.
    """
    for name, v in (("rows", rows), ("k", k), ("count", count)):
        if not is_int(v) or v < 0:
            raise ValueError(f"distinct_rows({name}=...) must be an int >= 0, found {v!r}")
    if count > MAX_COUNT:
        raise ValueError(f"distinct_rows(count=...) must be at most 2**62, found {count}")
    if k > count:
        raise ValueError(f"distinct_rows: cannot draw {k} distinct values from {count}")
    out = torch.empty((rows, k), dtype=torch.int64)
    for i, j in enumerate(range(count - k, count)):
        t = torch.randint(0, j + 1, (rows,), generator=generator, dtype=torch.int64)
        taken = (out[:, :i] == t[:, None]).any(dim=1)
        out[:, i] = torch.where(taken, torch.full_like(t, j), t)
    if k > 1:  # Floyd's order favours the high values late in a row: shuffle each row
        out = out.gather(1, torch.rand((rows, k), generator=generator).argsort(dim=1))
    return out


def random_routes(
    tokens: int,
    layers: int,
    topk: int,
    *,
    experts: int,
    seed: int = 0,
    dtype: torch.dtype = torch.int16,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """A valid ``(tokens, layers, topk)`` routing: each token's ``topk`` experts distinct, all in ``0 .. experts-1``.

    Use it wherever a test or an example needs ``routed_experts`` (instead of
    ``torch.randint(0, experts, ...)``, which repeats experts within a token).

    Examples:
        >>> from trajschema.testing import random_routes
        >>> r = random_routes(5, 2, 4, experts=8)
        >>> tuple(r.shape), r.dtype, int(r.max()) < 8
        ((5, 2, 4), torch.int16, True)
        >>> bool((r.sort(dim=-1).values.diff(dim=-1) != 0).all())
        True

    Args:
        tokens: tokens of the sample (``seq``).
        layers: MoE layers.
        topk: experts per token.
        experts: the model's expert count.
        seed: seeds the draw (when no ``generator`` is given).
        dtype: an integer dtype that holds ``experts - 1`` (verl writes ``int16``).
        generator: draw from this generator instead of a new one seeded with ``seed``.

    Raises:
        ValueError: ``topk > experts`` (no token can name ``topk`` distinct experts), a
            size that is not an int >= 0, ``experts`` < 1, or a ``dtype`` that cannot
            hold ``experts - 1``.
    """
    for name, v in (("tokens", tokens), ("layers", layers), ("topk", topk), ("experts", experts)):
        _size(name, v)
    if experts < 1:
        raise ValueError(f"random_routes(experts=...) must be >= 1, found {experts}")
    if topk > experts:
        raise ValueError(
            f"random_routes: topk={topk} is more than experts={experts}: a token names {topk} distinct experts"
        )
    _holds(dtype, experts - 1, "random_routes")
    g = generator if generator is not None else torch.Generator().manual_seed(seed)
    ids = distinct_rows(tokens * layers, topk, experts, g)
    return ids.reshape(tokens, layers, topk).to(dtype)


def _size(name: str, v: Any) -> None:
    if not is_int(v) or v < 0:
        raise ValueError(f"random_routes({name}=...) must be an int >= 0, found {v!r}")


def _holds(dtype: Any, top: int, call: str) -> None:
    if not isinstance(dtype, torch.dtype) or dtype.is_floating_point or dtype.is_complex or dtype == torch.bool:
        raise ValueError(f"{call}(dtype=...) must be an integer torch dtype, found {dtype!r}")
    if top > torch.iinfo(dtype).max:
        raise ValueError(f"{call}: dtype {dtype} cannot hold expert id {top} (the largest id is experts - 1)")
