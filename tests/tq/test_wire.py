"""Unit tests of wire_batch / to_tq_fields: the TransferQueue 0.1.11 read layout, without Ray."""

from __future__ import annotations

import pytest
import torch
from tensordict import NonTensorStack, TensorDict

from tests.layout_cases import layout_sample
from trajschema.tq.wire import to_tq_fields, wire_batch


def assert_jagged(col, *, ragged_idx: int, lengths: list[int], dtype: torch.dtype) -> None:
    assert isinstance(col, torch.Tensor) and col.is_nested and col.layout == torch.jagged
    assert col._ragged_idx == ragged_idx
    assert col.lengths() is None
    assert col.dtype == dtype
    offsets = [0]
    for n in lengths:
        offsets.append(offsets[-1] + n)
    assert col.offsets().tolist() == offsets


def test_unequal_lengths_give_jagged_columns_ragged_at_dim_1():
    samples = [layout_sample(3, 5, seed=0), layout_sample(4, 2, seed=1), layout_sample(2, 7, seed=2)]
    td = wire_batch(samples)
    assert td.batch_size == torch.Size([3])
    assert_jagged(td.get("prompts"), ragged_idx=1, lengths=[3, 4, 2], dtype=torch.int64)
    assert_jagged(td.get("responses"), ragged_idx=1, lengths=[5, 2, 7], dtype=torch.int64)
    assert_jagged(td.get("input_ids"), ragged_idx=1, lengths=[8, 6, 9], dtype=torch.int64)
    assert_jagged(td.get("position_ids"), ragged_idx=1, lengths=[8, 6, 9], dtype=torch.int64)
    assert_jagged(td.get("rollout_log_probs"), ragged_idx=1, lengths=[5, 2, 7], dtype=torch.float32)
    assert td.get("input_ids").values().shape == (23,)
    for i, s in enumerate(samples):
        assert torch.equal(td.get("responses").unbind()[i], s["responses"])


def test_equal_lengths_are_still_jagged_not_dense():
    td = wire_batch([layout_sample(3, 5, seed=i) for i in range(4)])
    assert_jagged(td.get("responses"), ragged_idx=1, lengths=[5] * 4, dtype=torch.int64)
    assert td.get("responses").values().shape == (20,)


def test_routed_experts_3d_ragged_in_seq_dim():
    td = wire_batch([layout_sample(3, 5, layers=4, topk=2, seed=0), layout_sample(1, 1, layers=4, topk=2, seed=1)])
    col = td.get("routed_experts")
    assert_jagged(col, ragged_idx=1, lengths=[8, 2], dtype=torch.int16)
    assert col.values().shape == (10, 4, 2)
    assert [tuple(t.shape) for t in col.unbind()] == [(8, 4, 2), (2, 4, 2)]


def test_mrope_position_ids_with_ragged_seq_are_ragged_at_dim_2():
    samples = [layout_sample(3, 5, mrope=4, seed=0), layout_sample(4, 2, mrope=4, seed=1)]
    col = wire_batch(samples).get("position_ids")
    assert_jagged(col, ragged_idx=2, lengths=[8, 6], dtype=torch.int64)
    assert col.values().shape == (4, 14)
    for got, s in zip(col.unbind(), samples):
        assert torch.equal(got, s["position_ids"])


def test_mrope_position_ids_with_equal_seq_are_ragged_at_dim_1():
    # No dim varies, so torch (and TransferQueue) treat the 4 rows as the ragged dim.
    col = wire_batch([layout_sample(3, 5, mrope=4, seed=i) for i in range(3)]).get("position_ids")
    assert_jagged(col, ragged_idx=1, lengths=[4, 4, 4], dtype=torch.int64)
    assert col.values().shape == (12, 8)


