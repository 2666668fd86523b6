"""Part 6 of ``bench_core.py``: what ``@ts.checked`` adds to a call, per check mode.

``bench_core.py`` runs it with the other parts (``--only 6`` or ``--only checked`` runs it
alone); it also runs alone: ``python benchmarks/bench_checked.py [--quick] [--markdown]``.

Three groups, each timed with ``bench_core.measure`` (blocks interleaved round-robin):

* ``"never"`` (set process-wide with ``ts.set_check_mode``, the slowest way to read it:
  no ``checks`` block is in force, so the wrapper falls back to the default) and
  ``"once"`` after its one check, each against the same function undecorated, called
  with the same ``vlm_mrope_moe`` sample. Target: the decorator adds < 1 µs per call.
* ``"always"`` on that realistic sample (P=512, R=1024, layers 48, topk 8;
  ``depth="shapes"``) against a direct ``schema.validate(sample, depth="shapes")`` plus
  the undecorated call.
* ``"always"`` on a 256-sample TensorDict batch laid out as TransferQueue returns it
  (``trajschema.testing.tq_batch``: jagged columns, ``NonTensorStack``) against a direct
  ``schema.validate_batch(td, depth="shapes")`` plus the undecorated call.

Before timing, it asserts that the decorated functions do the job: in ``"always"`` mode
each rejects every broken variant of ``bench_core.bad_variants`` with the very
violations of the direct call, and its body does not run; in ``"never"`` mode the body
runs on broken data; in ``"once"`` mode the first call checks and the later ones do not.
The "ratio" of these rows is the time the decorator adds per call (decorated − baseline).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

import trajschema as ts
from trajschema.runtime.decorator import checked, checks, set_check_mode
from trajschema.testing import tq_batch

from harness import Row, measure, render
from workload import bad_variants, make_sample

#: Samples in the batch of the TensorDict row (whatever ``--batch`` says).
BATCH = 256
#: The bound on what ``"never"`` may add to a call (ns).
NEVER_TARGET_NS = 1000.0


def _step(batch: Any) -> int:
    """The training step the decorator wraps: as cheap as a function can be."""
    return 1


def _rejects_like_direct(decorated: Callable[[Any], Any], direct: Callable[[Any], Any], bad: Any, what: str) -> None:
    """``decorated(bad)`` raises the SchemaError ``direct(bad)`` raises, and never reaches the body."""
    try:
        direct(bad)
    except ts.SchemaError as e:
        expected = e.violations
    else:
        raise AssertionError(f"{what}: the direct call accepted it")
    try:
        got = decorated(bad)
    except ts.SchemaError as e:
        found = e.violations
    else:
        raise AssertionError(f"{what}: @checked accepted it (returned {got!r})")
    assert found == expected, f"{what}: {found} != {expected}"


def _verify(
    schema: ts.Schema, sample: Mapping[str, Any], td: Any, variants: Mapping[str, Mapping[str, Any]], pack: Callable
) -> None:
    ran: list[str] = []

    @checked(schema)
    def counted(batch: Any) -> int:
        ran.append("ran")
        return 1

    on_sample = checked(schema)(_step)
    with checks("always"):
        assert on_sample(sample) == 1 and on_sample(td) == 1
        for what, bad in variants.items():
            _rejects_like_direct(on_sample, lambda s: schema.validate(s, depth="shapes"), bad, what)
            broken = pack([bad, *([sample] * 3)])
            _rejects_like_direct(
                on_sample, lambda b: schema.validate_batch(b, depth="shapes"), broken, f"{what} (batch)"
            )
            _rejects_like_direct(counted, lambda s: schema.validate(s, depth="shapes"), bad, what)
        assert ran == [], "the body ran after a failed check"
    with checks("never"):
        for bad in variants.values():
            assert counted(bad) == 1
    with checks("once"):
        bad = next(iter(variants.values()))
        once = checked(schema)(_step)
        try:
            once(bad)
        except ts.SchemaError:
            pass
        else:
            raise AssertionError("'once': the first call did not check")
        assert once(sample) == 1 and once(bad) == 1, "'once': checked again after a passing check"


def checked_rows(
    schema: ts.Schema,
    sample: Mapping[str, Any],
    *,
    timing: Mapping[str, Any],
    seed: int = 0,
    say: Callable[[str], None] = print,
) -> list[Any]:
    """The part-6 rows: ``@checked`` in each mode against an undecorated call (and a direct check)."""

    gen = torch.Generator().manual_seed(seed + 6)  # its own data: the other parts' draws stay the same
    layers, topk = sample["routed_experts"].shape[1:]
    ps = torch.randint(8, 129, (BATCH,), generator=gen).tolist()
    rs = torch.randint(1, 257, (BATCH,), generator=gen).tolist()
    samples = [make_sample(p, r, layers=layers, topk=topk, gen=gen, index=i) for i, (p, r) in enumerate(zip(ps, rs))]
    td = tq_batch(samples)
    assert td.batch_size == torch.Size([BATCH]) and td["input_ids"].layout == torch.jagged
    _verify(schema, sample, td, bad_variants(sample), tq_batch)
    say(f"      @checked rejects what validate/validate_batch reject, in every mode as documented; timing {BATCH}...")

    decorated = checked(schema)(_step)

    def direct_sample() -> int:
        schema.validate(sample, depth="shapes")
        return _step(sample)

    def direct_batch() -> int:
        schema.validate_batch(td, depth="shapes")
        return _step(td)

    try:
        set_check_mode("never")
        never = measure({"plain": lambda: _step(sample), "dec": lambda: decorated(sample)}, **timing)
        set_check_mode("once")
        assert decorated(sample) == 1  # its one check
        once = measure({"plain": lambda: _step(sample), "dec": lambda: decorated(sample)}, **timing)
        set_check_mode("always")
        always = measure(
            {
                "sample": lambda: decorated(sample),
                "direct sample": direct_sample,
                "batch": lambda: decorated(td),
                "direct batch": direct_batch,
            },
            **timing,
        )
    finally:
        set_check_mode(None)  # back to TRAJSCHEMA_CHECKS
    plain = "the same function undecorated"
    return [
        Row('@checked, mode "never": fn(sample)', never["dec"], plain, never["plain"], NEVER_TARGET_NS, kind="added"),
        Row('@checked, mode "once", after its check', once["dec"], plain, once["plain"], None, kind="added"),
        Row(
            '@checked, mode "always": fn(sample), depth="shapes"',
            always["sample"],
            'validate(sample, depth="shapes") + fn(sample)',
            always["direct sample"],
            None,
            kind="added",
        ),
        Row(
            f'@checked, mode "always": fn(td of {BATCH}), depth="shapes"',
            always["batch"],
            'validate_batch(td, depth="shapes") + fn(td)',
            always["direct batch"],
            None,
            kind="added",
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="0.02 s blocks, 3 repeats")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    quick = {"min_block_s": 0.02, "repeats": 3, "warmup_s": 0.02}
    timing = quick if args.quick else {"min_block_s": 0.25, "repeats": 9, "warmup_s": 0.2}
    schema = ts.load_schema("vlm_mrope_moe")
    sample = make_sample(512, 1024, layers=48, topk=8, gen=torch.Generator().manual_seed(0))
    print(render(checked_rows(schema, sample, timing=timing), args.markdown))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
