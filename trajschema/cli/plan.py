"""``trajschema plan``: how much padding a PPO/GRPO batch needs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from trajschema.cli.args import FORMATTER, positive_int, write
from trajschema.cli.output import emit_json

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["add_plan", "plan_report", "run_plan"]


def add_plan(sub: Any) -> None:
    """Register ``trajschema plan``."""
    p = sub.add_parser(
        "plan",
        help="how much padding a PPO/GRPO batch needs",
        description=(
            "Plan the padding of one training batch. The batch must grow to a multiple of\n"
            "lcm(dp_size, critic_mini_batch_size * rollout_n, actor_mini_batch_size * rollout_n)\n"
            "(verl's rule), so every data-parallel rank gets as many samples and every PPO\n"
            "mini-batch is full. Prints that multiple, how many padding samples reach it, their\n"
            "share of the padded batch, and how long each padding sample must be for the tensor x\n"
            "context parallel layout (a multiple of 2 * tp_size * cp_size, at least 128 tokens)."
        ),
        epilog=(
            "Exit status: 0 success, 2 a usage error.\n\n"
            "Example:\n  trajschema plan --dp-size 2 --batch-size 353 --rollout-n 8 --actor-mini-batch-size 15"
        ),
        formatter_class=FORMATTER,
    )
    p.add_argument("--dp-size", type=positive_int, required=True, metavar="N", help="data-parallel ranks")
    p.add_argument(
        "--batch-size",
        type=positive_int,
        required=True,
        metavar="B",
        help="samples (trajectories) in the batch, before padding",
    )
    p.add_argument(
        "--rollout-n", type=positive_int, required=True, metavar="K", help="the rollout's n (responses per prompt)"
    )
    p.add_argument(
        "--actor-mini-batch-size", type=positive_int, required=True, metavar="M", help="the actor's ppo_mini_batch_size"
    )
    p.add_argument(
        "--critic-mini-batch-size",
        type=positive_int,
        metavar="C",
        help="the critic's ppo_mini_batch_size (only when a critic is trained)",
    )
    p.add_argument("--tp-size", type=positive_int, default=1, metavar="TP", help="tensor-parallel size (default 1)")
    p.add_argument("--cp-size", type=positive_int, default=1, metavar="CP", help="context-parallel size (default 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_plan)


def plan_report(args: argparse.Namespace) -> dict[str, Any]:
    """The numbers ``plan`` prints, as a JSON-ready dict."""
    from trajschema.padding import padding_needed, required_multiple
    from trajschema.verl.config import padding_dims

    multiple = required_multiple(
        args.dp_size,
        actor_mini_batch_size=args.actor_mini_batch_size,
        critic_mini_batch_size=args.critic_mini_batch_size,
        rollout_n=args.rollout_n,
    )
    pad = padding_needed(args.batch_size, multiple)
    dims = padding_dims(tp_size=args.tp_size, cp_size=args.cp_size)
    return {
        "dp_size": args.dp_size,
        "batch_size": args.batch_size,
        "rollout_n": args.rollout_n,
        "actor_mini_batch_size": args.actor_mini_batch_size,
        "critic_mini_batch_size": args.critic_mini_batch_size,
        "tp_size": args.tp_size,
        "cp_size": args.cp_size,
        "required_multiple": multiple,
        "padding_samples": pad,
        "padded_batch_size": args.batch_size + pad,
        "padding_share": pad / (args.batch_size + pad),
        "padding_dims": dims,
        "padding_length": sum(dims.values()),
    }


def run_plan(args: argparse.Namespace, console: Console) -> int:
    r = plan_report(args)
    if args.json:
        emit_json("plan", r)
        return 0
    terms = [f"dp_size {r['dp_size']}"]
    if r["critic_mini_batch_size"] is not None:
        terms.append(f"critic_mini_batch_size {r['critic_mini_batch_size']} x rollout_n {r['rollout_n']}")
    terms.append(f"actor_mini_batch_size {r['actor_mini_batch_size']} x rollout_n {r['rollout_n']}")
    layout = 2 * r["tp_size"] * r["cp_size"]
    dims = r["padding_dims"]
    rows = [
        ("required multiple", str(r["required_multiple"]), f"lcm({', '.join(terms)})"),
        ("batch size", str(r["batch_size"]), "samples"),
        (
            "padding samples",
            str(r["padding_samples"]),
            f"{r['padding_share']:.1%} of the padded batch of {r['padded_batch_size']}",
        ),
        (
            "padding length",
            str(r["padding_length"]),
            f"tokens per padding sample: prompt {dims['prompt']} + response {dims['response']} "
            f"(a multiple of 2 x tp_size {r['tp_size']} x cp_size {r['cp_size']} = {layout}, at least 128)",
        ),
    ]
    width = max(len(v) for _, v, _ in rows)
    for label, value, note in rows:
        write(f"{label:<18} {value:>{width}}  {note}")
    return 0
