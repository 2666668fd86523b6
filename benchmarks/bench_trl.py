"""Part 11 of ``bench_core.py``: the TRL check's cost against the step that builds its batch (issue 30).

``bench_core.py`` runs it with the other parts (``--only 11`` or ``--only trl`` runs it
alone); it also runs alone: ``python benchmarks/bench_trl.py [--quick] [--markdown]``.
It needs TRL 1.16.0 (``pip install --no-deps -r .ci/trl-requirements.txt``); without it
the part prints why and its rows read "skipped".

The batch: TRL 1.16.0's own ``GRPOTrainer._generate_and_score_completions`` on CPU over the
tiny random model of ``tests/trl_support.py`` (a 1-layer Llama of hidden size 16 and a
24-word tokenizer, saved to a temporary folder), ``prompts`` prompts of 1..4 words x 4
generations, completions of up to ``length`` tokens, with ``old_per_token_logps`` and
``ref_per_token_logps`` (``num_iterations=2``, ``beta=0.1``), as in the tests. Sizes: 16
and 64 prompts (64 and 256 rows), completions up to 128 tokens (``--quick``: 16 prompts,
up to 32 tokens).

Rows (``harness.measure``: blocks interleaved round-robin, median of the blocks; ratio =
check / step, an overhead):

* **the step** (the baseline): TRL's own ``_generate_and_score_completions`` on that batch
  of prompts (generation, the two log-prob passes, rewards, advantages, padding), seeded
  the same way at each call, so each call builds the same batch;
* **the check** (``install()``'s work per batch): ``text.batch_violations(batch,
  layout=grpo_layout(pad_token_id=..., mask_truncated_completions=...), depth="shapes")``
  on the dict the step returned; target (issue 30): under 5% of the step;
* **the check at depth="values"** (``install(depth="values")``): info.

The model is as small as a model gets, so the step's tensor work is the least any real run
spends on this batch: the share measured is an upper bound of what a real model sees.

Before timing it asserts: two calls of the step build the same batch; the batch has no
violation at either depth; ``install(mode="always")`` around the step records exactly that
check in TRL's metrics (``trajschema/violations`` 0); a copy with one row's last
completion token left out of ``completion_mask`` is reported at that row at
``depth="shapes"``; a copy with a NaN advantage passes ``depth="shapes"`` and is reported
at that row at ``depth="values"``.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

import trajschema as ts
import trajschema.trl as tt

from harness import Row, measure, render

ROOT = Path(__file__).resolve().parent.parent
GENERATIONS = 4
#: (prompts, max completion length) per batch; ``--quick``: ``QUICK``.
SIZES = ((16, 128), (64, 128))
QUICK = ((16, 32),)
SCHEMA = "text"
#: Issue 30: the check under 5% of the step.
TARGET = 0.05


def load_trl() -> tuple[Any, str]:
    """The installed TRL module and the tests' TRL helpers, or None and why not."""
    # The tests' tiny model and trainer, as bench_skyrl imports the tests' shim. Ahead of site-packages: the
    # editable install appends the repository after it, and verl and OpenRLHF install a top-level `tests`.
    if sys.path[1:2] != [str(ROOT)]:
        sys.path.insert(1, str(ROOT))
    try:
        from tests.trainer_import import import_installed

        trl = import_installed("trl")  # checked first: the helpers would call pytest.skip
        import tests.trl_support as support
    except Exception as e:  # TRL's import chain (transformers, datasets, accelerate): any failure means no part 11
        why = f"TRL 1.16.0 not importable ({type(e).__name__}: {e})"
        return None, f"{why}; pip install --no-deps -r .ci/trl-requirements.txt"
    return (trl, support), ""


def prompt_texts(prompts: int) -> list[str]:
    return [" ".join(f"w{(3 * i + j) % 21}" for j in range(1 + i % 4)) for i in range(prompts)]


def layout_of(trainer: Any) -> Any:
    """The layout ``install()``'s check fits to ``trainer`` (``trajschema.trl.patch._check``)."""
    pad = trainer.processing_class.pad_token_id
    return tt.grpo_layout(
        pad_token_id=pad, mask_truncated_completions=bool(getattr(trainer, "mask_truncated_completions", False))
    )


