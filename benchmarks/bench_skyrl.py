"""Part 8 of ``bench_core.py``: padding a SkyRL VLM batch, ours against SkyRL 0.3.0's own (issue 18).

``bench_core.py`` runs it with the other parts (``--only 8`` or ``--only skyrl`` runs it
alone); it also runs alone: ``python benchmarks/bench_skyrl.py [--quick] [--markdown]``.

The batch is part 7's rollout (``bench_dense.make_rollout``: ``n`` samples, P uniform in
8..512, R uniform in 1..1024) turned into tensors by SkyRL's own
``convert_prompts_responses_to_batch_tensors`` and wrapped, as
``RayPPOTrainer.convert_to_training_input`` wraps it, into SkyRL's ``TrainingInputBatch``
with images: ``pixel_values``, a ``TensorList`` of per-row ``(n_i, 1176)`` float32 patches,
and ``image_grid_thw``, a ``TensorList`` of per-row ``(m_i, 3)`` int64 grids (one or two
images of ``(1, h, w)`` patches per row, h and w even in 4..32; the rows after row 0 are
views of one shared tensor, so 4096 rows of images cost one tensor's memory). Row 0 holds
one image of 1024 or of 16384 patches (4.8 MB or 77 MB): SkyRL clones row 0, images
included, for every padding row.

Candidates, for ``pad_size`` 7 (what a data-parallel multiple needs) and 255:

* ``trajschema.skyrl.pad_training_input_batch(batch, pad_size)``, called as
  ``install()`` calls it (no ``schema=``: it picks one with ``choose_batch_schema``,
  which reads this batch as ``text``, since SkyRL keeps no ``position_ids``);
* the same given ``schema=vlm_mrope`` (as under ``install(schema=...)``);
* the same with ``check=False`` (as under ``install(check=False)``): only the row the
  padding is shaped on is checked, not the whole batch;
* SkyRL 0.3.0's ``skyrl.backends.skyrl_train.training_batch.pad_training_input_batch``,
  imported through the Python 3.11 shim of ``tests/skyrl_shim.py`` (the tests' own).

Time: ``harness.measure``, every candidate interleaved round-robin in one group; target:
ours no slower (ratio >= 1). The checked calls read every mask and padded region of the
batch (the info row below), which SkyRL's padding of a few rows never does: where row 0's
images are small and ``pad_size`` is 7 that check alone outweighs SkyRL's whole call. One
info row: that check, ``vlm_mrope.batch_violations(batch, layout="skyrl", depth="shapes")``.

Memory, two ways, per call:

* **new tensor storage**, exact: the bytes of every storage the result's tensors (and
  ``TensorList`` entries) hold that the input's do not; what the padded batch costs while
  it lives. Deterministic, so it shows exactly what grows with row 0's images;
* **peak RSS growth**, in a fresh subprocess per side (``--peak-rss``): the batch built,
  one warm-up call, glibc's free heap handed back (``malloc_trim``), the kernel's peak-RSS
  mark reset to the current RSS (``/proc/self/clear_refs``), one call, ``VmHWM`` minus the
  RSS before it. This counts the call's temporaries too. ``resource.getrusage``'s
  ``ru_maxrss`` cannot be reset, so the build's own peak would hide the call's; without the
  trim, a call served from the freed (still resident) Python lists of the build reads
  low (SkyRL's 32 MB of clones did); ``MALLOC_MMAP_THRESHOLD_`` is 128 KiB in the
  subprocess, so a freed tensor leaves RSS at once.

Targets: ours' memory independent of row 0's images (new storage: equal for both sizes;
peak, the median of 5 calls each: grows by less than a tenth of what row 0's image grows
by, 6.9 MB, so a copy of the image fails while the call-to-call spread, a few MB, does
not). SkyRL's side of ``pad_size`` 255 with 16384 patches is not run: it would clone
255 x 77 MB = 19.6 GB on a 23 GB machine; its rows read "skipped".

Before timing, it asserts that both candidates do the job: each returns ``n + pad_size``
rows in every column and metadata list, with the real rows' entries untouched; SkyRL's
padding rows carry row 0's images, ours none; ours passes
``schema.validate_batch(result, layout="skyrl")`` for ``vlm_mrope`` and ``text`` (a
whole batch padded keeps the batch's widths, so the exact ``skyrl`` layout, not
``sliced_layout``).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import gc
import json
import math
import os
import statistics
import subprocess
import sys
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

import trajschema as ts
import trajschema.skyrl as sk

# The tests' Python 3.11 import shim for SkyRL (one copy), as the package tests.skyrl_shim: the
# repository root goes on the path, never tests/ itself (where tests/skyrl would import as
# `skyrl`); ahead of site-packages, since verl and TransferQueue install a `tests` package there.
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
from tests.skyrl_shim import import_skyrl_module

from bench_dense import PAD_TOKEN_ID, PROMPT_RANGE, RESPONSE_RANGE, Rollout, make_rollout, skyrl_version
from harness import Row, measure, render

#: The issue's batch.
BATCH = 4096
#: A pad a data-parallel multiple needs (7: 4089 real rows to a multiple of 8), and a larger one.
PAD_SIZES = (7, 255)
#: Row 0's one image: (1, 32, 32) and (1, 128, 128) patches.
ROW0_PATCHES = (1024, 16384)
#: A Qwen2-VL patch: 3 channels x 2 frames x 14 x 14.
PATCH_DIM = 1176
#: SkyRL's side is not run when its clones of row 0's images would exceed this.
MAX_CLONE_BYTES = 4 * 2**30
TRAINING_BATCH = "skyrl.backends.skyrl_train.training_batch"
SCHEMA = "vlm_mrope"


# ---------------------------------------------------------------------------
# The batch


def row_images(n: int, *, seed: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Rows 1..n-1's ``pixel_values`` and ``image_grid_thw`` (row 0's are a placeholder, see `with_row0`)."""
    gen = torch.Generator().manual_seed(seed)
    counts = torch.randint(1, 3, (n,), generator=gen).tolist()
    sides = (torch.randint(2, 17, (n, 2, 2), generator=gen) * 2).tolist()
    grids = [torch.tensor([[1, h, w] for h, w in sides[i][:k]], dtype=torch.int64) for i, k in enumerate(counts)]
    patches = [int(g.prod(dim=1).sum()) for g in grids]
    shared = torch.randn(max(patches), PATCH_DIM, generator=gen)
    return [shared[:p] for p in patches], grids


