"""The ``verl_dataproto`` layout against verl 0.9.1's own code as the oracle.

Every batch here is built by verl: ``AgentLoopWorker._agent_loop_postprocess`` pads each
sample (``tokenizer.pad`` left to ``rollout.prompt_length``, right to
``rollout.response_length``, positions by ``compute_position_id_with_mask``, routes
placed after the left padding, teacher outputs by ``_pad_teacher_outputs``),
``AgentLoopWorker._postprocess`` stacks them into a ``DataProto`` (``rm_scores`` at the
last response token, ``__num_turns__``), and the trainer's ``compute_response_mask``,
``DataProto.concat`` and ``pad_dataproto_to_divisor`` run as ``RayPPOTrainer`` runs them.
verl is imported through ``verl_support.verl_module`` (a missing verl skips, and fails
under ``TRAJSCHEMA_REQUIRE_VERL=1``).

The worker is ``object.__new__(AgentLoopWorker)`` with only the attributes those two
methods read. Its ``_compute_score`` and ``_compute_teacher_logprobs`` are replaced: they
call reward and teacher servers, which are not under test (the stand-in teacher returns
fixed top-k outputs, which verl's own ``_pad_teacher_outputs`` then pads). The tokenizer is
a real ``PreTrainedTokenizerFast`` over an in-memory WordLevel vocabulary: no download.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch

import trajschema as ts
from tests.verl_support import verl_module

pytestmark = pytest.mark.verl

AGENT_LOOP = "verl.experimental.agent_loop.agent_loop"
PAD = 0
PROMPT_LENGTH, RESPONSE_LENGTH = 8, 6
P_LENS = [3, 8, 1, 5]
R_LENS = [4, 2, 6, 1]
LAYERS, TOPK, EXPERTS, TEACHER_TOPK = 2, 2, 8, 3


@functools.lru_cache(maxsize=1)
def tokenizer() -> Any:
    tokenizers = verl_module("tokenizers")
    transformers = verl_module("transformers")
    vocab = {"<pad>": PAD, "<unk>": 1, **{f"t{i}": i for i in range(2, 100)}}
    model = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<unk>"))
    return transformers.PreTrainedTokenizerFast(tokenizer_object=model, pad_token="<pad>", unk_token="<unk>")


def worker(*, teacher: bool = False) -> Any:
    """An ``AgentLoopWorker`` holding only what ``_agent_loop_postprocess`` and ``_postprocess`` read."""
    cls = verl_module(AGENT_LOOP).AgentLoopWorker
    w = object.__new__(cls)
    w.rollout_config = SimpleNamespace(prompt_length=PROMPT_LENGTH, response_length=RESPONSE_LENGTH)
    w.tokenizer = tokenizer()
    w.processor = None
    w.mm_processor_kwargs = {}
    w.reward_loop_worker_handles = None
    w.distillation_enabled = False

    async def no_score(outputs: list[Any], kwargs: dict) -> None:  # the reward server is not under test
        return None

    async def stand_in_teacher(output: Any, prompt_ids: list[int], response_ids: list[int], **_: Any) -> None:
        # The teacher server is not under test: fixed top-k outputs, one row per real token.
        if teacher:
            n = len(prompt_ids) + len(response_ids)
            output.extra_fields["teacher_ids"] = torch.arange(n * TEACHER_TOPK).reshape(n, TEACHER_TOPK) % 90 + 2
            output.extra_fields["teacher_logprobs"] = -torch.rand(n, TEACHER_TOPK)

    w._compute_score = no_score
    w._compute_teacher_logprobs = stand_in_teacher
    return w


def sample_output(i: int, p: int, r: int, *, moe: bool, score: float | None = 1.0) -> Any:
    mod = verl_module(AGENT_LOOP)
    g = torch.Generator().manual_seed(i)
    routed = None
    if moe:
        routed = torch.rand(p + r, LAYERS, EXPERTS, generator=g).argsort(-1)[..., :TOPK].numpy().astype(np.int64)
    return mod.AgentLoopOutput(
        prompt_ids=[2 + (i + k) % 90 for k in range(p)],
        response_ids=[2 + (i * 7 + k) % 90 for k in range(r)],
        response_mask=[1] * r,
        response_logprobs=[-0.25] * r,
        routed_experts=routed,
        reward_score=score,
        num_turns=2,
        metrics=mod.AgentLoopMetrics(),
    )


def verl_batch(
    *, moe: bool = False, teacher: bool = False, p_lens: list[int] = P_LENS, r_lens: list[int] = R_LENS
) -> Any:
    """A ``DataProto`` as the agent loop hands it to ``RayPPOTrainer``, with its ``response_mask``."""
    w = worker(teacher=teacher)

    async def run() -> list[Any]:
        outs = [sample_output(i, p, r, moe=moe) for i, (p, r) in enumerate(zip(p_lens, r_lens))]
        return [await w._agent_loop_postprocess(o, False, raw_prompt=[]) for o in outs]

    # The trainer's gen batch carries the GRPO uids (RayPPOTrainer.fit sets them); verl's
    # generate_sequences hands its non-tensor batch to _postprocess, as here.
    uids = np.array([f"u{i // 2}" for i in range(len(p_lens))], dtype=object)
    data = w._postprocess(asyncio.run(run()), input_non_tensor_batch={"uid": uids})
    if "response_mask" not in data.batch.keys():  # as RayPPOTrainer.fit does
        data.batch["response_mask"] = verl_module("verl.trainer.ppo.ray_trainer").compute_response_mask(data)
    return data


def found(schema: str, batch: Any, **kw: Any) -> list[tuple[int | None, str, str]]:
    return [
        (v.sample, v.field, v.code)
        for v in ts.load_schema(schema).batch_violations(batch, layout="verl_dataproto", **kw)
    ]


# -- verl's clean batches validate clean ------------------------------------------------


@pytest.mark.parametrize("schema", ["text", "moe_routed"])
def test_verls_own_batches_validate_clean(schema):
    data = verl_batch(moe=schema == "moe_routed")
    assert data.batch["input_ids"].shape == (len(P_LENS), PROMPT_LENGTH + RESPONSE_LENGTH)
    ts.load_schema(schema).validate_batch(data, layout="verl_dataproto")
    ts.load_schema(schema).validate_batch(data, layout=ts.load_layout("verl_dataproto").with_pad_token(PAD))
    if schema == "moe_routed":
        assert data.batch["routed_experts"].dtype == torch.int16
        ts.load_schema(schema).validate_batch(data, layout="verl_dataproto", dims={"experts": EXPERTS})


def test_distill_batches_padded_by_verls_pad_teacher_outputs_validate_clean():
    data = verl_batch(teacher=True)
    assert data.batch["teacher_ids"].shape == (len(P_LENS), PROMPT_LENGTH + RESPONSE_LENGTH, TEACHER_TOPK)
    ts.load_schema("distill").validate_batch(data, layout="verl_dataproto")


def test_compute_response_mask_and_dataproto_concat_keep_a_batch_clean():
    data = verl_batch(moe=True)
    del data.batch["response_mask"]
    data.batch["response_mask"] = verl_module("verl.trainer.ppo.ray_trainer").compute_response_mask(data)
    both = verl_module("verl.protocol").DataProto.concat([data, verl_batch(moe=True, p_lens=[2], r_lens=[6])])
    ts.load_schema("moe_routed").validate_batch(both, layout="verl_dataproto")


def test_odd_sizes_built_by_verl_validate_clean():
    ts.load_schema("moe_routed").validate_batch(
        verl_batch(moe=True, p_lens=[1, 8], r_lens=[6, 1]), layout="verl_dataproto"
    )
    ts.load_schema("text").validate_batch(verl_batch(p_lens=[4], r_lens=[3]), layout="verl_dataproto")


def test_pad_dataproto_to_divisor_output_passes_the_layout_only_the_padding_contract_tells_its_rows():
    # verl pads by repeating real rows: every one is layout-correct, so the layout passes it.
    # Telling a padding row from a real one is the is_padding contract's job: tagged
    # padding, those repeated rows carry a loss mask, which is caught.
    padded, pad_size = verl_module("verl.protocol").pad_dataproto_to_divisor(verl_batch(moe=True), 3)
    assert pad_size == 2
    schema = ts.load_schema("moe_routed")
    schema.validate_batch(padded, layout="verl_dataproto")
    tags = [{"is_padding": i >= len(P_LENS)} for i in range(len(padded))]
    assert found("moe_routed", padded, tags=tags) == [
        (len(P_LENS), "response_mask", "padding"),
        (len(P_LENS) + 1, "response_mask", "padding"),
    ]


# -- the defect catalogue ---------------------------------------------------------------


def _shift_prompt(b: Any) -> None:  # row 0's prompt one step left: a pad after it
    for k in ("prompts", "input_ids", "attention_mask"):
        b[k][0, :PROMPT_LENGTH] = b[k][0, :PROMPT_LENGTH].roll(-1)


def _response_mask_wrong_side(b: Any) -> None:
    b["response_mask"][1] = b["response_mask"][1].flip(0)


def _mrope_three_rows(b: Any) -> None:
    b["position_ids"] = b["position_ids"][:, :3]


def _token_in_padding(b: Any) -> None:
    b["responses"][3, -1] = 5


DEFECTS = {
    "shifted-prompt": (_shift_prompt, (0, "attention_mask", "mask")),
    "response-mask-wrong-side": (_response_mask_wrong_side, (1, "response_mask", "mask")),
    "token-in-padding": (_token_in_padding, (3, "responses", "padded")),
}


@pytest.mark.parametrize("defect", list(DEFECTS))
def test_each_defect_is_found_with_its_sample_key_and_code(defect):
    data = verl_batch(moe=True)
    mutate, expected = DEFECTS[defect]
    mutate(data.batch)
    got = found("moe_routed", data)
    assert expected in got, got


def test_a_padding_row_with_a_loss_mask_is_caught():
    data = verl_batch()
    tags = [{"is_padding": i == 2} for i in range(len(P_LENS))]
    assert found("text", data, tags=tags) == [(2, "response_mask", "padding")]


def test_mrope_with_three_rows_where_the_schema_says_four_is_a_shape_violation():
    # A VLM batch from verl needs a real processor (get_rope_index); the text rows verl
    # would write are mimicked by repeating its 1-D positions, then one row is dropped.
    data = verl_batch()
    pos = data.batch["position_ids"]
    data.batch["position_ids"] = pos.unsqueeze(1).expand(-1, 4, -1).clone()
    data.non_tensor_batch["multi_modal_inputs"] = np.array([{} for _ in P_LENS], dtype=object)
    schema = ts.load_schema("vlm_mrope")
    assert not [v for v in found("vlm_mrope", data) if v[1] == "position_ids" and v[2] == "shape"]
    _mrope_three_rows(data.batch)
    assert (None, "position_ids", "shape") in found("vlm_mrope", data)
    with pytest.raises(ts.SchemaError):
        schema.validate_batch(data, layout="verl_dataproto")


# -- recorded: verl's own DataProto as a bundle, read back with verl and without ----------------------


@pytest.mark.parametrize("with_verl", [True, False], ids=["verl", "no-verl"])
def test_verls_dataproto_records_bit_exact_and_checks_alike_without_verl(tmp_path, monkeypatch, with_verl):
    data = verl_batch(moe=True)
    data.batch["rm_scores"][1, 0] = float("nan")  # a defect the recording must keep
    schema = ts.load_schema("moe_routed")
    path = ts.record_batch(data, tmp_path / "b", schema=schema, layout="verl_dataproto", trainer="verl")
    if not with_verl:
        monkeypatch.setitem(sys.modules, "verl", None)  # as on a laptop without verl: the import fails
    got = ts.load_bundle(path)
    assert type(got.batch) is (verl_module("verl").DataProto if with_verl else ts.RecordedDataProto)
    assert set(got.batch.batch.keys()) == set(data.batch.keys())
    for name in data.batch.keys():
        a, b = data.batch[name], got.batch.batch[name]
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    assert {k: list(v) for k, v in got.batch.non_tensor_batch.items()} == {
        k: list(v) for k, v in data.non_tensor_batch.items()
    }
    expected = [(v.sample, v.field, v.code) for v in schema.batch_violations(data, layout="verl_dataproto")]
    assert expected and [(v.sample, v.field, v.code) for v in got.violations()] == expected


def test_a_dataproto_of_mismatched_parts_is_a_bundle_error_naming_verls_refusal(tmp_path):
    """verl's DataProto asserts each non-tensor column has the batch's rows: a bundle edited so they
    do not is refused as a BundleError, not verl's AssertionError."""
    from tests.bundle.test_hostile_bundles import _dataproto_bundle

    verl_module("verl.protocol")  # skips without verl (fails under TRAJSCHEMA_REQUIRE_VERL=1)
    path = ts.record_batch([], tmp_path / "b", schema="text")
    _dataproto_bundle(path, 3, ["a", "b"])
    refused = r"^batch\.batch: DataProto refuses the recorded parts \(AssertionError: key uid length 2"
    with pytest.raises(ts.BundleError, match=refused):
        ts.load_bundle(path, verify=False)
