"""Checking dense batches: clean batches of both layouts pass, and each defect of the catalogue
is reported with its (sample, batch key, code)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import trajschema as ts
from tests.dense.dense_builders import EXPERTS, PAD, TensorBatch, skyrl_batch, verl_batch
from trajschema.dense import check_dense

LENGTHS = [(3, 2), (1, 4), (5, 0), (2, 1)]
SCHEMAS = ("text", "vlm_mrope", "moe_routed", "distill", "vlm_mrope_moe")


def found(schema: str, batch: Any, layout: str, **kw: Any) -> set[tuple[int | None, str, str]]:
    r = check_dense(ts.load_schema(schema).plan, batch, ts.load_layout(layout), **kw)
    for v in r.violations:
        pickle.loads(pickle.dumps(v))  # violations stay light
    return {(v.sample, v.field, v.code) for v in r.violations}


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("layout", ["skyrl", "verl_dataproto"])
@pytest.mark.parametrize("depth", ["shapes", "values"])
def test_clean_batches_of_every_schema_pass(schema: str, layout: str, depth: str) -> None:
    build = skyrl_batch if layout == "skyrl" else verl_batch
    r = check_dense(
        ts.load_schema(schema).plan, build(schema, LENGTHS), ts.load_layout(layout), depth=depth, extract=True
    )
    assert r.violations == []
    assert r.lengths["prompt"].tolist() == [p for p, _ in LENGTHS]
    assert r.lengths["response"].tolist() == [r_ for _, r_ in LENGTHS]
    assert r.jagged is not None and r.jagged["responses"][1].tolist() == list(range(102, 106))


def test_a_verl_dataproto_and_a_tensordict_read_like_a_dict() -> None:
    proto = verl_batch("vlm_mrope_moe", LENGTHS, as_dict=False)
    assert found("vlm_mrope_moe", proto, "verl_dataproto") == set()
    tensors_only = verl_batch("text", LENGTHS, as_dict=False).batch  # a TensorDict without the non-tensor fields
    assert found("text", tensors_only, "verl_dataproto") == {
        (None, "__num_turns__", "missing"),
        (None, "uid", "missing"),
    }


def _skyrl(**change: Any) -> TensorBatch:
    b = skyrl_batch("moe_routed", LENGTHS)
    for k, fn in change.items():
        b[k] = fn(b[k].clone())
    return b


def _verl(**change: Any) -> dict:
    b = verl_batch("vlm_mrope_moe", LENGTHS)
    for k, fn in change.items():
        b[k] = fn(b[k].clone())
    return b


def _set(index: Any, value: Any) -> Callable[[torch.Tensor], torch.Tensor]:
    def change(x: torch.Tensor) -> torch.Tensor:
        x[index] = value
        return x

    return change


def _shift_prompt(x: torch.Tensor, row: int = 0) -> torch.Tensor:
    x[row] = torch.roll(x[row], -1)  # tokens moved one to the left, the mask not
    return x


def _padding_row(b: TensorBatch) -> TensorBatch:
    b.metadata["is_padding"] = [False, False, False, True]
    return b


SKYRL_DEFECTS = {
    "shifted prompt": (_skyrl(sequences=lambda x: _shift_prompt(x, 3)), {(3, "sequences", "padded")}),
    "non-contiguous mask": (_skyrl(attention_mask=_set((0, 3), 0)), {(0, "attention_mask", "mask")}),
    "mask value 2": (_skyrl(attention_mask=_set((1, 4), 2)), {(1, "attention_mask", "mask")}),
    "response mask on the wrong side": (
        _skyrl(response_mask=_set(0, torch.tensor([1, 1, 0, 0]))),
        {(0, "response_mask", "mask")},
    ),
    "float mask": (_skyrl(attention_mask=lambda x: x.float()), {(None, "attention_mask", "mask")}),
    "non-pad value in padding": (_skyrl(rewards=_set((2, 0), 3.0)), {(2, "rewards", "padded")}),
    "loss mask outside the response": (_skyrl(loss_mask=_set((3, 0), 1.0)), {(3, "loss_mask", "mask")}),
    "routes shape": (_skyrl(rollout_expert_indices=lambda x: x[:, :-1]), {(None, "rollout_expert_indices", "shape")}),
    "padded length not the max": (
        _skyrl(
            sequences=lambda x: torch.cat([torch.full((4, 1), PAD), x], 1),
            attention_mask=lambda x: torch.cat([torch.zeros(4, 1, dtype=x.dtype), x], 1),
            rollout_expert_indices=lambda x: torch.cat([torch.zeros_like(x[:, :1]), x], 1),
        ),
        {(None, "attention_mask", "length")},
    ),
    "padding row with a loss mask": (_padding_row(_skyrl()), {(3, "loss_mask", "padding")}),
}

VERL_DEFECTS = {
    "shifted prompt": (
        _verl(prompts=_shift_prompt, input_ids=_shift_prompt),
        {(0, "prompts", "padded"), (0, "input_ids", "padded")},
    ),
    "response mask on the wrong side": (
        _verl(response_mask=lambda x: x.flip(1)),
        {(i, "response_mask", "mask") for i in (0, 1, 3)},
    ),
    "non-contiguous response": (_verl(attention_mask=_set((1, 8), 0)), {(1, "attention_mask", "mask")}),
    "mrope with 3 rows": (_verl(position_ids=lambda x: x[:, :3]), {(None, "position_ids", "shape")}),
    "mrope rows last": (_verl(position_ids=lambda x: x.transpose(1, 2)), {(None, "position_ids", "shape")}),
    "non-pad value in padding": (_verl(rm_scores=_set((2, 3), 1.0)), {(2, "rm_scores", "padded")}),
    "routes wrong dtype": (_verl(routed_experts=lambda x: x.float()), {(None, "routed_experts", "dtype")}),
}


@pytest.mark.parametrize("case", SKYRL_DEFECTS, ids=str)
def test_each_skyrl_defect_is_reported_where_it_is(case: str) -> None:
    batch, want = SKYRL_DEFECTS[case]
    assert found("moe_routed", batch, "skyrl") == want


@pytest.mark.parametrize("case", VERL_DEFECTS, ids=str)
def test_each_verl_defect_is_reported_where_it_is(case: str) -> None:
    batch, want = VERL_DEFECTS[case]
    assert found("vlm_mrope_moe", batch, "verl_dataproto") == want


def test_a_response_mask_with_more_ones_than_the_attention_mask_is_a_mask_violation() -> None:
    b = skyrl_batch("text", [(1, 1), (1, 4)])
    b["response_mask"][0] = 1  # 4 response tokens in a 2-token sequence
    got = check_dense(ts.load_schema("text").plan, b, ts.load_layout("skyrl")).violations
    assert [(v.sample, v.field, v.code) for v in got] == [(0, "response_mask", "mask")]
    assert "4 ones, more than the 2 real positions attention_mask gives" in got[0].message


def test_route_ids_beyond_the_experts_are_reported_at_depth_values_only() -> None:
    b = _skyrl(rollout_expert_indices=_set((1, 4, 0, 0), EXPERTS + 3))
    schema = ts.load_schema("moe_routed")
    got = check_dense(schema.plan, b, ts.load_layout("skyrl"), dims={"experts": EXPERTS}).violations
    assert {(v.sample, v.field, v.code) for v in got} == {(1, "rollout_expert_indices", "value")}
    assert "schema field routed_experts" in got[0].message
    assert (
        check_dense(schema.plan, b, ts.load_layout("skyrl"), dims={"experts": EXPERTS}, depth="shapes").violations == []
    )


def test_messages_say_where_what_and_what_was_found() -> None:
    msgs = {
        case: sorted(
            str(v) for v in check_dense(ts.load_schema("moe_routed").plan, b, ts.load_layout("skyrl")).violations
        )
        for case, (b, _) in SKYRL_DEFECTS.items()
    }
    assert msgs["non-contiguous mask"] == [
        "sample 0, attention_mask: attention_mask row 0: ones are not one contiguous run (2 runs) in the seq block"
    ]
    assert msgs["mask value 2"][0].endswith("values other than 0 and 1 (found 2) in the seq block")
    assert "padding on the right of a block the layout pads on the left" in msgs["response mask on the wrong side"][0]
    assert msgs["padded length not the max"] == [
        "attention_mask: padded to 6 along 'seq', but the longest row has 5: the layout pads to the batch maximum"
    ]
    assert (
        "rewards row 2: 3.0 at position 0 of the padded region along 'response'" in msgs["non-pad value in padding"][0]
    )


@pytest.mark.parametrize("layout", ["skyrl", "verl_dataproto"])
def test_empty_and_single_row_batches(layout: str) -> None:
    build = skyrl_batch if layout == "skyrl" else verl_batch
    for lengths in ([], [(1, 0)], [(4, 3)]):
        r = check_dense(
            ts.load_schema("moe_routed").plan, build("moe_routed", lengths), ts.load_layout(layout), extract=True
        )
        assert r.violations == [] and r.jagged is not None and r.jagged.batch_size[0] == len(lengths)


def test_rows_with_no_response() -> None:
    lengths = [(2, 0), (3, 0)]
    for layout, build in (("skyrl", skyrl_batch), ("verl_dataproto", verl_batch)):
        r = check_dense(ts.load_schema("text").plan, build("text", lengths), ts.load_layout(layout))
        assert r.violations == [] and r.lengths["response"].tolist() == [0, 0]


def test_a_meta_batch_is_reported_not_passed() -> None:
    b = skyrl_batch("text", LENGTHS)
    meta = TensorBatch({k: v.to("meta") for k, v in b.items()})
    meta.metadata = b.metadata
    got = check_dense(ts.load_schema("text").plan, meta, ts.load_layout("skyrl")).violations
    assert [(v.sample, v.field, v.code) for v in got] == [(None, "attention_mask", "mask")]
    assert "meta tensor" in got[0].message and "nothing per row was checked" in got[0].message
    b["rewards"] = b["rewards"].to("meta")
    got = check_dense(ts.load_schema("text").plan, b, ts.load_layout("skyrl")).violations
    assert [(v.field, v.code) for v in got] == [("rewards", "batch")]


def test_batch_level_misuse() -> None:
    schema, layout = ts.load_schema("text"), ts.load_layout("skyrl")
    with pytest.raises(TypeError, match="a dense batch must be a mapping"):
        check_dense(schema.plan, [1, 2], layout)
    b = skyrl_batch("text", LENGTHS)
    b["rewards"] = b["rewards"][:3]
    assert {(v.sample, v.field, v.code) for v in check_dense(schema.plan, b, layout).violations} == {
        (None, "rewards", "batch")
    }
    b = skyrl_batch("text", LENGTHS)
    del b["attention_mask"]
    got = check_dense(schema.plan, b, layout).violations
    assert [(v.field, v.code) for v in got] == [("attention_mask", "mask")]


def test_validate_batch_with_a_layout_raises_every_violation() -> None:
    batch, want = SKYRL_DEFECTS["mask value 2"]
    with pytest.raises(ts.SchemaError) as err:
        ts.load_schema("moe_routed").validate_batch(batch, layout="skyrl")
    assert {(v.sample, v.field, v.code) for v in err.value.violations} == want


# -- review findings (issue 17) ---------------------------------------------------------------


def test_a_zero_d_numpy_column_is_read_not_crashed_on() -> None:
    """Was: ``TypeError: iteration over a 0-d array`` from inside the view."""
    b = verl_batch("text", LENGTHS)
    b["uid"] = np.array("q", dtype=object)
    check_dense(ts.load_schema("text").plan, b, ts.load_layout("verl_dataproto"))  # no exception
    b["uid"] = np.array("q")
    check_dense(ts.load_schema("text").plan, b, ts.load_layout("verl_dataproto"))


def _short_uids() -> Any:
    b = skyrl_batch("text", LENGTHS)
    b.metadata = {"uids": ["a", "b"]}
    return b


def _scalar_uid() -> Any:
    b = verl_batch("text", LENGTHS)
    b["uid"] = "q"
    return b


def _none_uid() -> Any:
    b = verl_batch("text", LENGTHS)
    b["uid"] = None
    return b


@pytest.mark.parametrize("build", [_short_uids, _scalar_uid, _none_uid], ids=["short", "scalar", "none"])
def test_a_per_sample_value_that_is_not_one_per_row_is_a_violation(build: Callable[[], Any]) -> None:
    b = build()
    layout = "skyrl" if isinstance(b, TensorBatch) else "verl_dataproto"
    got = found("text", b, layout)
    assert {code for _, _, code in got} & {"batch", "missing"}, got


def test_a_nan_in_a_cast_field_is_reported_once_with_the_value_the_batch_holds() -> None:
    b = skyrl_batch("text", LENGTHS)
    b["loss_mask"][1, 0] = float("nan")
    got = check_dense(ts.load_schema("text").plan, b, ts.load_layout("skyrl")).violations
    assert [(v.sample, v.code) for v in got] == [(1, "value")] and "nan" in got[0].message


# -- issue 29: a row with a broken mask reports the mask only -------------------------------------

# Every row has a prompt of 3+ tokens (a hole inside it) and a response of 2+ (one to cut short).
BROKEN_LENGTHS = [(3, 2), (4, 3), (5, 2), (3, 3)]
CLEAN_ROW = 2  # the row that keeps a defect of its own unless it is broken too
RowBreak = Callable[[dict, int, int, int], str]


def _hole_in_prompt(b: dict, row: int, p: int, r: int) -> str:
    b["attention_mask"][row, b["prompts"].shape[1] - 2] = 0
    return "attention_mask"


def _stray_one_in_prompt_padding(b: dict, row: int, p: int, r: int) -> str:
    b["attention_mask"][row, 0] = 1
    return "attention_mask"


def _two_in_attention_mask(b: dict, row: int, p: int, r: int) -> str:
    b["attention_mask"][row, b["prompts"].shape[1] - 1] = 2
    return "attention_mask"


def _attention_ends_before_the_response(b: dict, row: int, p: int, r: int) -> str:
    b["attention_mask"][row, b["prompts"].shape[1] + r - 1] = 0  # one run still: the response mask disagrees
    return "response_mask"


def _response_mask_beyond_the_response(b: dict, row: int, p: int, r: int) -> str:
    b["response_mask"][row, r] = 1
    return "response_mask"


def _sky_hole(b: dict, row: int, p: int, r: int) -> str:
    b["attention_mask"][row, -2] = 0
    return "attention_mask"


def _sky_two(b: dict, row: int, p: int, r: int) -> str:
    b["attention_mask"][row, -1] = 2
    return "attention_mask"


def _sky_response_mask_two(b: dict, row: int, p: int, r: int) -> str:
    b["response_mask"][row, -1] = 2
    return "response_mask"


def _sky_response_starts_late(b: dict, row: int, p: int, r: int) -> str:
    b["response_mask"][row, b["response_mask"].shape[1] - r] = 0  # one run still: the loss mask disagrees
    return "loss_mask"


BREAKS: dict[str, dict[str, RowBreak]] = {
    "verl_dataproto": {
        "hole in the prompt": _hole_in_prompt,
        "stray one in the prompt padding": _stray_one_in_prompt_padding,
        "value 2": _two_in_attention_mask,
        "attention mask ends before the response": _attention_ends_before_the_response,
        "response mask beyond the response": _response_mask_beyond_the_response,
    },
    "skyrl": {
        "hole in the sequence": _sky_hole,
        "value 2": _sky_two,
        "response mask value 2": _sky_response_mask_two,
        "response mask starts late": _sky_response_starts_late,
    },
}
BREAK_CASES = [(layout, case) for layout, cases in BREAKS.items() for case in cases]


def _with_clean_row_defect(b: dict, layout: str) -> tuple[str, str]:
    """A padded-region defect on `CLEAN_ROW`: reported unless that row's mask is broken too."""
    if layout == "skyrl":
        b["rewards"][CLEAN_ROW, 0] = 3.0
        return "rewards", "padded"
    b["rm_scores"][CLEAN_ROW, BROKEN_LENGTHS[CLEAN_ROW][1]] = 1.0
    return "rm_scores", "padded"


