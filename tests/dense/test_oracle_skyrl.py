"""The ``skyrl`` layout against SkyRL 0.3.0's own code as the oracle.

Every batch here is built by SkyRL's ``convert_prompts_responses_to_batch_tensors`` and
wrapped into its ``TrainingInputBatch`` as ``RayPPOTrainer.convert_to_training_input``
does (`skyrl_support.skyrl_batch`); a missing SkyRL skips, and fails under
``TRAJSCHEMA_REQUIRE_SKYRL=1`` (set by ``.ci/run``). Clean batches validate clean; each
defect of the catalogue is found with its sample, batch key and code. SkyRL's own
``TrainingInput`` jaxtyping annotations are shown wrong for SkyRL's own batches, where
``schema.annotations(layout="skyrl")`` is right.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Callable
from typing import Any

import beartype
import jaxtyping
import pytest
import torch
from beartype import beartype as beartype_checker
from hypothesis import given
from hypothesis import strategies as st
from jaxtyping import jaxtyped

import trajschema as ts
from tests.skyrl_support import TRAINING_BATCH, import_skyrl, routes, shimmed_modules, skyrl_batch, tokens

P_LENS = [3, 5, 1, 2]
R_LENS = [4, 2, 3, 1]
EXPERTS = 8
JT_ERRORS = (jaxtyping.TypeCheckError, beartype.roar.BeartypeException)


def build(schema: str, *, experts: int = EXPERTS, p_lens=P_LENS, r_lens=R_LENS, **kw: Any) -> Any:
    """A SkyRL batch carrying what ``schema`` declares (routes for MoE, images for a VLM)."""
    prompts = [tokens(p) for p in p_lens]
    responses = [tokens(r, 50) for r in r_lens]
    extra: dict[str, Any] = {"logprobs": [[-0.5] * r for r in r_lens]}
    if "moe" in schema:
        extra["experts"] = [routes(p + r, 2, 2, experts, seed=i) for i, (p, r) in enumerate(zip(p_lens, r_lens))]
    if "vlm" in schema:
        extra["images"] = [
            (torch.randn(4 * (i + 1), 6), torch.tensor([[1, 2, 2 * (i + 1)]])) for i in range(len(p_lens))
        ]
    return skyrl_batch(prompts, responses, **{**extra, **kw})


def found(schema: str, batch: Any, **kw: Any) -> list[tuple[int | None, str, str]]:
    return [(v.sample, v.field, v.code) for v in ts.load_schema(schema).batch_violations(batch, layout="skyrl", **kw)]


# -- the shim ---------------------------------------------------------------------------


def test_the_shim_restores_typing_typeddict_and_executes_only_the_tinker_types_module():
    original = typing.TypedDict
    tb = import_skyrl(TRAINING_BATCH)
    assert typing.TypedDict is original
    assert tb.TrainingInputBatch.__module__ == TRAINING_BATCH
    if sys.version_info < (3, 12):
        assert shimmed_modules == ["skyrl.tinker.types"]


# -- SkyRL's clean batches validate clean -----------------------------------------------


@pytest.mark.parametrize("schema", ["text", "moe_routed", "vlm_mrope", "vlm_mrope_moe"])
def test_skyrls_own_batches_validate_clean(schema):
    batch = build(schema)
    assert type(batch).__name__ == "TrainingInputBatch"
    ts.load_schema(schema).validate_batch(batch, layout="skyrl")
    ts.load_schema(schema).validate_batch(batch, layout=ts.load_layout("skyrl").with_pad_token(0))
    if "moe" in schema:
        ts.load_schema(schema).validate_batch(batch, layout="skyrl", dims={"experts": EXPERTS})


def test_skyrl_downcasts_routes_to_uint8_below_256_experts_and_int16_above():
    small, large = build("moe_routed"), build("moe_routed", experts=300)
    assert small["rollout_expert_indices"].dtype == torch.uint8
    assert large["rollout_expert_indices"].dtype == torch.int16
    ts.load_schema("moe_routed").validate_batch(large, layout="skyrl", dims={"experts": 300})


@pytest.mark.parametrize(
    ("p_lens", "r_lens"),
    [([1], [1]), ([4], [0]), ([2, 6, 1], [0, 0, 5])],
    ids=["one-row", "no-response", "empty-responses"],
)
def test_odd_sizes_built_by_skyrl_validate_clean(p_lens, r_lens):
    ts.load_schema("moe_routed").validate_batch(build("moe_routed", p_lens=p_lens, r_lens=r_lens), layout="skyrl")


def test_skyrls_pad_training_input_batch_is_clean_when_its_rows_are_tagged_padding():
    # SkyRL pads by copying row 0 with a zero loss mask: layout-correct; the is_padding tag
    # (which SkyRL does not set) is what tells a padding row from a real one.
    tb = import_skyrl(TRAINING_BATCH)
    padded = tb.pad_training_input_batch(build("moe_routed"), 2)
    padded.metadata["is_padding"] = [False] * len(P_LENS) + [True, True]
    ts.load_schema("moe_routed").validate_batch(padded, layout="skyrl")


# -- the defect catalogue ---------------------------------------------------------------


def _shift_prompt(b: Any) -> None:  # row 2's real tokens one step left: a pad at the end
    b["sequences"][2] = b["sequences"][2].roll(-1)
    b["attention_mask"][2] = b["attention_mask"][2].roll(-1)


def _response_mask_wrong_side(b: Any) -> None:
    b["response_mask"][1] = b["response_mask"][1].flip(0)


def _holed_mask(b: Any) -> None:
    b["attention_mask"][0, 3] = 0


def _loss_on_a_padding_row(b: Any) -> None:
    b.metadata["is_padding"] = [False, True, False, False]


def _longer_than_the_max(b: Any) -> None:
    for k in ("sequences", "attention_mask", "rollout_expert_indices"):
        b[k] = torch.cat([torch.zeros_like(b[k][:, :1]), b[k]], 1)


def _routes_one_token_short(b: Any) -> None:
    b["rollout_expert_indices"] = b["rollout_expert_indices"][:, 1:]


def _expert_out_of_range(b: Any) -> None:
    b["rollout_expert_indices"][2, -1, 0, 0] = EXPERTS


def _token_in_the_padding(b: Any) -> None:
    b["sequences"][3, 0] = 5


def _loss_outside_the_response(b: Any) -> None:
    b["loss_mask"][1, 0] = 1.0


def _loss_mask_as_int(b: Any) -> None:
    b["loss_mask"] = b["loss_mask"].long()


DEFECTS: dict[str, tuple[Callable[[Any], None], tuple[int | None, str, str]]] = {
    "shifted-prompt": (_shift_prompt, (2, "attention_mask", "mask")),
    "response-mask-wrong-side": (_response_mask_wrong_side, (1, "response_mask", "mask")),
    "non-contiguous-mask": (_holed_mask, (0, "attention_mask", "mask")),
    "padding-row-with-loss": (_loss_on_a_padding_row, (1, "loss_mask", "padding")),
    "padded-longer-than-max": (_longer_than_the_max, (None, "attention_mask", "length")),
    "routes-short": (_routes_one_token_short, (None, "rollout_expert_indices", "shape")),
    "expert-out-of-range": (_expert_out_of_range, (2, "rollout_expert_indices", "value")),
    "token-in-padding": (_token_in_the_padding, (3, "sequences", "padded")),
    "loss-outside-response": (_loss_outside_the_response, (1, "loss_mask", "mask")),
    "loss-mask-int64": (_loss_mask_as_int, (None, "loss_mask", "dtype")),
}


@pytest.mark.parametrize("schema", ["moe_routed", "vlm_mrope_moe"])
@pytest.mark.parametrize("defect", list(DEFECTS))
def test_each_defect_is_found_with_its_sample_key_and_code(defect, schema):
    batch = build(schema)
    mutate, expected = DEFECTS[defect]
    mutate(batch)
    got = found(schema, batch, dims={"experts": EXPERTS})
    assert expected in got, got
    with pytest.raises(ts.SchemaError):
        ts.load_schema(schema).validate_batch(batch, layout="skyrl", dims={"experts": EXPERTS})


# -- jaxtyping: SkyRL's TrainingInput annotations against ours ----------------------------


def checker(annotations: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """Whether ``@jaxtyped(typechecker=beartype)`` accepts a batch's tensors under ``annotations``."""
    names = list(annotations)
    params = [f"p{i}" for i in range(len(names))]
    namespace: dict[str, Any] = {}
    exec(f"def fn({', '.join(params)}):\n    return None", namespace)
    namespace["fn"].__annotations__ = dict(zip(params, annotations.values()))
    fn = jaxtyped(typechecker=beartype_checker)(namespace["fn"])

    def accepts(batch: dict[str, Any]) -> bool:
        try:
            fn(*(batch[k] for k in names))
        except JT_ERRORS:
            return False
        return True

    return accepts


