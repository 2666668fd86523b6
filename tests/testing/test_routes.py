"""Valid routings (trajschema.testing.routes): distinct experts per token, ids below the expert count."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from trajschema.testing import random_routes
from trajschema.testing.routes import MAX_COUNT, distinct_rows


def _repeats(t: torch.Tensor) -> int:
    """How many slices along the last axis repeat a value: the reference, one slice at a time."""
    rows = t.reshape(-1, t.shape[-1]).tolist() if t.numel() else []
    return sum(len(set(r)) != len(r) for r in rows)


@given(
    rows=st.integers(0, 40),
    count=st.integers(0, 70),
    k=st.integers(0, 70),
    seed=st.integers(0, 2**32 - 1),
)
def test_distinct_rows_are_distinct_subsets_of_the_range(rows, count, k, seed):
    k = min(k, count)
    out = distinct_rows(rows, k, count, torch.Generator().manual_seed(seed))
    assert out.shape == (rows, k) and out.dtype == torch.int64
    assert _repeats(out) == 0
    if out.numel():
        assert int(out.min()) >= 0 and int(out.max()) < count


def test_distinct_rows_are_uniform_over_values_and_slots():
    out = distinct_rows(60_000, 3, 5, torch.Generator().manual_seed(7))
    # Every value equally likely overall (3/5 of rows hold it) and in each slot (1/5).
    assert torch.allclose(torch.bincount(out.flatten(), minlength=5).float() / 60_000, torch.full((5,), 0.6), atol=0.02)
    for slot in range(3):
        freq = torch.bincount(out[:, slot], minlength=5).float() / 60_000
        assert torch.allclose(freq, torch.full((5,), 0.2), atol=0.02), (slot, freq)


def test_distinct_rows_fill_the_whole_set_when_k_is_count():
    out = distinct_rows(50, 6, 6, torch.Generator().manual_seed(0))
    assert (out.sort(dim=1).values == torch.arange(6)).all()


def test_distinct_rows_reach_2_to_the_62():
    out = distinct_rows(4, 3, MAX_COUNT, torch.Generator().manual_seed(0))
    assert _repeats(out) == 0 and int(out.max()) < MAX_COUNT


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((3, 4, 3), "cannot draw 4 distinct values from 3"),
        ((-1, 2, 3), r"rows=\.\.\.\) must be an int >= 0, found -1"),
        ((2, True, 3), r"k=\.\.\.\) must be an int >= 0, found True"),
        ((2, 1, 2**62 + 1), "count=...\\) must be at most 2\\*\\*62"),
        ((2, 1, 3.0), r"count=\.\.\.\) must be an int >= 0, found 3.0"),
    ],
    ids=["k-above-count", "negative-rows", "bool-k", "huge-count", "float-count"],
)
def test_distinct_rows_refuses(args, message):
    with pytest.raises(ValueError, match=message):
        distinct_rows(*args, torch.Generator())


@given(
    tokens=st.integers(0, 30),
    layers=st.integers(0, 4),
    experts=st.integers(1, 300),
    topk=st.integers(0, 300),
    seed=st.integers(0, 2**16),
)
def test_random_routes_are_valid_routings(tokens, layers, experts, topk, seed):
    topk = min(topk, experts)
    r = random_routes(tokens, layers, topk, experts=experts, seed=seed)
    assert r.shape == (tokens, layers, topk) and r.dtype == torch.int16
    assert _repeats(r) == 0
    if r.numel():
        assert int(r.min()) >= 0 and int(r.max()) < experts


def test_random_routes_are_deterministic_and_seeded():
    a = random_routes(20, 3, 8, experts=128, seed=1)
    assert torch.equal(a, random_routes(20, 3, 8, experts=128, seed=1))
    assert not torch.equal(a, random_routes(20, 3, 8, experts=128, seed=2))
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(random_routes(4, 2, 2, experts=8, generator=g1), random_routes(4, 2, 2, experts=8, generator=g2))


def test_random_routes_spread_over_every_expert():
    r = random_routes(512, 4, 8, experts=64, seed=0)
    counts = torch.bincount(r.flatten().long(), minlength=64)
    assert int(counts.min()) > 0 and int(counts.max()) < 2 * math.ceil(r.numel() / 64)


def test_random_routes_in_a_wider_dtype():
    r = random_routes(3, 2, 4, experts=70_000, dtype=torch.int32, seed=0)
    assert r.dtype == torch.int32 and _repeats(r) == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"topk": 9, "experts": 8}, "topk=9 is more than experts=8"),
        ({"experts": 0, "topk": 0}, r"experts=\.\.\.\) must be >= 1, found 0"),
        ({"experts": 8, "tokens": -1}, r"tokens=\.\.\.\) must be an int >= 0, found -1"),
        ({"experts": 8, "layers": 2.0}, r"layers=\.\.\.\) must be an int >= 0, found 2.0"),
        ({"experts": True}, r"experts=\.\.\.\) must be an int >= 0, found True"),
        ({"experts": 300, "dtype": torch.uint8}, "dtype torch.uint8 cannot hold expert id 299"),
        ({"experts": 8, "dtype": torch.float32}, "must be an integer torch dtype"),
        ({"experts": 8, "dtype": "int16"}, "must be an integer torch dtype, found 'int16'"),
    ],
    ids=[
        "topk-above-experts",
        "no-experts",
        "negative-tokens",
        "float-layers",
        "bool-experts",
        "uint8",
        "float",
        "str",
    ],
)
def test_random_routes_refuses(kwargs, message):
    args = {"tokens": 4, "layers": 2, "topk": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        random_routes(args.pop("tokens"), args.pop("layers"), args.pop("topk"), **args)
