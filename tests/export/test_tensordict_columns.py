"""trajschema.export.columns: a schema as the keys of a TensorDict, and what only trajschema checks."""

from __future__ import annotations

import pytest

import trajschema as ts
from trajschema.core import Violation
from trajschema.export import tensordict_columns
from trajschema.export.columns import GAP_REASONS, needs, python_name


def _v(code: str, field: str, expected: str = "", actual: str = "") -> Violation:
    return Violation(None, field, code, expected, actual, "")


def test_a_tensordict_of_samples_has_one_column_per_field():
    cols = tensordict_columns(ts.load_schema("vlm_mrope").plan)
    by_key = {c.key: c for c in cols.columns}
    assert list(by_key) == list(ts.load_schema("vlm_mrope").fields)
    assert (by_key["position_ids"].shape, by_key["position_ids"].axes) == ((None, 4, None), ("B", "4", "seq"))
    assert (by_key["uid"].kind, by_key["uid"].is_tensor) == ("str", False)
    assert [c.key for c in cols.pandera_keys()] == [
        "prompts", "responses", "input_ids", "position_ids", "response_mask", "loss_mask", "num_turns",
    ]  # fmt: skip


def test_the_gaps_of_text():
    gaps = tensordict_columns(ts.load_schema("text").plan).gaps
    assert list(gaps) == [k for k in GAP_REASONS if k in gaps]
    assert gaps["shared dims"] == (
        "response in responses, response_mask, loss_mask, rollout_log_probs, rm_scores",
        "seq in input_ids, position_ids, attention_mask",
    )
    assert gaps["derived dims"] == ("seq = prompt + response",)
    assert gaps["dim bounds"] == ("prompt >= 1",)
    assert gaps["optional fields"] == ("attention_mask", "rollout_log_probs", "rm_scores", "session_id")
    assert gaps["non-tensor fields"] == ("uid (str)", "multi_modal_inputs (mapping)")
    assert "values" not in gaps and "layout" not in gaps


def test_a_layout_holds_its_own_keys_and_drops_the_value_checks():
    schema = ts.load_schema("text")
    cols = tensordict_columns(schema.plan, schema._bound("skyrl"))
    by_field = {c.field: c for c in cols.columns}
    assert by_field["input_ids"].key == "sequences" and by_field["input_ids"].axes == ("B", "seq padded")
    assert by_field["loss_mask"].dtype == "float32"  # the layout's dtype: SkyRL builds it float32
    assert "prompts" not in by_field and "uid" not in by_field  # a slice_of and a metadata key
    assert all(not c.checks for c in cols.columns)
    assert cols.gaps["layout"] == ("skyrl",) and "response_mask" in cols.gaps["values"]


@pytest.mark.parametrize(
    ("violation", "pandera", "typed"),
    [
        (_v("missing", "prompts"), True, True),
        (_v("missing", "uid"), False, True),
        (_v("kind", "prompts"), True, False),
        (_v("kind", "num_turns"), False, False),
        (_v("dtype", "prompts"), True, False),
        (_v("rank", "input_ids"), True, False),
        (_v("value", "response_mask", "in {0, 1}"), True, False),
        (_v("value", "num_turns", ">= 0"), True, False),
        (_v("value", "num_turns", "<= 3"), False, False),
        (_v("dtype", "attention_mask"), False, False),
        (_v("dim_mismatch", "input_ids"), False, False),
        (_v("dim_range", "prompts"), False, False),
        (_v("tag", "is_padding"), False, False),
    ],
    ids=lambda x: x if isinstance(x, bool) else f"{x.code} {x.field} {x.expected}".strip(),
)
def test_what_each_export_expresses(violation, pandera, typed):
    cols = tensordict_columns(ts.load_schema("text").plan)
    assert (cols.expresses(violation, "pandera"), cols.expresses(violation, "typed-tensordict")) == (pandera, typed)


def test_a_shape_is_expressed_when_an_axis_pandera_sizes_is_off():
    cols = tensordict_columns(ts.load_schema("vlm_mrope").plan)
    assert cols.expresses(_v("shape", "position_ids", "(rope_rows=4, seq=5)", "(3, 5)"), "pandera")
    assert not cols.expresses(_v("shape", "position_ids", "(rope_rows=4, seq=5)", "(4, 5)"), "pandera")
    assert not cols.expresses(_v("shape", "position_ids", "", "a list"), "pandera")


def test_an_unknown_export_is_named():
    cols = tensordict_columns(ts.load_schema("text").plan)
    with pytest.raises(ValueError, match="must be one of pandera, typed-tensordict, found 'jsonschema'"):
        cols.expresses(_v("missing", "prompts"), "jsonschema")


@pytest.mark.parametrize(
    ("name", "python"), [("text", "text"), ("vlm_mrope-2", "vlm_mrope_2"), ("9x", "schema_9x"), ("--", "schema")]
)
def test_python_names(name, python):
    assert python_name(name) == python


def test_needs_names_the_package_and_how_to_install_it():
    assert needs("torch", (2, 0), "this") == __import__("torch").__version__
    with pytest.raises(ImportError, match=r"this needs no_such_pkg>=1\.2, which is not installed: pip install"):
        needs("no_such_pkg", (1, 2), "this")
    with pytest.raises(ImportError, match=r"this needs torch>=99\.0; this is torch 2\."):
        needs("torch", (99, 0), "this")