KEYS = ["sequences", "attention_mask", "response_mask", "loss_mask", "rewards", "rollout_logprobs"]


def test_skyrls_own_annotations_reject_its_own_batch_and_miss_a_seq_wide_response_tensor():
    hints = import_skyrl(TRAINING_BATCH).TrainingInput.__annotations__
    theirs = checker({k: hints[k] for k in KEYS})
    ours = checker({k: a for k, a in ts.load_schema("text").annotations(layout="skyrl").items() if k in KEYS})
    real = build("text")
    assert real["loss_mask"].dtype == torch.float32  # TrainingInput: Integer
    assert real["response_mask"].shape[1] != real["sequences"].shape[1]  # TrainingInput: batch_size seq_len
    assert not theirs(real)
    assert ours(real)
    # With the dtype and widths TrainingInput names, theirs pass what SkyRL never builds; ours refuse.
    b, s = real["sequences"].shape
    as_annotated = {**real, "loss_mask": torch.ones(b, s, dtype=torch.int64)}
    for k in ("response_mask", "rewards", "rollout_logprobs"):
        as_annotated[k] = torch.zeros(b, s, dtype=real[k].dtype)
    assert theirs(as_annotated)
    assert not ours(as_annotated)


@pytest.mark.parametrize("schema", ["text", "moe_routed", "vlm_mrope", "vlm_mrope_moe"])
def test_our_dense_annotations_accept_skyrls_real_batches(schema):
    ann = ts.load_schema(schema).annotations(layout="skyrl")
    assert checker(ann)(build(schema))
    if "moe" in schema:
        assert checker(ann)(build(schema, experts=300))


