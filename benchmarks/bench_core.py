#!/usr/bin/env python
"""Benchmark trajschema's core operations against what a trainer would write instead.

Run from the repository root, inside the project's venv:

    python benchmarks/bench_core.py             # full run (a few minutes)
    python benchmarks/bench_core.py --quick     # smoke run (seconds)
    python benchmarks/bench_core.py --markdown  # print the table as markdown
    python benchmarks/bench_core.py --only 5    # only part 5 (verl's padding entry point; starts Ray)
    python benchmarks/bench_core.py --only 6    # only part 6 (what @ts.checked adds to a call)
    python benchmarks/bench_core.py --only 7    # only part 7 (a dense SkyRL batch: check, convert)
    python benchmarks/bench_core.py --only 8    # only part 8 (SkyRL's pad_training_input_batch vs ours)
    python benchmarks/bench_core.py --only 9    # only part 9 (packed batches: check, convert, verl's packing)
    python benchmarks/bench_core.py --only 10   # only part 10 (OpenRLHF's rollout split, alone vs under install())
    python benchmarks/bench_core.py --only 11   # only part 11 (the TRL check against TRL's own GRPO step)
    python benchmarks/bench_core.py --only 12   # only part 12 (recording a batch as a bundle, reading it back)

Every comparison runs in one process on the same samples, and every validator is first
shown to accept the good data and reject bad data (asserted), so the timings compare
checks that do the same job. See benchmarks/README.md for what each row compares.

Timing: ``time.perf_counter_ns`` around blocks of ``number`` calls, the block size chosen
so one block lasts at least ``--min-block`` seconds; ``--repeats`` blocks per
measurement, ``gc.collect()`` before and the garbage collector disabled during each
block; the reported figure is the median per-call time over the blocks
(:func:`measure`). Calls too slow and too stateful for blocks (TransferQueue puts, whose
keys must be fresh and cleared between calls) are timed one call per block, with untimed
set-up and clean-up around each call (:func:`measure_calls`); both interleave the
candidates round-robin.
"""

import argparse
import cProfile
import io
import os
import pstats
import resource
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from tensordict import NonTensorStack, TensorDict

import trajschema as ts
from trajschema.testing import tq_batch

from bench_checked import BATCH, checked_rows
from bench_dense import dense_rows, dense_sizes
from bench_nontensor import raw_type_guard
from bench_skyrl import independence, render_memory, skyrl_rows, skyrl_sizes
from bench_tq import UPSAMPLE_MULTIPLE, UPSAMPLE_REAL, tq_rows
from harness import Row, fmt_ns, fmt_ratio, machine_info, measure, render
from workload import (
    EOS,
    GROUP,
    JT_ERRORS,
    VERL_NONTENSOR_FIELDS,
    check_asserts,
    check_jaxtyping,
    check_jaxtyping_verl,
    make_sample,
    padding_baseline,
    tq_pack,
    tq_pack_function,
    verify_batch,
    verify_padding,
    verify_single,
    verl_samples,
    wire_batch_source,
)

