"""End to end on an embedded TransferQueue: the main job, ``trajschema demo``, as a script.

What a verl-style trainer does before a PPO/GRPO step, with trajschema doing the
checking and the padding: a multi-trajectory rollout is written through a
``TransferQueueWriter`` (every put validated first), padded to
``required_multiple(dp, mini_batch * rollout.n)`` with schema-derived padding, read
back, validated against the schema and the is_padding contract, and scored with
padding kept out of the metrics. The work is done by ``trajschema.cli.demo.run_demo``;
this script only forwards its arguments to the ``demo`` command.

Run: python examples/verl_padding.py [--schema vlm_mrope_moe] [--prompts 45] [--rollout-n 8]
     [--dp-size 2] [--mini-batch-size 15] [--seed 0]      (the same as `trajschema demo ...`)
"""

from __future__ import annotations

import sys

from trajschema.cli.app import main

if __name__ == "__main__":
    sys.exit(main(["demo", *sys.argv[1:]]))
