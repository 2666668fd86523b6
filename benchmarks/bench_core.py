#!/usr/bin/env python
"""Benchmark trajschema's core operations against what a trainer would write instead.

Run from the repository root, inside the project's venv:

    python benchmarks/bench_core.py             # full run (a few minutes)
    python benchmarks/bench_core.py --quick     # smoke run (seconds)
    python benchmarks/bench_core.py --markdown  # print the table as markdown
    python benchmarks/bench_core.py --only 5    # only part 5 (verl's padding entry point; starts Ray)
    python benchmarks/bench_core.py --only 6    # only part 6 (what @ts.checked adds to a call)

Every comparison runs in one process on the same samples, and every validator is first
shown to accept the good data and reject bad data (asserted), so the timings compare
checks that do the same job. See benchmarks/README.md for what each row compares.

Timing: ``time.perf_counter_ns`` around blocks of ``number`` calls, the block size chosen
so one block lasts at least ``--min-block`` seconds; ``--repeats`` blocks per
measurement, ``gc.collect()`` before and the garbage collector disabled during each
block; the reported figure is the median per-call time over the blocks
(:func:`measure`). Calls too slow and too stateful for blocks (TransferQueue puts, whose
keys must be fresh and cleared between calls) are timed one call per block, with untimed
set-up and clean-up around each call (:func:`measure_calls`); both interleave the
candidates round-robin.
"""

import argparse
import contextlib
import copy
import cProfile
import dataclasses
import datetime
import gc
import importlib.metadata
import io
import logging
import os
import platform
import pstats
import resource
import statistics
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import beartype
import jaxtyping
import tensordict
import torch
from beartype import beartype as beartype_checker
from jaxtyping import Float32, Int16, Int64, jaxtyped
from tensordict import NonTensorStack, TensorDict
from torch import Tensor