#: The benchmark's parts (see benchmarks/README.md); 4 and 5 run on a local TransferQueue.
PARTS = ("1", "2", "2b", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12")
#: Names accepted by --only for parts.
PART_ALIASES = {
    "verl": "5",
    "checked": "6",
    "dense": "7",
    "skyrl": "8",
    "packed": "9",
    "openrlhf": "10",
    "trl": "11",
    "bundle": "12",
}


def _parts(text: str) -> set[str]:
    parts = {PART_ALIASES.get(p.strip(), p.strip()) for p in text.split(",") if p.strip()}
    unknown = parts - set(PARTS)
    if not parts or unknown:
        raise argparse.ArgumentTypeError(
            f"expected parts of {', '.join(PARTS)}, verl, checked, dense, skyrl, packed, openrlhf, trl or bundle, "
            f"found {text!r}"
        )
    return parts


def _range(text: str) -> tuple[int, int]:
    lo, _, hi = text.partition(":")
    a, b = int(lo), int(hi or lo)
    if not 0 <= a <= b:
        raise argparse.ArgumentTypeError(f"expected LO:HI with 0 <= LO <= HI, found {text!r}")
    return a, b


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="smoke run: small batch, short blocks, 3 repeats")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument("--prompt", type=int, default=512, help="P of the single sample (row 1, and the padding reference)")
    ap.add_argument("--response", type=int, default=1024, help="R of the single sample")
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--batch", type=int, default=None, help="samples in the batch (default 4096, --quick 256)")
    ap.add_argument(
        "--batch-prompt", type=_range, default=(8, 128), metavar="LO:HI", help="uniform range of P in the batch"
    )
    ap.add_argument(
        "--batch-response", type=_range, default=(1, 256), metavar="LO:HI", help="uniform range of R in the batch"
    )
    ap.add_argument("--pad-counts", default="15,255,1023", help="padding row counts (the target applies to 255)")
    ap.add_argument(
        "--put-batch",
        type=int,
        default=None,
        help="samples per TransferQueueWriter.put in part 4, lengths from --batch-* (default 377, --quick 64)",
    )
    ap.add_argument("--repeats", type=int, default=None, help="timed blocks per measurement (default 9, --quick 3)")
    ap.add_argument(
        "--min-block", type=float, default=None, help="seconds per timed block (default 0.25, --quick 0.02)"
    )
    ap.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (1 keeps a shared machine's noise down)"
    )
    ap.add_argument("--max-gb", type=float, default=3.0, help="refuse batch sizes whose tensors would exceed this")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", action="store_true", help="also print cProfile tables of the trajschema calls")
    ap.add_argument("--check", action="store_true", help="exit with status 1 when a target is missed")
    ap.add_argument("--no-tq", action="store_true", help="skip parts 4 and 5 (the ones on a real local TransferQueue)")
    ap.add_argument(
        "--only",
        type=_parts,
        default=None,
        metavar="PARTS",
        help=f"run only these parts, comma-separated, of {', '.join(PARTS)} "
        "('verl' = 5, 'checked' = 6, 'dense' = 7, 'skyrl' = 8, 'packed' = 9, 'openrlhf' = 10, 'trl' = 11)",
    )
    args = ap.parse_args(argv)
    args.parts = set(PARTS) if args.only is None else args.only
    if args.no_tq:
        args.parts -= {"4", "5"}
    args.batch = args.batch if args.batch is not None else (256 if args.quick else 4096)
    args.repeats = args.repeats if args.repeats is not None else (3 if args.quick else 9)
    args.put_batch = args.put_batch if args.put_batch is not None else (64 if args.quick else 377)
    args.min_block = args.min_block if args.min_block is not None else (0.02 if args.quick else 0.25)
    args.warmup = 0.02 if args.quick else 0.2
    args.pad_counts = [int(c) for c in args.pad_counts.split(",") if c]
    if args.prompt < 1 or args.response < 1:
        ap.error("--prompt and --response must be >= 1")
    if args.batch_prompt[0] < 1 or args.batch_response[0] < 1:
        ap.error("batch P and R ranges must start at >= 1")
    if args.batch < 4 or args.put_batch < 1:
        ap.error("--batch must be >= 4 (the broken-batch checks break sample 3) and --put-batch >= 1")
    return args


def profile_call(label: str, fn: Callable[[], Any], calls: int) -> str:
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    buf = io.StringIO()
    stats = pstats.Stats(prof, stream=buf)
    stats.sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(12)
    return f"=== cProfile: {label} ({calls} calls) ===\n{buf.getvalue()}"