def build_batch(tb: ModuleType, rollout: Rollout, pixels: list[torch.Tensor], grids: list[torch.Tensor]) -> Any:
    """The ``TrainingInputBatch`` ``convert_to_training_input`` builds, by SkyRL's own
    ``convert_prompts_responses_to_batch_tensors`` (a tokenizer stand-in with only ``pad_token_id``)."""
    from skyrl.train.dataset.preprocess import convert_prompts_responses_to_batch_tensors

    seqs, attention, response, rewards, loss, logprobs, experts = convert_prompts_responses_to_batch_tensors(
        SimpleNamespace(pad_token_id=PAD_TOKEN_ID),
        rollout.prompts,
        rollout.responses,
        rollout.rewards,
        rollout.loss_masks,
        rollout.logprobs,
    )
    batch = tb.TrainingInputBatch(
        {
            "sequences": seqs,
            "attention_mask": attention,
            "response_mask": response,
            "rewards": rewards,
            "loss_mask": loss,
            "rollout_logprobs": logprobs,
            "rollout_expert_indices": experts,  # None: a rollout without routes
            "pixel_values": tb.TensorList(pixels),
            "image_grid_thw": tb.TensorList(grids),
        }
    )
    batch.metadata = {
        "uids": list(rollout.uids),
        "response_length": response.shape[1],
        "avg_response_length": sum(map(len, rollout.responses)) / len(rollout.responses),
    }
    return batch


def with_row0(tb: ModuleType, batch: Any, patches: int, *, seed: int) -> Any:
    """``batch`` (sharing its tensors) with row 0's images one ``(1, s, s)`` image of ``patches`` patches."""
    side = math.isqrt(patches)
    assert side * side == patches and side % 2 == 0, patches
    gen = torch.Generator().manual_seed(seed + patches)
    cols = dict(batch)
    cols["pixel_values"] = tb.TensorList(
        [torch.randn(patches, PATCH_DIM, generator=gen), *batch["pixel_values"].tensors[1:]]
    )
    cols["image_grid_thw"] = tb.TensorList([torch.tensor([[1, side, side]]), *batch["image_grid_thw"].tensors[1:]])
    out = tb.TrainingInputBatch(cols)
    out.metadata = {k: (list(v) if isinstance(v, list) else v) for k, v in batch.metadata.items()}
    return out


