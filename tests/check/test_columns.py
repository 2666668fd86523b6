"""The batch adapter: non-tensor columns read as tensordict's public API reads them, on every version.

And torch's one-time note on ``is_fx_tracing`` kept off stderr where trajschema builds jagged tensors.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import NonTensorData, NonTensorStack, TensorDict

from trajschema.check.columns import (
    batch_view,
    column_shapes,
    index_rows,
    nontensor_column,
    nontensor_values,
    without_fx_note,
)
from trajschema.tq.wire import wire_batch

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
        col = wire_batch([{"x": v} for v in values]).get("x")
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
    td = wire_batch(samples)
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


# -- torch's note on is_fx_tracing: kept off stderr where trajschema builds jagged tensors --------------

REPO = Path(__file__).resolve().parents[2]
NOTE = "is_fx_tracing will return true for both fx.symbolic_trace and torch.export"


def _note_record(message: str) -> logging.LogRecord:
    return logging.LogRecord("torch.fx._symbolic_trace", logging.WARNING, __file__, 1, message, None, None)


def test_without_fx_note_drops_only_the_note_and_only_inside_the_block():
    logger = logging.getLogger("torch.fx._symbolic_trace")
    before = list(logger.filters)
    with without_fx_note():
        assert not logger.filter(_note_record(NOTE + ". Please use ..."))
        assert logger.filter(_note_record("another warning of the same logger"))
        with without_fx_note():  # a nested block leaves the outer one's filter in place
            pass
        assert not logger.filter(_note_record(NOTE))
    assert logger.filters == before and logger.filter(_note_record(NOTE))


def test_without_fx_note_removes_its_filter_when_the_block_raises():
    logger = logging.getLogger("torch.fx._symbolic_trace")
    before = list(logger.filters)
    with pytest.raises(RuntimeError, match="boom"), without_fx_note():
        raise RuntimeError("boom")
    assert logger.filters == before


def _first_dense_example() -> str:
    """The first Python block of docs/dense.md: a user's first dense check (torch logs its note there)."""
    page = (REPO / "docs" / "dense.md").read_text()
    return re.search(r"^```python\n(.*?)^```", page, flags=re.MULTILINE | re.DOTALL)[1]


#: Public calls that build a jagged tensor from values and offsets on their first use in a process.
FIRST_JAGGED = {
    "dense check (dense.extract)": _first_dense_example(),
    "exclude_padding (index_rows)": (
        "import trajschema as ts\n"
        "from trajschema.testing import tq_batch, verl_sample\n"
        "schema = ts.load_schema('text')\n"
        "batch = tq_batch([verl_sample(schema, 5, 3, uid='a'), verl_sample(schema, 2, 6, uid='b', seed=1)])\n"
        "metrics = ts.exclude_padding(lambda batch, tags: {'samples': len(tags)})\n"
        "assert metrics(batch, [{'is_padding': False}, {'is_padding': True}]) == {'samples': 1}\n"
    ),
}
#: Run first, it keeps the hush from working: the meta-test's proof that torch still logs the note.
UNHUSHED = "import logging\nlogging.getLogger('torch.fx._symbolic_trace').addFilter = lambda f: None\n"


def _stderr_of(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "TORCH_LOGS")}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.parametrize("code", list(FIRST_JAGGED.values()), ids=list(FIRST_JAGGED))
def test_the_first_jagged_tensor_of_a_process_prints_nothing(code):
    assert _stderr_of(code) == ""


def test_without_the_hush_torch_prints_its_note():
    """The check above can fail: torch 2.13 does log the note (if it stops, `without_fx_note` can go)."""
    stderr = _stderr_of(UNHUSHED + FIRST_JAGGED["dense check (dense.extract)"])
    assert NOTE in stderr and re.search(r"^W\d{4} ", stderr, flags=re.MULTILINE), stderr
