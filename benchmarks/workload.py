"""The benchmark's workload: samples shaped as verl writes them, the hand-written baselines each
trajschema operation is compared with, and the checks that every candidate accepts good data and
rejects bad data before it is timed.

No ``from __future__ import annotations`` here: the jaxtyping baselines are timed with the
annotation objects themselves, as the hand-written signature in bench_core always was.
"""

import contextlib
import copy
import logging
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import beartype
import jaxtyping
import torch
from beartype import beartype as beartype_checker
from jaxtyping import Float32, Int16, Int64, jaxtyped
from tensordict import NonTensorStack, TensorDict
from torch import Tensor

import trajschema as ts
from trajschema.testing import random_routes, tq_batch, verl_sample

EOS = 2
VOCAB = 151_936
IMAGE_TOKEN = 151_655
NUM_EXPERTS = 128
#: What trajschema's packaged text schema pads with (``padding:`` in schemas/text.yaml);
#: the hand-written padding baseline hard-codes them, as a trainer would.
PAD_PROMPT, PAD_RESPONSE = 127, 1

TENSOR_FIELDS = (
    "prompts",
    "responses",
    "input_ids",
    "position_ids",
    "response_mask",
    "loss_mask",
    "attention_mask",
    "rollout_log_probs",
    "routed_experts",
)
NONTENSOR_FIELDS = ("num_turns", "uid", "multi_modal_inputs")
#: The non-tensor columns of a ``verl_samples`` sample: what verl's TransferQueue trainer
#: writes, plus ``data_source``, a dataset column the schema does not declare
#: (``extra: allow``), which every reader still has to carry.
VERL_NONTENSOR_FIELDS = ("num_turns", "uid", "session_id", "multi_modal_inputs", "data_source")
DATA_SOURCES = ("openai/gsm8k", "hiyouga/geometry3k")
GROUP = 8  # GRPO rollout.n: samples per uid


# ---------------------------------------------------------------------------
# Realistic samples (verl's TransferQueue layout: one unpadded sample per key)