def test_mixed_3_and_4_row_position_ids():
    ragged_both = [layout_sample(3, 5, mrope=3, seed=0), layout_sample(4, 2, mrope=4, seed=1)]
    col = wire_batch(ragged_both).get("position_ids")
    assert col.is_nested and col.layout == torch.strided and col.dtype == torch.int64
    assert [tuple(t.shape) for t in col.unbind()] == [(3, 8), (4, 6)]

    same_seq = [layout_sample(3, 5, mrope=3, seed=0), layout_sample(4, 4, mrope=4, seed=1)]
    col = wire_batch(same_seq).get("position_ids")
    assert_jagged(col, ragged_idx=1, lengths=[3, 4], dtype=torch.int64)


def test_non_tensor_fields_are_non_tensor_stacks():
    samples = [layout_sample(3, 5, mrope=4, seed=0), layout_sample(4, 2, seed=1)]
    td = wire_batch(samples)
    for name in ("num_turns", "uid", "multi_modal_inputs"):
        assert isinstance(td.get(name), NonTensorStack), name
    assert td.get("num_turns").tolist() == [1, 2]
    assert td.get("uid").tolist() == ["uid-0", "uid-1"]
    mm = td.get("multi_modal_inputs").tolist()
    assert torch.equal(mm[0]["image_grid_thw"], torch.tensor([[1, 2, 2]])) and mm[1] == {}


def test_zero_dim_tensors_stack_densely_with_type_promotion():
    td = wire_batch([{"score": torch.tensor(1)}, {"score": torch.tensor(0.5)}])
    col = td.get("score")
    assert not col.is_nested and col.shape == (2,) and col.dtype == torch.float32


def test_mixed_dtypes_fall_back_to_strided_with_first_dtype():
    td = wire_batch([{"x": torch.tensor([1, 2])}, {"x": torch.tensor([0.5, 0.25, 2.0])}])
    col = td.get("x")
    assert col.layout == torch.strided and col.dtype == torch.int64
    assert [t.tolist() for t in col.unbind()] == [[1, 2], [0, 0, 2]]


def test_mixed_ranks_become_non_tensor_stack_of_tensors():
    td = wire_batch([{"pos": torch.arange(3)}, {"pos": torch.arange(12).reshape(4, 3)}])
    col = td.get("pos")
    assert isinstance(col, NonTensorStack)
    assert [tuple(t.shape) for t in col.tolist()] == [(3,), (4, 3)]


def test_tensor_and_none_mix_becomes_non_tensor_stack():
    col = wire_batch([{"x": torch.ones(2)}, {"x": None}]).get("x")
    assert isinstance(col, NonTensorStack)
    assert col.tolist()[1] is None


def test_empty_response_is_a_zero_length_row():
    col = wire_batch([{"r": torch.zeros(0, dtype=torch.int64)}, {"r": torch.ones(2, dtype=torch.int64)}]).get("r")
    assert_jagged(col, ragged_idx=1, lengths=[0, 2], dtype=torch.int64)


def test_field_missing_from_some_samples_is_dropped():
    td = wire_batch([{"a": torch.ones(2), "b": "x"}, {"a": torch.ones(3)}])
    assert list(td.keys()) == ["a"]


def test_fields_are_ordered_by_name():
    td = wire_batch([{"z": 1, "a": torch.ones(1), "m": "s"}])
    assert list(td.keys()) == ["a", "m", "z"]


def test_no_samples_is_an_error():
    with pytest.raises(ValueError, match="at least one sample"):
        wire_batch([])
    with pytest.raises(ValueError, match="at least one sample"):
        to_tq_fields([])


@pytest.mark.parametrize("where", [0, 1])
def test_a_tensordict_valued_field_is_refused_by_name(where):
    """tensordict's own RuntimeError from NonTensorStack(TensorDict, ...) never leaks out."""
    samples = [{"uid": "a", "extra": 1}, {"uid": "b", "extra": 2}]
    samples[where]["extra"] = TensorDict({"x": torch.ones(2)}, batch_size=[])
    with pytest.raises(ValueError, match=r"fields \['extra'\] hold TensorDicts"):
        wire_batch(samples)
    with pytest.raises(ValueError, match="'extra' holds TensorDicts"):
        to_tq_fields(samples)