@pytest.mark.parametrize("schema", ts.schema_names())
@pytest.mark.parametrize(("layout", "case"), BREAK_CASES, ids=[f"{lay}-{c}" for lay, c in BREAK_CASES])
@pytest.mark.parametrize("rows", [[0], [3], [0, 1, 2, 3]], ids=["first", "last", "every"])
def test_a_row_with_a_broken_mask_reports_the_mask_only(schema: str, layout: str, case: str, rows: list[int]) -> None:
    b = (skyrl_batch if layout == "skyrl" else verl_batch)(schema, BROKEN_LENGTHS)
    key, code = _with_clean_row_defect(b, layout)
    want = {(CLEAN_ROW, key, code)} if CLEAN_ROW not in rows else set()
    for row in rows:
        want.add((row, BREAKS[layout][case](b, row, *BROKEN_LENGTHS[row]), "mask"))
    for depth in ("shapes", "values"):
        r = check_dense(ts.load_schema(schema).plan, b, ts.load_layout(layout), depth=depth, extract=True)
        assert {(v.sample, v.field, v.code) for v in r.violations} == want, depth
        assert not set(r.bindings) & set(rows)
        assert all(int(length[row]) == 0 for length in r.lengths.values() for row in rows)  # unknown: none


@pytest.mark.parametrize("layout", ["skyrl", "verl_dataproto"])
def test_a_padding_row_with_a_broken_mask_reports_the_mask_only(layout: str) -> None:
    b = (skyrl_batch if layout == "skyrl" else verl_batch)("text", BROKEN_LENGTHS)
    flags = [False, False, False, True]  # row 3 keeps its loss mask of ones: a `padding` violation
    tags = [{"is_padding": f} for f in flags] if layout == "verl_dataproto" else None
    if layout == "skyrl":
        b.metadata["is_padding"] = flags
    plan, lay = ts.load_schema("text").plan, ts.load_layout(layout)
    assert {v.code for v in check_dense(plan, b, lay, tags=tags).violations} == {"padding"}
    key = BREAKS[layout]["value 2"](b, 3, *BROKEN_LENGTHS[3])
    assert [(v.sample, v.field, v.code) for v in check_dense(plan, b, lay, tags=tags).violations] == [(3, key, "mask")]


