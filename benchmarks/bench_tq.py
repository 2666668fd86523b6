"""Parts 4 and 5 of ``bench_core.py``: the TransferQueue writer and verl's padding entry point on a real TransferQueue.

``bench_core.py`` runs them unless ``--no-tq`` (``--only 5`` runs part 5 alone); they
run alone too: ``python benchmarks/bench_tq.py [--quick] [--only 4|5]``.

Part 4 makes two measurements, each against raw ``kv_batch_put`` calls of the same data, timed with
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

Part 5 times ``trajschema.verl.upsample_batch_to_divisible_size`` end to end (as
``trajschema.verl.install()`` calls it: schema picked from the sample read, one
``kv_batch_get``, padding validated, one ``kv_batch_put``) against verl 0.9.1's own
``verl.trainer.ppo.padding_utils.upsample_batch_to_divisible_size`` on the same
partition of the same TransferQueue: 96 real samples padded to a multiple of 120
(24 padding samples) and 1 real sample padded to 120 (119). Each call's padding keys
are cleared after it, outside the timed region. Skipped, with the reason, when verl
cannot be imported.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import torch

import trajschema as ts
from trajschema.testing import tq_batch, verl_sample

from harness import Call, Row, measure_calls, render
from workload import GROUP, same_batch, tq_pack, verl_samples

EOS = 2
PARTITION = "bench_pad"
PUT_PARTITION = "bench_put"
UPSAMPLE_PARTITION = "bench_upsample"
#: Part 5's batch multiple: dp_size 2, ppo_mini_batch_size 15, rollout.n 8 (lcm 120).
UPSAMPLE_MULTIPLE = 120
#: Part 5's batches: real samples in the batch; padded to 120 they need 24 and 119 padding samples.
UPSAMPLE_REAL = (96, 1)
#: The parts of tq_rows: part 4's put and pad_to_multiple rows, part 5's upsample rows.
TQ_PARTS = ("put", "pad", "upsample", "audit")


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


def load_verl_padding_utils(tq: Any) -> tuple[Any, str]:
    """verl's ``verl.trainer.ppo.padding_utils`` module, or None and why it cannot be the baseline.

    verl's ``upsample_batch_to_divisible_size`` calls the module-level
    ``kv_batch_get``/``kv_batch_put`` of the ``transfer_queue`` module it imported, so
    that must be the TransferQueue ``tq`` this benchmark started.
    """
    try:
        from verl.trainer.ppo import padding_utils
    except Exception as e:  # verl imports transformers, Ray, ...: any failure means no baseline
        return None, f"verl not importable ({type(e).__name__}: {e})"
    if padding_utils.tq is not tq:
        return None, f"verl's padding_utils.tq is {padding_utils.tq!r}, not the transfer_queue module started here"
    return padding_utils, ""


def cleared_call(tq: Any, pad: Callable[[], Any], n_real: int, partition: str) -> Any:
    """A ``measure_calls`` candidate timing ``pad()``, then clearing (untimed) the padding keys it added.

    ``pad()`` pads a batch of ``n_real`` samples and returns the padded ``KVBatchMeta``.
    """

    written: list[Any] = []
    return Call(
        lambda: written.append(pad()),
        after=lambda: tq.kv_clear(written.pop().keys[n_real:], partition),
    )


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

    gen = torch.Generator().manual_seed(seed + 1)
    groups = -(-n // GROUP)
    group_p = torch.randint(prompt_range[0], prompt_range[1] + 1, (groups,), generator=gen).tolist()
    ps = [group_p[i // GROUP] for i in range(n)]
    rs = torch.randint(response_range[0], response_range[1] + 1, (n,), generator=gen).tolist()
    return verl_samples(schema, ps, rs, layers=layers, topk=topk)


def put_rows(tq: Any, schema: ts.Schema, samples: list[dict[str, Any]], *, repeats: int, say=print) -> list[Any]:
    """``TransferQueueWriter.put`` of ``samples`` against verl's way and a raw put of a prebuilt TensorDict."""

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

    calls = {
        name: cleared_call(tq, lambda writer=writer: writer.pad_to_multiple(meta, multiple), n_real, PARTITION)
        for name, writer in writers.items()
    }
    calls["raw"] = Call(
        lambda: tq.kv_batch_put(keys=pad.keys, partition_id=PARTITION, fields=pad.fields, tags=pad.tags),
        after=lambda: tq.kv_clear(pad.keys, PARTITION),
    )
    return measure_calls(calls, repeats=repeats)


