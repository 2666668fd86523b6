"""Part 10 of ``bench_core.py``: OpenRLHF 0.11.2's rollout split, with and without trajschema's padding (issue 30).

``bench_core.py`` runs it with the other parts (``--only 10`` or ``--only openrlhf`` runs it
alone); it also runs alone: ``python benchmarks/bench_openrlhf.py [--quick] [--markdown]``.
It needs OpenRLHF (``pip install --no-deps -r .ci/openrlhf-requirements.txt``); without it
the part prints why and its row reads "skipped". OpenRLHF's experience maker is loaded with
the stand-ins of ``tests/openrlhf_support.py`` (the tests' own: ``deepspeed``, vLLM and the
model classes, none of which the split calls).

The rollout: ``n`` one-sample ``Experience``s made by OpenRLHF's own
``SamplesGenerator._process_response_into_experience`` (P uniform in 8..512, R in 1..1024),
split for 4 actors with ``rollout.micro_batch_size`` 2 (``pad_multiple`` = 8), for
``n`` = 65 and 1025 (``--quick``: 65), so each needs 7 padding samples. Candidates, each on
its own copy of the same samples, interleaved in one group:

* OpenRLHF's own ``RemoteExperienceMaker.split_rollout_samples`` (its batch building:
  ``Experience.concat_experiences`` per micro-batch): the baseline;
* the same under ``trajschema.openrlhf.install()`` (default arguments: ``mode=None``, the
  check mode in force at each step), called in ``ts.checks("always")``: the rollout checked
  against ``text`` in OpenRLHF's layout at ``depth="shapes"``, the padding experiences made
  from the schema (``pad_rollout_samples``), then OpenRLHF's own split;
* the same in ``ts.checks("never")`` (as under ``install(mode="never")``): the padding only.

Time: ``harness.measure``; ratio = trajschema / OpenRLHF (an overhead); issue 30 states no
target for it, so the rows are info. Memory, per call: the peak of Python-level
allocations (``tracemalloc``, one call each after the timing; tensor storage, which torch
allocates outside Python's allocator, is not in it) and, exactly, the bytes of tensor
storage the padding experiences hold.

Before timing it asserts, for each ``n``: OpenRLHF alone returns the ``n`` rows in
``ceil(n / 2)`` micro-batches, which 4 actors cannot share evenly; under
``install(strict=True)``, in either check mode, the split returns ``n + 7`` rows in
micro-batches of 2, a multiple of 4 of them, tagged ``is_padding`` ``[False] * n + [True] *
7`` (strict: the clean rollout raised nothing); every micro-batch of real samples equals
OpenRLHF's own tensor for tensor; every padding row has no action token and reward 0; a
rollout whose row 3 has no real token is split in ``checks("never")`` and refused with a
``SchemaError`` naming row 3 alone in ``checks("always")``.
"""

from __future__ import annotations

import dataclasses
import random
import sys
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

import trajschema as ts
import trajschema.openrlhf as to

from harness import Row, measure, render

ROOT = Path(__file__).resolve().parent.parent
#: Rollout sizes: 8k + 1 samples, so 7 padding samples each (``--quick``: the first).
SIZES = (65, 1025)
ACTORS = 4
ROLLOUT_MBS = 2
PROMPT_RANGE = (8, 512)
RESPONSE_RANGE = (1, 1024)
OWN = "OpenRLHF 0.11.2 split_rollout_samples alone"
#: The check modes the split runs in under ``install()``: its rollout check due, and not.
CHECK_MODES = ("always", "never")


def load_openrlhf() -> tuple[SimpleNamespace | None, str]:
    """OpenRLHF's modules under test (``tests.openrlhf_support.load``), or None and why not."""
    # The tests' OpenRLHF loader, as bench_skyrl imports the tests' shim. Ahead of site-packages: the
    # editable install appends the repository after it, and verl and OpenRLHF install a top-level `tests`.
    if sys.path[1:2] != [str(ROOT)]:
        sys.path.insert(1, str(ROOT))
    try:
        from tests.openrlhf_support import EXPERIENCE, load
        from tests.trainer_import import import_installed

        import_installed(EXPERIENCE)  # checked first: load() would call pytest.skip
        return load(), ""
    except Exception as e:  # OpenRLHF's import chain: any failure means no part 10
        why = f"OpenRLHF 0.11.2 not importable ({type(e).__name__}: {e})"
        return None, f"{why}; pip install --no-deps -r .ci/openrlhf-requirements.txt"