def make_batches(n: int, seed: int) -> tuple[ModuleType, dict[int, Any]]:
    """SkyRL's training-batch module and the batch, by row 0's patch count."""
    tb = import_skyrl_module(TRAINING_BATCH)
    rollout = make_rollout(n, seed=seed + 8, prompt_range=PROMPT_RANGE, response_range=RESPONSE_RANGE)
    pixels, grids = row_images(n, seed=seed + 8)
    base = build_batch(tb, rollout, pixels, grids)
    return tb, {p: with_row0(tb, base, p, seed=seed) for p in ROW0_PATCHES}


# ---------------------------------------------------------------------------
# Memory


def _storages(batch: Mapping[str, Any]) -> Iterator[torch.UntypedStorage]:
    for col in batch.values():
        for t in [col] if isinstance(col, torch.Tensor) else getattr(col, "tensors", []):
            yield t.untyped_storage()


def new_storage_bytes(result: Mapping[str, Any], source: Mapping[str, Any]) -> int:
    """Bytes of the storages ``result``'s tensors hold that ``source``'s do not (each counted once)."""
    old = {s.data_ptr() for s in _storages(source) if s.nbytes()}
    new = {s.data_ptr(): s.nbytes() for s in _storages(result) if s.nbytes() and s.data_ptr() not in old}
    return sum(new.values())


def clone_bytes(batch: Any, pad: int) -> int:
    """What SkyRL's clones of row 0's images take for ``pad`` padding rows."""
    return pad * sum(batch[k].tensors[0].nbytes for k in ("pixel_values", "image_grid_thw"))


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"/proc/self/status has no {field}")