def upsample_rows(tq: Any, schema: ts.Schema, samples: list[dict[str, Any]], *, repeats: int, say=print) -> list[Any]:
    """Part 5: ``trajschema.verl.upsample_batch_to_divisible_size`` against verl's own, for each of ``UPSAMPLE_REAL``.

    ``samples`` (at least ``max(UPSAMPLE_REAL)``) are written once; the batch of ``n``
    real samples is the meta of the first ``n``. Both candidates get the same meta and
    pad it on the same partition; each call's padding keys are cleared after it.
    """

    from trajschema.verl import upsample_batch_to_divisible_size

    n = max(UPSAMPLE_REAL)
    assert len(samples) >= n, (len(samples), n)
    samples = samples[:n]
    padding_utils, why_no_verl = load_verl_padding_utils(tq)
    # The tags verl's agent loop writes besides the schema's (padding inherits them).
    tags = [{"global_steps": 1, "min_global_steps": 1, "max_global_steps": 1} for _ in samples]
    writer = ts.TransferQueueWriter(schema, partition_id=UPSAMPLE_PARTITION, eos_token_id=EOS)
    full = writer.put([f"r{i}_0_0" for i in range(n)], samples, tags)
    picked = ts.schema_for_sample(tq.kv_batch_get([full.keys[0]], UPSAMPLE_PARTITION)[0], full.tags[0])
    assert picked.name == schema.name, f"schema_for_sample picked {picked.name!r}, not {schema.name!r}"

    runs: dict[str, Callable[[Any], Any]] = {
        "ours": lambda meta: upsample_batch_to_divisible_size(meta, UPSAMPLE_MULTIPLE, EOS),
    }
    if padding_utils is not None:
        runs["verl"] = lambda meta: padding_utils.upsample_batch_to_divisible_size(meta, UPSAMPLE_MULTIPLE, EOS)
    else:
        say(f"      the verl baseline rows of part 5 are skipped: {why_no_verl}")

    rows = []
    for real in UPSAMPLE_REAL:
        meta = dataclasses.replace(full, keys=full.keys[:real], tags=full.tags[:real])
        count = ts.padding_needed(real, UPSAMPLE_MULTIPLE)
        # Correctness first (and warm-up): each candidate's padding makes the batch a multiple,
        # reads back valid with exactly the real samples' fields, and the two candidates'
        # padding is the same but for its fresh uid (and the keys made of it).
        back: dict[str, tuple[Any, list[dict]]] = {}
        for name, run in runs.items():
            padded = run(meta)
            assert len(padded.keys) == real + count and len(padded.keys) % UPSAMPLE_MULTIPLE == 0, name
            added, added_tags = padded.keys[real:], padded.tags[real:]
            got = tq.kv_batch_get(added, UPSAMPLE_PARTITION)
            if name == "ours":
                schema.validate_batch(got, tags=added_tags)
            else:  # verl pads routes with zeros: every padding token repeats expert 0, which the schema refuses
                found = {(v.field, v.code) for v in schema.batch_violations(got, tags=added_tags)}
                assert found <= {("routed_experts", "repeated")}, (name, sorted(found))
            assert sorted(got.keys()) == sorted(samples[0]), (name, sorted(got.keys()), sorted(samples[0]))
            uid = got.get("uid").tolist()
            assert len(set(uid)) == 1 and added == [f"{uid[0]}_{i}_0" for i in range(count)], name
            # the routes differ on purpose (ours spread over the experts, verl's zeros): compared apart
            back[name] = (got.exclude("uid", "routed_experts"), [dict(t) for t in added_tags])
            tq.kv_clear(added, UPSAMPLE_PARTITION)
        if "verl" in back:
            diff = same_batch(back["ours"][0], back["verl"][0])
            assert diff is None, f"{real} real: our padding differs from verl's: {diff}"
            assert back["ours"][1] == back["verl"][1], (back["ours"][1][:1], back["verl"][1][:1])
        listing = tq.kv_list(UPSAMPLE_PARTITION).get(UPSAMPLE_PARTITION, {})
        assert sorted(listing) == sorted(full.keys), f"{len(listing)} keys in the partition, expected {n}"
        checked = (
            "ours reads back valid, verl's breaks only distinct routes; equal but for the uid and the routes"
            if "verl" in back
            else "ours reads back valid"
        )
        say(f"      upsample {real} real + {count} padding: {checked}; timing...")

        calls = {
            name: cleared_call(tq, lambda run=run, meta=meta: run(meta), real, UPSAMPLE_PARTITION)
            for name, run in runs.items()
        }
        times = measure_calls(calls, repeats=repeats)
        op = f"trajschema.verl.upsample_batch_to_divisible_size({real} real + {count} padding)"
        label = "verl padding_utils.upsample_batch_to_divisible_size"
        rows.append(
            Row(op, times["ours"], label, times["verl"], 1.0, kind="overhead")
            if "verl" in times
            else Row(op, times["ours"], label, None, 1.0, kind="overhead", skipped=why_no_verl)
        )
    return rows


