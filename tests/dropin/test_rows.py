"""`trajschema.dropin.rows`: the real rows of a padded batch, zeros on the padding rows, the padding metrics."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from trajschema.dropin import PADDING_METRICS, padding_metrics, real_and_padding, zeros_on_padding


@given(st.lists(st.booleans(), min_size=1, max_size=40).filter(lambda f: not all(f)))
def test_real_and_padding_partitions_the_rows_in_order(flags):
    real, pad = real_and_padding(flags)
    assert sorted(real + pad) == list(range(len(flags)))
    assert [flags[i] for i in real] == [False] * len(real) and [flags[i] for i in pad] == [True] * len(pad)
    assert real == sorted(real) and pad == sorted(pad)


@pytest.mark.parametrize(("flags", "match"), [([], "no rows"), ([True] * 3, r"no real row \(3 rows, all padding\)")])
def test_a_batch_with_nothing_real_is_refused(flags, match):
    with pytest.raises(ValueError, match=match):
        real_and_padding(flags)


@given(st.lists(st.booleans(), min_size=1, max_size=30), st.sampled_from([torch.float32, torch.int64, torch.bool]))
def test_zeros_on_padding_puts_each_value_on_its_real_row_and_exact_zeros_elsewhere(flags, dtype):
    real = [i for i, p in enumerate(flags) if not p]
    values = (torch.arange(len(real) * 3).reshape(len(real), 3) + 1).to(dtype)
    full = zeros_on_padding(values, real, len(flags))
    assert full.shape == (len(flags), 3) and full.dtype == dtype
    for i, p in enumerate(flags):
        want = torch.zeros(3, dtype=dtype) if p else values[real.index(i)]
        assert torch.equal(full[i], want)


def test_padding_metrics_are_the_three_names_with_share_and_tokens():
    assert padding_metrics([False, True, True, False], 12.0) == {
        "padding/samples": 2.0,
        "padding/tokens": 12.0,
        "padding/share": 0.5,
    }
    assert tuple(padding_metrics([False], 0.0)) == PADDING_METRICS
    assert padding_metrics([False, False], math.nan)["padding/tokens"] == 0.0  # no padding row: nothing unknown
    assert math.isnan(padding_metrics([False, True], math.nan)["padding/tokens"])
    assert padding_metrics([], 0.0)["padding/share"] == 0.0