def _copy(batch: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _found(schema: ts.Schema, batch: Any, layout: Any, depth: str) -> set[tuple[Any, str]]:
    return {(v.sample, v.field) for v in schema.batch_violations(batch, layout=layout, depth=depth)}


def verify(support: Any, trainer: Any, texts: list[str], batch: Mapping[str, Any], schema: ts.Schema) -> None:
    """Assert that the step and the check do the job (module docstring)."""
    again = support.grpo_batch(trainer, texts)
    assert again.keys() == batch.keys()
    for k, v in batch.items():
        assert not isinstance(v, torch.Tensor) or torch.equal(v, again[k]), f"the step built another {k}"
    layout = layout_of(trainer)
    assert _found(schema, batch, layout, "shapes") == _found(schema, batch, layout, "values") == set()
    metrics = trainer._metrics["train" if trainer.model.training else "eval"]
    before = len(metrics["trajschema/violations"])
    tt.install(SCHEMA, mode="always")
    try:
        support.grpo_batch(trainer, texts)
    finally:
        tt.uninstall()
    assert metrics["trajschema/violations"][before:] == [0.0], metrics["trajschema/violations"]
    short = _copy(batch)
    lengths = short["completion_mask"].sum(1)
    r = int(torch.nonzero(lengths >= 2).flatten()[0])
    short["completion_mask"][r, int(lengths[r]) - 1] = 0  # the row's last token (its eos) left out of the mask
    assert {row for row, _ in _found(schema, short, layout, "shapes")} == {r}
    nan = _copy(batch)
    nan["advantages"][5] = float("nan")
    assert _found(schema, nan, layout, "shapes") == set()
    assert _found(schema, nan, layout, "values") == {(5, "advantages")}


def trl_sizes(quick: bool) -> str:
    sizes = QUICK if quick else SIZES
    batches = " and ".join(f"{p} prompts x {GENERATIONS} (completions up to {n} tokens)" for p, n in sizes)
    return (
        f"TRL 1.16.0 GRPOTrainer on CPU over tests/trl_support.py's tiny random model (1-layer Llama, "
        f"hidden 16, 24 words), num_iterations=2, beta=0.1; batches of {batches}; schema {SCHEMA}"
    )


def trl_rows(
    *,
    timing: Mapping[str, Any],
    quick: bool = False,
    sizes: tuple[tuple[int, int], ...] | None = None,
    say: Callable[[str], None] = print,
) -> list[Row]:
    """The part-11 rows (a "skipped" row without TRL)."""
    sizes = sizes or (QUICK if quick else SIZES)
    loaded, why = load_trl()
    if loaded is None:
        say(f"[11] skipped: {why}")
        prompts, length = sizes[0]
        step = f"TRL 1.16.0 _generate_and_score_completions ({prompts * GENERATIONS} rows, completions up to {length})"
        op = f'trajschema.trl check ({prompts * GENERATIONS} rows, {SCHEMA}, trl_grpo), depth="shapes"'
        return [Row(op, None, step, None, TARGET, kind="overhead", skipped=why)]
    _, support = loaded
    schema = ts.load_schema(SCHEMA)
    folder = Path(tempfile.mkdtemp(prefix="bench-trl-"))
    support.tiny_model(folder)
    rows: list[Row] = []
    for prompts, length in sizes:
        trainer = support.make_trainer(folder, generations=GENERATIONS, prompts=prompts, max_completion_length=length)
        trainer.model.train()
        texts = prompt_texts(prompts)
        batch = support.grpo_batch(trainer, texts)
        verify(support, trainer, texts, batch, schema)
        n, width = batch["completion_ids"].shape
        say(
            f"      {n} rows, completions padded to {width}, prompts to {batch['prompt_ids'].shape[1]}: the step "
            "repeats its batch, the batch passes, install() records the same check, broken copies are caught; "
            "timing..."
        )
        layout = layout_of(trainer)
        t = measure(
            {
                "step": lambda trainer=trainer, texts=texts: support.grpo_batch(trainer, texts),
                "shapes": lambda b=batch, lay=layout: schema.batch_violations(b, layout=lay, depth="shapes"),
                "values": lambda b=batch, lay=layout: schema.batch_violations(b, layout=lay, depth="values"),
            },
            **timing,
        )
        step = f"TRL 1.16.0 _generate_and_score_completions ({n} rows, completions up to {length})"
        op = f"trajschema.trl check ({n} rows, width {width}, {SCHEMA}, trl_grpo)"
        rows += [
            Row(f'{op}, depth="shapes"', t["shapes"], step, t["step"], TARGET, kind="overhead"),
            Row(f'{op}, depth="values"', t["values"], step, t["step"], None, kind="overhead"),
        ]
    return rows


def main(argv: list[str] | None = None) -> int:
    import argparse

    from harness import machine_info

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="16 prompts, completions up to 32 tokens, 0.02 s blocks")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--prompts", type=int, default=None, help="one batch of this many prompts (x4 generations)")
    ap.add_argument("--length", type=int, default=None, help="max completion length of that batch (default 128)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    quick = {"min_block_s": 0.02, "repeats": 3, "warmup_s": 0.02}
    timing = quick if args.quick else {"min_block_s": 0.25, "repeats": 9, "warmup_s": 0.2}
    one = args.prompts is not None or args.length is not None
    sizes = ((args.prompts or SIZES[-1][0], args.length or SIZES[-1][1]),) if one else None
    rows = trl_rows(timing=timing, quick=args.quick, sizes=sizes, say=lambda m: print(m, file=sys.stderr))
    print("\n".join(machine_info()))
    print(render(rows, args.markdown))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    raise SystemExit(main())
