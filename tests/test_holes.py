"""Holes found by attacking the core: each was a bug, each test fails on the code before the fix."""

from __future__ import annotations

import copy
import multiprocessing
import pickle

import cloudpickle
import pytest
import torch
from tensordict import TensorDict

import trajschema as ts
from trajschema.testing import tq_batch, verl_sample

TEXT = ts.load_schema("text")
VLM = ts.load_schema("vlm_mrope")
MOE = ts.load_schema("vlm_mrope_moe")


def _use(schema: ts.Schema) -> None:
    """Exercise every lazily built part of a schema."""
    s = verl_sample(schema, 5, 3, layers=2, topk=2) if "layers" in schema.dims else verl_sample(schema, 5, 3)
    schema.validate(s)
    schema.violations({"uid": 3})
    schema.validate_batch(tq_batch([s, s]))
    schema.padding(2, eos_token_id=2, like=s)


# -- schema objects pickle, copy and compare equal after any use ----------------------


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
def test_a_used_schema_pickles_and_compares_equal(schema, dumps):
    _use(schema)
    back = pickle.loads(dumps(schema))
    assert back == schema and back is not schema
    _use(back)  # its plan is rebuilt on first use
    assert back == schema


def test_a_used_schema_deep_copies_and_compares_equal(schema):
    _use(schema)
    clone = copy.deepcopy(schema)
    assert clone == schema and hash(clone) == hash(schema)
    assert clone._plan is None
    _use(clone)


def test_different_schemas_do_not_compare_equal():
    assert TEXT != VLM and TEXT != "text"


def _validate_in_child(schema_bytes: bytes) -> dict[str, int]:
    schema = pickle.loads(schema_bytes)
    return schema.validate(verl_sample(schema, 4, 2))


def test_a_used_schema_crosses_a_spawned_process():
    _use(TEXT)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        assert pool.apply(_validate_in_child, (pickle.dumps(TEXT),)) == {"prompt": 4, "response": 2, "seq": 6}


# -- dims= cannot re-pin a fixed dim ------------------------------------------------------


@pytest.mark.parametrize("call", ["validate", "violations", "validate_batch", "batch_violations", "padding", "writer"])
def test_dims_cannot_repin_a_fixed_dim(call):
    sample = verl_sample(VLM, 5, 3)
    dims = {"rope_rows": 3}
    calls = {
        "validate": lambda: VLM.validate(sample, dims=dims),
        "violations": lambda: VLM.violations(sample, dims=dims),
        "validate_batch": lambda: VLM.validate_batch([sample], dims=dims),
        "batch_violations": lambda: VLM.batch_violations(tq_batch([sample]), dims=dims),
        "padding": lambda: VLM.padding(1, eos_token_id=2, dims=dims),
        "writer": lambda: ts.TransferQueueWriter(VLM, partition_id="p", eos_token_id=2, dims=dims, client=object()),
    }
    with pytest.raises(ValueError, match="rope_rows is fixed at 4"):
        calls[call]()


def test_dims_may_restate_a_fixed_dim():
    assert VLM.validate(verl_sample(VLM, 5, 3), dims={"rope_rows": 4})["rope_rows"] == 4


# -- batch checks read no device memory at depth="shapes" ---------------------------------


def _on_meta(td: TensorDict) -> TensorDict:
    out = TensorDict({}, batch_size=td.batch_size)
    for k in td.keys():
        col = td.get(k)
        if isinstance(col, torch.Tensor) and col.is_nested and col.layout == torch.jagged:
            out[k] = torch.nested.nested_tensor_from_jagged(
                col.values().to("meta"), col.offsets().to("meta"), jagged_dim=col._ragged_idx
            )
        elif isinstance(col, torch.Tensor):
            out[k] = col.to("meta")
        else:
            out[k] = col
    return out


def test_jagged_meta_batches_check_at_depth_shapes():
    samples = [verl_sample(MOE, p, r, layers=2, topk=2, seed=p) for p, r in [(5, 3), (7, 1), (2, 9)]]
    meta = _on_meta(tq_batch(samples))
    assert meta["input_ids"].device.type == "meta"
    MOE.validate_batch(meta, depth="shapes")  # nothing to read, nothing raised
    assert MOE.batch_violations(meta, depth="values") == []  # meta has no values to check


def test_meta_batches_still_report_what_their_static_shapes_show():
    samples = [verl_sample(VLM, 5, 3), verl_sample(VLM, 6, 2)]
    td = tq_batch(samples)
    td["position_ids"] = torch.zeros(2, 3, 8, dtype=torch.int64, device="meta")  # 3 rope rows, not 4
    codes = {(v.sample, v.field, v.code) for v in VLM.batch_violations(td, depth="shapes")}
    assert (0, "position_ids", "shape") in codes and (1, "position_ids", "shape") in codes


# -- undeclared fields are never copied into padding at a stale length -------------------


def test_an_undeclared_tensor_following_a_sequence_dim_is_not_copied():
    moe_sample = verl_sample(MOE, 100, 11, layers=48, topk=8)
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


# -- what was hard-coded is derived from the declaration --------------------------------


def test_the_uid_field_is_the_one_declared_pad_uid():
    schema = ts.schema_from_dict(
        {
            "name": "grouped",
            "fields": {
                "mask": {"shape": ["n"], "dtype": "int64", "values": [0, 1], "pad": 0},
                "group": {"kind": "str", "pad": "uid"},
            },
            "dims": {"n": {}},
        }
    )
    real = {"mask": torch.ones(3, dtype=torch.int64), "group": "g0"}
    pad = schema.padding(1, eos_token_id=0, like=real)
    pad.samples[0]["group"] = "g0"
    found = ts.padding_contract_violations([real, *pad.samples], [{}, *pad.tags], schema)
    assert [(v.sample, v.field, v.code) for v in found] == [(1, "group", "padding")]


def test_the_is_padding_default_comes_from_its_tag_declaration():
    assert TEXT._compiled().padding_default is False
    undeclared = ts.schema_from_dict({"name": "bare", "fields": {"n": {"kind": "int", "pad": 0}}})
    assert undeclared._compiled().padding_default is False
    # A declaration that made untagged (real) samples padding would hide them from metrics.
    with pytest.raises(ts.SchemaDefinitionError, match=r"tags\.is_padding"):
        ts.schema_from_dict(
            {
                "name": "x",
                "fields": {"n": {"kind": "int", "pad": 0}},
                "tags": {"is_padding": {"kind": "bool", "default": True}},
            }
        )


def test_dim_descriptions_are_kept():
    assert TEXT.dims["prompt"].description.startswith("prompt tokens")


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


def test_messages_name_numpy_types_and_odd_tags_plainly():
    np = pytest.importorskip("numpy")
    with pytest.raises(TypeError, match=r"found numpy\.bool"):
        ts.is_padding({"is_padding": np.True_})
    (v,) = TEXT.batch_violations([verl_sample(TEXT, 3, 2)], tags="x")
    assert v.actual == "str 'x'"
    pad = MOE.padding(1, eos_token_id=2, dims={"layers": np.int64(2), "topk": np.int32(2)})
    assert all(type(n) is int for n in pad.dims.values())