def make_sample(
    prompt: int, response: int, *, layers: int, topk: int, gen: torch.Generator, index: int = 0
) -> dict[str, Any]:
    """One ``vlm_mrope_moe`` rollout sample as verl writes it to TransferQueue.

    The prompt holds an image block (grid 1 x h x w) after a short text prefix, so
    rows 1-3 of the mrope ``position_ids`` are genuine t/h/w positions.
    ``multi_modal_inputs`` carries only ``image_grid_thw``: real samples also carry
    ``pixel_values`` (megabytes per image), which would dominate the memory of a
    4096-sample batch and the deepcopy in the padding baseline.
    """
    seq = prompt + response
    prompts = torch.randint(10, VOCAB, (prompt,), generator=gen)
    # An image block of up to 64 tokens (an 8 x 8 merged-patch grid) after 2 text tokens.
    img_start = 2
    side = min(8, int(max(prompt - img_start - 1, 0) ** 0.5))  # leave >= 1 text token after it
    n_img = side * side
    if n_img:
        prompts[img_start : img_start + n_img] = IMAGE_TOKEN
    responses = torch.randint(10, VOCAB, (response,), generator=gen)
    responses[-1] = EOS
    input_ids = torch.cat([prompts, responses])

    text_pos = torch.arange(seq)
    thw = text_pos.expand(3, seq).clone()
    if n_img:
        i = torch.arange(n_img)
        thw[0, img_start : img_start + n_img] = img_start
        thw[1, img_start : img_start + n_img] = img_start + i // side
        thw[2, img_start : img_start + n_img] = img_start + i % side
        after = img_start + side  # text resumes after the largest image position
        thw[:, img_start + n_img :] = torch.arange(after, after + seq - img_start - n_img)
    position_ids = torch.cat([text_pos[None], thw])  # (4, S): text row, then t/h/w

    # Multi-turn responses: tool outputs inside the response are masked out.
    response_mask = torch.ones(response, dtype=torch.int64)
    if response >= 8:
        a = int(torch.randint(1, response // 2, (1,), generator=gen))
        b = min(response - 1, a + int(torch.randint(1, response // 4 + 2, (1,), generator=gen)))
        response_mask[a:b] = 0
    return {
        "prompts": prompts,
        "responses": responses,
        "input_ids": input_ids,
        "position_ids": position_ids,
        "response_mask": response_mask,
        "loss_mask": response_mask.clone(),
        "attention_mask": torch.ones(seq, dtype=torch.int64),
        "rollout_log_probs": -torch.rand(response, generator=gen, dtype=torch.float32) * 5,
        "routed_experts": random_routes(seq, layers, topk, experts=NUM_EXPERTS, generator=gen),
        "num_turns": 1 + index % 3,
        "uid": str(uuid.UUID(int=index // 8 + 1)),  # GRPO groups of 8
        "multi_modal_inputs": {"image_grid_thw": torch.tensor([[1, 2 * side, 2 * side]])},
    }


def bad_variants(sample: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Broken copies of ``sample`` that every validator must reject."""
    s = sample["input_ids"].shape[0]
    short_seq = dict(sample)
    # S consistent across every seq-shaped field, but S != P + R: only the explicit
    # relation check catches this one in the jaxtyping and assert versions.
    for k in ("input_ids", "attention_mask", "routed_experts"):
        short_seq[k] = sample[k][: s - 1]
    short_seq["position_ids"] = sample["position_ids"][:, : s - 1]
    return {
        "routed_experts one row short": {**sample, "routed_experts": sample["routed_experts"][:-1]},
        "every seq field one short (S != P + R)": short_seq,
        "routed_experts int8": {**sample, "routed_experts": sample["routed_experts"].to(torch.int8)},
        "position_ids 3 rows": {**sample, "position_ids": sample["position_ids"][1:]},
        "uid not a str": {**sample, "uid": 17},
    }


def verl_samples(
    schema: ts.Schema, prompts: Sequence[int], responses: Sequence[int], *, layers: int, topk: int
) -> list[dict[str, Any]]:
    """``vlm_mrope_moe`` samples built by ``trajschema.testing.verl_sample``, one per (P, R).

    ``verl_sample`` fills every tensor field verl writes (with the optional
    ``attention_mask``, ``rollout_log_probs`` and ``rm_scores``) and ``num_turns``,
    ``uid``, ``session_id`` and ``multi_modal_inputs`` (``image_grid_thw`` only). On
    top, each sample gets varied ``num_turns``, a GRPO ``uid`` and ``session_id`` per
    group of ``GROUP`` samples, and an undeclared ``data_source`` str column.
    """
    out = []
    for i, (p, r) in enumerate(zip(prompts, responses)):
        group = i // GROUP
        s = verl_sample(schema, p, r, uid=str(uuid.UUID(int=group + 1)), layers=layers, topk=topk, seed=i)
        s["num_turns"] = 1 + i % 3
        s["session_id"] = group
        s["data_source"] = DATA_SOURCES[group % len(DATA_SOURCES)]
        out.append(s)
    assert out and all(k in out[0] for k in VERL_NONTENSOR_FIELDS), sorted(out[0]) if out else out
    assert isinstance(out[0]["multi_modal_inputs"], dict) and isinstance(out[0]["session_id"], int)
    return out


# ---------------------------------------------------------------------------
# The alternatives


@jaxtyped(typechecker=beartype_checker)
def check_jaxtyping(
    prompts: Int64[Tensor, "P"],  # noqa: F821 - jaxtyping dim strings
    responses: Int64[Tensor, "R"],  # noqa: F821 - jaxtyping dim strings
    input_ids: Int64[Tensor, "S"],  # noqa: F821 - jaxtyping dim strings
    position_ids: Int64[Tensor, "4 S"],  # noqa: F722 - jaxtyping dim strings
    response_mask: Int64[Tensor, "R"],  # noqa: F821 - jaxtyping dim strings
    loss_mask: Int64[Tensor, "R"],  # noqa: F821 - jaxtyping dim strings
    attention_mask: Int64[Tensor, "S"],  # noqa: F821 - jaxtyping dim strings
    rollout_log_probs: Float32[Tensor, "R"],  # noqa: F821 - jaxtyping dim strings
    routed_experts: Int16[Tensor, "S layers topk"],  # noqa: F722 - jaxtyping dim strings
    num_turns: int,
    uid: str,
    multi_modal_inputs: dict,
) -> None:
    """The same checks as trajschema ``depth="shapes"``, as jaxtyping + beartype annotations."""
    # jaxtyping cannot say S = P + R, nor the dims' lower bounds (prompt >= 1, ...).
    p, r = prompts.shape[0], responses.shape[0]
    assert input_ids.shape[0] == p + r, "S != P + R"
    assert p >= 1 and routed_experts.shape[1] >= 1 and routed_experts.shape[2] >= 1


@jaxtyped(typechecker=beartype_checker)
def check_jaxtyping_verl(
    prompts: Int64[Tensor, "P"],  # noqa: F821 - jaxtyping dim strings
    responses: Int64[Tensor, "R"],  # noqa: F821 - jaxtyping dim strings
    input_ids: Int64[Tensor, "S"],  # noqa: F821 - jaxtyping dim strings
    position_ids: Int64[Tensor, "4 S"],  # noqa: F722 - jaxtyping dim strings
    response_mask: Int64[Tensor, "R"],  # noqa: F821 - jaxtyping dim strings
    loss_mask: Int64[Tensor, "R"],  # noqa: F821 - jaxtyping dim strings
    attention_mask: Int64[Tensor, "S"],  # noqa: F821 - jaxtyping dim strings
    rollout_log_probs: Float32[Tensor, "R"],  # noqa: F821 - jaxtyping dim strings
    rm_scores: Float32[Tensor, "R"],  # noqa: F821 - jaxtyping dim strings
    routed_experts: Int16[Tensor, "S layers topk"],  # noqa: F722 - jaxtyping dim strings
    num_turns: int,
    uid: str,
    session_id: int,
    multi_modal_inputs: dict,
    **undeclared: object,
) -> None:
    """``check_jaxtyping`` for a ``verl_samples`` sample: also ``rm_scores`` and ``session_id``.

    Undeclared columns (``data_source``) are accepted unchecked, as the schema's
    ``extra: allow`` accepts them.
    """
    p, r = prompts.shape[0], responses.shape[0]
    assert input_ids.shape[0] == p + r, "S != P + R"
    assert p >= 1 and routed_experts.shape[1] >= 1 and routed_experts.shape[2] >= 1


JT_ERRORS = (jaxtyping.TypeCheckError, beartype.roar.BeartypeException, AssertionError)

_INT16_32_64 = (torch.int16, torch.int32, torch.int64)


def check_asserts(s: Mapping[str, Any]) -> None:
    """The same checks written out by hand, the way a trainer guards its inputs."""
    prompts, responses = s["prompts"], s["responses"]
    assert isinstance(prompts, Tensor) and prompts.dtype == torch.int64 and prompts.dim() == 1
    assert isinstance(responses, Tensor) and responses.dtype == torch.int64 and responses.dim() == 1
    p, r = prompts.shape[0], responses.shape[0]
    seq = p + r
    assert p >= 1
    input_ids = s["input_ids"]
    assert isinstance(input_ids, Tensor) and input_ids.dtype == torch.int64 and input_ids.shape == (seq,)
    position_ids = s["position_ids"]
    assert isinstance(position_ids, Tensor) and position_ids.dtype == torch.int64 and position_ids.shape == (4, seq)
    for k in ("response_mask", "loss_mask"):
        v = s[k]
        assert isinstance(v, Tensor) and v.dtype == torch.int64 and v.shape == (r,)
    attention_mask = s["attention_mask"]
    assert isinstance(attention_mask, Tensor) and attention_mask.dtype == torch.int64 and attention_mask.shape == (seq,)
    lp = s["rollout_log_probs"]
    assert isinstance(lp, Tensor) and lp.dtype == torch.float32 and lp.shape == (r,)
    re_ = s["routed_experts"]
    assert isinstance(re_, Tensor) and re_.dtype in _INT16_32_64 and re_.dim() == 3
    assert re_.shape[0] == seq and re_.shape[1] >= 1 and re_.shape[2] >= 1
    nt = s["num_turns"]
    assert isinstance(nt, int) and not isinstance(nt, bool)
    assert isinstance(s["uid"], str)
    assert isinstance(s["multi_modal_inputs"], Mapping)


def _clone_at(ref: Tensor, shape: Sequence[int]) -> Tensor:
    """A fresh tensor of ``shape`` cloned from (the top-left corner of) ``ref``."""
    if len(shape) == ref.dim() and all(a >= b for a, b in zip(ref.shape, shape)):
        return ref[tuple(slice(0, n) for n in shape)].clone()
    return ref.new_empty(shape)


def padding_baseline(
    ref: Mapping[str, Any], count: int, eos: int
) -> tuple[list[str], list[dict[str, Any]], TensorDict]:
    """Hand-written padding: one padding sample at a time, cloned from ``ref``, then stacked.

    Produces the same keys, tags and TensorDict as ``schema.padding(count, eos_token_id=eos,
    like=ref)`` (sizes prompt 127 / response 1, layers and topk from ``ref``; EOS ids,
    zero masks, arange positions, attention 1, log-probs 0, routes spread over the
    reference's largest expert id + 1 as ``pad: {spread: experts}`` spreads them; one fresh
    uid shared by the group; ``num_turns`` 0 and empty ``multi_modal_inputs``).
    """
    uid = "pad" + uuid.uuid4().hex
    p, r = PAD_PROMPT, PAD_RESPONSE
    seq = p + r
    layers, topk = ref["routed_experts"].shape[1:]
    experts = int(ref["routed_experts"].max()) + 1
    positions = torch.arange(seq)
    slots = torch.arange(seq * topk).view(seq, 1, topk)
    rows = []
    for i in range(count):
        row: dict[str, Any] = {}
        row["prompts"] = _clone_at(ref["prompts"], (p,)).fill_(eos)
        row["responses"] = _clone_at(ref["responses"], (r,)).fill_(eos)
        row["input_ids"] = _clone_at(ref["input_ids"], (seq,)).fill_(eos)
        row["position_ids"] = _clone_at(ref["position_ids"], (4, seq)).copy_(positions.expand(4, seq))
        row["response_mask"] = _clone_at(ref["response_mask"], (r,)).zero_()
        row["loss_mask"] = _clone_at(ref["loss_mask"], (r,)).zero_()
        row["attention_mask"] = _clone_at(ref["attention_mask"], (seq,)).fill_(1)
        row["rollout_log_probs"] = _clone_at(ref["rollout_log_probs"], (r,)).zero_()
        # padding token t of the batch, slot k: expert (t * topk + k) % experts, in every layer
        spread = ((slots + i * seq * topk) % experts).expand(seq, layers, topk)
        row["routed_experts"] = _clone_at(ref["routed_experts"], (seq, layers, topk)).copy_(spread)
        extra = copy.deepcopy({k: ref[k] for k in NONTENSOR_FIELDS})
        extra["uid"] = uid
        extra["num_turns"] = 0
        extra["multi_modal_inputs"] = {}
        row.update(extra)
        rows.append(row)
    td = TensorDict({k: torch.stack([row[k] for row in rows]) for k in TENSOR_FIELDS}, batch_size=[count])
    for k in NONTENSOR_FIELDS:
        td[k] = NonTensorStack.from_list([row[k] for row in rows])
    keys = [f"{uid}_{i}_0" for i in range(count)]
    tags = [{"is_padding": True, "prompt_len": p, "response_len": r, "seq_len": seq} for _ in range(count)]
    return keys, tags, td


# ---------------------------------------------------------------------------
# TransferQueue layout


def wire_batch_source() -> str:
    return "trajschema.testing.tq_batch (the layout pinned against real TransferQueue round trips)"


def tq_pack_function() -> Callable[[list[Any]], Any]:
    """TransferQueue's own read-side packer: per-sample values of one field -> one batch column.

    ``AsyncSimpleStorageManager._pack_field_values`` is a staticmethod; it is called
    through the class, with no manager, Ray or storage unit. Raises ImportError when
    TransferQueue is not installed.
    """
    from transfer_queue.storage.managers.simple_storage_manager import AsyncSimpleStorageManager

    return AsyncSimpleStorageManager._pack_field_values


def tq_pack(samples: Sequence[Mapping[str, Any]]) -> TensorDict:
    """The TensorDict ``kv_batch_get`` returns for ``samples``, packed by TransferQueue's own code.

    What ``AsyncSimpleStorageManager.get_data`` does once the storage units have
    answered: gather each field's per-sample values (a storage unit keeps every
    field of every sample as the value written), pack each field with
    ``_pack_field_values``, in the order of ``BatchMeta.field_names`` (sorted), and
    wrap the columns in ``TensorDict(columns, batch_size=len(samples))``. Part 4
    asserts that a real ``kv_batch_get`` returns this very layout.
    """
    pack = tq_pack_function()
    with quiet_transfer_queue():  # a fallback to a strided nested tensor logs a warning per column
        columns = {f: pack([s[f] for s in samples]) for f in sorted(samples[0])}
    return TensorDict(columns, batch_size=[len(samples)])


@contextlib.contextmanager
def quiet_transfer_queue() -> Iterator[None]:
    from transfer_queue.storage.managers import simple_storage_manager

    log = logging.getLogger(simple_storage_manager.__name__)  # the logger _pack_field_values warns on
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def same_value(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, Tensor):
        if a.is_nested:
            if a.layout != b.layout or a.dtype != b.dtype or a.size(0) != b.size(0):
                return False
            if a.layout == torch.jagged:
                return (
                    a._ragged_idx == b._ragged_idx
                    and torch.equal(a.offsets(), b.offsets())
                    and torch.equal(a.values(), b.values())
                )
            return all(torch.equal(x, y) for x, y in zip(a.unbind(), b.unbind()))
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, Mapping):
        return list(a) == list(b) and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return a == b


def same_batch(a: TensorDict, b: TensorDict) -> str | None:
    """Why TensorDicts ``a`` and ``b`` differ (keys, column types, layouts, values), or None."""
    if list(a.keys()) != list(b.keys()) or a.batch_size != b.batch_size:
        return f"keys/batch size {list(a.keys())} {a.batch_size} != {list(b.keys())} {b.batch_size}"
    for k in a.keys():
        x, y = a.get(k), b.get(k)
        if type(x) is not type(y):
            return f"{k}: {type(x).__name__} != {type(y).__name__}"
        same = same_value(x, y) if isinstance(x, Tensor) else same_value(x.tolist(), y.tolist())
        if not same:
            return f"{k}: values or layout differ"
    return None


# ---------------------------------------------------------------------------
# Correctness before timing


def _rejects(fn: Callable[[], Any], expected: tuple[type[BaseException], ...]) -> str:
    try:
        fn()
    except expected as e:
        return type(e).__name__
    raise AssertionError(f"{getattr(fn, '__name__', fn)} accepted bad data")


def verify_single(schema: ts.Schema, sample: dict[str, Any]) -> None:
    schema.validate(sample, depth="shapes")
    schema.validate(sample, depth="values")
    check_jaxtyping(**sample)
    check_asserts(sample)
    for what, bad in bad_variants(sample).items():
        try:
            for depth in ("shapes", "values"):
                _rejects(lambda bad=bad, depth=depth: schema.validate(bad, depth=depth), (ts.SchemaError,))
            _rejects(lambda bad=bad: check_jaxtyping(**bad), JT_ERRORS)
            _rejects(lambda bad=bad: check_asserts(bad), (AssertionError,))
        except AssertionError as e:
            raise AssertionError(f"{what}: {e}") from None


def _jaxtyping_per_sample(s: Mapping[str, Any]) -> None:
    check_jaxtyping(**s)


def verify_batch(
    schema: ts.Schema,
    samples: list[dict[str, Any]],
    td: TensorDict,
    *,
    pack: Callable[[list[dict[str, Any]]], TensorDict] = tq_batch,
    loops: Mapping[str, tuple[Callable[[Mapping[str, Any]], None], tuple[type[BaseException], ...]]] | None = None,
) -> None:
    """Every validator accepts ``samples`` (and ``td``, their batch) and rejects each broken batch.

    ``pack`` lays a list of samples out as a batch; ``loops`` are the per-sample
    baselines (by default the jaxtyping function and the hand-written asserts).
    """
    if loops is None:
        loops = {"jaxtyping": (_jaxtyping_per_sample, JT_ERRORS), "asserts": (check_asserts, (AssertionError,))}
    schema.validate_batch(td, depth="shapes")
    schema.validate_batch(td, depth="values")
    for s in samples:
        for check, _ in loops.values():
            check(s)
    # A small batch of the same samples with one broken sample in the middle.
    small = samples[:64]
    for what, bad in bad_variants(small[3]).items():
        broken = [*small[:3], bad, *small[4:]]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "nested tensors are a prototype"
            try:
                bad_td = pack(broken)
            except (RuntimeError, TypeError, ValueError):  # a column our fallback layout cannot pack
                bad_td = None
        if bad_td is not None and bad_td.get("routed_experts").dtype != bad["routed_experts"].dtype:
            # Mixed dtypes: TransferQueue falls back to a strided nested tensor that casts
            # every row to the first row's dtype, so the batch it returns is valid.
            bad_td = None
        if bad_td is not None:
            for depth in ("shapes", "values"):
                try:
                    schema.validate_batch(bad_td, depth=depth)
                except ts.SchemaError as e:
                    if not any(v.sample == 3 for v in e.violations):
                        raise AssertionError(f"{what}: violations name the wrong sample: {e}") from None
                else:
                    raise AssertionError(f"validate_batch accepted a batch with {what}")

        for name, (check, errors) in loops.items():

            def loop(broken=broken, check=check) -> None:
                for s in broken:
                    check(s)

            try:
                _rejects(loop, errors)
            except AssertionError:
                raise AssertionError(f"{name} loop accepted a batch with {what}") from None


def verify_padding(schema: ts.Schema, ref: dict[str, Any], count: int) -> None:
    pad = schema.padding(count, eos_token_id=EOS, like=ref)
    keys, tags, td = padding_baseline(ref, count, EOS)
    ours = pad.fields
    assert set(ours.keys()) == set(td.keys()), (sorted(ours.keys()), sorted(td.keys()))
    assert ours.batch_size == td.batch_size == torch.Size([count])
    for k in ours.keys():
        a, b = ours.get(k), td.get(k)
        assert type(a) is type(b), (k, type(a), type(b))
        if isinstance(a, Tensor):
            assert a.shape == b.shape and a.dtype == b.dtype, (k, a.shape, b.shape, a.dtype, b.dtype)
            assert torch.equal(a, b), k
        else:
            la, lb = a.tolist(), b.tolist()
            if k == "uid":
                assert la == [pad.uid] * count and lb == [keys[0].split("_")[0]] * count
            else:
                assert la == lb, (k, la[:3], lb[:3])
    assert len(pad.keys) == len(keys) == count and all(k.endswith(f"_{i}_0") for i, k in enumerate(keys))
    assert [dict(t) for t in pad.tags] == tags, (pad.tags[:1], tags[:1])
    # Both sets of padding samples are valid samples of the schema.
    schema.validate_batch(td, tags=tags)
    schema.validate_batch(ours, tags=pad.tags)