#: Real rows of the audited verl step (part 5b), and the audit's target share of the step.
AUDIT_REAL = (1000, 4000)
AUDIT_SHARE = 0.02
#: A Qwen3-MoE-shaped model config that pins the moe_routed padding to 8 experts, top-2, 4 layers.
AUDIT_MODEL = {"architectures": ["Qwen3MoeForCausalLM"], "num_experts": 8, "num_experts_per_tok": 2}
AUDIT_DIMS = {"layers": 4, "topk": 2, "experts": 8}


def audit_rows(tq: Any, *, repeats: int, say=print) -> list[Any]:
    """Part 5b: what the verl step audit costs against the step's own batch work, on this TransferQueue.

    A step of verl 0.9.1's trainer under ``trajschema.verl.install()`` (audit on), as
    ``tests/verl/step.py`` drives it: ``_balance_batch`` (padding to a multiple of 2 ranks
    x ``ppo_mini_batch_size`` 3 x ``rollout.n`` 4), ``_compute_advantage`` (GRPO), and
    ``_compute_metrics``, on ``moe_routed`` rows whose model config pins 8 experts, top-2.
    Each timed step is the three calls, with ``trajschema.verl.audit.audit_padding`` (one
    ``kv_batch_get`` of the padding rows, their check and figures) timed inside it: ours
    is the audit, the baseline the rest of the step. The rows are written (not timed)
    before each step and cleared after it. Target: the audit at most 2% of the rest.
    """
    import json
    import tempfile
    import time

    import trajschema.verl as tv
    import trajschema.verl.patch as vpatch

    from harness import Timing

    sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # the tests' verl step, as bench_skyrl does
    from tests.verl.step import TIMING_RAW, rollout, step_config, stub_trainer, write
    from tests.verl_support import import_installed

    try:
        tb = import_installed("verl.trainer.ppo.v1.trainer_base")
    except ImportError as e:
        return [Row("trajschema.verl step audit", None, "the step", None, AUDIT_SHARE, "overhead", skipped=str(e))]
    model = Path(tempfile.mkdtemp(prefix="bench_audit_"))
    (model / "config.json").write_text(json.dumps({**AUDIT_MODEL, "num_hidden_layers": AUDIT_DIMS["layers"]}))
    config = step_config("grpo", "token-mean")
    config.actor_rollout_ref.model.path = str(model)
    spent: list[float] = []
    audit = vpatch.audit_padding

    def timed_audit(*args: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return audit(*args, **kw)
        finally:
            spent.append(time.perf_counter() - t)

    rows = []
    vpatch.audit_padding = timed_audit
    tv.install()
    try:
        for real in AUDIT_REAL:
            keys, samples, tags = rollout(real, "moe_routed", **AUDIT_DIMS)
            steps, audits = [], []
            for _ in range(repeats + 1):  # the first is the warm-up
                meta = write(tq, "bench_audit", keys, samples, tags, "moe_routed")
                t, metrics = stub_trainer(tb, config, 2), {}
                spent.clear()
                start = time.perf_counter()
                meta = t._balance_batch(meta, metrics=metrics)
                meta = t._compute_advantage(meta, metrics)
                t._compute_metrics(meta, metrics, dict(TIMING_RAW), 1, 0)
                whole = time.perf_counter() - start
                tq.kv_clear(list(meta.keys), "bench_audit")
                assert len(spent) == 1 and metrics["trajschema/violations"] == 0, (spent, metrics)
                assert metrics["trajschema/padding_rows"] == metrics["padding/samples"] > 0, metrics
                steps.append((whole - spent[0]) * 1e9)
                audits.append(spent[0] * 1e9)
            pad = int(metrics["padding/samples"])
            say(f"      verl step of {real} moe_routed rows + {pad} padding under install(): {repeats} steps")
            ours, theirs = (_timing(v[1:], repeats, Timing) for v in (audits, steps))
            op = f"trajschema.verl step audit ({real} moe_routed rows + {pad} padding, 2 ranks)"
            rows.append(
                Row(
                    op,
                    ours,
                    "the rest of the step (_balance_batch, _compute_advantage, _compute_metrics)",
                    theirs,
                    AUDIT_SHARE,
                    kind="overhead",
                )
            )
    finally:
        tv.uninstall()
        vpatch.audit_padding = audit
    return rows


def _timing(per_call: list[float], repeats: int, timing: Any) -> Any:
    ordered = sorted(per_call)
    return timing(ordered[len(ordered) // 2], ordered[0], ordered[-1], 1, repeats, tuple(per_call))


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
    parts: Collection[str] = TQ_PARTS,
) -> list[Any]:
    """The rows of ``parts`` (of ``TQ_PARTS``), on one local TransferQueue.

    ``"put"``: the put of a rollout batch. ``"pad"``: pad_to_multiple for each padding
    count; two writers pad: the one that wrote the batch (it knows a real sample and
    reads nothing back) and a fresh one, as a trainer driver whose rollout workers wrote
    the batch (it reads one real sample with ``kv_batch_get`` first). ``"upsample"``:
    part 5 (:func:`upsample_rows`), on samples made like the put's.
    """

    unknown = set(parts) - set(TQ_PARTS)
    assert not unknown, f"unknown parts {sorted(unknown)}; expected some of {TQ_PARTS}"
    schema = ts.load_schema("vlm_mrope_moe")
    lengths = {"prompt_range": prompt_range, "response_range": response_range, "layers": layers, "topk": topk}
    rows = []
    with ts.start_local_transfer_queue() as tq:
        say("      local TransferQueue started")
        if "put" in parts:
            rollout_batch = put_samples(schema, put_batch, seed=seed, **lengths)
            rows += put_rows(tq, schema, rollout_batch, repeats=repeats, say=say)
            del rollout_batch
        if "pad" in parts:
            real = [
                verl_sample(schema, 40 + 7 * i, 20 + 5 * i, uid=f"q{i}", layers=layers, topk=topk, seed=i)
                for i in range(9)
            ]
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
        if "upsample" in parts:
            samples = put_samples(schema, max(UPSAMPLE_REAL), seed=seed + 1, **lengths)
            rows += upsample_rows(tq, schema, samples, repeats=repeats, say=say)
        if "audit" in parts:
            rows += audit_rows(tq, repeats=max(5, repeats // 3), say=say)
    return rows


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 calls per side instead of 31")
    ap.add_argument("--counts", default="15,255,1023")
    ap.add_argument("--put-batch", type=int, default=377)
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument(
        "--only", choices=("4", "5", "verl"), default=None, help="run part 4 (put, pad_to_multiple) or 5 (= verl) alone"
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    counts = [int(c) for c in args.counts.split(",") if c]
    parts = {None: TQ_PARTS, "4": ("put", "pad"), "5": ("upsample", "audit"), "verl": ("upsample", "audit")}[args.only]
    rows = tq_rows(counts, repeats=3 if args.quick else 31, put_batch=args.put_batch, parts=parts)
    print(render(rows, args.markdown))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