def test_a_broken_longest_row_leaves_the_padded_length_unjudged() -> None:
    """SkyRL pads to the longest row; a row whose mask is broken has no length to compare."""
    for rows in ([1], [1, 3]):  # rows 1 and 3 hold the longest response
        b = skyrl_batch("text", BROKEN_LENGTHS)
        for row in rows:
            b["response_mask"][row, 1] = 0  # a hole
        got = found("text", b, "skyrl")
        assert got == {(row, "response_mask", "mask") for row in rows}


def test_a_broken_row_does_not_choose_the_pad_token_of_the_others() -> None:
    """Without a pinned pad token the most common first padded value is the pad: a broken row
    (all of it unknown) is left out of that vote."""
    b = skyrl_batch("text", [(4, 0), (4, 0), (1, 1)])
    b["sequences"][:2, 0] = 7
    b["attention_mask"][:2, 1] = 0  # a hole in each full row: their first value, 7, is a real token
    assert found("text", b, "skyrl") == {(0, "attention_mask", "mask"), (1, "attention_mask", "mask")}


@given(layout=st.sampled_from(["skyrl", "verl_dataproto"]), data=st.data())
def test_any_one_mask_defect_leaves_its_rows_only_mask_violations(layout: str, data: st.DataObject) -> None:
    lengths = data.draw(st.lists(st.tuples(st.integers(1, 5), st.integers(0, 4)), min_size=1, max_size=5))
    b = (skyrl_batch if layout == "skyrl" else verl_batch)("text", lengths)
    masks = ["attention_mask", "response_mask"] + (["loss_mask"] if layout == "skyrl" else [])
    key = data.draw(st.sampled_from([k for k in masks if b[k].numel()]))
    for _ in range(data.draw(st.integers(1, 3))):
        row, col = data.draw(st.integers(0, b[key].shape[0] - 1)), data.draw(st.integers(0, b[key].shape[1] - 1))
        b[key][row, col] = data.draw(st.sampled_from([0, 1, 2, -1]))
    got = found("text", b, layout)
    broken = {s for s, _, c in got if c == "mask"}
    assert all(c == "mask" for s, _, c in got if s in broken), got
    assert not broken or all(c != "length" for s, _, c in got if s is None), got


