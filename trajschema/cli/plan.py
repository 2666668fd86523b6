"""``trajschema plan``: how much padding a PPO/GRPO batch needs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from trajschema.cli.args import FORMATTER, add_shared, write
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
            "context parallel layout (a multiple of what verl aligns each packed sequence to:\n"
            "tp_size, or 2 * tp_size * cp_size with context parallelism; at least 128 tokens)."
        ),
        epilog=(
            f"{JSON_HELP}\n\n"
            "Exit status: 0 success, 2 a usage error.\n\n"
            "Example:\n  trajschema plan --dp-size 2 --batch-size 353 --rollout-n 8 --actor-mini-batch-size 15"
        ),
        formatter_class=FORMATTER,
    )
    add_shared(p, "dp_size", required=True)
    add_shared(p, "batch_size", required=True)
    add_shared(p, "rollout_n", required=True)
    add_shared(p, "actor_mini_batch_size", required=True)
    add_shared(p, "critic_mini_batch_size", note="(only when a critic is trained)")
    add_shared(p, "tp_size", default=1)
    add_shared(p, "cp_size", default=1)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run=run_plan)


def plan_report(args: argparse.Namespace) -> dict[str, Any]:
    """The numbers ``plan`` prints, as a JSON-ready dict."""
    from trajschema.padding import padding_needed, required_multiple
    from trajschema.verl.config import padding_dims, sequence_alignment

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
        "alignment": sequence_alignment(tp_size=args.tp_size, cp_size=args.cp_size),
        "padding_dims": dims,
        "padding_length": sum(dims.values()),
    }


#: The shape of ``plan --json``, for the command's epilog (one line per key).
JSON_HELP = (
    '--json prints one object: version (1), command ("plan"), the arguments (dp_size,\n'
    "batch_size, rollout_n, actor_mini_batch_size, critic_mini_batch_size or null,\n"
    "tp_size, cp_size), required_multiple, padding_samples, padded_batch_size,\n"
    "padding_share (0 to 1), alignment (what verl pads each packed sequence to a\n"
    "multiple of), padding_dims (the tokens of each padding sample, per dim) and\n"
    "padding_length (their sum)."
)


def run_plan(args: argparse.Namespace, console: Console) -> int:
    from trajschema.cli.output import fold, terminal_width

    r = plan_report(args)
    if args.json:
        emit_json("plan", r)
        return 0
    terms = [f"dp_size {r['dp_size']}"]
    if r["critic_mini_batch_size"] is not None:
        terms.append(f"critic_mini_batch_size {r['critic_mini_batch_size']} x rollout_n {r['rollout_n']}")
    terms.append(f"actor_mini_batch_size {r['actor_mini_batch_size']} x rollout_n {r['rollout_n']}")
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
            f"(a multiple of verl's alignment {r['alignment']} for tp_size {r['tp_size']} x cp_size "
            f"{r['cp_size']}, at least 128)",
        ),
    ]
    width = max(len(v) for _, v, _ in rows)
    line_width = terminal_width(console)
    for label, value, note in rows:
        head = f"{label:<18} {value:>{width}}  "
        if line_width is None:
            write(head + note)
            continue
        # On a terminal the note wraps between words, lined up under itself; when that
        # leaves it too narrow a column, it goes under the row instead.
        beside = line_width - len(head) >= 30
        lines = fold(note, line_width, indent=len(head) if beside else 4)
        write("\n".join([head + lines[0].lstrip(), *lines[1:]] if beside else [head.rstrip(), *lines]))
    return 0
