"""pad_to_multiple end to end vs a raw kv_batch_put of the same padding, on a real local TransferQueue.

Part 4 of ``bench_core.py`` (which runs it unless ``--no-tq``); runs alone too:
``python benchmarks/bench_tq.py [--quick]``.

The trajschema side is ``TransferQueueWriter.pad_to_multiple(meta, multiple)`` on a
partition holding a few real ``vlm_mrope_moe`` samples (layers 48, topk 8): one
``kv_batch_get`` of a reference sample, padding derived from the schema, validated, and
one ``kv_batch_put``. The baseline writes the very same padding TensorDict with one raw
``kv_batch_put``. Each call's keys are cleared before the next call, outside the timed
region; calls of the two sides alternate, so drifting load falls on both alike.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

import trajschema as ts
from trajschema.testing import verl_sample

EOS = 2
PARTITION = "bench_pad"


def _timed(fn: Callable[[], Any]) -> float:
    gc.collect()
    gc.disable()
    try:
        t0 = time.perf_counter_ns()
        fn()
        return float(time.perf_counter_ns() - t0)
    finally:
        gc.enable()


def _measure(tq: Any, writers: dict[str, Any], meta: Any, ref: dict, count: int, repeats: int) -> dict:
    """Alternating timed calls of each writer's pad_to_multiple and of a raw put of the same padding."""
    schema, n_real = ref_schema(writers), len(meta.keys)
    multiple = n_real + count
    pad = schema.padding(count, eos_token_id=EOS, like=ref)

    # Correctness first: each writer's padding reads back valid, with the raw padding's fields.
    for writer in writers.values():
        padded = writer.pad_to_multiple(meta, multiple)
        added = padded.keys[n_real:]
        back = tq.kv_batch_get(added, PARTITION)
        schema.validate_batch(back, tags=padded.tags[n_real:])
        assert sorted(back.keys()) == sorted(pad.fields.keys())
        tq.kv_clear(added, PARTITION)

    times: dict[str, list[float]] = {name: [] for name in [*writers, "raw"]}
    written: list[Any] = []
    for _ in range(repeats):
        for name, writer in writers.items():
            times[name].append(_timed(lambda w=writer: written.append(w.pad_to_multiple(meta, multiple))))
            tq.kv_clear(written.pop().keys[n_real:], PARTITION)
        times["raw"].append(
            _timed(lambda: tq.kv_batch_put(keys=pad.keys, partition_id=PARTITION, fields=pad.fields, tags=pad.tags))
        )
        tq.kv_clear(pad.keys, PARTITION)
    return times


def ref_schema(writers: dict[str, Any]) -> ts.Schema:
    return next(iter(writers.values())).schema


def tq_rows(counts: list[int], *, repeats: int, layers: int = 48, topk: int = 8, say=print) -> list[Any]:
    """Measure pad_to_multiple against a raw put for each padding count; return bench_core Rows.

    Two writers pad: the one that wrote the batch (it knows a real sample and reads
    nothing back) and a fresh one, as a trainer driver whose rollout workers wrote the
    batch (it reads one real sample with ``kv_batch_get`` first).
    """
    from bench_core import Row, Timing

    schema = ts.load_schema("vlm_mrope_moe")
    real = [
        verl_sample(schema, 40 + 7 * i, 20 + 5 * i, uid=f"q{i}", layers=layers, topk=topk, seed=i) for i in range(9)
    ]
    rows = []
    with ts.start_local_transfer_queue() as tq:
        rollout = ts.TransferQueueWriter(schema, partition_id=PARTITION, eos_token_id=EOS)
        meta = rollout.put([f"q{i}_0_0" for i in range(len(real))], real)
        driver = ts.TransferQueueWriter(schema, partition_id=PARTITION, eos_token_id=EOS)
        writers = {"same writer": rollout, "fresh writer": driver}
        for count in counts:
            times = _measure(tq, writers, meta, real[0], count, repeats)
            timing = {k: Timing(statistics.median(v), min(v), max(v), 1, len(v), tuple(v)) for k, v in times.items()}
            say(f"      pad_to_multiple({count}) vs raw kv_batch_put: {repeats} alternating calls each")
            for name, note in (("same writer", "writer that put the batch"), ("fresh writer", "+1 kv_batch_get")):
                rows.append(
                    Row(
                        f"pad_to_multiple({count}), {note}",
                        timing[name],
                        "raw kv_batch_put of the same padding",
                        timing["raw"],
                        1.3 if count == 255 else None,  # the bound: overhead <= 1.3x at 255
                        kind="overhead",
                    )
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    import argparse

    from bench_core import render

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 calls per side instead of 15")
    ap.add_argument("--counts", default="15,255,1023")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    rows = tq_rows([int(c) for c in args.counts.split(",")], repeats=3 if args.quick else 15)
    print(render(rows, args.markdown))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    sys.exit(main())