@pytest.mark.parametrize("layout", ["skyrl", "verl_dataproto"])
def test_a_meta_mask_is_a_violation_in_every_layout(layout: str) -> None:
    b = (skyrl_batch if layout == "skyrl" else verl_batch)("vlm_mrope", BROKEN_LENGTHS)
    plan, lay = ts.load_schema("vlm_mrope").plan, ts.load_layout(layout)
    meta = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in b.items()}
    if layout == "skyrl":
        meta = TensorBatch(meta)
        meta.metadata = b.metadata
    assert [(v.field, v.code) for v in check_dense(plan, meta, lay).violations] == [("attention_mask", "mask")]
    b["response_mask"] = b["response_mask"].to("meta")  # one column elsewhere: the batch is on two devices
    assert [(v.field, v.code) for v in check_dense(plan, b, lay).violations] == [("response_mask", "batch")]


# -- issue 29: a field derived from another is not missing when its source is malformed ----------


def _tolist(x: torch.Tensor) -> Any:
    return x.tolist()


def _rows(x: torch.Tensor) -> Any:
    return list(x.unbind(0))


_ABSENT = object()


def _absent(x: torch.Tensor) -> Any:
    return _ABSENT


MALFORMED = {
    "bool": (lambda x: x.bool(), "dtype"),
    "float": (lambda x: x.float(), "dtype"),
    "list of lists": (_tolist, "shape"),
    "list of tensors": (_rows, "shape"),
    "one column short": (lambda x: x[:, :-1], "shape"),
    "nested": (lambda x: torch.nested.nested_tensor(list(x)), "kind"),
    "sparse": (lambda x: x.to_sparse(), "kind"),
    "None": (lambda x: None, "missing"),
    "absent": (_absent, "missing"),
}
SOURCES = {"verl_dataproto": "response_mask", "skyrl": "sequences"}  # loss_mask same_as; prompts, responses slices
# skyrl reads the sequence axis's width from its first column, sequences: a shorter one is another width
SOURCE_CASES = [(lay, how) for lay in SOURCES for how in MALFORMED if (lay, how) != ("skyrl", "one column short")]


