"""Tour of trajschema: load every packaged schema, validate, reject, pad.

Run: python examples/quickstart.py
"""

from __future__ import annotations

import time

import torch

import trajschema as ts
from trajschema.testing import tq_batch, verl_sample


def main() -> None:
    print(f"packaged schemas: {', '.join(ts.schema_names())}\n")
    for name in ts.schema_names():
        schema = ts.load_schema(name)
        sample = verl_sample(schema, 57, 31, layers=48, topk=8)
        dims = schema.validate(sample)
        print(f"[{name}] a realistic sample binds {dims}")

        pad = schema.padding(3, eos_token_id=151643, like=sample)
        schema.validate_batch(pad.fields, tags=pad.tags)
        print(f"[{name}] padding: 3 samples, uid {pad.uid}, tags {pad.tags[0]}")
    print()

    schema = ts.load_schema("vlm_mrope_moe")
    bad = verl_sample(schema, 57, 31, layers=48, topk=8)
    bad["position_ids"] = bad["position_ids"][1:]  # 3 mrope rows where 4 are declared
    bad["routed_experts"] = bad["routed_experts"][:-1]  # one row short of input_ids
    bad["response_mask"] = torch.ones(88, dtype=torch.int64)  # sized like input_ids
    try:
        schema.validate(bad, tag={"seq_len": 88})
    except ts.SchemaError as err:
        print("a bad sample is rejected with every problem at once:")
        print(err, "\n")

    # A batch as TransferQueue returns it, padded to the multiple a PPO step needs.
    multiple = ts.required_multiple(2, actor_mini_batch_size=15, rollout_n=8)
    real = [
        verl_sample(schema, 20 + i % 17, 1 + i % 29, uid=f"q{i // 8}", layers=48, topk=8, seed=i)
        for i in range(45 * 8 - 7)
    ]
    need = ts.padding_needed(len(real), multiple)
    pad = schema.padding(need, eos_token_id=151643, like=real[0])
    batch = tq_batch(real + pad.samples)
    tags = [{"is_padding": False}] * len(real) + pad.tags
    start = time.perf_counter()
    schema.validate_batch(batch, tags=tags)
    took = time.perf_counter() - start
    print(
        f"{len(real)} real samples + {need} padding = {len(tags)} (a multiple of {multiple}); "
        f"validate_batch of the jagged batch took {took * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
