"""Part 4 of ``bench_core.py``: the TransferQueue writer on a real local TransferQueue.

``bench_core.py`` runs it unless ``--no-tq``; it runs alone too:
``python benchmarks/bench_tq.py [--quick]``.

Two measurements, each against raw ``kv_batch_put`` calls of the same data, timed with
``bench_core.measure_calls`` (one call per candidate per round, round-robin, so
drifting load falls on all candidates alike; each call's keys are fresh and are
cleared after it, outside the timed region):

* ``TransferQueueWriter.put`` of a rollout batch of ``vlm_mrope_moe`` samples with
  uneven lengths (a list of dicts, ``depth="values"``), against what verl does without
  trajschema (``verl.utils.tensordict_utils.list_of_dict_to_tensordict`` then one
  ``kv_batch_put``; skipped when verl is not importable) and against one
  ``kv_batch_put`` of a prebuilt TensorDict of the same samples.
* ``TransferQueueWriter.pad_to_multiple(meta, multiple)`` on a partition holding a few
  real samples (layers 48, topk 8): padding derived from the schema, validated, one
  ``kv_batch_put`` (and one ``kv_batch_get`` of a reference sample for a writer that did
  not write the batch), against one ``kv_batch_put`` of the very same padding.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import trajschema as ts
from trajschema.testing import tq_batch, verl_sample

EOS = 2
PARTITION = "bench_pad"
PUT_PARTITION = "bench_put"


class _FreshKeys:
    """A new set of ``n`` keys per call (``next()``, untimed) and their clearing (``clear()``, untimed)."""

    def __init__(self, tq: Any, prefix: str, n: int, partition: str) -> None:
        self.tq, self.prefix, self.n, self.partition = tq, prefix, n, partition
        self.calls = 0
        self.keys: list[str] = []

    def next(self) -> None:
        self.calls += 1
        self.keys = [f"{self.prefix}{self.calls}_{i}_0" for i in range(self.n)]

    def clear(self) -> None:
        self.tq.kv_clear(self.keys, self.partition)


def load_verl_list_of_dict_to_tensordict() -> tuple[Callable[[list[dict]], Any] | None, str]:
    """verl's ``list_of_dict_to_tensordict``, or None and why it is not importable."""
    try:
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict
    except Exception as e:  # verl imports transformers, Ray, ...: any failure means no baseline
        return None, f"verl not importable ({type(e).__name__}: {e})"
    return list_of_dict_to_tensordict, ""


