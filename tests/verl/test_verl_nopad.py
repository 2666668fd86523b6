"""``verl_nopad`` held to verl 0.9.1's own ``left_right_2_no_padding``: our conversion equals
its output field for field, and its output validates clean (text, MoE, mrope, distillation).

verl's function is imported from the installed verl (``verl/workers/utils/padding.py``)
and run unchanged on a ``verl_dataproto`` batch built by ``to_dense``.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import trajschema as ts
from tests.dense.test_convert import same
from tests.verl_support import verl_module
from trajschema.testing import verl_sample

SCHEMAS = ["text", "moe_routed", "vlm_mrope", "distill", "vlm_mrope_moe"]
LENGTHS = [(3, 2), (1, 5), (6, 1), (2, 0), (4, 4)]


def dense_td(schema: str, lengths: list[tuple[int, int]] = LENGTHS, *, extra: tuple[int, int] = (2, 3)) -> Any:
    """A verl_dataproto batch as a TensorDict (the tensors verl's engine path keeps), padded past the longest row."""
    from tensordict import NonTensorStack, TensorDict

    s = ts.load_schema(schema)
    rows = [verl_sample(schema, p, r, seed=i, uid=f"q{i // 2}") for i, (p, r) in enumerate(lengths)]
    for r in rows:
        r["loss_mask"] = r["response_mask"].clone()
    sizes = {"prompt": max(p for p, _ in lengths) + extra[0], "response": max(r for _, r in lengths) + extra[1]}
    dense = s.to_dense(rows, layout="verl_dataproto", pad_token_id=0, lengths=sizes)
    tensors = {k: v for k, v in dense.items() if isinstance(v, torch.Tensor)}
    td = TensorDict(tensors, batch_size=[len(rows)])
    for k, v in dense.items():
        if k not in tensors:
            td[k] = NonTensorStack.from_list(list(v))
    return td


def verl_nopad(td: Any) -> Any:
    padding = verl_module("verl.workers.utils.padding")
    return padding.left_right_2_no_padding(td.clone())


def same_tensor(a: Any, b: Any) -> bool:
    if a.is_nested or b.is_nested:
        return (
            a.is_nested
            and b.is_nested
            and a._ragged_idx == b._ragged_idx
            and a.offsets().dtype == b.offsets().dtype
            and torch.equal(a.offsets(), b.offsets())
            and a.values().dtype == b.values().dtype
            and torch.equal(a.values(), b.values())
        )
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def entries(td: Any) -> dict[str, Any]:
    """Every key's value, ``NonTensorData`` as its data."""
    out = {}
    for k in td.keys():
        v = td.get(k)
        kind = type(v).__name__
        out[k] = v.data if kind == "NonTensorData" else v.tolist() if kind == "NonTensorStack" else v
    return out


@pytest.mark.verl
@pytest.mark.parametrize("schema", SCHEMAS)
def test_pack_dense_equals_verls_left_right_2_no_padding(schema: str) -> None:
    td = dense_td(schema)
    theirs = entries(verl_nopad(td))
    ours_td = ts.load_schema(schema).pack_dense(td, layout="verl_nopad")
    ours = entries(ours_td)
    assert ours.keys() == theirs.keys()
    for k, want in theirs.items():
        got = ours[k]
        if isinstance(want, torch.Tensor):
            assert isinstance(got, torch.Tensor) and same_tensor(got, want), k
        else:
            assert same(got, want), k
    assert ours_td["loss_mask"] is ours_td["response_mask"]  # verl's loss mask is its response mask, the same tensor
    assert entries(td).keys() - {"loss_mask"} <= ours.keys()  # the dense batch is not changed, nothing lost


@pytest.mark.verl
@pytest.mark.parametrize("schema", SCHEMAS)
def test_verls_own_output_validates_clean(schema: str) -> None:
    s = ts.load_schema(schema)
    theirs = verl_nopad(dense_td(schema))
    assert s.batch_violations(theirs, layout="verl_nopad") == []
    back = s.from_packed(theirs, layout="verl_nopad")
    assert len(back) == len(LENGTHS)


@pytest.mark.verl
def test_an_all_zero_attention_mask_row_is_an_empty_segment_and_reported() -> None:
    """verl turns a row without real tokens into an empty segment (and its no_padding_2_padding then asserts)."""
    td = dense_td("text")
    td["attention_mask"][2] = 0
    theirs = verl_nopad(td)
    assert int(theirs["input_ids"].offsets().diff()[2]) == 0
    found = ts.load_schema("text").batch_violations(theirs, layout="verl_nopad")
    assert found and all(v.sample == 2 for v in found if v.sample is not None)
    assert any(v.code == "mask" and v.sample == 2 for v in found)


@pytest.mark.verl
def test_a_nested_column_cut_with_other_offsets_is_reported_at_its_sequence() -> None:
    """Padded and real offsets confused: input_ids nested with offsets that count one token too many in sequence 1."""
    theirs = verl_nopad(dense_td("text"))
    ids = theirs["input_ids"]
    offsets = ids.offsets().clone()
    offsets[2:] += 1
    values = torch.cat([ids.values(), torch.zeros(1, dtype=ids.dtype)])
    theirs["input_ids"] = torch.nested.nested_tensor_from_jagged(values, offsets)
    found = ts.load_schema("text").batch_violations(theirs, layout="verl_nopad")
    assert [(v.sample, v.field, v.code) for v in found if v.code == "offsets"] == [(1, "input_ids", "offsets")]