def make_samples(mods: SimpleNamespace, n: int, seed: int) -> list[Any]:
    from tests.openrlhf_support import rollout

    rng = random.Random(seed)
    lengths = [(rng.randint(*PROMPT_RANGE), rng.randint(*RESPONSE_RANGE)) for _ in range(n)]
    return rollout(mods, lengths, [float(i % 2) for i in range(n)])


def make_maker(mods: SimpleNamespace) -> Any:
    from tests.openrlhf_support import args_for

    args = args_for(actors=ACTORS, rollout_mbs=ROLLOUT_MBS)
    tok = SimpleNamespace(pad_token_id=0, eos_token_id=2)
    return mods.experience_maker.RemoteExperienceMaker(None, None, None, None, None, SimpleNamespace(args=args), tok)


def own_split(mods: SimpleNamespace) -> Callable[..., Any]:
    """OpenRLHF's own ``split_rollout_samples`` (read with the drop-in uninstalled)."""
    to.uninstall()
    return mods.experience_maker.RemoteExperienceMaker.split_rollout_samples


def under(mode: str, split: Callable[..., Any]) -> Callable[..., Any]:
    """``split`` called in ``ts.checks(mode)``: the check mode ``install()`` (``mode=None``) reads at each step."""

    def call(maker: Any, samples: list[Any]) -> Any:
        with ts.checks(mode):
            return split(maker, samples)

    return call


def bound(split: Callable[..., Any], maker: Any, samples: list[Any]) -> Callable[[], Any]:
    """``split(maker, samples)``, a candidate of ``measure`` (each on its own copy of the samples)."""
    return lambda: split(maker, samples)