def put_samples(
    schema: ts.Schema,
    n: int,
    *,
    prompt_range: tuple[int, int],
    response_range: tuple[int, int],
    layers: int,
    topk: int,
    seed: int,
) -> list[dict[str, Any]]:
    """A rollout batch: GRPO groups of 8 share a prompt length, response lengths vary per sample."""
    from bench_core import GROUP, verl_samples

    gen = torch.Generator().manual_seed(seed + 1)
    groups = -(-n // GROUP)
    group_p = torch.randint(prompt_range[0], prompt_range[1] + 1, (groups,), generator=gen).tolist()
    ps = [group_p[i // GROUP] for i in range(n)]
    rs = torch.randint(response_range[0], response_range[1] + 1, (n,), generator=gen).tolist()
    return verl_samples(schema, ps, rs, layers=layers, topk=topk)


def put_rows(tq: Any, schema: ts.Schema, samples: list[dict[str, Any]], *, repeats: int, say=print) -> list[Any]:
    """``TransferQueueWriter.put`` of ``samples`` against verl's way and a raw put of a prebuilt TensorDict."""
    from bench_core import Call, Row, measure_calls, same_batch, tq_pack

    n = len(samples)
    tags = [
        {
            "is_padding": False,
            "prompt_len": s["prompts"].shape[0],
            "response_len": s["responses"].shape[0],
            "seq_len": s["input_ids"].shape[0],
        }
        for s in samples
    ]
    writer = ts.TransferQueueWriter(schema, partition_id=PUT_PARTITION, eos_token_id=EOS, depth="values")
    prebuilt = tq_batch(samples)  # trajschema.testing: the layout kv_batch_get returns; built untimed
    to_td, why_no_verl = load_verl_list_of_dict_to_tensordict()

    keys = {name: _FreshKeys(tq, f"{name}", n, PUT_PARTITION) for name in ("ts", "verl", "raw")}
    runs: dict[str, Callable[[], Any]] = {
        "ts": lambda: writer.put(keys["ts"].keys, samples, tags),
        "raw": lambda: tq.kv_batch_put(keys=keys["raw"].keys, partition_id=PUT_PARTITION, fields=prebuilt, tags=tags),
    }
    if to_td is not None:
        runs["verl"] = lambda: tq.kv_batch_put(
            keys=keys["verl"].keys, partition_id=PUT_PARTITION, fields=to_td(samples), tags=tags
        )
    else:
        say(f"      the verl baseline row is skipped: {why_no_verl}")

    # Fairness first (and warm-up): every candidate's data reads back from TransferQueue,
    # passes validate_batch, and is the very TensorDict TransferQueue's packing code
    # builds offline from the same samples (the layout part 2b validates).
    expected = tq_pack(samples)
    for name, run in runs.items():
        keys[name].next()
        run()
        back = tq.kv_batch_get(keys[name].keys, PUT_PARTITION)
        schema.validate_batch(back, tags=tags)
        diff = same_batch(back, expected)
        assert diff is None, f"{name}: read back differs from the offline TransferQueue packing: {diff}"
        keys[name].clear()
    listing = tq.kv_list(PUT_PARTITION).get(PUT_PARTITION, {})
    assert not listing, f"kv_clear left {len(listing)} keys behind"
    say(f"      every candidate's put of {n} samples reads back valid, as TransferQueue's packing; timing...")

    times = measure_calls(
        {name: Call(run, before=keys[name].next, after=keys[name].clear) for name, run in runs.items()},
        repeats=repeats,
    )
    say(f"      put of {n} samples vs raw kv_batch_put: {repeats} alternating calls each")
    op = f'TransferQueueWriter.put({n} samples, depth="values")'
    verl_label = "verl list_of_dict_to_tensordict + kv_batch_put"
    return [
        Row(op, times["ts"], verl_label, times["verl"], 1.0, kind="overhead")
        if "verl" in times
        else Row(op, times["ts"], verl_label, None, 1.0, kind="overhead", skipped=why_no_verl),
        Row(op, times["ts"], "raw kv_batch_put of a prebuilt TensorDict", times["raw"], 1.3, kind="overhead"),
    ]


def _pad_times(tq: Any, writers: dict[str, Any], meta: Any, ref: dict, count: int, repeats: int) -> dict:
    """Alternating timed calls of each writer's pad_to_multiple and of a raw put of the same padding."""
    from bench_core import Call, measure_calls

    schema, n_real = next(iter(writers.values())).schema, len(meta.keys)
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

    written: list[Any] = []

    def pad_call(writer: Any) -> Call:
        return Call(
            lambda: written.append(writer.pad_to_multiple(meta, multiple)),
            after=lambda: tq.kv_clear(written.pop().keys[n_real:], PARTITION),
        )

    calls = {name: pad_call(writer) for name, writer in writers.items()}
    calls["raw"] = Call(
        lambda: tq.kv_batch_put(keys=pad.keys, partition_id=PARTITION, fields=pad.fields, tags=pad.tags),
        after=lambda: tq.kv_clear(pad.keys, PARTITION),
    )
    return measure_calls(calls, repeats=repeats)


def tq_rows(
    counts: list[int],
    *,
    repeats: int,
    layers: int = 48,
    topk: int = 8,
    say=print,
    put_batch: int = 377,
    prompt_range: tuple[int, int] = (8, 128),
    response_range: tuple[int, int] = (1, 256),
    seed: int = 0,
) -> list[Any]:
    """Part 4's rows: the put of a rollout batch, then pad_to_multiple for each padding count.

    Two writers pad: the one that wrote the batch (it knows a real sample and reads
    nothing back) and a fresh one, as a trainer driver whose rollout workers wrote the
    batch (it reads one real sample with ``kv_batch_get`` first).
    """
    from bench_core import Row

    schema = ts.load_schema("vlm_mrope_moe")
    rollout_batch = put_samples(
        schema,
        put_batch,
        prompt_range=prompt_range,
        response_range=response_range,
        layers=layers,
        topk=topk,
        seed=seed,
    )
    real = [
        verl_sample(schema, 40 + 7 * i, 20 + 5 * i, uid=f"q{i}", layers=layers, topk=topk, seed=i) for i in range(9)
    ]
    rows = []
    with ts.start_local_transfer_queue() as tq:
        say("      local TransferQueue started")
        rows += put_rows(tq, schema, rollout_batch, repeats=repeats, say=say)
        rollout = ts.TransferQueueWriter(schema, partition_id=PARTITION, eos_token_id=EOS)
        meta = rollout.put([f"q{i}_0_0" for i in range(len(real))], real)
        driver = ts.TransferQueueWriter(schema, partition_id=PARTITION, eos_token_id=EOS)
        writers = {"same writer": rollout, "fresh writer": driver}
        for count in counts:
            timing = _pad_times(tq, writers, meta, real[0], count, repeats)
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
    ap.add_argument("--quick", action="store_true", help="3 calls per side instead of 31")
    ap.add_argument("--counts", default="15,255,1023")
    ap.add_argument("--put-batch", type=int, default=377)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    counts = [int(c) for c in args.counts.split(",") if c]
    rows = tq_rows(counts, repeats=3 if args.quick else 31, put_batch=args.put_batch)
    print(render(rows, args.markdown))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
