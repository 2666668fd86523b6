"""Part 12 of ``bench_core.py``: recording a batch as a bundle and reading it back (issue 31).

``bench_core.py --only 12`` (or ``--only bundle``) runs it; it also runs alone:
``python benchmarks/bench_bundle.py [--quick] [--markdown]``.

The batch: 4096 ``verl_sample`` samples of ``moe_routed`` (P uniform in 8..128, R uniform
in 1..256, 4 layers x topk 2 of routes) as TransferQueue returns them (a jagged
TensorDict, ``trajschema.testing.tq_batch``), with one tag dict per sample (``--quick``:
512 samples). Rows (``harness.measure``, interleaved blocks, medians; ratio = trajschema /
baseline, an overhead):

* ``ts.record_batch(batch, dir, schema=..., tags=...)`` (the tensors in ``safetensors``,
  the structure and non-tensor columns in JSON, the manifest with the schema's YAML and a
  SHA-256 per payload, written to a temporary directory and renamed) against
  ``torch.save({"batch": batch, "tags": tags}, file)`` (pickle), both into a fresh path
  on the same disk each call;
* ``ts.load_bundle(dir)`` (payloads verified, the schema compiled from its YAML, the batch
  rebuilt) against ``torch.load(file, weights_only=False)``, which needs pickle for a
  TensorDict (``weights_only=True`` refuses it).

Before timing it asserts that the bundle reads back bit-exact and checks clean, and that
``torch.load`` gives the batch back. The bytes on disk of both are printed beside.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

import trajschema as ts
from trajschema.testing import tq_batch, verl_sample

from harness import Row, measure, render

SCHEMA = "moe_routed"
SIZES = {"full": 4096, "quick": 512}


def bundle_batch(n: int, seed: int = 0) -> tuple[Any, list[dict[str, Any]]]:
    """``n`` samples as TransferQueue returns them, and their tags (every 16th padding)."""
    g = torch.Generator().manual_seed(seed)
    lengths = [
        (int(torch.randint(8, 129, (1,), generator=g)), int(torch.randint(1, 257, (1,), generator=g))) for _ in range(n)
    ]
    rows = [
        verl_sample(SCHEMA, p, r, uid=f"q{i // 8}", layers=4, topk=2, experts=64, seed=seed + i)
        for i, (p, r) in enumerate(lengths)
    ]
    return tq_batch(rows), [{"is_padding": i % 16 == 15} for i in range(n)]


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def bundle_rows(
    *, timing: Mapping[str, Any], quick: bool = False, say: Callable[[str], None] = print
) -> tuple[list[Row], list[str]]:
    """The part-12 rows, and lines on the bytes each writes."""
    n = SIZES["quick" if quick else "full"]
    batch, tags = bundle_batch(n)
    schema = ts.load_schema(SCHEMA)
    work = Path(tempfile.mkdtemp(prefix="bench-bundle-"))
    try:
        bundle = ts.load_bundle(ts.record_batch(batch, work / "check", schema=schema, tags=tags))
        assert bundle.tags == tags and bundle.violations(depth="shapes") == []
        for k in batch.keys():
            a, b = batch.get(k), bundle.batch.get(k)
            if isinstance(a, torch.Tensor) and a.is_nested:
                assert torch.equal(a.values(), b.values()) and torch.equal(a.offsets(), b.offsets()), k
        torch.save({"batch": batch, "tags": tags}, work / "check.pt")
        assert torch.load(work / "check.pt", weights_only=False)["tags"] == tags
        sizes = [
            f"part 12, bytes on disk for {n} samples: bundle {_size(work / 'check') / 2**20:.1f} MiB "
            f"(tensors {(work / 'check' / 'tensors.safetensors').stat().st_size / 2**20:.1f} MiB, batch.json "
            f"{(work / 'check' / 'batch.json').stat().st_size / 2**10:.0f} KiB, manifest "
            f"{(work / 'check' / 'manifest.json').stat().st_size / 2**10:.0f} KiB); torch.save "
            f"{_size(work / 'check.pt') / 2**20:.1f} MiB"
        ]
        say(f"      {n} samples: the bundle reads back bit-exact and checks clean; timing...")
        counter = iter(range(10**9))

        def record() -> None:
            ts.record_batch(batch, work / f"b{next(counter)}", schema=schema, tags=tags)

        def save() -> None:
            torch.save({"batch": batch, "tags": tags}, work / f"p{next(counter)}.pt")

        written = measure({"record": record, "save": save}, **timing)
        read = measure(
            {
                "load": lambda: ts.load_bundle(work / "check"),
                "torch": lambda: torch.load(work / "check.pt", weights_only=False),
            },
            **timing,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = [
        Row(
            f"ts.record_batch({n} samples, {SCHEMA}, tags)",
            written["record"],
            "torch.save (pickle) of batch and tags",
            written["save"],
            None,
            kind="overhead",
        ),
        Row(
            f"ts.load_bundle({n} samples): verified, schema compiled",
            read["load"],
            "torch.load(weights_only=False)",
            read["torch"],
            None,
            kind="overhead",
        ),
    ]
    return rows, sizes


def bundle_sizes(quick: bool) -> str:
    n = SIZES["quick" if quick else "full"]
    shape = "P 8..128, R 1..256, 4 layers x topk 2"
    return f"{n} verl_sample samples of {SCHEMA} ({shape}) as a jagged TensorDict, one tag each"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    timing = (
        {"min_block_s": 0.05, "repeats": 3, "warmup_s": 0.0}
        if args.quick
        else {"min_block_s": 0.5, "repeats": 7, "warmup_s": 0.2}
    )
    rows, sizes = bundle_rows(timing=timing, quick=args.quick)
    print("\n".join(sizes))
    print(render(rows, args.markdown))
    return 0


if __name__ == "__main__":
    sys.exit(main())
