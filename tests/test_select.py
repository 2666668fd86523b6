"""Choosing a schema from a sample."""

from __future__ import annotations

import pytest
import torch

import trajschema as ts
from trajschema.testing import verl_sample


@pytest.mark.parametrize("name", ts.schema_names())
def test_each_packaged_schemas_own_sample_picks_it(name):
    schema = ts.load_schema(name)
    kw = {k: 2 for k in ("layers", "topk", "teacher_topk") if k in schema.dims}
    assert ts.schema_for_sample(verl_sample(schema, 6, 3, **kw)).name == name


def test_the_schema_declaring_more_fields_wins_so_padding_copies_nothing_stale():
    moe = verl_sample(ts.load_schema("vlm_mrope_moe"), 100, 11, layers=48, topk=8)
    chosen = ts.schema_for_sample(moe)
    assert chosen.name == "vlm_mrope_moe"
    chosen.padding(2, eos_token_id=2, like=moe)  # vlm_mrope would refuse: routed_experts undeclared


def test_no_fitting_schema_names_each_candidates_first_problem():
    with pytest.raises(ts.SchemaNotFoundError, match=r"text: .*missing"):
        ts.schema_for_sample({"input_ids": torch.zeros(3, dtype=torch.int64)}, candidates=["text"])
    with pytest.raises(TypeError):
        ts.schema_for_sample([1, 2])
