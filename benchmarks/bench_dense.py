"""Part 7 of ``bench_core.py``: a dense padded SkyRL batch (issue 17).

``bench_core.py`` runs it with the other parts (``--only 7`` or ``--only dense`` runs it
alone); it also runs alone: ``python benchmarks/bench_dense.py [--quick] [--markdown]``.

The batch is what SkyRL 0.3.0's ``RayPPOTrainer.convert_to_training_input`` builds: a
rollout of ``n`` samples (P uniform in 8..512, R uniform in 1..1024, a fixed seed) as
Python lists, turned into tensors by SkyRL's own
``skyrl.train.dataset.preprocess.convert_prompts_responses_to_batch_tensors`` (with a
tokenizer stand-in that has only ``pad_token_id``) and wrapped with its keys
(``sequences``, ``attention_mask``, ``response_mask``, ``rewards``, ``loss_mask``,
``rollout_logprobs``, ...) and ``metadata = {"uids": [...]}``. The schema is ``text``,
the layout the packaged ``skyrl`` one with the pad id pinned.

Timed, interleaved round-robin with ``harness.measure``:

* the build itself (SkyRL's function and the wrapping);
* ``schema.batch_violations(batch, layout=skyrl, depth="shapes")``, against the build
  (target: at most 10% of it) and against a per-row Python loop of the same checks in
  plain torch (target: at least 20x slower than ours);
* the same call at ``depth="values"`` (reported);
* ``schema.from_dense(batch, layout=skyrl)`` (dense -> samples) and
  ``schema.to_dense(samples, layout=skyrl)`` (samples -> dense), reported against the build.

Before timing, it asserts that the candidates do the job: ours and the loop accept the
batch SkyRL built, and both reject each defect of a small catalogue (a shifted prompt, a
response mask on the wrong side, a loss mask on padding, a token in the padded region)
at the right row; ``to_dense(from_dense(batch))`` gives the batch back bit for bit.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

import trajschema as ts

from harness import Row, measure, render

#: The issue's batch: 4096 rows, P uniform in 8..512, R uniform in 1..1024.
BATCH = 4096
PROMPT_RANGE = (8, 512)
RESPONSE_RANGE = (1, 1024)
#: Qwen2's ``<|endoftext|>`` (SkyRL's pad id with a Qwen tokenizer) and ``<|im_end|>``.
PAD_TOKEN_ID = 151_643
EOS_TOKEN_ID = 151_645
#: Token ids drawn for prompts and responses stay below the special tokens.
VOCAB = 151_000
GROUP = 8  # GRPO samples per prompt uid
#: The keys SkyRL pads along the sequence block and along the response block.
SEQ_KEYS = ("sequences", "attention_mask")
RESPONSE_KEYS = ("response_mask", "loss_mask", "rewards", "rollout_logprobs")
#: The dtypes SkyRL builds (``loss_mask`` float32, whatever its ``TrainingInput`` says).
DTYPES = {
    "sequences": torch.int64,
    "attention_mask": torch.int64,
    "response_mask": torch.int64,
    "loss_mask": torch.float32,
    "rewards": torch.float32,
    "rollout_logprobs": torch.float32,
}


@dataclasses.dataclass(frozen=True)
class Rollout:
    """A generator output as SkyRL's trainer holds it: one Python list per sample."""

    prompts: list[list[int]]
    responses: list[list[int]]
    rewards: list[list[float]]
    loss_masks: list[list[int]]
    logprobs: list[list[float]]
    uids: list[str]


