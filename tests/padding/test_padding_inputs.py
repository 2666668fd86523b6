"""Padding under odd input: odd ``like=`` samples, sizes past int64, dtypes that cannot hold positions.

Each test pins a bug found in `Schema.padding` (it failed when written): the
answer is padding that validates, or a ValueError/TypeError (a SchemaError for a
reference that breaks the schema) naming the argument, never a torch, KeyError or
RecursionError from inside.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trajschema as ts
from trajschema.testing import verl_sample

TEXT = ts.load_schema("text")
VLM = ts.load_schema("vlm_mrope")
VLM_MOE = ts.load_schema("vlm_mrope_moe")


# -- undeclared fields of like=: copied when they keep their size, never at a stale length ---------


def test_an_undeclared_tensor_following_a_sequence_dim_is_not_copied():
    moe_sample = verl_sample(VLM_MOE, 100, 11, layers=48, topk=8)
    assert moe_sample["routed_experts"].shape == (111, 48, 8)
    with pytest.raises(ts.SchemaError) as info:
        VLM.padding(3, eos_token_id=2, like=moe_sample)  # vlm_mrope does not declare routed_experts
    (v,) = info.value.violations
    assert v.field == "routed_experts" and v.code == "extra"
    assert "(111, 48, 8)" in v.message or "111,48,8" in v.message
    assert "seq=111" in v.message and "Declare 'routed_experts'" in v.message


def test_undeclared_non_tensors_and_unrelated_tensors_are_still_copied():
    sample = verl_sample(TEXT, 5, 4)
    sample["data_source"] = "gsm8k"
    sample["image_grid_thw"] = torch.tensor([[1, 4, 4]])  # shares no dim the padding resizes
    pad = TEXT.padding(2, eos_token_id=2, like=sample)
    assert pad.samples[0]["data_source"] == "gsm8k"
    assert torch.equal(pad.samples[1]["image_grid_thw"], sample["image_grid_thw"])


def test_a_size_collision_is_refused_rather_than_guessed():
    # (1, 3) grid beside response=3: it may follow the response or not; refusing is the safe side.
    sample = verl_sample(TEXT, 5, 3)
    sample["image_grid_thw"] = torch.tensor([[1, 4, 4]])
    with pytest.raises(ts.SchemaError, match="like the reference's response=3"):
        TEXT.padding(1, eos_token_id=2, like=sample)


def test_a_tensor_sharing_a_size_the_padding_keeps_is_copied():
    sample = verl_sample(TEXT, 5, 3)
    sample["extra_vec"] = torch.zeros(9)
    pad = TEXT.padding(1, eos_token_id=2, like=sample, dims={"prompt": 5, "response": 3})
    assert pad.samples[0]["extra_vec"].shape == (9,)


@pytest.mark.parametrize("extra", [torch.zeros(3), "x"], ids=["tensor", "str"])
def test_padding_like_a_sample_with_a_non_str_key(extra):
    """An undeclared non-str key in like= is refused by a Value/TypeError naming it, not a KeyError/IndexError."""
    like = {**verl_sample(TEXT, 2, 2), 1: extra}
    with pytest.raises((ValueError, TypeError), match="1"):
        TEXT.padding(1, eos_token_id=2, like=like)


def test_padding_like_a_sample_with_an_undeclared_strided_nested_tensor():
    """An undeclared strided nested tensor in like= is copied or refused clearly, not a NestedTensorImpl error."""
    nested = torch.nested.nested_tensor([torch.zeros(3), torch.zeros(8)])
    try:
        pad = TEXT.padding(2, eos_token_id=2, like={**verl_sample(TEXT, 5, 3), "extra": nested})
    except (ValueError, TypeError):
        return
    assert len(pad) == 2


def test_padding_like_a_deeply_nested_undeclared_value():
    """A deeply nested undeclared value in like= is copied or refused with a clear error, not a RecursionError."""
    deep: list = []
    cur = deep
    for _ in range(5000):
        cur.append([])
        cur = cur[0]
    try:
        pad = TEXT.padding(1, eos_token_id=2, like={**verl_sample(TEXT, 5, 3), "extra": deep})
    except (ValueError, TypeError):
        return
    assert len(pad) == 1


# -- sizes ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [{"count": 2**63}, {"count": 1, "dims": {"layers": 2**63}}],
    ids=["count", "dims"],
)
def test_padding_sizes_beyond_int64_are_a_value_error(kwargs):
    """count=2**63 or dims beyond int64 raise the documented ValueError naming the argument, not a torch error."""
    like = verl_sample(VLM_MOE, 5, 3, layers=2, topk=2)
    count = kwargs.pop("count")
    with pytest.raises(ValueError, match=r"count|layers"):
        VLM_MOE.padding(count, eos_token_id=2, like=like, **kwargs)


def test_padding_sizes_that_make_an_inline_axis_negative_are_a_value_error():
    schema = ts.schema_from_dict(
        {
            "name": "diff",
            "dims": {"n": {"min": 2}, "m": {}},
            "padding": {"n": 3, "m": 1},
            "fields": {"t": {"shape": ["n - m"], "dtype": "int64", "pad": 0}},
        }
    )
    assert schema.padding(1, eos_token_id=0).fields["t"].shape == (1, 2)
    with pytest.raises(ValueError, match=r"negative axis \(n - m=-3\)"):
        schema.padding(1, eos_token_id=0, dims={"n": 2, "m": 5})


def test_padding_dims_given_as_numpy_ints_are_plain_ints():
    pad = VLM_MOE.padding(1, eos_token_id=2, dims={"layers": np.int64(2), "topk": np.int32(2), "experts": np.int16(4)})
    assert all(type(n) is int for n in pad.dims.values())


# -- padding values ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "n"), [("bfloat16", 513), ("float16", 4097)])
def test_float_positions_are_exact_or_refused(dtype, n):
    """pad: positions fills exactly 0..n-1, or refuses the size when the float dtype cannot hold every position."""
    schema = ts.schema_from_dict(
        {"name": "p", "dims": {"n": {}}, "fields": {"pos": {"shape": ["n"], "dtype": dtype, "pad": "positions"}}}
    )
    try:
        pad = schema.padding(1, eos_token_id=2, dims={"n": n})
    except ValueError:
        return
    assert pad.fields["pos"][0].tolist() == list(range(n))