@pytest.mark.parametrize("schema", ts.schema_names())
@pytest.mark.parametrize(("layout", "how"), SOURCE_CASES, ids=[f"{lay}-{how}" for lay, how in SOURCE_CASES])
def test_a_malformed_source_is_reported_once_and_what_it_stands_for_is_not_missing(
    schema: str, layout: str, how: str
) -> None:
    change, code = MALFORMED[how]
    build, key = (skyrl_batch if layout == "skyrl" else verl_batch), SOURCES[layout]
    for lengths in (LENGTHS, [(2, 1)], []):
        b = build(schema, lengths)
        new = change(b[key])
        if new is _ABSENT:
            del b[key]
        else:
            b[key] = new
        assert found(schema, b, layout) == {(None, key, code)}, lengths


# -- a column the check cannot read (nested, sparse, of another width) is reported, never raised ---

UNREADABLE = {
    "nested": (lambda x: torch.nested.nested_tensor(list(x)), "kind", "strided nested tensor of 4"),
    "jagged": (lambda x: torch.nested.nested_tensor(list(x), layout=torch.jagged), "kind", "jagged nested tensor of 4"),
    "sparse": (lambda x: x.to_sparse(), "kind", "sparse_coo"),
}
UNREADABLE_CASES = [
    (layout, schema, key)
    for layout, schema, build in [("skyrl", "moe_routed", skyrl_batch), ("verl_dataproto", "vlm_mrope_moe", verl_batch)]
    for key, col in build(schema, LENGTHS).items()
    if isinstance(col, torch.Tensor) and col.dim()
]