def make_rollout(n: int, *, seed: int, prompt_range: tuple[int, int], response_range: tuple[int, int]) -> Rollout:
    """``n`` samples: random tokens, EOS last, the score on the last response token, a few env tokens masked."""
    gen = torch.Generator().manual_seed(seed)
    ps = torch.randint(prompt_range[0], prompt_range[1] + 1, (n,), generator=gen).tolist()
    rs = torch.randint(response_range[0], response_range[1] + 1, (n,), generator=gen).tolist()
    prompts, responses, rewards, masks, logprobs = [], [], [], [], []
    for p, r in zip(ps, rs):
        prompts.append(torch.randint(10, VOCAB, (p,), generator=gen).tolist())
        resp = torch.randint(10, VOCAB, (r,), generator=gen)
        resp[-1] = EOS_TOKEN_ID
        responses.append(resp.tolist())
        reward = torch.zeros(r)
        reward[-1] = float(torch.rand((), generator=gen) > 0.5)
        rewards.append(reward.tolist())
        masks.append((torch.rand(r, generator=gen) > 0.1).long().tolist())
        logprobs.append((-torch.rand(r, generator=gen) * 5).tolist())
    uids = [f"q{i // GROUP}" for i in range(n)]
    return Rollout(prompts, responses, rewards, masks, logprobs, uids)


def skyrl_builder() -> Callable[[Rollout], ts.DenseBatch]:
    """SkyRL's own build, as ``RayPPOTrainer.convert_to_training_input`` calls it (raises ImportError without SkyRL)."""
    from skyrl.train.dataset.preprocess import convert_prompts_responses_to_batch_tensors

    tokenizer = SimpleNamespace(pad_token_id=PAD_TOKEN_ID)

    def build(rollout: Rollout) -> ts.DenseBatch:
        seqs, attention, response, rewards, loss, logprobs, experts = convert_prompts_responses_to_batch_tensors(
            tokenizer, rollout.prompts, rollout.responses, rollout.rewards, rollout.loss_masks, rollout.logprobs
        )
        # convert_to_training_input's keys; a text rollout has no routes and no images (None there).
        columns = {
            "sequences": seqs,
            "attention_mask": attention,
            "response_mask": response,
            "rewards": rewards,
            "loss_mask": loss,
            "rollout_logprobs": logprobs,
        }
        assert experts is None
        return ts.DenseBatch(columns, metadata={"uids": list(rollout.uids)})

    return build


# ---------------------------------------------------------------------------
# The baseline: the same checks, written as a trainer would, one row at a time


def _batch_shapes(batch: Mapping[str, Any], n: int) -> list[tuple[int | None, str, str]]:
    """Every column there, of SkyRL's dtype, ``(n, width)`` with one width per block."""
    found: list[tuple[int | None, str, str]] = []
    widths = {}
    for key, dtype in DTYPES.items():
        t = batch.get(key)
        if not isinstance(t, torch.Tensor):
            found.append((None, key, "missing"))
        elif t.dtype != dtype or t.dim() != 2 or t.shape[0] != n:
            found.append((None, key, "dtype/shape"))
        else:
            widths.setdefault(key in SEQ_KEYS, set()).add(t.shape[1])
    if any(len(w) > 1 for w in widths.values()):
        found.append((None, "sequences", "shape"))
    return found


def loop_check(batch: Mapping[str, Any], pad_token_id: int) -> list[tuple[int | None, str, str]]:
    """The checks of ``batch_violations(..., layout=skyrl, depth="shapes")`` as a per-row loop.

    Per row: each mask holds only 0/1 and its ones are one run that ends the row (the
    padding is on the left); the prompt is at least one token; the padded regions hold
    the pad id (``sequences``) or zeros (the response-level tensors). Per batch: the
    columns' dtypes and shapes, each padded length the batch maximum, one str uid per row.
    Returns (row, key, what) for every problem.
    """
    uids = batch.metadata.get("uids") if hasattr(batch, "metadata") else None
    n = len(uids) if isinstance(uids, list) else -1
    found = _batch_shapes(batch, n)
    if found:
        return found
    seqs, am, rm = batch["sequences"], batch["attention_mask"], batch["response_mask"]
    width, rwidth = seqs.shape[1], rm.shape[1]
    longest = longest_response = 0
    for i in range(n):
        a, m = am[i], rm[i]
        s, r = int(a.sum()), int(m.sum())
        if not bool(((a == 0) | (a == 1)).all()) or not bool(a[width - s :].all()):
            found.append((i, "attention_mask", "mask"))
            continue
        if not bool(((m == 0) | (m == 1)).all()) or not bool(m[rwidth - r :].all()):
            found.append((i, "response_mask", "mask"))
            continue
        if s - r < 1:
            found.append((i, "response_mask", "dim_range"))
        if not bool((seqs[i, : width - s] == pad_token_id).all()):
            found.append((i, "sequences", "padded"))
        for key in RESPONSE_KEYS[1:]:
            if bool(batch[key][i, : rwidth - r].any()):
                found.append((i, key, "padded"))
        longest, longest_response = max(longest, s), max(longest_response, r)
    if n and longest != width:
        found.append((None, "attention_mask", "length"))
    if n and longest_response != rwidth:
        found.append((None, "response_mask", "length"))
    found += [(i, "uids", "kind") for i, u in enumerate(uids) if not isinstance(u, str)]
    return found