def nontensor_share(schema: ts.Schema, td: TensorDict, timing: Mapping[str, Any]) -> str:
    """Unprofiled: how much of ``validate_batch(td)`` reading its declared non-tensor columns costs.

    cProfile inflates code that makes many small Python calls (``tolist()`` makes
    several per row), so this times ``validate_batch``, ``tolist()`` of the columns it
    reads, and the fast recipe of ``bench_nontensor.py`` on the same columns,
    interleaved like any other measurement.
    """

    declared = [k for k in VERL_NONTENSOR_FIELDS if k in schema.fields]
    cols = [td.get(k) for k in declared]
    assert all(all(a is b for a, b in zip(raw_type_guard(c), c.tolist(), strict=True)) for c in cols)
    t = measure(
        {
            "validate_batch": lambda: schema.validate_batch(td, depth="shapes"),
            "tolist": lambda: [c.tolist() for c in cols],
            "recipe": lambda: [raw_type_guard(c) for c in cols],
        },
        **timing,
    )
    whole, slow, fast = (t[k].median_ns for k in ("validate_batch", "tolist", "recipe"))
    return (
        f"=== unprofiled (medians of interleaved blocks): validate_batch(td packed by TransferQueue, "
        f'depth="shapes") takes {fmt_ns(whole)}. Reading the {len(cols)} declared non-tensor columns it reads '
        f"({', '.join(declared)}) takes {fmt_ns(slow)} with NonTensorStack.tolist() ({slow / whole:.2f}x that call) "
        f"and {fmt_ns(fast)} with bench_nontensor.py's recipe ({fmt_ratio(slow / fast)} faster); the cProfile "
        "above shows which of the two trajschema calls ===\n"
    )


#: Padding rows of the spread-routes row (issue 16's figure: 255 rows, 128 experts).
SPREAD_COUNT = 255
SPREAD_EXPERTS = 128


def routes_schemas(schema: ts.Schema) -> tuple[ts.Schema, ts.Schema]:
    """``schema`` with its routes padded by spreading over ``experts`` (pinned, as from a model config), and by 0."""
    routes = {"shape": ["seq", "layers", "topk"], "dtype": ["int16", "int32", "int64"], "min": 0}
    made = []
    for pad in ({"spread": "experts"}, 0):
        made.append(
            ts.schema_from_dict(
                {
                    "name": f"{schema.name}_routes",
                    "extends": [schema.name],
                    "dims": {"experts": {"min": 1}},
                    "fields": {"routed_experts": {**routes, "pad": pad}},
                }
            ).with_dims({"experts": SPREAD_EXPERTS}, sources={"experts": "config: num_experts"})
        )
    return made[0], made[1]