@pytest.mark.parametrize("how", UNREADABLE)
@pytest.mark.parametrize(
    ("layout", "schema", "key"), UNREADABLE_CASES, ids=[f"{c[0]}-{c[2]}" for c in UNREADABLE_CASES]
)
def test_a_nested_or_sparse_column_is_a_kind_violation(layout: str, schema: str, key: str, how: str) -> None:
    change, code, actual = UNREADABLE[how]
    b = (skyrl_batch if layout == "skyrl" else verl_batch)(schema, LENGTHS)
    b[key] = change(b[key])
    for depth in ("shapes", "values"):
        (v,) = check_dense(ts.load_schema(schema).plan, b, ts.load_layout(layout), depth=depth).violations
        assert (v.sample, v.field, v.code) == (None, key, code)
        assert v.expected.startswith("a dense (strided) tensor (4, ") and actual in v.actual
        assert v.expected in v.message and v.actual in v.message


@pytest.mark.parametrize("key", ["input_ids", "attention_mask", "position_ids"])
@pytest.mark.parametrize("extra", [1, -1], ids=["long", "short"])
def test_a_sequence_column_not_as_wide_as_prompt_and_response_is_a_shape_violation(key: str, extra: int) -> None:
    """verl's sequence axis is its prompt block then its response block: a full-sequence column of
    another width is that column's ``shape`` violation, naming the width the blocks make."""
    b = verl_batch("text", LENGTHS)
    p, r = b["prompts"].shape[1], b["responses"].shape[1]
    wide = torch.cat([b[key], b[key][:, -1:]], 1) if extra > 0 else b[key][:, :-1]
    b[key] = wide
    (v,) = check_dense(ts.load_schema("text").plan, b, ts.load_layout("verl_dataproto")).violations
    assert (v.sample, v.field, v.code, v.expected) == (None, key, "shape", f"(4, {p + r})")
    assert v.actual == f"int64[4,{p + r + extra}]"
    assert v.message.endswith(f"; seq = prompt {p} + response {r}")