# ---------------------------------------------------------------------------
# Both sides do the job before they are timed


def _copy(batch: ts.DenseBatch) -> ts.DenseBatch:
    return ts.DenseBatch({k: v.clone() for k, v in batch.items()}, metadata=dict(batch.metadata))


def defects(batch: ts.DenseBatch) -> dict[str, tuple[int, ts.DenseBatch]]:
    """One broken copy of ``batch`` per defect, with the row broken (a row with padding on both blocks)."""
    s, r = batch["attention_mask"].sum(1), batch["response_mask"].sum(1)
    rows = ((s < s.max()) & (r < r.max()) & (r > 0)).nonzero().flatten().tolist()
    assert rows, "no row has padding in both blocks"
    i = rows[len(rows) // 2]
    out: dict[str, tuple[int, ts.DenseBatch]] = {}
    shifted = _copy(batch)  # the prompt starts one token early: the row no longer ends with its real tokens
    for key in SEQ_KEYS:
        shifted[key][i] = shifted[key][i].roll(-1)
    out["prompt shifted left by one"] = (i, shifted)
    wrong_side = _copy(batch)  # the response mask left-aligned
    for key in ("response_mask", "loss_mask", "rewards", "rollout_logprobs"):
        wrong_side[key][i] = wrong_side[key][i].flip(0)
    out["response mask on the wrong side"] = (i, wrong_side)
    on_padding = _copy(batch)  # rllm #508: a loss mask of 1 where there is no token
    on_padding["loss_mask"][i, 0] = 1.0
    out["loss mask on padding"] = (i, on_padding)
    token = _copy(batch)
    token["sequences"][i, 0] = 7
    out["a token in the padded region"] = (i, token)
    return out


def verify(schema: ts.Schema, layout: ts.Layout, batch: ts.DenseBatch) -> list[dict[str, Any]]:
    """Ours and the loop accept ``batch`` and reject every defect at its row; the round trip is exact."""
    for depth in ("shapes", "values"):
        found = schema.batch_violations(batch, layout=layout, depth=depth)
        assert not found, f"depth={depth}: SkyRL's own batch fails: {found[:3]}"
    assert not loop_check(batch, PAD_TOKEN_ID), loop_check(batch, PAD_TOKEN_ID)[:3]
    for what, (row, bad) in defects(batch).items():
        ours = schema.batch_violations(bad, layout=layout, depth="shapes")
        assert ours and all(v.sample in (row, None) for v in ours), f"{what}: trajschema found {ours[:3]}"
        assert any(v.sample == row for v in ours), f"{what}: trajschema did not name row {row}: {ours[:3]}"
        theirs = loop_check(bad, PAD_TOKEN_ID)
        assert theirs and {i for i, _, _ in theirs} <= {row, None}, f"{what}: the loop found {theirs[:3]}"
    samples = schema.from_dense(batch, layout=layout)
    assert len(samples) == len(batch.metadata["uids"])
    back = schema.to_dense(samples, layout=layout)
    assert set(back) == set(batch) and back.metadata == batch.metadata, (sorted(back), sorted(batch))
    for key, value in batch.items():
        assert back[key].dtype == value.dtype and torch.equal(back[key], value), f"round trip changed {key}"
    return samples


def skyrl_version() -> str:
    """The installed SkyRL's version, for the reports' headers (parts 7 and 8)."""
    try:
        return importlib.metadata.version("skyrl")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def dense_sizes(n: int) -> str:
    """What part 7 ran on, for the report's header."""
    version = skyrl_version()
    return (
        f"{n} rows of the text schema, P uniform in {PROMPT_RANGE[0]}..{PROMPT_RANGE[1]}, R uniform in "
        f"{RESPONSE_RANGE[0]}..{RESPONSE_RANGE[1]}, built by SkyRL {version}'s "
        "convert_prompts_responses_to_batch_tensors; the packaged skyrl layout with the pad id pinned"
    )


def dense_rows(
    *,
    timing: Mapping[str, Any],
    n: int = BATCH,
    seed: int = 0,
    say: Callable[[str], None] = print,
) -> list[Row]:
    """The part-7 rows (each reads "skipped", saying why, when SkyRL cannot be imported)."""
    op = f'batch_violations(SkyRL batch of {n}, layout="skyrl", depth='
    build_label = "SkyRL convert_prompts_responses_to_batch_tensors (the build)"
    try:
        build = skyrl_builder()
    except ImportError as e:
        why = f"skyrl not importable ({type(e).__name__}: {e}); pip install --no-deps skyrl==0.3.0 (see README)"
        say(f"[7] skipped: {why}")
        return [Row(f'{op}"shapes")', None, build_label, None, 0.1, kind="overhead", skipped=why)]
    schema = ts.load_schema("text")
    layout = ts.load_layout("skyrl").with_pad_token(PAD_TOKEN_ID)
    rollout = make_rollout(n, seed=seed + 7, prompt_range=PROMPT_RANGE, response_range=RESPONSE_RANGE)
    batch = build(rollout)
    say(
        f"      SkyRL built {n} rows: sequences {tuple(batch['sequences'].shape)}, "
        f"response-level {tuple(batch['rewards'].shape)}"
    )
    samples = verify(schema, layout, batch)
    say("      ours and the loop accept SkyRL's batch and reject each defect; the round trip is exact; timing...")
    t = measure(
        {
            "build": lambda: build(rollout),
            "shapes": lambda: schema.batch_violations(batch, layout=layout, depth="shapes"),
            "values": lambda: schema.batch_violations(batch, layout=layout, depth="values"),
            "loop": lambda: loop_check(batch, PAD_TOKEN_ID),
            "from": lambda: schema.from_dense(batch, layout=layout),
            "to": lambda: schema.to_dense(samples, layout=layout),
        },
        **timing,
    )
    return [
        Row(f'{op}"shapes")', t["shapes"], build_label, t["build"], 0.1, kind="overhead"),
        Row(f'{op}"shapes")', t["shapes"], f"per-row Python loop of the same checks, {n} rows", t["loop"], 20),
        Row(f'{op}"values")', t["values"], build_label, t["build"], None, kind="overhead"),
        Row(
            f'from_dense(SkyRL batch of {n}, layout="skyrl")', t["from"], build_label, t["build"], None, kind="overhead"
        ),
        Row(f'to_dense({n} samples, layout="skyrl")', t["to"], build_label, t["build"], None, kind="overhead"),
    ]


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"256 rows instead of {BATCH}, 0.02 s blocks, 3 repeats")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--batch", type=int, default=None, help=f"rows (default {BATCH}, --quick 256)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    quick = {"min_block_s": 0.02, "repeats": 3, "warmup_s": 0.02}
    timing = quick if args.quick else {"min_block_s": 0.25, "repeats": 9, "warmup_s": 0.2}
    n = args.batch or (256 if args.quick else BATCH)
    print(render(dense_rows(timing=timing, n=n, say=lambda m: print(m, file=sys.stderr)), args.markdown))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