def _trim_heap() -> None:
    """Give glibc's free heap memory back to the OS: a call served from free chunks that are still
    resident (the build's freed Python lists) would not raise the RSS by what it allocates."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: the figures may then read low
        ctypes.CDLL(None).malloc_trim(0)


def call_peak(fn: Callable[[], Any]) -> int | None:
    """Bytes the peak RSS rose by during ``fn()`` (None without Linux's resettable ``VmHWM``)."""
    gc.collect()
    _trim_heap()
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := the current RSS
        before = _status_kb("VmRSS")
    except OSError:
        return None
    result = fn()
    peak = _status_kb("VmHWM")
    del result
    return max(0, peak - before) * 1024


#: The candidates: ours as ``install()`` calls it (the schema chosen), ours given the schema,
#: ours as ``install(check=False)`` calls it (only the row padding is shaped on is checked), SkyRL's.
WHO = ("ours", "ours, schema given", "ours, unchecked", "skyrl")


def candidates(
    tb: ModuleType, batches: Mapping[int, Any], who: tuple[str, ...] = WHO
) -> dict[tuple[str, int, int], Callable[[], Any]]:
    """One call per (candidate, pad_size, row 0's patches); SkyRL's only where it can afford the clones."""
    vlm = ts.load_schema(SCHEMA)
    fns: dict[tuple[str, int, int], Callable[[], Any]] = {}
    for name in who:
        for pad in PAD_SIZES:
            for patches, b in batches.items():
                if name == "ours":
                    fns[name, pad, patches] = lambda b=b, p=pad: sk.pad_training_input_batch(b, p)
                elif name == "ours, unchecked":
                    fns[name, pad, patches] = lambda b=b, p=pad: sk.pad_training_input_batch(b, p, check=False)
                elif name != "skyrl":
                    fns[name, pad, patches] = lambda b=b, p=pad: sk.pad_training_input_batch(b, p, schema=vlm)
                elif clone_bytes(b, pad) <= MAX_CLONE_BYTES:
                    fns[name, pad, patches] = lambda b=b, p=pad: tb.pad_training_input_batch(b, p)
    return fns


#: Calls whose peak is read, per candidate and size: one call's peak moves by a few MB between calls.
PEAK_CALLS = 5


def peak_child(side: str, n: int, seed: int) -> dict[str, list[int] | None]:
    """In this (fresh) process: the peak-RSS growth of `PEAK_CALLS` calls of each candidate
    of one side (``ours`` or ``skyrl``), after one warm-up call each."""
    torch.set_num_threads(1)
    tb, batches = make_batches(n, seed)
    who = tuple(w for w in WHO if w.startswith(side))
    out: dict[str, list[int] | None] = {}
    for key, fn in candidates(tb, batches, who).items():
        fn()  # imports, schema loading and caches are not the call's memory
        peaks = [call_peak(fn) for _ in range(PEAK_CALLS)]
        out["|".join(map(str, key))] = None if None in peaks else typing.cast(list[int], peaks)
    return out


def peak_rss(side: str, n: int, seed: int) -> dict[tuple[str, int, int], list[int] | None]:
    """`peak_child` in a fresh subprocess (its allocations of >= 128 KiB mmapped, so frees leave RSS)."""
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--peak-rss", side, "--batch", str(n), "--seed", str(seed)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {(k.split("|")[0], int(k.split("|")[1]), int(k.split("|")[2])): v for k, v in found.items()}


# ---------------------------------------------------------------------------
# Both sides do the job before they are timed


def _same_rows(out: Any, batch: Any, pad: int) -> None:
    """``out`` is ``batch`` with ``pad`` rows appended: its class and keys, the real rows' values and entries kept."""
    n = len(batch)
    assert type(out) is type(batch) and len(out) == n + pad and list(out) == list(batch)
    assert len(out.metadata["uids"]) == n + pad and out.metadata["pad_size"] == pad
    for key, col in batch.items():
        if isinstance(col, torch.Tensor):
            assert out[key].shape == (n + pad, *col.shape[1:]) and torch.equal(out[key][:n], col), key
        elif col is not None:
            assert len(out[key]) == n + pad and all(a is b for a, b in zip(out[key].tensors, col.tensors)), key


def verify(tb: ModuleType, batch: Any, pad: int) -> None:
    """Every candidate returns ``n + pad`` rows, real rows untouched; SkyRL's padding rows hold
    row 0's images, ours none; ours passes ``validate_batch`` in the ``skyrl`` layout."""
    n, row0 = len(batch), batch["pixel_values"].tensors[0].shape
    for (who, p, patches), fn in candidates(tb, {row0[0]: batch}).items():
        if p != pad:
            continue
        out = fn()
        _same_rows(out, batch, pad)
        padded = [t.shape for t in out["pixel_values"].tensors[n:]]
        if who == "skyrl":
            assert padded == [row0] * pad, (patches, padded[:2])
            continue
        assert all(s[0] == 0 for s in padded) and out.metadata["is_padding"] == [False] * n + [True] * pad
        for name in (SCHEMA, "text"):
            ts.load_schema(name).validate_batch(out, layout="skyrl")


def _mb(nbytes: float | None) -> str:
    return "n/a" if nbytes is None else f"{nbytes / 2**20:,.1f} MB"


#: The memory table's columns.
MEMORY_HEADER = ("call", "pad_size", "row 0's images", "new tensor storage", "peak RSS growth")
#: What each candidate is called in the tables.
LABELS = {
    "ours": "trajschema.skyrl (schema chosen)",
    "ours, schema given": f"trajschema.skyrl (schema={SCHEMA})",
    "ours, unchecked": "trajschema.skyrl (check=False)",
    "skyrl": "SkyRL 0.3.0 (clones row 0)",
}


@dataclasses.dataclass(frozen=True)
class Memory:
    """One call's memory: ``new`` and each ``peak`` in bytes (None: not run, or no ``VmHWM``)."""

    who: str
    pad: int
    patches: int
    image_bytes: int
    new: int | None
    peak: list[int] | None
    clones: int  # what SkyRL's clones of row 0's images take at this pad_size

    def cells(self) -> tuple[str, ...]:
        image = f"{self.patches} patches ({_mb(self.image_bytes)})"
        if self.new is None:
            skipped = f"not run ({_mb(self.clones)} of clones)"
            return (LABELS[self.who], str(self.pad), image, skipped, skipped)
        peak = "n/a" if not self.peak else f"{_mb(statistics.median(self.peak))} ({_range(self.peak)})"
        return (LABELS[self.who], str(self.pad), image, _mb(self.new), peak)


def _range(values: list[int]) -> str:
    return f"{min(values) / 2**20:,.1f}-{max(values) / 2**20:,.1f}"


def memory_table(
    batches: Mapping[int, Any],
    fns: Mapping[tuple[str, int, int], Callable[[], Any]],
    peaks: Mapping[tuple[str, int, int], list[int] | None],
) -> list[Memory]:
    """One row per (candidate, pad_size, row 0's patches): new storage, exact, and peak RSS growth."""
    rows = []
    for who in WHO:
        for pad in PAD_SIZES:
            for patches, batch in batches.items():
                fn = fns.get((who, pad, patches))
                new = None if fn is None else new_storage_bytes(fn(), batch)
                image = batch["pixel_values"].tensors[0].nbytes
                peak = peaks.get((who, pad, patches))
                rows.append(Memory(who, pad, patches, image, new, peak, clone_bytes(batch, pad)))
                gc.collect()
    return rows


def render_memory(rows: list[Memory], markdown: bool) -> str:
    """The memory table, as markdown or aligned text."""
    cells = [r.cells() for r in rows]
    if markdown:
        lines = ["| " + " | ".join(MEMORY_HEADER) + " |", "|---|---:|---|---:|---:|"]
        return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in cells])
    table = [MEMORY_HEADER, *cells]
    widths = [max(len(r[i]) for r in table) for i in range(len(MEMORY_HEADER))]
    right = {1, 3, 4}
    lines = [
        "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in table
    ]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


