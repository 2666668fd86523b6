"""The TRL check's cost: ``trajschema.trl``'s check of a GRPO batch against the step that builds it (issue 30).

Runs alone (not a part of ``bench_core.py``): ``python benchmarks/bench_trl.py [--quick] [--markdown]``.

The batch: TRL 1.16.0's own ``GRPOTrainer._generate_and_score_completions`` on CPU over the
tiny random model of ``tests/trl_support.py`` (a 1-layer Llama of hidden size 16 and a
24-word tokenizer, saved to a temporary folder), ``prompts`` prompts of 1..4 words x 4
generations, completions of up to ``--length`` tokens, with ``old_per_token_logps`` and
``ref_per_token_logps`` (``num_iterations=2``, ``beta=0.1``), as in the tests.

Rows (``harness.measure_calls``: single calls, round-robin, median of the repeats):

* **the step**: TRL's own ``_generate_and_score_completions`` on that batch of prompts
  (generation, the two log-prob passes, rewards, advantages, padding);
* **the check** (``install()``'s work per batch): ``text.batch_violations(batch,
  layout=grpo_layout(pad_token_id=...), depth="shapes")`` on the dict the step returned;
  target: under 5% of the step;
* **the check at depth="values"** (``install(depth="values")``): info.

The model is as small as a model gets, so the step's tensor work is the least any real run
spends on this batch: the share measured is an upper bound of what a real model sees.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.trl_support, benchmarks.harness

import trajschema as ts
import trajschema.trl as tt
from benchmarks.harness import Call, Row, machine_info, measure_calls, render
from tests.trl_support import grpo_batch, make_trainer, tiny_model

GENERATIONS = 4


def trl_rows(*, prompts: int, length: int, repeats: int, say=print) -> list[Row]:
    folder = Path(tempfile.mkdtemp(prefix="bench-trl-"))
    tiny_model(folder)
    trainer = make_trainer(folder, generations=GENERATIONS, prompts=prompts, max_completion_length=length)
    trainer.model.train()
    texts = [" ".join(f"w{(3 * i + j) % 21}" for j in range(1 + i % 4)) for i in range(prompts)]
    schema = ts.load_schema("text")
    layout = tt.grpo_layout(pad_token_id=trainer.processing_class.pad_token_id)
    batch = grpo_batch(trainer, texts)
    rows = batch["completion_ids"].shape
    say(f"batch: {rows[0]} rows, completions padded to {rows[1]}, prompts to {batch['prompt_ids'].shape[1]}")
    assert schema.batch_violations(batch, layout=layout, depth="values") == []  # a clean batch: the real cost
    calls = {
        "step": Call(lambda: grpo_batch(trainer, texts)),
        "shapes": Call(lambda: schema.batch_violations(batch, layout=layout, depth="shapes")),
        "values": Call(lambda: schema.batch_violations(batch, layout=layout, depth="values")),
    }
    for call in calls.values():
        call.run()  # warm: binding, generated checkers
    t = measure_calls(calls, repeats=repeats)
    step = f"TRL _generate_and_score_completions ({rows[0]} rows)"
    return [
        Row("check, depth=shapes", t["shapes"], step, t["step"], 0.05, kind="overhead"),
        Row("check, depth=values", t["values"], step, t["step"], None, kind="overhead"),
    ]


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="16 prompts, completions up to 32 tokens, 3 repeats")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--prompts", type=int, default=None, help="prompts (x4 generations; default 64, --quick 16)")
    ap.add_argument("--length", type=int, default=None, help="max completion length (default 128, --quick 32)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    prompts = args.prompts or (16 if args.quick else 64)
    length = args.length or (32 if args.quick else 128)
    rows = trl_rows(
        prompts=prompts, length=length, repeats=3 if args.quick else 9, say=lambda m: print(m, file=sys.stderr)
    )
    print("\n".join(machine_info()))
    print(render(rows, args.markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
