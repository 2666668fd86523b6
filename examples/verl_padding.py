"""End to end on an embedded TransferQueue: write a rollout batch, pad it, read it back, score it.

What a verl-style trainer does before a PPO/GRPO step, with trajschema doing the
checking and the padding:

1. rollout writes multi-trajectory samples (uneven trajectories per prompt) with a
   ``TransferQueueWriter`` — every put validated before anything is written;
2. the trainer pads the batch to ``required_multiple(dp, mini_batch * rollout.n)``
   with padding derived from the schema (``pad_to_multiple``);
3. it reads everything back, validates every sample against the schema and the
   is_padding contract, and computes metrics on real samples only.

Run: python examples/verl_padding.py [--schema vlm_mrope_moe] [--prompts 45] [--rollout-n 8]
"""

from __future__ import annotations

import argparse
import random
import sys
import time

import torch

import trajschema as ts
from trajschema.testing import verl_sample

EOS = 151643


def build_rollout(schema: ts.Schema, prompts: int, rollout_n: int, seed: int) -> tuple[list[str], list[dict]]:
    """Samples of ``prompts`` groups; each prompt gets 1..2*rollout_n-1 trajectories (multi-turn agents)."""
    rng = random.Random(seed)
    keys, samples = [], []
    for p in range(prompts):
        uid = f"prompt{p}"
        prompt_len = rng.randint(8, 96)
        for t in range(rng.randint(1, 2 * rollout_n - 1)):
            response_len = rng.randint(1, 64)
            sample = verl_sample(schema, prompt_len, response_len, uid=uid, layers=48, topk=8, seed=seed + 1000 * p + t)
            sample["session_id"] = t
            sample["rm_scores"] = torch.zeros(response_len)
            sample["rm_scores"][-1] = float(rng.random() < 0.5)  # outcome reward on the last token
            keys.append(f"{uid}_{t}_0")
            samples.append(sample)
    return keys, samples


def metrics(batch, tags) -> dict[str, float]:
    """Mean outcome score and mean response length over the samples given."""
    lengths = batch["loss_mask"].offsets().diff().float() if batch["loss_mask"].is_nested else None
    scores = torch.stack([s.sum() for s in batch["rm_scores"].unbind()])
    return {"score/mean": scores.mean().item(), "response_length/mean": lengths.mean().item()}


real_metrics = ts.exclude_padding(metrics)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schema", default="vlm_mrope_moe", choices=ts.schema_names())
    parser.add_argument("--prompts", type=_positive, default=45)
    parser.add_argument("--rollout-n", type=_positive, default=8)
    parser.add_argument("--dp-size", type=_positive, default=2)
    parser.add_argument("--mini-batch", type=_positive, default=15, help="actor ppo_mini_batch_size (prompts)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    schema = ts.load_schema(args.schema)
    keys, samples = build_rollout(schema, args.prompts, args.rollout_n, args.seed)
    multiple = ts.required_multiple(args.dp_size, actor_mini_batch_size=args.mini_batch, rollout_n=args.rollout_n)
    partition = "train_step_1"
    # What put checks first, timed on its own for the report (before Ray starts competing for the CPUs).
    t0 = time.perf_counter()
    schema.validate_batch(samples)
    t_validate = time.perf_counter() - t0

    with ts.start_local_transfer_queue(timeout_s=60) as tq:
        ready = time.perf_counter()
        writer = ts.TransferQueueWriter(schema, partition_id=partition, eos_token_id=EOS)
        t0 = time.perf_counter()
        meta = writer.put(keys, samples)
        t_put = time.perf_counter() - t0

        t0 = time.perf_counter()
        padded = writer.pad_to_multiple(meta, multiple)
        t_pad = time.perf_counter() - t0

        t0 = time.perf_counter()
        batch = tq.kv_batch_get(padded.keys, partition)
        t_get = time.perf_counter() - t0
        t0 = time.perf_counter()
        schema.validate_batch(batch, tags=padded.tags)
        ts.check_padding_contract(batch, padded.tags, schema)
        t_check = time.perf_counter() - t0

        unfiltered = metrics(batch, padded.tags)
        filtered = real_metrics(batch, padded.tags)
        tq.kv_clear(padded.keys, partition)

    added = len(padded.keys) - len(keys)
    print(f"schema            {schema.name} (position_ids {schema.fields['position_ids'].describe()})")
    print(f"rollout           {len(keys)} samples from {args.prompts} prompts (uneven trajectories per prompt)")
    print(
        f"multiple          {multiple} = lcm(dp {args.dp_size}, mini-batch {args.mini_batch} x rollout.n "
        f"{args.rollout_n})"
    )
    print(f"padding added     {added} -> {len(padded.keys)} samples; real_count {ts.real_count(padded.tags)}")
    print(f"TransferQueue     started in {ready - started:.1f} s")
    print(f"put               {t_put * 1e3:.1f} ms (validating the same samples alone: {t_validate * 1e3:.1f} ms)")
    print(f"pad_to_multiple   {t_pad * 1e3:.1f} ms (one put; this writer wrote the batch, so nothing is read back)")
    print(f"read back         {t_get * 1e3:.1f} ms; validate_batch + contract {t_check * 1e3:.1f} ms, all valid")
    print("metrics           " + "  ".join(f"{k} {v:.4f}" for k, v in filtered.items()) + "   (real samples only)")
    print("without filter    " + "  ".join(f"{k} {v:.4f}" for k, v in unfiltered.items()) + "   (diluted by padding)")
    print(f"total             {time.perf_counter() - started:.1f} s")
    return _no_ray_left()


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, found {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, found {value}")
    return value


def _no_ray_left() -> int:
    """Exit status 1 if any process this script started (Ray's raylet, GCS, workers) survived."""
    import psutil

    time.sleep(0.5)
    left = [p for p in psutil.Process().children(recursive=True) if p.is_running()]
    if left:
        names = ", ".join(f"{p.pid} {p.name()}" for p in left[:8])
        print(f"warning: {len(left)} child processes still running: {names}", file=sys.stderr)
        return 1
    print("shutdown          clean (no Ray processes left)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