@pytest.mark.parametrize("column", [0, -1], ids=["zeros", "ones"])
def test_a_mask_of_another_width_than_its_axis_is_a_shape_violation(column: int) -> None:
    """SkyRL's sequence axis takes its width from ``sequences``: a wider attention mask is a
    ``shape`` violation and no lengths are read from it (a column more of padding used to crash the check)."""
    b = skyrl_batch("text", LENGTHS)
    b["attention_mask"] = torch.cat([b["attention_mask"], b["attention_mask"][:, [column]]], 1)
    s = b["sequences"].shape[1]
    got = check_dense(ts.load_schema("text").plan, b, ts.load_layout("skyrl")).violations
    assert [(v.sample, v.field, v.code, v.expected, v.actual) for v in got] == [
        (None, "attention_mask", "shape", f"(4, {s})", f"int64[4,{s + 1}]")
    ]


def test_an_optional_source_of_a_required_field_is_missing_once() -> None:
    """verl's loss_mask is its response_mask: with the response mask optional and absent, the
    loss mask it stands for is missing, said once for the batch key."""
    schema = ts.schema_from_dict(
        {
            "name": "optional_response_mask",
            "extends": ["text"],
            "fields": {
                "response_mask": {
                    "shape": ["response"],
                    "dtype": "int64",
                    "values": [0, 1],
                    "pad": 0,
                    "required": False,
                }
            },
        }
    )
    b = verl_batch("text", LENGTHS)
    del b["response_mask"]
    got = check_dense(schema.plan, b, ts.load_layout("verl_dataproto")).violations
    assert [(v.sample, v.field, v.code) for v in got] == [(None, "response_mask", "missing")]
    assert "schema field loss_mask" in got[0].message


def test_a_value_of_a_same_as_source_is_reported_once() -> None:
    """The loss mask verl holds as its response_mask is one tensor: a value outside {0, 1} in it is one violation."""
    b = verl_batch("text", LENGTHS)
    b["response_mask"][1, 1] = 2
    got = check_dense(ts.load_schema("text").plan, b, ts.load_layout("verl_dataproto")).violations
    assert [(v.sample, v.field, v.code) for v in got] == [(1, "response_mask", "value")]
