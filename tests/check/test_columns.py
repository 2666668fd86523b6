"""The batch adapter: non-tensor columns read as tensordict's public API reads them, on every version."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import NonTensorData, NonTensorStack, TensorDict

from trajschema.check.columns import batch_view, column_shapes, index_rows, nontensor_column, nontensor_values
from trajschema.tq.layout import tq_layout

VALUES = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=5),
    st.booleans(),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.lists(st.integers(), max_size=3),
)


@settings(deadline=None)
@given(values=st.lists(VALUES, min_size=1, max_size=12), how=st.sampled_from(["from_list", "stack", "tq"]))
def test_fast_nontensor_reads_equal_tolist(values, how):
    if how == "from_list" and any(isinstance(v, list) for v in values):
        how = "stack"  # from_list reads a list value as a nested stack: tensordict's own rule
    if how == "from_list":
        col = NonTensorStack.from_list(values)
    elif how == "stack":
        col = NonTensorStack(*[NonTensorData(data=v) for v in values])
    else:
        col = tq_layout([{"x": v} for v in values]).get("x")
    expected = col.tolist() if isinstance(col, NonTensorStack) else [col.data] * len(values)
    assert nontensor_values(col, len(values)) == expected


def test_a_shared_one_value_column_reads_as_one_value_per_row():
    one = NonTensorData(data="q0")
    col = NonTensorStack(*[one] * 3)
    assert nontensor_values(col, 3) == ["q0", "q0", "q0"] == col.tolist()


def test_shared_memory_columns_fall_back_to_the_public_reader():
    td = TensorDict({"n": torch.zeros(3)}, batch_size=[3])
    td["s"] = NonTensorStack.from_list(["ab", "cd", "ef"])
    td.share_memory_()
    col = td.get("s")
    assert nontensor_values(col, 3) == col.tolist() == ["ab", "cd", "ef"]


def test_nontensor_data_and_list_columns():
    assert nontensor_values(NonTensorData(data=7, batch_size=[3]), 3) == [7, 7, 7]
    assert nontensor_values([1, 2], 2) == [1, 2]
    assert nontensor_values(torch.zeros(2), 2) is None


def test_an_empty_nontensor_column_fits_an_empty_tensordict_on_every_version():
    td = TensorDict({"x": torch.zeros(0, 2)}, batch_size=[0])
    td["uid"] = nontensor_column([])
    assert nontensor_values(td.get("uid"), 0) == []
    assert batch_view(td).n == 0


def test_index_rows_on_a_jagged_and_nontensor_batch():
    samples = [{"a": torch.arange(i + 1), "uid": f"u{i}"} for i in range(4)]
    td = tq_layout(samples)
    picked = index_rows(td, torch.tensor([1, 3]))
    assert nontensor_values(picked.get("uid"), 2) == ["u1", "u3"]
    assert column_shapes(picked.get("a"), 2).tolist() == [[2], [4]]


@pytest.mark.parametrize("layout", ["jagged", "strided", "dense"])
def test_column_shapes_for_every_layout(layout):
    rows = [torch.zeros(3, 2), torch.zeros(5, 2)] if layout != "dense" else [torch.zeros(3, 2)] * 2
    if layout == "dense":
        col = torch.stack(rows)
    else:
        col = torch.nested.as_nested_tensor(rows, layout=torch.jagged if layout == "jagged" else torch.strided)
    want = [list(r.shape) for r in rows]
    assert column_shapes(col, 2).tolist() == want
