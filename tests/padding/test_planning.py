"""Batch-size planning: ``required_multiple`` (verl's rule) and ``padding_needed``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import trajschema as ts


def _prime_factors(n: int) -> set[int]:
    out, p = set(), 2
    while p * p <= n:
        while n % p == 0:
            out.add(p)
            n //= p
        p += 1
    if n > 1:
        out.add(n)
    return out


@pytest.mark.parametrize(
    ("dp_size", "kwargs", "expected"),
    [
        pytest.param(1, {}, 1, id="single-rank"),
        pytest.param(6, {}, 6, id="dp-only"),
        pytest.param(6, {"rollout_n": 8}, 6, id="rollout-n-alone-does-not-count"),
        # verl's example: 2 ranks, ppo_mini_batch_size 15 prompts, rollout.n 8 -> 120 samples.
        pytest.param(2, {"actor_mini_batch_size": 15, "rollout_n": 8}, 120, id="verl-example-actor"),
        pytest.param(2, {"critic_mini_batch_size": 15, "rollout_n": 8}, 120, id="verl-example-critic"),
        pytest.param(4, {"actor_mini_batch_size": 3}, 12, id="rollout-n-defaults-to-1"),
        pytest.param(16, {"actor_mini_batch_size": 2, "rollout_n": 8}, 16, id="dp-already-a-multiple"),
        pytest.param(7, {"actor_mini_batch_size": 5, "rollout_n": 3}, 105, id="coprime"),
        pytest.param(3, {"actor_mini_batch_size": 4, "critic_mini_batch_size": 6}, 12, id="actor-and-critic"),
        pytest.param(
            8,
            {"actor_mini_batch_size": 16, "critic_mini_batch_size": 4, "rollout_n": 5},
            80,
            id="actor-and-critic-times-n",
        ),
        pytest.param(
            6,
            {"actor_mini_batch_size": 4, "critic_mini_batch_size": 10, "rollout_n": 1},
            60,
            id="three-way-lcm",
        ),
    ],
)
def test_required_multiple(dp_size: int, kwargs: dict, expected: int) -> None:
    assert ts.required_multiple(dp_size, **kwargs) == expected


@pytest.mark.parametrize(
    ("batch_size", "multiple", "expected"),
    [
        pytest.param(360, 120, 0, id="verl-45-prompts-x-8-fits"),
        pytest.param(352, 120, 8, id="verl-44-prompts-x-8"),
        pytest.param(353, 120, 7, id="docstring-example"),
        pytest.param(0, 120, 0, id="empty-batch"),
        pytest.param(1, 120, 119, id="one-sample"),
        pytest.param(121, 120, 119, id="just-over"),
        pytest.param(5, 1, 0, id="multiple-one"),
    ],
)
def test_padding_needed(batch_size: int, multiple: int, expected: int) -> None:
    assert ts.padding_needed(batch_size, multiple) == expected


def test_verl_example_end_to_end() -> None:
    multiple = ts.required_multiple(2, actor_mini_batch_size=15, rollout_n=8)
    assert ts.padding_needed(45 * 8, multiple) == 0
    assert ts.padding_needed(44 * 8, multiple) == 8


_BAD = [
    pytest.param(0, id="zero"),
    pytest.param(-2, id="negative"),
    pytest.param(2.0, id="float"),
    pytest.param(True, id="bool"),
    pytest.param("2", id="string"),
]


@pytest.mark.parametrize("value", [*_BAD, pytest.param(None, id="none")])
def test_required_multiple_rejects_bad_dp_size(value: object) -> None:
    with pytest.raises(ValueError, match=rf"^dp_size must be a positive int, found {value!r}$"):
        ts.required_multiple(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [*_BAD, pytest.param(None, id="none")])
def test_required_multiple_rejects_bad_rollout_n(value: object) -> None:
    with pytest.raises(ValueError, match=rf"^rollout_n must be a positive int, found {value!r}$"):
        ts.required_multiple(2, actor_mini_batch_size=4, rollout_n=value)  # type: ignore[arg-type]


@pytest.mark.parametrize("arg", ["actor_mini_batch_size", "critic_mini_batch_size"])
@pytest.mark.parametrize("value", _BAD)
def test_required_multiple_rejects_bad_mini_batch_size(arg: str, value: object) -> None:
    with pytest.raises(ValueError, match=rf"^{arg} must be a positive int, found {value!r}$"):
        ts.required_multiple(2, rollout_n=8, **{arg: value})


def test_mini_batch_sizes_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        ts.required_multiple(2, 15)  # type: ignore[misc]


@pytest.mark.parametrize(
    ("batch_size", "multiple", "match"),
    [
        pytest.param(-1, 8, r"^batch_size must be an int >= 0, found -1$", id="negative-batch"),
        pytest.param(1.5, 8, r"^batch_size must be an int >= 0, found 1\.5$", id="float-batch"),
        pytest.param(8.0, 8, r"^batch_size must be an int >= 0, found 8\.0$", id="integral-float-batch"),
        pytest.param(True, 8, r"^batch_size must be an int >= 0, found True$", id="bool-batch"),
        pytest.param(None, 8, r"^batch_size must be an int >= 0, found None$", id="none-batch"),
        pytest.param("3", 8, r"^batch_size must be an int >= 0, found '3'$", id="string-batch"),
        pytest.param(3, 0, r"^multiple must be a positive int, found 0$", id="zero-multiple"),
        pytest.param(3, -2, r"^multiple must be a positive int, found -2$", id="negative-multiple"),
        pytest.param(3, 2.0, r"^multiple must be a positive int, found 2\.0$", id="float-multiple"),
        pytest.param(3, True, r"^multiple must be a positive int, found True$", id="bool-multiple"),
        pytest.param(3, None, r"^multiple must be a positive int, found None$", id="none-multiple"),
    ],
)
def test_padding_needed_misuse(batch_size: object, multiple: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ts.padding_needed(batch_size, multiple)  # type: ignore[arg-type]


@given(batch_size=st.integers(min_value=0, max_value=10**7), multiple=st.integers(min_value=1, max_value=10**4))
def test_padding_needed_reaches_the_next_multiple(batch_size: int, multiple: int) -> None:
    pad = ts.padding_needed(batch_size, multiple)
    assert type(pad) is int
    assert 0 <= pad < multiple
    assert (batch_size + pad) % multiple == 0


sizes = st.integers(min_value=1, max_value=64)


@given(
    dp=sizes,
    actor=st.none() | sizes,
    critic=st.none() | sizes,
    n=st.integers(min_value=1, max_value=16),
)
def test_required_multiple_is_the_least_common_multiple(dp: int, actor: int | None, critic: int | None, n: int) -> None:
    got = ts.required_multiple(dp, actor_mini_batch_size=actor, critic_mini_batch_size=critic, rollout_n=n)
    parts = [dp] + [m * n for m in (actor, critic) if m is not None]
    assert all(got % p == 0 for p in parts)
    # Least: dividing out any prime factor breaks divisibility by some part.
    for p in _prime_factors(got):
        assert not all((got // p) % q == 0 for q in parts)


# --- odd values (issue 14): only a ValueError naming the argument, exactly when the reference refuses


class _RaisingRepr:
    def __repr__(self) -> str:
        raise RuntimeError("repr of a hostile value")


def _shown(value: object) -> str:
    """How a refused value appears in the message: its repr, when that is short and can be taken."""
    try:
        text = repr(value)
    except RuntimeError:
        return type(value).__name__
    return text if len(text) <= 80 else ""


_ODD_VALUES = st.one_of(
    st.integers(-(2**70), 2**70),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4),
    st.lists(st.integers(), max_size=100),
    st.sampled_from([2 + 0j, object(), _RaisingRepr()]),
)
_ARGS = ["dp_size", "actor_mini_batch_size", "critic_mini_batch_size", "rollout_n", "batch_size", "multiple"]


@given(arg=st.sampled_from(_ARGS), value=_ODD_VALUES)
def test_odd_values_raise_only_value_errors_naming_the_argument(arg: str, value: object) -> None:
    positive = isinstance(value, int) and not isinstance(value, bool) and value > 0
    accepted = (
        positive
        or (arg == "batch_size" and type(value) is int and value == 0)
        or (arg.endswith("mini_batch_size") and value is None)  # optional
    )
    if arg in ("batch_size", "multiple"):
        call = {"batch_size": 5, "multiple": 3, arg: value}
        run = lambda: ts.padding_needed(call["batch_size"], call["multiple"])  # noqa: E731
    else:
        call = {"dp_size": 2, "rollout_n": 2, arg: value}
        run = lambda: ts.required_multiple(call.pop("dp_size"), **call)  # noqa: E731
    if accepted:
        got = run()
        assert type(got) is int and got >= 0
        return
    with pytest.raises(ValueError) as info:
        run()
    message = str(info.value)
    assert type(info.value) is ValueError
    assert message.startswith(f"{arg} must be ") and _shown(value) in message, message