def _same(a: TensorDict, b: TensorDict) -> None:
    assert list(a.keys()) == list(b.keys()) and a.batch_size == b.batch_size
    for k in a.keys():
        x, y = a.get(k), b.get(k)
        assert type(x) is type(y)
        if isinstance(x, torch.Tensor):
            assert x.layout == y.layout and x.dtype == y.dtype
            if x.layout == torch.jagged:
                assert x._ragged_idx == y._ragged_idx
                assert torch.equal(x.offsets(), y.offsets()) and torch.equal(x.values(), y.values())
            else:
                assert all(torch.equal(p, q) for p, q in zip(x.unbind(), y.unbind(), strict=True))
        else:
            assert x.tolist() == y.tolist()


def test_to_tq_fields_packs_like_tq_layout():
    samples = [layout_sample(3, 5, mrope=4, seed=0), layout_sample(4, 2, mrope=4, seed=1)]
    for s in samples:
        s["multi_modal_inputs"] = {"n": 1}
    _same(to_tq_fields(samples), wire_batch(samples))


def test_to_tq_fields_refuses_data_tq_would_change():
    with pytest.raises(ValueError, match=r"'b' is missing from samples \[1\]"):
        to_tq_fields([{"a": torch.ones(2), "b": 1}, {"a": torch.ones(3)}])
    with pytest.raises(ValueError, match=r"'x' mixes dtypes \(float32, int64\)"):
        to_tq_fields([{"x": torch.ones(2)}, {"x": torch.ones(3, dtype=torch.int64)}])
    with pytest.raises(ValueError, match=r"'x' mixes tensors with non-tensor values \(samples \[1\]\)"):
        to_tq_fields([{"x": torch.ones(2)}, {"x": None}])
    # None in a non-tensor field is fine: it round-trips as a NonTensorStack element.
    assert to_tq_fields([{"m": {"a": 1}}, {"m": None}]).get("m").tolist() == [{"a": 1}, None]


def test_wire_fields_views_ragged_first_columns_as_strided_nested_tensors_in_place():
    import warnings

    from trajschema.tq.wire import wire_fields

    samples = [layout_sample(3, 5, mrope=4, seed=0), layout_sample(4, 2, mrope=4, seed=1), layout_sample(2, 0, mrope=4)]
    packed = to_tq_fields(samples)
    before = {k: packed.get(k) for k in packed.keys()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's one-time prototype warning stays quiet
        wire = wire_fields(packed)
    assert wire is packed and list(wire.keys()) == list(before)
    assert before["position_ids"]._ragged_idx == 2 and wire.get("position_ids") is before["position_ids"]
    for k, old in before.items():
        new = wire.get(k)
        if isinstance(old, torch.Tensor) and old.layout == torch.jagged and old._ragged_idx == 1:
            assert new.layout == torch.strided and new.is_nested and not new.requires_grad
            assert new.unbind()[0].data_ptr() == old.values().data_ptr()  # the same memory, no copy
            for i, (p, s) in enumerate(zip(new.unbind(), samples, strict=True)):
                assert p.dtype == s[k].dtype and torch.equal(p, s[k]), (k, i)
        elif isinstance(old, torch.Tensor):
            assert new is old  # ragged elsewhere, dense, or strided already: kept
        else:
            assert new.tolist() == old.tolist()
    # What TransferQueue stores is each sample's value, and it packs those again on read.
    rows = [
        {k: (v.unbind()[i] if isinstance(v, torch.Tensor) else v.tolist()[i]) for k, v in wire.items()}
        for i in range(3)
    ]
    _same(wire_batch(rows), to_tq_fields(samples))


def test_wire_fields_keeps_a_jagged_column_it_cannot_view():
    from trajschema.tq.wire import wire_fields

    col = torch.nested.as_nested_tensor([torch.arange(4), torch.arange(3)], layout=torch.jagged)
    narrowed = torch.nested.narrow(
        torch.arange(10).view(2, 5), 1, torch.tensor([0, 1]), torch.tensor([2, 3]), layout=torch.jagged
    )
    td = TensorDict({"a": col, "n": narrowed}, batch_size=[2])
    wire_fields(td)
    assert td.get("a").layout == torch.strided and td.get("n").layout == torch.jagged  # lengths: not contiguous