#: The share of the growth of row 0's image that a peak may grow by and still count as not growing.
PEAK_SLACK = 0.1


def independence(rows: list[Memory]) -> list[str]:
    """Per candidate and measure, how much more the call takes with row 0's larger image, at each
    pad_size. Target for trajschema's: nothing, exactly for new storage; for the peak (median of
    `PEAK_CALLS` calls), less than `PEAK_SLACK` of the two images' difference, so a copy of row
    0's image, or of a tenth of it, fails while the call-to-call spread (a few MB) does not.
    SkyRL's is shown for contrast."""
    small, large = ROW0_PATCHES[0], ROW0_PATCHES[-1]
    out = []
    for who in WHO:
        for name in ("new tensor storage", "peak RSS growth"):
            grew, ok = [], True
            for pad in PAD_SIZES:
                pair = {r.patches: r for r in rows if r.who == who and r.pad == pad}
                a, b = pair.get(small), pair.get(large)
                if a is None or b is None:
                    continue
                if name.startswith("new") and a.new is not None and b.new is not None:
                    grew.append(f"{_signed(b.new - a.new)} at pad_size {pad}")
                    ok = ok and b.new == a.new
                elif not name.startswith("new") and a.peak and b.peak:
                    median = statistics.median(b.peak) - statistics.median(a.peak)
                    grew.append(f"{_signed(median)} (medians) at pad_size {pad}")
                    ok = ok and median < PEAK_SLACK * (b.image_bytes - a.image_bytes)
            if grew:
                verdict = ("PASS" if ok else "FAIL") if who != "skyrl" else "(for contrast)"
                out.append(f"{LABELS[who]}, {name}, row 0 {small} -> {large} patches: {', '.join(grew)}: {verdict}")
    return out


def _signed(nbytes: float) -> str:
    return ("+" if nbytes >= 0 else "-") + _mb(abs(nbytes))


# ---------------------------------------------------------------------------
# The part


def skyrl_sizes(n: int) -> str:
    """What part 8 ran on, for the report's header."""
    version = skyrl_version()
    return (
        f"{n} rows, P uniform in {PROMPT_RANGE[0]}..{PROMPT_RANGE[1]}, R uniform in {RESPONSE_RANGE[0]}.."
        f"{RESPONSE_RANGE[1]}, built by SkyRL {version}'s convert_prompts_responses_to_batch_tensors, with "
        f"pixel_values ({PATCH_DIM} float32 per patch, 1-2 images of 4..32 x 4..32 patches a row, one shared "
        f"storage) and image_grid_thw; row 0: one image of {' or '.join(map(str, ROW0_PATCHES))} patches"
    )