SHAPE_AND_DTYPE_DEFECTS = {
    "loss-mask-int64": _loss_mask_as_int,
    "padded-longer-than-max-but-not-everywhere": lambda b: b.__setitem__(
        "attention_mask", torch.cat([torch.zeros_like(b["attention_mask"][:, :1]), b["attention_mask"]], 1)
    ),
    "routes-short": _routes_one_token_short,
    "routes-int8": lambda b: b.__setitem__("rollout_expert_indices", b["rollout_expert_indices"].to(torch.int8)),
    "response-mask-seq-wide": lambda b: b.__setitem__("response_mask", torch.ones_like(b["attention_mask"])),
    "rewards-float64": lambda b: b.__setitem__("rewards", b["rewards"].double()),
}


@pytest.mark.parametrize("defect", list(SHAPE_AND_DTYPE_DEFECTS))
def test_our_dense_annotations_reject_each_shape_and_dtype_defect(defect):
    batch = build("moe_routed")
    SHAPE_AND_DTYPE_DEFECTS[defect](batch)
    assert not checker(ts.load_schema("moe_routed").annotations(layout="skyrl"))(batch)
    assert found("moe_routed", batch)  # and the layout check finds it too


# -- a property: whatever sizes SkyRL pads, the layout reads them back -------------------


@given(
    st.lists(st.tuples(st.integers(1, 9), st.integers(0, 7)), min_size=1, max_size=6),
    st.integers(0, 5),
)
def test_any_batch_skyrl_builds_validates_clean_and_a_moved_response_mask_does_not(sizes, pick):
    p_lens, r_lens = [p for p, _ in sizes], [r for _, r in sizes]
    batch = build("moe_routed", p_lens=p_lens, r_lens=r_lens)
    schema = ts.load_schema("moe_routed")
    schema.validate_batch(batch, layout="skyrl", dims={"experts": EXPERTS})
    lengths = batch["response_mask"].sum(1)
    row = pick % len(sizes)
    if 0 < lengths[row] < batch["response_mask"].shape[1]:  # a row with response padding: flip it
        batch["response_mask"][row] = batch["response_mask"][row].flip(0)
        assert (row, "response_mask", "mask") in found("moe_routed", batch)