def spread_row(schema: ts.Schema, sample: dict[str, Any], timing: Mapping[str, Any]) -> Row:
    """Padding with spread routes against the same padding with routes 0 (issue 16: at most 1.5x)."""
    spread, zeros = routes_schemas(schema)
    pad = spread.padding(SPREAD_COUNT, eos_token_id=EOS, like=sample)
    routes = pad.fields["routed_experts"]
    share = -(-routes.shape[0] * routes.shape[1] * routes.shape[-1] // SPREAD_EXPERTS)
    assert int(torch.bincount(routes[:, :, 0].flatten().long()).max()) <= share  # spread, not zeros
    assert not zeros.padding(1, eos_token_id=EOS, like=sample).fields["routed_experts"].any()
    t = measure(
        {
            "spread": lambda: spread.padding(SPREAD_COUNT, eos_token_id=EOS, like=sample),
            "zeros": lambda: zeros.padding(SPREAD_COUNT, eos_token_id=EOS, like=sample),
        },
        **timing,
    )
    op = f"padding({SPREAD_COUNT}), routes spread over {SPREAD_EXPERTS}"
    return Row(op, t["spread"], "the same padding, routes 0", t["zeros"], 1.5, kind="overhead")


def main(argv: Sequence[str] | None = None) -> int:
    if not __debug__:
        sys.exit("bench_core.py needs assertions (the hand-written baseline is asserts): run without -O")
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    schema = ts.load_schema("vlm_mrope_moe")
    timing = {"min_block_s": args.min_block, "repeats": args.repeats, "warmup_s": args.warmup}
    load_before = os.getloadavg()
    log = sys.stderr

    started = time.perf_counter()

    def say(msg: str) -> None:
        print(f"{time.perf_counter() - started:6.1f}s {msg}", file=log, flush=True)

    rows: list[Row] = []
    parts = args.parts

    # 1. One sample ------------------------------------------------------------
    # (built whatever --only says: it is small, and the batch lengths below come after it
    # from the same generator, so every part always sees the same data)
    P, R = args.prompt, args.response
    sample = make_sample(P, R, layers=args.layers, topk=args.topk, gen=gen, index=0)
    if "1" in parts:
        verify_single(schema, sample)
        say(f"[1/12] single sample P={P} R={R}: validators agree on good and bad samples; timing...")
        t = measure(
            {
                "shapes": lambda: schema.validate(sample, depth="shapes"),
                "values": lambda: schema.validate(sample, depth="values"),
                "jaxtyping": lambda: check_jaxtyping(**sample),
                "asserts": lambda: check_asserts(sample),
            },
            **timing,
        )
        rows += [
            Row('validate(sample, depth="shapes")', t["shapes"], "jaxtyping+beartype fn(**sample)", t["jaxtyping"], 10),
            Row('validate(sample, depth="shapes")', t["shapes"], "hand-written asserts", t["asserts"], None),
            Row('validate(sample, depth="values")', t["values"], "", None, None),
        ]

    # 2. A TransferQueue batch ---------------------------------------------------
    n = args.batch
    plo, phi = args.batch_prompt
    rlo, rhi = args.batch_response
    ps = torch.randint(plo, phi + 1, (n,), generator=gen).tolist()
    rs = torch.randint(rlo, rhi + 1, (n,), generator=gen).tolist()
    total_seq = sum(ps) + sum(rs)
    # routed_experts dominates; the samples and the TensorDict each hold one copy.
    per_seq_token = args.layers * args.topk * 2 + 8 + 4 * 8 + 8  # experts, input_ids, position_ids, attention
    per_response_token = 3 * 8 + 4  # responses, two masks, log-probs
    est_gb = 2 * (total_seq * per_seq_token + sum(rs) * per_response_token + sum(ps) * 8) / 1e9
    if est_gb > args.max_gb and parts & {"2", "2b"}:
        sys.exit(
            f"batch would hold ~{est_gb:.1f} GB of tensors (> --max-gb {args.max_gb}); "
            "use smaller --batch/--batch-prompt/--batch-response"
        )
    op = f"validate_batch(td of {n})"
    td = None
    if "2" in parts:
        say(f"[2/12] building {n} samples, P in {plo}..{phi}, R in {rlo}..{rhi} (~{est_gb:.2f} GB of tensors)...")
        samples = [
            make_sample(p, r, layers=args.layers, topk=args.topk, gen=gen, index=i)
            for i, (p, r) in enumerate(zip(ps, rs))
        ]
        td = tq_batch(samples)  # trajschema.testing.tq_batch
        assert td["position_ids"].layout == torch.jagged and td["position_ids"]._ragged_idx == 2
        assert td["routed_experts"].layout == torch.jagged and td["routed_experts"]._ragged_idx == 1
        verify_batch(schema, samples, td)
        say("      validators agree on good and bad batches; timing...")

        def jt_loop() -> None:
            for s in samples:
                check_jaxtyping(**s)

        def assert_loop() -> None:
            for s in samples:
                check_asserts(s)

        def ts_loop() -> None:
            for s in samples:
                schema.validate(s, depth="shapes")

        t = measure(
            {
                "shapes": lambda: schema.validate_batch(td, depth="shapes"),
                "values": lambda: schema.validate_batch(td, depth="values"),
                "jaxtyping": jt_loop,
                "asserts": assert_loop,
                "loop": ts_loop,
            },
            **timing,
        )
        rows += [
            Row(f'{op}, depth="shapes"', t["shapes"], f"jaxtyping+beartype, loop of {n}", t["jaxtyping"], 50),
            Row(f'{op}, depth="shapes"', t["shapes"], f"hand-written asserts, loop of {n}", t["asserts"], None),
            Row(f'{op}, depth="shapes"', t["shapes"], f'validate(depth="shapes"), loop of {n}', t["loop"], None),
            Row(f'{op}, depth="values"', t["values"], "", None, None),
        ]

    # 2b. The same lengths, verl's columns, laid out by TransferQueue's own code -------
    real_td = None
    if "2b" in parts:
        try:
            tq_pack_function()
        except ImportError as e:
            why = f"transfer_queue not importable ({type(e).__name__}: {e})"
            say(f"[2b/12] skipped: {why}")
            label = f'{op}, depth="shapes", packed by TransferQueue'
            rows.append(Row(label, None, f"jaxtyping+beartype, loop of {n}", None, 50, skipped=why))
        else:
            say(f"[2b/12] building {n} verl_sample samples, packed by TransferQueue's _pack_field_values...")
            vsamples = verl_samples(schema, ps, rs, layers=args.layers, topk=args.topk)
            real_td = tq_pack(vsamples)
            assert real_td["position_ids"].layout == torch.jagged and real_td["position_ids"]._ragged_idx == 2
            assert all(type(real_td.get(k)) is NonTensorStack for k in VERL_NONTENSOR_FIELDS), real_td
            verify_batch(
                schema,
                vsamples,
                real_td,
                pack=tq_pack,
                loops={"jaxtyping": (lambda s: check_jaxtyping_verl(**s), JT_ERRORS)},
            )
            say("      validators agree on good and bad batches; timing...")

            def jt_verl_loop() -> None:
                for s in vsamples:
                    check_jaxtyping_verl(**s)

            t = measure(
                {"shapes": lambda: schema.validate_batch(real_td, depth="shapes"), "jaxtyping": jt_verl_loop},
                **timing,
            )
            rows.append(
                Row(
                    f'{op}, depth="shapes", packed by TransferQueue',
                    t["shapes"],
                    f"jaxtyping+beartype, loop of {n}",
                    t["jaxtyping"],
                    50,
                )
            )

    # 3. Padding ------------------------------------------------------------------
    if "3" in parts:
        say(f"[3/12] padding {args.pad_counts} rows like the P={P} R={R} sample...")
        for count in args.pad_counts:
            verify_padding(schema, sample, count)
            t = measure(
                {
                    "ours": lambda count=count: schema.padding(count, eos_token_id=EOS, like=sample),
                    "theirs": lambda count=count: padding_baseline(sample, count, EOS),
                },
                **timing,
            )
            target = 10 if count == 255 else None  # the target is stated for 255 rows
            rows.append(
                Row(f"padding({count}, like=sample)", t["ours"], "clone-and-deepcopy loop + stack", t["theirs"], target)
            )
        rows.append(spread_row(schema, sample, timing))

    # 4 and 5. On a real TransferQueue (one Ray + TransferQueue for both) -------------
    tq_parts = (["put", "pad"] if "4" in parts else []) + (["upsample", "audit"] if "5" in parts else [])
    if tq_parts:
        if "4" in parts:
            say(
                f"[4/12] put of {args.put_batch} samples and pad_to_multiple {args.pad_counts} rows "
                "on a local TransferQueue (starts Ray, ~15 s)..."
            )
        if "5" in parts:
            say(
                f"[5/12] trajschema.verl vs verl upsample_batch_to_divisible_size: {list(UPSAMPLE_REAL)} real samples "
                f"padded to a multiple of {UPSAMPLE_MULTIPLE}, on {'the same' if '4' in parts else 'a'} local "
                "TransferQueue, then the verl step audit's cost..."
            )
        rows += tq_rows(
            args.pad_counts,
            repeats=3 if args.quick else 31,
            layers=args.layers,
            topk=args.topk,
            say=say,
            put_batch=args.put_batch,
            prompt_range=args.batch_prompt,
            response_range=args.batch_response,
            seed=args.seed,
            parts=tq_parts,
        )

    # 6. What @ts.checked adds to a call ---------------------------------------------------
    if "6" in parts:
        say(
            f"[6/12] @ts.checked in each mode vs undecorated and direct calls (the P={P} R={R} sample, {BATCH} samples)"
        )
        rows += checked_rows(schema, sample, timing=timing, seed=args.seed, say=say)

    # 7. A dense padded SkyRL batch -------------------------------------------------------
    if "7" in parts:
        say(f"[7/12] a dense SkyRL batch of {n} rows built by SkyRL's own code: check, per-row loop, convert...")
        rows += dense_rows(timing=timing, n=n, seed=args.seed, say=say)

    # 8. SkyRL's pad_training_input_batch, ours against its own ------------------------------
    memory = []
    if "8" in parts:
        say(f"[8/12] pad_training_input_batch on a SkyRL VLM batch of {n} rows: trajschema.skyrl vs SkyRL's own...")
        part8, memory = skyrl_rows(timing=timing, n=n, seed=args.seed, say=say)
        rows += part8

    # 9. Packed batches: verl's packing, ours, the thd round trip, the checks against a read pass ----
    packed_profiles: list[str] = []
    if "9" in parts:
        # Imported here: pyproject.toml's isort list of the benchmark modules (known-local-folder) predates it.
        from bench_packed import packed_rows

        say(
            f"[9/12] packed batches of {n} samples (moe_routed, text): pack_dense vs verl's left_right_2_no_padding, "
            "to_packed/from_packed, the checks vs a read pass..."
        )
        part9, packed_profiles = packed_rows(
            timing=timing,
            n=n,
            prompts=ps,
            responses=rs,
            prompt_range=args.batch_prompt,
            response_range=args.batch_response,
            layers=args.layers,
            topk=args.topk,
            say=say,
            profile=profile_call if args.profile else None,
        )
        rows += part9

    # 10. OpenRLHF's rollout split, alone and under trajschema.openrlhf.install() --------------
    split_memory: list[Any] = []
    if "10" in parts:
        # Imported here, as part 9's module: pyproject.toml's isort list of the benchmark modules predates it.
        from bench_openrlhf import openrlhf_rows

        say(
            "[10/12] OpenRLHF 0.11.2 split_rollout_samples over 4 actors, alone vs under trajschema.openrlhf.install() "
            "(rollout check + padding, and padding only): time and peak Python allocation..."
        )
        part10, split_memory = openrlhf_rows(timing=timing, quick=args.quick, seed=args.seed, say=say)
        rows += part10

    # 11. The TRL check against TRL's own step that builds the batch ------------------------------
    if "11" in parts:
        from bench_trl import trl_rows

        say(
            "[11/12] trajschema.trl's check per batch vs TRL 1.16.0's own _generate_and_score_completions "
            "on a tiny random model (builds the trainer, ~10 s per batch size)..."
        )
        rows += trl_rows(timing=timing, quick=args.quick, say=say)

    # 12. Recording a batch as a bundle and reading it back, against torch.save / torch.load ---------
    bundle_bytes: list[str] = []
    if "12" in parts:
        from bench_bundle import bundle_rows

        say("[12/12] ts.record_batch / ts.load_bundle of a jagged batch vs torch.save / torch.load (pickle)...")
        part12, bundle_bytes = bundle_rows(timing=timing, quick=args.quick, say=say)
        rows += part12

    load_after = os.getloadavg()
    lines = machine_info()
    lines.append(f"load average (1 min) before/after: {load_before[0]:.2f} / {load_after[0]:.2f}")
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    lines.append(f"peak resident memory of this process (Ray and TransferQueue run in others): {peak_gb:.1f} GB")
    if parts & {"1", "2", "2b", "3"}:
        lines.append(
            f"sizes: single sample P={P}, R={R}, layers={args.layers}, topk={args.topk}; batch of {n} with P uniform "
            f"in {plo}..{phi}, R uniform in {rlo}..{rhi} (sum S = {total_seq}), laid out by {wire_batch_source()}; "
            "the same lengths as verl_sample samples with verl's non-tensor columns, packed by TransferQueue's "
            "AsyncSimpleStorageManager._pack_field_values"
        )
    if "6" in parts:
        lines.append(
            f"part 6: the single sample above; a TensorDict of {BATCH} samples (P uniform in 8..128, R uniform in "
            f"1..256, layers={args.layers}, topk={args.topk}) laid out by trajschema.testing.tq_batch"
        )
    if "7" in parts:
        lines.append(f"part 7: {dense_sizes(n)}")
    if "8" in parts:
        lines.append(f"part 8: {skyrl_sizes(n)}")
    if "9" in parts:
        from bench_packed import packed_sizes

        lines.append(
            f"part 9: {packed_sizes(n, args.batch_prompt, args.batch_response, args.layers, args.topk)} "
            "(the lengths of parts 2 and 2b)"
        )
    if "5" in parts:
        lines.append(
            f"part 5: {max(UPSAMPLE_REAL)} verl_sample samples (layers={args.layers}, topk={args.topk}, GRPO groups "
            f"of {GROUP} sharing P uniform in {plo}..{phi}, R uniform in {rlo}..{rhi}) in one partition; batches of "
            f"{' and '.join(map(str, UPSAMPLE_REAL))} of them padded to a multiple of {UPSAMPLE_MULTIPLE}"
        )
    if "10" in parts:
        from bench_openrlhf import openrlhf_sizes

        lines.append(f"part 10: {openrlhf_sizes(args.quick)}")
    if "11" in parts:
        from bench_trl import trl_sizes

        lines.append(f"part 11: {trl_sizes(args.quick)}")
    if "12" in parts:
        from bench_bundle import bundle_sizes

        lines.append(f"part 12: {bundle_sizes(args.quick)}")
    lines += bundle_bytes
    lines.append(
        f"timing: median of {args.repeats} blocks, each >= {args.min_block} s (gc collected before, disabled during); "
        f"{'quick run' if args.quick else 'full run'}"
    )
    if parts != set(PARTS):
        lines.append(f"parts run: {', '.join(p for p in PARTS if p in parts) or 'none'} (of {', '.join(PARTS)})")
    bullet = "- " if args.markdown else "  "
    print("\n".join(bullet + line for line in lines))
    print()
    print(render(rows, args.markdown))
    print()
    print(
        "Times are medians per call; ratio = baseline time / trajschema time (higher is better for trajschema), "
        "except in the put, pad_to_multiple, upsample_batch_to_divisible_size and spread-routes rows and the dense "
        "rows against SkyRL's build, the packed rows of part 9, the OpenRLHF split of part 10, the TRL check of "
        "part 11 (its share of TRL's step) and the bundle rows of part 12, where it is trajschema / baseline (an "
        "overhead, lower is better), and in the @checked rows, where it is the time the decorator adds per call "
        "(decorated - baseline)."
    )
    if memory:
        print()
        print("Part 8, memory per call (new tensor storage: exact; peak RSS growth: in a fresh subprocess per side):")
        print()
        print(render_memory(memory, args.markdown))
        print()
        print("\n".join(bullet + line for line in independence(memory)))
    if split_memory:
        from bench_openrlhf import render_split_memory

        print()
        print(
            "Part 10, memory per call: peak Python-level allocation (tracemalloc, one call each, tensor storage not "
            "included) of each candidate, and the padding samples' tensor storage (exact):"
        )
        print()
        print(render_split_memory(split_memory, args.markdown))
    skipped = [r for r in rows if r.skipped]
    if skipped:
        print()
        print("Skipped rows:")
        if args.markdown:
            print()
        for r in skipped:
            print(f"{bullet}{r.operation}{' vs ' + r.baseline if r.baseline else ''}: {r.skipped}")
    print()
    print("Spread per measurement (blocks x calls per block; paired ratios compare blocks run back to back):")
    if args.markdown:
        print()
    seen: set[int] = set()
    for r in rows:
        for who, tm in (("trajschema", r.ours), (r.baseline, r.theirs)):
            if tm is not None and id(tm) not in seen:
                seen.add(id(tm))
                print(f"{bullet}{r.operation} / {who}: {tm.spread()}")
        paired = r.paired()
        if paired is not None:
            med, lo, hi = (r.fmt(x) for x in paired)
            print(f"{bullet}{r.operation} vs {r.baseline}: per-round ratio median {med}, min {lo}, max {hi}")

    if args.profile:
        print()
        print(
            profile_call(
                'schema.validate(sample, depth="shapes")', lambda: schema.validate(sample, depth="shapes"), 2000
            )
        )
        if td is not None:
            print(
                profile_call(
                    'schema.validate_batch(td, depth="shapes")', lambda: schema.validate_batch(td, depth="shapes"), 20
                )
            )
        if real_td is not None:
            print(
                profile_call(
                    'schema.validate_batch(td packed by TransferQueue, verl columns, depth="shapes")',
                    lambda: schema.validate_batch(real_td, depth="shapes"),
                    20,
                )
            )
            print(nontensor_share(schema, real_td, timing))
        for text in packed_profiles:
            print(text)
        c0 = 255 if 255 in args.pad_counts else args.pad_counts[0]
        print(
            profile_call(
                f"schema.padding({c0}, like=sample)", lambda: schema.padding(c0, eos_token_id=EOS, like=sample), 20
            )
        )
    failed = [r for r in rows if r.result == "FAIL"]
    return 1 if failed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