import trajschema as ts
from trajschema.testing import tq_batch, verl_sample

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
        "routed_experts": torch.randint(0, NUM_EXPERTS, (seq, layers, topk), generator=gen, dtype=torch.int16),
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
    zero masks, arange positions, attention 1, log-probs 0, experts 0; one fresh uid
    shared by the group; ``num_turns`` 0 and empty ``multi_modal_inputs``).
    """
    uid = "pad" + uuid.uuid4().hex
    p, r = PAD_PROMPT, PAD_RESPONSE
    seq = p + r
    layers, topk = ref["routed_experts"].shape[1:]
    positions = torch.arange(seq)
    rows = []
    for _ in range(count):
        row: dict[str, Any] = {}
        row["prompts"] = _clone_at(ref["prompts"], (p,)).fill_(eos)
        row["responses"] = _clone_at(ref["responses"], (r,)).fill_(eos)
        row["input_ids"] = _clone_at(ref["input_ids"], (seq,)).fill_(eos)
        row["position_ids"] = _clone_at(ref["position_ids"], (4, seq)).copy_(positions.expand(4, seq))
        row["response_mask"] = _clone_at(ref["response_mask"], (r,)).zero_()
        row["loss_mask"] = _clone_at(ref["loss_mask"], (r,)).zero_()
        row["attention_mask"] = _clone_at(ref["attention_mask"], (seq,)).fill_(1)
        row["rollout_log_probs"] = _clone_at(ref["rollout_log_probs"], (r,)).zero_()
        row["routed_experts"] = _clone_at(ref["routed_experts"], (seq, layers, topk)).zero_()
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


def tq_layout_source() -> str:
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
    with _quiet_transfer_queue():  # a fallback to a strided nested tensor logs a warning per column
        columns = {f: pack([s[f] for s in samples]) for f in sorted(samples[0])}
    return TensorDict(columns, batch_size=[len(samples)])


@contextlib.contextmanager
def _quiet_transfer_queue() -> Iterator[None]:
    from transfer_queue.storage.managers import simple_storage_manager

    log = logging.getLogger(simple_storage_manager.__name__)  # the logger _pack_field_values warns on
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _same_value(a: Any, b: Any) -> bool:
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
        return list(a) == list(b) and all(_same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    return a == b


def same_batch(a: TensorDict, b: TensorDict) -> str | None:
    """Why TensorDicts ``a`` and ``b`` differ (keys, column types, layouts, values), or None."""
    if list(a.keys()) != list(b.keys()) or a.batch_size != b.batch_size:
        return f"keys/batch size {list(a.keys())} {a.batch_size} != {list(b.keys())} {b.batch_size}"
    for k in a.keys():
        x, y = a.get(k), b.get(k)
        if type(x) is not type(y):
            return f"{k}: {type(x).__name__} != {type(y).__name__}"
        same = _same_value(x, y) if isinstance(x, Tensor) else _same_value(x.tolist(), y.tolist())
        if not same:
            return f"{k}: values or layout differ"
    return None


# ---------------------------------------------------------------------------
# Timing


@dataclasses.dataclass(frozen=True)
class Timing:
    median_ns: float
    min_ns: float
    max_ns: float
    number: int  # calls per block
    repeats: int  # blocks
    per_call: tuple[float, ...]  # ns per call in each block, in round order

    def spread(self) -> str:
        return f"{self.repeats}x{self.number} calls, min {fmt_ns(self.min_ns)}, max {fmt_ns(self.max_ns)}"


def _block(fn: Callable[[], Any], number: int) -> int:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter_ns()
        for _ in range(number):
            fn()
        return time.perf_counter_ns() - t0
    finally:
        gc.enable()


def _calibrate(fn: Callable[[], Any], min_block_s: float, warmup_s: float) -> int:
    """Warm ``fn`` up and return how many calls make a block of at least ``min_block_s``."""
    t_end = time.perf_counter() + warmup_s
    fn()
    fn()
    while time.perf_counter() < t_end:
        fn()
    number = 1
    target_ns = min_block_s * 1e9
    while True:
        took = _block(fn, number)
        if took >= target_ns:
            return number
        grow = target_ns / max(took, 1) * 1.1
        number = max(number + 1, min(int(number * grow) + 1, number * 100))


def measure(
    fns: Mapping[str, Callable[[], Any]], *, min_block_s: float, repeats: int, warmup_s: float
) -> dict[str, Timing]:
    """Median per-call time of each of ``fns`` over ``repeats`` blocks of >= ``min_block_s``.

    The blocks of the functions are interleaved round-robin (a, b, c, a, b, c, ...), so
    load from other work on a shared machine falls on all of them alike and the ratios
    between them stay meaningful even when the absolute times drift.
    """
    numbers = {k: _calibrate(fn, min_block_s, warmup_s) for k, fn in fns.items()}
    per_call: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            per_call[k].append(_block(fn, numbers[k]) / numbers[k])
    return {k: Timing(statistics.median(v), min(v), max(v), numbers[k], repeats, tuple(v)) for k, v in per_call.items()}


def _nothing() -> None:
    return None


@dataclasses.dataclass(frozen=True)
class Call:
    """One candidate of :func:`measure_calls`: ``run`` is timed; ``before`` and ``after`` are not."""

    run: Callable[[], Any]
    before: Callable[[], Any] = _nothing
    after: Callable[[], Any] = _nothing


def measure_calls(calls: Mapping[str, Call], *, repeats: int) -> dict[str, Timing]:
    """Time ``repeats`` single calls of each candidate, round-robin (a, b, c, a, b, c, ...).

    For operations that change state (a TransferQueue put needs fresh keys, cleared
    afterwards): each round runs, per candidate, ``before()``, then ``run()`` as a
    timed block of one call (``gc`` collected before, disabled during, as in
    :func:`measure`), then ``after()``. Warm the candidates up before calling this.
    """
    per_call: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(repeats):
        for k, c in calls.items():
            c.before()
            per_call[k].append(float(_block(c.run, 1)))
            c.after()
    return {k: Timing(statistics.median(v), min(v), max(v), 1, repeats, tuple(v)) for k, v in per_call.items()}


def fmt_ratio(r: float) -> str:
    return f"{r:.1f}×" if r >= 1 else f"{r:.2f}×"


def fmt_ns(ns: float) -> str:
    if ns < 10_000:
        return f"{ns / 1e3:.2f} µs"
    if ns < 10_000_000:
        return f"{ns / 1e3:.0f} µs"
    if ns < 10_000_000_000:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e9:.2f} s"


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


# ---------------------------------------------------------------------------
# The run


@dataclasses.dataclass
class Row:
    operation: str
    ours: Timing | None
    baseline: str
    theirs: Timing | None
    target: float | None
    # "speedup": ratio = baseline / trajschema, target is a minimum.
    # "overhead": ratio = trajschema / baseline, target is a maximum.
    # "added": ratio = trajschema - baseline (ns per call), target is a maximum in ns.
    kind: str = "speedup"
    #: why a side of the row was not measured (the row then reads "skipped")
    skipped: str | None = None

    def _ratio(self, ours: float, theirs: float) -> float:
        if self.kind == "added":
            return ours - theirs
        return ours / theirs if self.kind == "overhead" else theirs / ours

    def fmt(self, ratio: float) -> str:
        """The ratio as the table prints it (a time difference for an "added" row)."""
        if self.kind == "added":
            return ("+" if ratio >= 0 else "−") + fmt_ns(abs(ratio))
        return fmt_ratio(ratio)

    @property
    def ratio(self) -> float | None:
        if self.ours is None or self.theirs is None:
            return None
        return self._ratio(self.ours.median_ns, self.theirs.median_ns)

    def paired(self) -> tuple[float, float, float] | None:
        """Median, min and max of the per-round ratios (blocks of one round ran back to back)."""
        if self.ours is None or self.theirs is None:
            return None
        r = [self._ratio(a, b) for a, b in zip(self.ours.per_call, self.theirs.per_call)]
        return statistics.median(r), min(r), max(r)

    @property
    def result(self) -> str:
        if self.skipped:
            return "skipped"
        if self.target is None or self.ratio is None:
            return "info"
        ok = self.ratio <= self.target if self.kind in ("overhead", "added") else self.ratio >= self.target
        return "PASS" if ok else "FAIL"


HEADER = ("operation", "trajschema", "baseline", "baseline time", "ratio", "target", "result")


def _cells(row: Row) -> tuple[str, ...]:
    ratio = row.ratio
    return (
        row.operation,
        fmt_ns(row.ours.median_ns) if row.ours else "—",
        row.baseline or "—",
        fmt_ns(row.theirs.median_ns) if row.theirs else "—",
        "—" if ratio is None else row.fmt(ratio),
        "—" if row.target is None else _target_cell(row),
        row.result,
    )


def _target_cell(row: Row) -> str:
    assert row.target is not None
    if row.kind == "added":
        return f"≤+{fmt_ns(row.target)}"
    return f"{'≤' if row.kind == 'overhead' else '≥'}{row.target:g}×"


def render(rows: list[Row], markdown: bool, header: Sequence[str] = HEADER) -> str:
    table = [tuple(header), *(_cells(r) for r in rows)]
    if markdown:
        out = [
            "| " + " | ".join(header) + " |",
            "|" + "|".join(["---", "---:", "---", "---:", "---:", "---:", "---"]) + "|",
        ]
        out += ["| " + " | ".join(c) + " |" for c in table[1:]]
        return "\n".join(out)
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    right = {1, 3, 4, 5}
    lines = []
    for j, r in enumerate(table):
        lines.append(
            "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        )
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_rev() -> str:
    try:
        root = Path(__file__).resolve().parent.parent
        rev = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "trajschema"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        return rev + (" (trajschema/ has uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def machine_info() -> list[str]:
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return [
        f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"machine: {_cpu_model()}, os.cpu_count()={os.cpu_count()}, usable cpus={affinity}, {platform.platform()}",
        f"python {platform.python_version()}, torch {torch.__version__} (intra-op threads: {torch.get_num_threads()}), "
        f"tensordict {tensordict.__version__}, jaxtyping {jaxtyping.__version__}, beartype {beartype.__version__}, "
        f"trajschema {ts.__version__} @ {_git_rev()}, TransferQueue {_dist_version('TransferQueue')}, "
        f"verl {_dist_version('verl')}",
    ]


def _dist_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


#: The benchmark's parts (see benchmarks/README.md); 4 and 5 run on a local TransferQueue.
PARTS = ("1", "2", "2b", "3", "4", "5", "6")
#: Names accepted by --only for parts.
PART_ALIASES = {"verl": "5", "checked": "6"}


def _parts(text: str) -> set[str]:
    parts = {PART_ALIASES.get(p.strip(), p.strip()) for p in text.split(",") if p.strip()}
    unknown = parts - set(PARTS)
    if not parts or unknown:
        raise argparse.ArgumentTypeError(f"expected parts of {', '.join(PARTS)}, verl or checked, found {text!r}")
    return parts


def _range(text: str) -> tuple[int, int]:
    lo, _, hi = text.partition(":")
    a, b = int(lo), int(hi or lo)
    if not 0 <= a <= b:
        raise argparse.ArgumentTypeError(f"expected LO:HI with 0 <= LO <= HI, found {text!r}")
    return a, b


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="smoke run: small batch, short blocks, 3 repeats")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument("--prompt", type=int, default=512, help="P of the single sample (row 1, and the padding reference)")
    ap.add_argument("--response", type=int, default=1024, help="R of the single sample")
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--batch", type=int, default=None, help="samples in the batch (default 4096, --quick 256)")
    ap.add_argument(
        "--batch-prompt", type=_range, default=(8, 128), metavar="LO:HI", help="uniform range of P in the batch"
    )
    ap.add_argument(
        "--batch-response", type=_range, default=(1, 256), metavar="LO:HI", help="uniform range of R in the batch"
    )
    ap.add_argument("--pad-counts", default="15,255,1023", help="padding row counts (the target applies to 255)")
    ap.add_argument(
        "--put-batch",
        type=int,
        default=None,
        help="samples per TransferQueueWriter.put in part 4, lengths from --batch-* (default 377, --quick 64)",
    )
    ap.add_argument("--repeats", type=int, default=None, help="timed blocks per measurement (default 9, --quick 3)")
    ap.add_argument(
        "--min-block", type=float, default=None, help="seconds per timed block (default 0.25, --quick 0.02)"
    )
    ap.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (1 keeps a shared machine's noise down)"
    )
    ap.add_argument("--max-gb", type=float, default=3.0, help="refuse batch sizes whose tensors would exceed this")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true", help="also print cProfile tables of the trajschema calls")
    ap.add_argument("--check", action="store_true", help="exit with status 1 when a target is missed")
    ap.add_argument("--no-tq", action="store_true", help="skip parts 4 and 5 (the ones on a real local TransferQueue)")
    ap.add_argument(
        "--only",
        type=_parts,
        default=None,
        metavar="PARTS",
        help=f"run only these parts, comma-separated, of {', '.join(PARTS)} ('verl' = 5, 'checked' = 6)",
    )
    args = ap.parse_args(argv)
    args.parts = set(PARTS) if args.only is None else args.only
    if args.no_tq:
        args.parts -= {"4", "5"}
    args.batch = args.batch if args.batch is not None else (256 if args.quick else 4096)
    args.repeats = args.repeats if args.repeats is not None else (3 if args.quick else 9)
    args.put_batch = args.put_batch if args.put_batch is not None else (64 if args.quick else 377)
    args.min_block = args.min_block if args.min_block is not None else (0.02 if args.quick else 0.25)
    args.warmup = 0.02 if args.quick else 0.2
    args.pad_counts = [int(c) for c in args.pad_counts.split(",") if c]
    if args.prompt < 1 or args.response < 1:
        ap.error("--prompt and --response must be >= 1")
    if args.batch_prompt[0] < 1 or args.batch_response[0] < 1:
        ap.error("batch P and R ranges must start at >= 1")
    if args.batch < 4 or args.put_batch < 1:
        ap.error("--batch must be >= 4 (the broken-batch checks break sample 3) and --put-batch >= 1")
    return args


def profile_call(label: str, fn: Callable[[], Any], calls: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(12)
    return f"=== cProfile: {label} ({calls} calls) ===\n{buf.getvalue()}"


def nontensor_share(schema: ts.Schema, td: TensorDict, timing: Mapping[str, Any]) -> str:
    """Unprofiled: how much of ``validate_batch(td)`` reading its declared non-tensor columns costs.

    cProfile inflates code that makes many small Python calls (``tolist()`` makes
    several per row), so this times ``validate_batch``, ``tolist()`` of the columns it
    reads, and the fast recipe of ``bench_nontensor.py`` on the same columns,
    interleaved like any other measurement.
    """
    from bench_nontensor import raw_type_guard

    declared = [k for k in VERL_NONTENSOR_FIELDS if k in schema.fields]
    cols = [td.get(k) for k in declared]
    assert all(all(a is b for a, b in zip(raw_type_guard(c), c.tolist(), strict=True)) for c in cols)
    t = measure(
        {
            "validate_batch": lambda: schema.validate_batch(td, depth="shapes"),
            "tolist": lambda: [c.tolist() for c in cols],
            "recipe": lambda: [raw_type_guard(c) for c in cols],
        },
        **timing,
    )
    whole, slow, fast = (t[k].median_ns for k in ("validate_batch", "tolist", "recipe"))
    return (
        f"=== unprofiled (medians of interleaved blocks): validate_batch(td packed by TransferQueue, "
        f'depth="shapes") takes {fmt_ns(whole)}. Reading the {len(cols)} declared non-tensor columns it reads '
        f"({', '.join(declared)}) takes {fmt_ns(slow)} with NonTensorStack.tolist() ({slow / whole:.2f}x that call) "
        f"and {fmt_ns(fast)} with bench_nontensor.py's recipe ({fmt_ratio(slow / fast)} faster); the cProfile "
        "above shows which of the two trajschema calls ===\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    if not __debug__:
        sys.exit("bench_core.py needs assertions (the hand-written baseline is asserts): run without -O")
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    schema = ts.load_schema("vlm_mrope_moe")
    timing = {"min_block_s": args.min_block, "repeats": args.repeats, "warmup_s": args.warmup}
    load_before = os.getloadavg()
    log = sys.stderr

    started = time.perf_counter()

    def say(msg: str) -> None:
        print(f"{time.perf_counter() - started:6.1f}s {msg}", file=log, flush=True)

    rows: list[Row] = []
    parts = args.parts

    # 1. One sample ------------------------------------------------------------
    # (built whatever --only says: it is small, and the batch lengths below come after it
    # from the same generator, so every part always sees the same data)
    P, R = args.prompt, args.response
    sample = make_sample(P, R, layers=args.layers, topk=args.topk, gen=gen, index=0)
    if "1" in parts:
        verify_single(schema, sample)
        say(f"[1/6] single sample P={P} R={R}: validators agree on good and bad samples; timing...")
        t = measure(
            {
                "shapes": lambda: schema.validate(sample, depth="shapes"),
                "values": lambda: schema.validate(sample, depth="values"),
                "jaxtyping": lambda: check_jaxtyping(**sample),
                "asserts": lambda: check_asserts(sample),
            },
            **timing,
        )
        rows += [
            Row('validate(sample, depth="shapes")', t["shapes"], "jaxtyping+beartype fn(**sample)", t["jaxtyping"], 10),
            Row('validate(sample, depth="shapes")', t["shapes"], "hand-written asserts", t["asserts"], None),
            Row('validate(sample, depth="values")', t["values"], "", None, None),
        ]

    # 2. A TransferQueue batch ---------------------------------------------------
    n = args.batch
    plo, phi = args.batch_prompt
    rlo, rhi = args.batch_response
    ps = torch.randint(plo, phi + 1, (n,), generator=gen).tolist()
    rs = torch.randint(rlo, rhi + 1, (n,), generator=gen).tolist()
    total_seq = sum(ps) + sum(rs)
    # routed_experts dominates; the samples and the TensorDict each hold one copy.
    per_seq_token = args.layers * args.topk * 2 + 8 + 4 * 8 + 8  # experts, input_ids, position_ids, attention
    per_response_token = 3 * 8 + 4  # responses, two masks, log-probs
    est_gb = 2 * (total_seq * per_seq_token + sum(rs) * per_response_token + sum(ps) * 8) / 1e9
    if est_gb > args.max_gb and parts & {"2", "2b"}:
        sys.exit(
            f"batch would hold ~{est_gb:.1f} GB of tensors (> --max-gb {args.max_gb}); "
            "use smaller --batch/--batch-prompt/--batch-response"
        )
    op = f"validate_batch(td of {n})"
    td = None
    if "2" in parts:
        say(f"[2/6] building {n} samples, P in {plo}..{phi}, R in {rlo}..{rhi} (~{est_gb:.2f} GB of tensors)...")
        samples = [
            make_sample(p, r, layers=args.layers, topk=args.topk, gen=gen, index=i)
            for i, (p, r) in enumerate(zip(ps, rs))
        ]
        td = tq_batch(samples)  # trajschema.testing.tq_batch
        assert td["position_ids"].layout == torch.jagged and td["position_ids"]._ragged_idx == 2
        assert td["routed_experts"].layout == torch.jagged and td["routed_experts"]._ragged_idx == 1
        verify_batch(schema, samples, td)
        say("      validators agree on good and bad batches; timing...")

        def jt_loop() -> None:
            for s in samples:
                check_jaxtyping(**s)

        def assert_loop() -> None:
            for s in samples:
                check_asserts(s)

        def ts_loop() -> None:
            for s in samples:
                schema.validate(s, depth="shapes")

        t = measure(
            {
                "shapes": lambda: schema.validate_batch(td, depth="shapes"),
                "values": lambda: schema.validate_batch(td, depth="values"),
                "jaxtyping": jt_loop,
                "asserts": assert_loop,
                "loop": ts_loop,
            },
            **timing,
        )
        rows += [
            Row(f'{op}, depth="shapes"', t["shapes"], f"jaxtyping+beartype, loop of {n}", t["jaxtyping"], 50),
            Row(f'{op}, depth="shapes"', t["shapes"], f"hand-written asserts, loop of {n}", t["asserts"], None),
            Row(f'{op}, depth="shapes"', t["shapes"], f'validate(depth="shapes"), loop of {n}', t["loop"], None),
            Row(f'{op}, depth="values"', t["values"], "", None, None),
        ]

    # 2b. The same lengths, verl's columns, laid out by TransferQueue's own code -------
    real_td = None
    if "2b" in parts:
        try:
            tq_pack_function()
        except ImportError as e:
            why = f"transfer_queue not importable ({type(e).__name__}: {e})"
            say(f"[2b/6] skipped: {why}")
            label = f'{op}, depth="shapes", packed by TransferQueue'
            rows.append(Row(label, None, f"jaxtyping+beartype, loop of {n}", None, 50, skipped=why))
        else:
            say(f"[2b/6] building {n} verl_sample samples, packed by TransferQueue's _pack_field_values...")
            vsamples = verl_samples(schema, ps, rs, layers=args.layers, topk=args.topk)
            real_td = tq_pack(vsamples)
            assert real_td["position_ids"].layout == torch.jagged and real_td["position_ids"]._ragged_idx == 2
            assert all(type(real_td.get(k)) is NonTensorStack for k in VERL_NONTENSOR_FIELDS), real_td
            verify_batch(
                schema,
                vsamples,
                real_td,
                pack=tq_pack,
                loops={"jaxtyping": (lambda s: check_jaxtyping_verl(**s), JT_ERRORS)},
            )
            say("      validators agree on good and bad batches; timing...")

            def jt_verl_loop() -> None:
                for s in vsamples:
                    check_jaxtyping_verl(**s)

            t = measure(
                {"shapes": lambda: schema.validate_batch(real_td, depth="shapes"), "jaxtyping": jt_verl_loop},
                **timing,
            )
            rows.append(
                Row(
                    f'{op}, depth="shapes", packed by TransferQueue',
                    t["shapes"],
                    f"jaxtyping+beartype, loop of {n}",
                    t["jaxtyping"],
                    50,
                )
            )

    # 3. Padding ------------------------------------------------------------------
    if "3" in parts:
        say(f"[3/6] padding {args.pad_counts} rows like the P={P} R={R} sample...")
        for count in args.pad_counts:
            verify_padding(schema, sample, count)
            t = measure(
                {
                    "ours": lambda count=count: schema.padding(count, eos_token_id=EOS, like=sample),
                    "theirs": lambda count=count: padding_baseline(sample, count, EOS),
                },
                **timing,
            )
            target = 10 if count == 255 else None  # the target is stated for 255 rows
            rows.append(
                Row(f"padding({count}, like=sample)", t["ours"], "clone-and-deepcopy loop + stack", t["theirs"], target)
            )

    # 4 and 5. On a real TransferQueue (one Ray + TransferQueue for both) -------------
    tq_parts = (["put", "pad"] if "4" in parts else []) + (["upsample"] if "5" in parts else [])
    if tq_parts:
        from bench_tq import UPSAMPLE_MULTIPLE, UPSAMPLE_REAL, tq_rows

        if "4" in parts:
            say(
                f"[4/6] put of {args.put_batch} samples and pad_to_multiple {args.pad_counts} rows "
                "on a local TransferQueue (starts Ray, ~15 s)..."
            )
        if "5" in parts:
            say(
                f"[5/6] trajschema.verl vs verl upsample_batch_to_divisible_size: {list(UPSAMPLE_REAL)} real samples "
                f"padded to a multiple of {UPSAMPLE_MULTIPLE}, on {'the same' if '4' in parts else 'a'} local "
                "TransferQueue..."
            )
        rows += tq_rows(
            args.pad_counts,
            repeats=3 if args.quick else 31,
            layers=args.layers,
            topk=args.topk,
            say=say,
            put_batch=args.put_batch,
            prompt_range=args.batch_prompt,
            response_range=args.batch_response,
            seed=args.seed,
            parts=tq_parts,
        )

    # 6. What @ts.checked adds to a call ---------------------------------------------------
    if "6" in parts:
        from bench_checked import BATCH, checked_rows

        say(f"[6/6] @ts.checked in each mode vs undecorated and direct calls (the P={P} R={R} sample, {BATCH} samples)")
        rows += checked_rows(schema, sample, timing=timing, seed=args.seed, say=say)

    load_after = os.getloadavg()
    lines = machine_info()
    lines.append(f"load average (1 min) before/after: {load_before[0]:.2f} / {load_after[0]:.2f}")
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    lines.append(f"peak resident memory of this process (Ray and TransferQueue run in others): {peak_gb:.1f} GB")
    if parts & {"1", "2", "2b", "3"}:
        lines.append(
            f"sizes: single sample P={P}, R={R}, layers={args.layers}, topk={args.topk}; batch of {n} with P uniform "
            f"in {plo}..{phi}, R uniform in {rlo}..{rhi} (sum S = {total_seq}), laid out by {tq_layout_source()}; "
            "the same lengths as verl_sample samples with verl's non-tensor columns, packed by TransferQueue's "
            "AsyncSimpleStorageManager._pack_field_values"
        )
    if "6" in parts:
        from bench_checked import BATCH

        lines.append(
            f"part 6: the single sample above; a TensorDict of {BATCH} samples (P uniform in 8..128, R uniform in "
            f"1..256, layers={args.layers}, topk={args.topk}) laid out by trajschema.testing.tq_batch"
        )
    if "5" in parts:
        from bench_tq import UPSAMPLE_MULTIPLE, UPSAMPLE_REAL

        lines.append(
            f"part 5: {max(UPSAMPLE_REAL)} verl_sample samples (layers={args.layers}, topk={args.topk}, GRPO groups "
            f"of {GROUP} sharing P uniform in {plo}..{phi}, R uniform in {rlo}..{rhi}) in one partition; batches of "
            f"{' and '.join(map(str, UPSAMPLE_REAL))} of them padded to a multiple of {UPSAMPLE_MULTIPLE}"
        )
    lines.append(
        f"timing: median of {args.repeats} blocks, each >= {args.min_block} s (gc collected before, disabled during); "
        f"{'quick run' if args.quick else 'full run'}"
    )
    if parts != set(PARTS):
        lines.append(f"parts run: {', '.join(p for p in PARTS if p in parts) or 'none'} (of {', '.join(PARTS)})")
    bullet = "- " if args.markdown else "  "
    print("\n".join(bullet + line for line in lines))
    print()
    print(render(rows, args.markdown))
    print()
    print(
        "Times are medians per call; ratio = baseline time / trajschema time (higher is better for trajschema), "
        "except in the put, pad_to_multiple and upsample_batch_to_divisible_size rows, where it is "
        "trajschema / baseline (an overhead, lower is better), and in the @checked rows, where it is the time "
        "the decorator adds per call (decorated - baseline)."
    )
    skipped = [r for r in rows if r.skipped]
    if skipped:
        print()
        print("Skipped rows:")
        if args.markdown:
            print()
        for r in skipped:
            print(f"{bullet}{r.operation}{' vs ' + r.baseline if r.baseline else ''}: {r.skipped}")
    print()
    print("Spread per measurement (blocks x calls per block; paired ratios compare blocks run back to back):")
    if args.markdown:
        print()
    seen: set[int] = set()
    for r in rows:
        for who, tm in (("trajschema", r.ours), (r.baseline, r.theirs)):
            if tm is not None and id(tm) not in seen:
                seen.add(id(tm))
                print(f"{bullet}{r.operation} / {who}: {tm.spread()}")
        paired = r.paired()
        if paired is not None:
            med, lo, hi = (r.fmt(x) for x in paired)
            print(f"{bullet}{r.operation} vs {r.baseline}: per-round ratio median {med}, min {lo}, max {hi}")

    if args.profile:
        print()
        print(
            profile_call(
                'schema.validate(sample, depth="shapes")', lambda: schema.validate(sample, depth="shapes"), 2000
            )
        )
        if td is not None:
            print(
                profile_call(
                    'schema.validate_batch(td, depth="shapes")', lambda: schema.validate_batch(td, depth="shapes"), 20
                )
            )
        if real_td is not None:
            print(
                profile_call(
                    'schema.validate_batch(td packed by TransferQueue, verl columns, depth="shapes")',
                    lambda: schema.validate_batch(real_td, depth="shapes"),
                    20,
                )
            )
            print(nontensor_share(schema, real_td, timing))
        c0 = 255 if 255 in args.pad_counts else args.pad_counts[0]
        print(
            profile_call(
                f"schema.padding({c0}, like=sample)", lambda: schema.padding(c0, eos_token_id=EOS, like=sample), 20
            )
        )
    failed = [r for r in rows if r.result == "FAIL"]
    return 1 if failed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