def skyrl_rows(
    *, timing: Mapping[str, Any], n: int = BATCH, seed: int = 0, say: Callable[[str], None] = print
) -> tuple[list[Row], list[Memory]]:
    """The part-8 time rows and memory rows (a "skipped" row, and no memory rows, without SkyRL)."""
    label = "SkyRL 0.3.0 pad_training_input_batch (clones row 0)"
    try:
        tb, batches = make_batches(n, seed)
    except ImportError as e:
        why = f"skyrl not importable ({type(e).__name__}: {e}); pip install --no-deps skyrl==0.3.0 (see README)"
        say(f"[8] skipped: {why}")
        return [
            Row(f"trajschema.skyrl.pad_training_input_batch(VLM batch of {n}, 7)", None, label, None, 1, skipped=why)
        ], []
    first = batches[ROW0_PATCHES[0]]
    chosen = sk.choose_batch_schema(first).name
    say(f"      SkyRL built {n} rows: sequences {tuple(first['sequences'].shape)}; the schema chosen: {chosen}")
    for pad in PAD_SIZES:
        for batch in batches.values():
            verify(tb, batch, pad)
    say(f"      both return n + pad_size rows, real rows untouched; ours validates ({SCHEMA}, text); timing...")
    fns = candidates(tb, batches)
    vlm = ts.load_schema(SCHEMA)
    timed: dict[Any, Callable[[], Any]] = {
        **fns,
        "check": lambda: vlm.batch_violations(first, layout="skyrl", depth="shapes"),
    }
    timed.update(audit_candidates(tb, n, seed, first))
    t = measure(timed, **timing)
    rows = []
    for (who, pad, patches), tm in ((k, t[k]) for k in fns if k[0] != "skyrl"):
        theirs = t.get(("skyrl", pad, patches))
        skip = None if theirs else f"SkyRL's side would clone {_mb(clone_bytes(batches[patches], pad))} of images"
        schema = {"ours": chosen, "ours, unchecked": f"{chosen}, check=False"}.get(who, f"{SCHEMA} given")
        op = f"trajschema.skyrl.pad_training_input_batch(VLM batch of {n}, {pad}), row 0: {patches} patches, {schema}"
        # issue 27: unchecked no slower than SkyRL's; checked at most 2x its time
        if who == "ours, unchecked":
            rows.append(Row(op, tm, label, theirs, 1, skipped=skip))
        else:
            rows.append(Row(op, tm, label, theirs, 2, kind="overhead", skipped=skip))
    rows.append(
        Row(
            f"trajschema.skyrl step audit (VLM batch of {n} + {PAD_SIZES[0]} padding rows)",
            t["audit"],
            f"SkyRL builds the step's batch ({n} rows: convert_prompts_responses_to_batch_tensors + wrap)",
            t["build"],
            0.02,
            kind="overhead",
        )
    )
    base = t["skyrl", PAD_SIZES[0], ROW0_PATCHES[0]]
    op = f'{SCHEMA}.batch_violations(VLM batch of {n}, layout="skyrl", depth="shapes"), row 0: {ROW0_PATCHES[0]}'
    rows.append(Row(op, t["check"], label + f", {PAD_SIZES[0]}", base, None))
    say("      memory: exact new storage here, peak RSS in a fresh subprocess per side...")
    peaks = {**peak_rss("ours", n, seed), **peak_rss("skyrl", n, seed)}
    return rows, memory_table(batches, fns, peaks)


def audit_candidates(tb: ModuleType, n: int, seed: int, batch: Any) -> dict[str, Callable[[], Any]]:
    """The step audit of ``batch`` padded by 7 rows (as install() runs it once per padded part of a
    step), and SkyRL's own build of the step's batch from the rollout (its per-step batch work)."""
    from trajschema.skyrl.audit import skyrl_step_audit

    padded = sk.pad_training_input_batch(batch, PAD_SIZES[0])
    real = [not p for p in padded.metadata["is_padding"]]
    found = skyrl_step_audit(padded, real)
    assert found.faults == () and found.figures["trajschema/padding_rows"] == PAD_SIZES[0], found
    rollout = make_rollout(n, seed=seed + 8, prompt_range=PROMPT_RANGE, response_range=RESPONSE_RANGE)
    pixels, grids = row_images(n, seed=seed + 8)
    return {
        "audit": lambda: skyrl_step_audit(padded, real),
        "build": lambda: build_batch(tb, rollout, pixels, grids),
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"256 rows instead of {BATCH}, 0.02 s blocks, 3 repeats")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--batch", type=int, default=None, help=f"rows (default {BATCH}, --quick 256)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peak-rss", choices=("ours", "skyrl"), help="(internal) print one side's peak-RSS growths")
    args = ap.parse_args(argv)
    n = args.batch or (256 if args.quick else BATCH)
    if args.peak_rss:
        print(json.dumps(peak_child(args.peak_rss, n, args.seed)))
        return 0
    torch.set_num_threads(1)
    quick = {"min_block_s": 0.02, "repeats": 3, "warmup_s": 0.02}
    timing = quick if args.quick else {"min_block_s": 0.25, "repeats": 9, "warmup_s": 0.2}
    rows, memory = skyrl_rows(timing=timing, n=n, seed=args.seed, say=lambda m: print(m, file=sys.stderr))
    print(render(rows, args.markdown))
    if memory:
        print()
        print(render_memory(memory, args.markdown))
        print()
        print("\n".join(independence(memory)))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
