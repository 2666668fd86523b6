"""Realistic samples for tests, examples and benchmarks.

[`verl_sample`][trajschema.testing.verl_sample] builds one rollout sample the way verl's TransferQueue trainer
writes it — token ids with the response following the prompt, text (and mrope) position
ids, 0/1 masks, negative log-probs, int16 routed experts (a valid routing: each token's
``topk`` experts distinct, see [`random_routes`][trajschema.testing.random_routes]) —
for any schema that uses the packaged field names. It is written by hand from verl's layout, *not* derived from the
schema's pad rules, so that checking its output against a schema is a real test.

Importing this module needs only torch (it is not imported by ``import trajschema``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from trajschema.core import lazy_front, positive_int
from trajschema.load import resolve_schema
from trajschema.schema import Schema
from trajschema.testing.routes import random_routes

__all__ = [
    "BATCH_FORMS",
    "LAYOUTS",
    "ExpectedViolation",
    "MemoryTransferQueue",
    "assert_bundle_valid",
    "assert_padding_invariant",
    "assert_valid",
    "batches",
    "dense_batches",
    "invalid_samples",
    "random_routes",
    "recorded_batch",
    "samples",
    "tags",
    "tq_batch",
    "verl_sample",
]

if TYPE_CHECKING:  # for type checkers and linters; at run time __getattr__ imports them on first use
    from trajschema.testing.assertions import assert_padding_invariant, assert_valid
    from trajschema.testing.dense import dense_batches
    from trajschema.testing.recorded import assert_bundle_valid, recorded_batch
    from trajschema.testing.strategies import (
        BATCH_FORMS,
        LAYOUTS,
        ExpectedViolation,
        batches,
        invalid_samples,
        samples,
        tags,
    )
    from trajschema.tq import MemoryTransferQueue

#: The toolkit's other names, each imported from its own module on first use (the
#: strategies need hypothesis, which importing this module must not import).
_ROOMS: dict[str, tuple[str, ...]] = {
    "trajschema.testing.assertions": ("assert_padding_invariant", "assert_valid"),
    "trajschema.testing.recorded": ("assert_bundle_valid", "recorded_batch"),
    "trajschema.testing.dense": ("dense_batches",),
    "trajschema.testing.strategies": (
        "BATCH_FORMS",
        "LAYOUTS",
        "ExpectedViolation",
        "batches",
        "invalid_samples",
        "samples",
        "tags",
    ),
    "trajschema.tq": ("MemoryTransferQueue",),
}

__getattr__, __dir__ = lazy_front(__name__, _ROOMS)


def verl_sample(
    schema: Schema | str,
    prompt_len: int,
    response_len: int,
    *,
    uid: str = "q0",
    layers: int | None = None,
    topk: int | None = None,
    experts: int | None = None,
    teacher_topk: int | None = None,
    vocab: int = 32000,
    optional: bool = True,
    seed: int = 0,
) -> dict[str, Any]:
    """One realistic sample with ``prompt_len`` + ``response_len`` tokens.

    Examples:
        >>> from trajschema.testing import verl_sample
        >>> s = verl_sample("vlm_mrope_moe", 5, 3, layers=48, topk=8)
        >>> tuple(s["position_ids"].shape), s["routed_experts"].dtype
        ((4, 8), torch.int16)

    Args:
        schema: the schema (or its name) whose fields to fill.
        prompt_len: prompt tokens.
        response_len: response tokens.
        uid: the GRPO group id.
        layers: MoE layers (used when the schema has ``routed_experts``). Default: the
            schema's ``layers`` when it pins one (as
            [`schema_for_config`][trajschema.schema_for_config] does), else 4.
        topk: experts per token (likewise; default the pinned ``topk``, else 2); each
            token's ``topk`` experts are distinct.
        experts: the expert count: ids are drawn from ``0 .. experts-1``. Default: the
            schema's ``experts`` when it pins one, else ``max(topk, 64)``.
        teacher_topk: distillation top-k (when the schema has ``teacher_ids``; default the
            pinned ``teacher_topk``, else 3).
        vocab: token ids are drawn from ``[3, vocab)``.
        optional: also fill the optional fields (attention mask, log-probs, scores, session id).
        seed: for the random token ids (and routes).

    Raises:
        ValueError: ``topk`` more than ``experts`` (a token names distinct experts).
    """
    schema = resolve_schema(schema, argument="verl_sample(schema)")
    pinned = _fixed(schema)
    layers = pinned.get("layers", 4) if layers is None else layers
    topk = pinned.get("topk", 2) if topk is None else topk
    teacher_topk = pinned.get("teacher_topk", 3) if teacher_topk is None else teacher_topk
    g = torch.Generator().manual_seed(seed)
    p, r = prompt_len, response_len
    s = p + r
    prompts = torch.randint(3, vocab, (p,), generator=g)
    responses = torch.randint(3, vocab, (r,), generator=g)
    text_pos = torch.arange(s)
    sample: dict[str, Any] = {
        "prompts": prompts,
        "responses": responses,
        "input_ids": torch.cat([prompts, responses]),
        "response_mask": torch.ones(r, dtype=torch.int64),
        "loss_mask": torch.ones(r, dtype=torch.int64),
        "num_turns": 1,
        "uid": uid,
    }
    pos_field = schema.fields.get("position_ids")
    pos_shape = pos_field.shape or () if pos_field is not None else ()
    rows = pos_shape[0].evaluate(_fixed(schema)) if len(pos_shape) == 2 else None
    if rows is None:
        sample["position_ids"] = text_pos
    else:
        # Row 0 text positions, then t/h/w rows; an image block shares one t position.
        vision = text_pos.clone()
        vision[1 : min(5, s)] = 1
        mrope = torch.stack([text_pos, *([vision] * 3)])
        sample["position_ids"] = mrope[-rows:].clone()
    if "multi_modal_inputs" in schema.fields:
        if schema.fields["multi_modal_inputs"].required:
            sample["multi_modal_inputs"] = {"image_grid_thw": torch.tensor([[1, 2, 2]])}
        elif optional:
            sample["multi_modal_inputs"] = {}
    if "routed_experts" in schema.fields:
        sample["routed_experts"] = _routes(schema, s, layers, topk, experts, g)
    if "teacher_ids" in schema.fields:
        sample["teacher_ids"] = torch.randint(3, vocab, (s, teacher_topk), generator=g)
        sample["teacher_logprobs"] = -torch.rand((s, teacher_topk), generator=g) * 5
    if optional:
        sample["attention_mask"] = torch.ones(s, dtype=torch.int64)
        sample["rollout_log_probs"] = -torch.rand(r, generator=g) * 3
        sample["rm_scores"] = torch.zeros(r)
        if r:
            sample["rm_scores"][-1] = 1.0
        sample["session_id"] = 0
    return sample


def _routes(schema: Schema, s: int, layers: int, topk: int, experts: int | None, g: torch.Generator) -> torch.Tensor:
    """``routed_experts`` as verl writes them (int16, int32 when the ids need it), a valid routing."""
    if experts is None:
        experts = _fixed(schema).get("experts", max(topk, 64))
    else:
        experts = positive_int("verl_sample(experts=...)", experts)
    if topk > experts:
        raise ValueError(f"verl_sample: topk={topk} is more than experts={experts}: a token names distinct experts")
    dtype = torch.int16 if experts <= 2**15 else torch.int32
    return random_routes(s, layers, topk, experts=experts, dtype=dtype, generator=g)


def _fixed(schema: Schema) -> dict[str, int]:
    return {n: d.size for n, d in schema.dims.items() if hasattr(d, "size")}


def tq_batch(samples: list[dict[str, Any]]):
    """A TensorDict laid out as TransferQueue's ``kv_batch_get`` returns ``samples``.

    Tensor fields become jagged nested tensors (even when every sample has the same
    shape), strided nested tensors where the shapes cannot form a jagged one (e.g. some
    samples with 3 rope rows and some with 4); other fields become ``NonTensorStack``.
    The layout is pinned against a real TransferQueue round trip by the integration tests.
    """
    from tensordict import TensorDict

    from trajschema.tq import wire_batch

    # TransferQueue itself returns nothing for no keys; an empty batch is handier in tests.
    return wire_batch(samples) if samples else TensorDict({}, batch_size=[0])