def verify(mods: SimpleNamespace, maker: Any, own: Callable, n: int, seed: int) -> int:
    """Assert that both splits do the job (module docstring); the number of padding samples.

    Runs under ``install(strict=True)``, which it leaves installed."""
    cls = mods.experience_maker.RemoteExperienceMaker
    to.install(strict=True)
    ours = cls.split_rollout_samples
    assert ours is not own
    pad = (-n) % to.pad_multiple(maker.args)
    alone = own(maker, make_samples(mods, n, seed))
    assert sum(len(b.sequences) for b in alone) == n and len(alone) == -(-n // ROLLOUT_MBS)
    assert len(alone) % ACTORS != 0, "OpenRLHF alone would share this rollout evenly: no padding to measure"
    for mode in CHECK_MODES:
        split = under(mode, ours)(maker, make_samples(mods, n, seed))  # strict: a violation would raise
        assert all(len(b.sequences) == ROLLOUT_MBS for b in split) and len(split) % ACTORS == 0
        flags = [f for b in split for f in to.padding_flags(b)]
        assert flags == [False] * n + [True] * pad, flags
        for a, b in zip(alone[: n // ROLLOUT_MBS], split[: n // ROLLOUT_MBS], strict=True):
            for name in ("sequences", "attention_mask", "action_mask", "rewards", "response_length", "total_length"):
                assert torch.equal(getattr(a, name), getattr(b, name)), name
        for b in split:
            for row, is_pad in enumerate(to.padding_flags(b)):
                if is_pad:
                    assert not b.action_mask[row].any() and float(b.rewards[row]) == 0
    broken = make_samples(mods, n, seed)
    broken[3].attention_mask = torch.zeros_like(broken[3].attention_mask)
    under("never", ours)(maker, broken)  # no check: padded and split
    raised: ts.SchemaError | None = None
    try:
        under("always", ours)(maker, make_samples(mods, n, seed)[:3] + broken[3:])
    except ts.SchemaError as e:
        raised = e
    assert raised is not None, "install(strict=True) split a rollout with a row without a real token"
    assert {v.sample for v in raised.violations} == {3}, raised
    return pad


def _tensors(experiences: Sequence[Any]) -> list[torch.Tensor]:
    out = [t for e in experiences for t in vars(e).values() if isinstance(t, torch.Tensor)]
    return out + [t for e in experiences for t in e.info.values() if isinstance(t, torch.Tensor)]


def padding_bytes(sample: Any, count: int, maker: Any) -> int:
    """The bytes of tensor storage ``count`` padding experiences shaped on ``sample`` hold (each storage once)."""
    pads = to.padding_experiences(sample, count, eos_token_id=maker.tokenizer.eos_token_id)
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in _tensors(pads)}
    return sum(storages.values())


def peak_python_bytes(fn: Callable[[], Any]) -> int:
    """The peak of Python-level allocations during one call of ``fn`` (``tracemalloc``)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@dataclasses.dataclass(frozen=True)
class SplitMemory:
    n: int
    pad: int
    own_peak: int
    checked_peak: int
    unchecked_peak: int
    padding_storage: int


def render_split_memory(rows: Sequence[SplitMemory], markdown: bool) -> str:
    """Part 10's memory per call: peak Python allocation of each side, and the padding's tensor storage."""
    header = (
        "n",
        "padding samples",
        "OpenRLHF alone",
        "under install(): check + padding",
        'checks "never": padding',
        "padding samples' tensors",
    )

    def kib(nbytes: int, base: int | None = None) -> str:
        return f"{nbytes / 1024:.0f} KiB" + ("" if base is None else f" (+{(nbytes - base) / 1024:.0f})")

    cells = [
        (
            str(r.n),
            str(r.pad),
            kib(r.own_peak),
            kib(r.checked_peak, r.own_peak),
            kib(r.unchecked_peak, r.own_peak),
            kib(r.padding_storage),
        )
        for r in rows
    ]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---:"] * len(header)) + "|"]
        return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in cells])
    widths = [max(len(x) for x in col) for col in zip(header, *cells)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    return "\n".join(lines + ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells])


def openrlhf_sizes(quick: bool) -> str:
    sizes = SIZES[:1] if quick else SIZES
    return (
        f"rollouts of {' and '.join(map(str, sizes))} one-sample Experiences made by OpenRLHF's "
        f"SamplesGenerator._process_response_into_experience (P uniform in {PROMPT_RANGE[0]}..{PROMPT_RANGE[1]}, "
        f"R uniform in {RESPONSE_RANGE[0]}..{RESPONSE_RANGE[1]}), split for {ACTORS} actors with "
        f"rollout.micro_batch_size {ROLLOUT_MBS}"
    )


def openrlhf_rows(
    *, timing: Mapping[str, Any], quick: bool = False, seed: int = 0, say: Callable[[str], None] = print
) -> tuple[list[Row], list[SplitMemory]]:
    """The part-10 time rows and memory rows (a "skipped" row, and no memory rows, without OpenRLHF)."""
    sizes = SIZES[:1] if quick else SIZES
    mods, why = load_openrlhf()
    if mods is None:
        say(f"[10] skipped: {why}")
        op = f"split_rollout_samples({sizes[0]} samples, {ACTORS} actors, micro-batch {ROLLOUT_MBS}) + padding samples"
        return [Row(op, None, OWN, None, None, kind="overhead", skipped=why)], []
    maker = make_maker(mods)
    own = own_split(mods)
    rows: list[Row] = []
    memory: list[SplitMemory] = []
    try:
        for n in sizes:
            pad = verify(mods, maker, own, n, seed)
            say(
                f"      n={n}: OpenRLHF alone splits {n} rows unevenly over {ACTORS} actors; install() adds {pad} "
                "inert padding samples, real micro-batches equal, its check catches a broken row; timing..."
            )
            to.install()  # as a user calls it: mode=None, the check mode in force at each step
            ours = mods.experience_maker.RemoteExperienceMaker.split_rollout_samples
            fns = {"openrlhf": bound(own, maker, make_samples(mods, n, seed))}
            fns.update({m: bound(under(m, ours), maker, make_samples(mods, n, seed)) for m in CHECK_MODES})
            t = measure(fns, **timing)
            op = f"split_rollout_samples({n} samples, {ACTORS} actors, micro-batch {ROLLOUT_MBS}) under install()"
            rows += [
                Row(f"{op}: check + {pad} padding samples", t["always"], OWN, t["openrlhf"], None, kind="overhead"),
                Row(f'{op}, checks "never": {pad} padding samples', t["never"], OWN, t["openrlhf"], None, "overhead"),
            ]
            peaks = {k: peak_python_bytes(fn) for k, fn in fns.items()}
            memory.append(
                SplitMemory(
                    n,
                    pad,
                    peaks["openrlhf"],
                    peaks["always"],
                    peaks["never"],
                    padding_bytes(make_samples(mods, 1, seed)[0], pad, maker),
                )
            )
    finally:
        to.uninstall()
    return rows, memory


def main(argv: list[str] | None = None) -> int:
    import argparse

    from harness import machine_info

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="n = 65 only, 0.02 s blocks, 3 repeats")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    quick = {"min_block_s": 0.02, "repeats": 3, "warmup_s": 0.02}
    timing = quick if args.quick else {"min_block_s": 0.25, "repeats": 9, "warmup_s": 0.2}
    rows, memory = openrlhf_rows(
        timing=timing, quick=args.quick, seed=args.seed, say=lambda m: print(m, file=sys.stderr)
    )
    print("\n".join(machine_info()))
    print(render(rows, args.markdown))
    if memory:
        print()
        print(render_split_memory(memory, args.markdown))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
