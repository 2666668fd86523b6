"""Part 9 of ``bench_core.py``: packed batches, checked and converted (issue 29).

``bench_core.py`` runs it with the other parts (``--only 9`` or ``--only packed`` runs it
alone); it also runs alone: ``python benchmarks/bench_packed.py [--quick] [--markdown]``.

The samples: ``n`` samples (4096; ``--quick`` 256) with the lengths of parts 2 and 2b
(P uniform in ``--batch-prompt``, R uniform in ``--batch-response``, 8..128 and 1..256 by
default; run alone, the script draws its own from the same ranges), each built by
``trajschema.testing.verl_sample(schema, P, R, uid=..., layers=, topk=, seed=i)`` with
``loss_mask`` a clone of ``response_mask`` (GRPO groups of 8 uids), for two schemas:
``moe_routed`` (routes ``(S, layers, topk)`` int16, 48 x 8 by default) and ``text``. From
them, three batches of the same tokens:

* **dense** (``verl_dataproto``): ``schema.to_dense(samples, layout="verl_dataproto",
  pad_token_id=0, lengths=...)`` padded to the ranges' upper ends (verl pads to its
  configured lengths), its tensors in a ``TensorDict(batch_size=[n])`` and its list
  columns as ``NonTensorStack.from_list`` (as ``tests/verl/test_verl_nopad.py`` builds it);
* **verl_nopad**: verl 0.9.1's own ``verl.workers.utils.padding.left_right_2_no_padding``
  of the dense batch;
* **thd**: ``schema.to_packed(samples, layout=thd)``, ``thd`` being
  ``ts.load_layout("thd").with_pad_token(0).with_alignment(8)`` (8 = 2 * tp * cp at
  tp = cp = 2, verl's Megatron rule for ``cp > 1``).

Timed, every candidate of a schema interleaved round-robin in one ``harness.measure``
group, but for the first pair:

* ``schema.pack_dense(dense, layout="verl_nopad")`` (it checks the dense batch at
  ``depth="values"`` first; the public API has no unchecked conversion) against verl's
  ``left_right_2_no_padding``, one call per block, alternating (``harness.measure_calls``).
  verl's function pops and sets keys of the TensorDict it is given and writes into no
  tensor, so each of its calls gets a fresh shallow ``TensorDict.copy()`` of the dense
  batch, made in the untimed set-up (a shallow copy of a TensorDict with 4096-row
  ``NonTensorStack`` columns is not free); the dense batch is asserted unchanged after
  verl's call before timing, and no deep clone is needed;
* ``schema.to_packed(samples, layout=thd)`` (checks the samples at ``depth="values"``
  first) against a hand-written pack: one ``torch.cat`` per field of the samples' tensors
  and zero pads to the alignment, offsets from ``torch.cumsum``;
* ``schema.from_packed(thd_batch, layout=thd)`` (checks the batch first, ``depth="values"``
  by default; also timed with ``depth="shapes"``) against a hand-written unpack:
  ``torch.split`` of each flat field at the padded offsets, each piece cut to its sequence
  and cloned (``from_packed`` returns tensors that share no storage, so the baseline does too);
* ``schema.batch_violations(batch, layout=..., depth="shapes")`` for the thd, verl_nopad and
  dense batches, each against one read pass over the same batch: ``torch.sum`` of every
  tensor it holds, once each (nested tensors by their ``.values()``; ``loss_mask``, the very
  ``response_mask`` tensor in verl_nopad, once; verl's ``indices`` included; the list of
  tensors gathered before timing). Target (issue 29): the check within 3x that pass;
* the same three at ``depth="values"``, against the same pass, no target;
* where narrow integers hold at least a tenth of a batch's bytes (``moe_routed``'s int16
  routes), the shapes check also against a read pass of the same bytes with those tensors
  seen as int64 words: ``torch.sum`` of int16 (an int64 sum) runs at 0.64 GB/s on one
  thread of the development VM against 12.4 GB/s for int64, so the plain pass is slow
  there. No target.

Before timing, it asserts that the candidates do the job: ours and verl's nopad batches
are equal field for field (nested offsets and their dtypes, values, ``NonTensorData``),
with ``loss_mask`` the very ``response_mask`` tensor in both, and the dense batch unchanged;
``to_packed`` equals the hand-written pack key for key and bit for bit; ``from_packed`` and
the hand-written unpack both give the samples back bit for bit; the three batches pass
their checks at both depths; and broken copies are rejected at the broken row at
``depth="shapes"``: thd with a loss mask of 1 on an alignment-padding token, thd with
positions that do not restart at 0, verl_nopad with shifted positions, dense with a token
in the left padding.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict

import trajschema as ts
from trajschema.testing import verl_sample

from harness import Call, Row, measure, measure_calls, render

#: The issue's batch size and parts 2 and 2b's length ranges (``--batch-prompt``, ``--batch-response``).
BATCH = 4096
PROMPT_RANGE = (8, 128)
RESPONSE_RANGE = (1, 256)
SCHEMAS = ("moe_routed", "text")
PAD_TOKEN_ID = 0
#: thd's alignment: verl's 2 * tp * cp (``cp > 1``) at tp = cp = 2.
ALIGNMENT = 8
GROUP = 8  # GRPO samples per uid
#: Issue 29: the check within 3x one pass that reads the same bytes.
READ_TARGET = 3.0
#: thd's fields, as ``layouts/thd.yaml`` places them: on the run, on the run at the
#: response tokens (zero elsewhere), one nested entry per sequence, one list entry per sequence.
SEQ_FIELDS = ("input_ids", "position_ids", "attention_mask", "routed_experts")
RESPONSE_FIELDS = ("response_mask", "loss_mask", "rollout_log_probs", "rm_scores")
JAGGED_FIELDS = ("prompts", "responses")
LIST_FIELDS = ("num_turns", "uid", "session_id", "multi_modal_inputs")


def load_verl_nopad() -> tuple[Callable[[TensorDict], TensorDict] | None, str]:
    """verl 0.9.1's ``left_right_2_no_padding``, or None and why it is not importable."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # verl warns about every engine it cannot load on CPU
            from verl.workers.utils.padding import left_right_2_no_padding
    except Exception as e:  # verl imports transformers, flash-attn stand-ins, ...: any failure means no baseline
        why = f"verl not importable ({type(e).__name__}: {e})"
        return None, f"{why}; pip install --no-deps -r .ci/verl-requirements.txt"
    return left_right_2_no_padding, ""


def make_samples(
    schema: ts.Schema, prompts: Sequence[int], responses: Sequence[int], *, layers: int, topk: int
) -> list[dict[str, Any]]:
    """One ``verl_sample`` per (P, R), ``loss_mask`` a clone of ``response_mask``, GRPO uids."""
    out = []
    for i, (p, r) in enumerate(zip(prompts, responses)):
        s = verl_sample(schema, p, r, uid=f"q{i // GROUP}", layers=layers, topk=topk, seed=i)
        s["loss_mask"] = s["response_mask"].clone()
        out.append(s)
    return out


def dense_td(schema: ts.Schema, samples: list[dict[str, Any]], lengths: Mapping[str, int]) -> TensorDict:
    """The samples as a ``verl_dataproto`` TensorDict: tensors as they are, list columns as ``NonTensorStack``."""
    dense = schema.to_dense(samples, layout="verl_dataproto", pad_token_id=PAD_TOKEN_ID, lengths=dict(lengths))
    tensors = {k: v for k, v in dense.items() if isinstance(v, torch.Tensor)}
    td = TensorDict(tensors, batch_size=[len(samples)])
    for k, v in dense.items():
        if k not in tensors:
            td[k] = NonTensorStack.from_list(list(v))
    return td


# ---------------------------------------------------------------------------
# The baselines: what a trainer writes without checks


def pack_by_hand(samples: list[dict[str, Any]], alignment: int) -> ts.PackedBatch:
    """``to_packed``'s thd batch, written out: one ``torch.cat`` per field, zero pads, cumsum offsets."""
    lengths = torch.tensor([s["input_ids"].shape[0] for s in samples])
    padded = (lengths + alignment - 1) // alignment * alignment
    pads = (padded - lengths).tolist()
    prompt_lens = [s["prompts"].shape[0] for s in samples]
    out = ts.PackedBatch()
    for key, run in (("cu_seqlens", lengths), ("cu_seqlens_padded", padded)):
        offsets = torch.zeros(len(samples) + 1, dtype=torch.int32)
        offsets[1:] = torch.cumsum(run, 0)
        out[key] = offsets
    first = samples[0]
    for key in SEQ_FIELDS:
        if key in first:
            v0 = first[key]
            fill = PAD_TOKEN_ID if key == "input_ids" else 0
            pad = torch.full((alignment, *v0.shape[1:]), fill, dtype=v0.dtype)
            out[key] = torch.cat([x for s, p in zip(samples, pads) for x in (s[key], pad[:p])])
    for key in RESPONSE_FIELDS:
        if key in first:
            zeros = torch.zeros(max(prompt_lens) + alignment, dtype=first[key].dtype)
            out[key] = torch.cat(
                [x for s, p, q in zip(samples, prompt_lens, pads) for x in (zeros[:p], s[key], zeros[:q])]
            )
    for key in JAGGED_FIELDS:
        values = [s[key] for s in samples]
        offsets = torch.zeros(len(values) + 1, dtype=torch.int64)
        offsets[1:] = torch.cumsum(torch.tensor([v.shape[0] for v in values]), 0)
        out[key] = torch.nested.nested_tensor_from_jagged(torch.cat(values), offsets)
    for key in LIST_FIELDS:
        if key in first:
            out[key] = [s[key] for s in samples]
    return out


def unpack_by_hand(batch: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``from_packed``'s samples, written out: ``torch.split`` at the padded offsets, each piece cut and cloned."""
    lengths = batch["cu_seqlens"].diff().tolist()
    padded = batch["cu_seqlens_padded"].diff().tolist()
    cols: dict[str, list[Any]] = {key: [x.clone() for x in batch[key].unbind()] for key in JAGGED_FIELDS}
    prompt_lens = [p.shape[0] for p in cols["prompts"]]
    for key in SEQ_FIELDS:
        if key in batch:
            cols[key] = [x[:n].clone() for x, n in zip(torch.split(batch[key], padded), lengths)]
    for key in RESPONSE_FIELDS:
        if key in batch:
            pieces = torch.split(batch[key], padded)
            cols[key] = [x[p:n].clone() for x, p, n in zip(pieces, prompt_lens, lengths)]
    for key in LIST_FIELDS:
        if key in batch:
            cols[key] = list(batch[key])
    return [{key: col[i] for key, col in cols.items()} for i in range(len(lengths))]


def batch_tensors(batch: Any) -> list[torch.Tensor]:
    """Every tensor a batch holds, once each: nested ones by their values, ``NonTensorData`` tensors included."""
    if isinstance(batch, TensorDict):
        values = [batch.get(k) for k in batch.keys()]
    else:
        values = [*batch.values(), *getattr(batch, "metadata", {}).values()]
    out: list[torch.Tensor] = []
    seen: set[tuple[int, torch.dtype, tuple[int, ...]]] = set()
    for v in values:
        if isinstance(v, NonTensorData):
            v = v.data
        if not isinstance(v, torch.Tensor):
            continue  # lists and NonTensorStack columns of Python values
        if v.is_nested:
            v = v.values()
        key = (v.data_ptr(), v.dtype, tuple(v.shape))
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def read_pass(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """One pass that reads every byte of the batch's tensors."""
    return [torch.sum(t) for t in tensors]


#: Integer dtypes ``torch.sum`` reads slowly (one thread, the development VM: int16 0.64 GB/s, int32 1.2 GB/s,
#: uint8 0.31 GB/s, against 12.4 GB/s for int64 and 14.8 GB/s for float32).
NARROW = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32)


def as_words(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The same bytes, narrow integer tensors seen as int64 words where their bytes allow (contiguous, whole words)."""
    out = []
    for t in tensors:
        if t.dtype in NARROW and t.is_contiguous() and (t.numel() * t.element_size()) % 8 == 0:
            t = t.reshape(-1).view(torch.int64)
        out.append(t)
    return out


def narrow_share(tensors: Sequence[torch.Tensor]) -> float:
    """The share of the batch's bytes held by narrow integer tensors."""
    size = [t.numel() * t.element_size() for t in tensors]
    return sum(b for t, b in zip(tensors, size) if t.dtype in NARROW) / max(sum(size), 1)


# ---------------------------------------------------------------------------
# Both sides do the job before they are timed


def same(a: Any, b: Any) -> bool:
    """Bit-exact equality: tensors by layout, dtype, shape and bits (nested: offsets too); containers by members."""
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor) or a.is_nested != b.is_nested:
            return False
        if a.is_nested:
            return (
                a._ragged_idx == b._ragged_idx
                and a.offsets().dtype == b.offsets().dtype
                and torch.equal(a.offsets(), b.offsets())
                and same(a.values(), b.values())
            )
        return (a.dtype, a.shape) == (b.dtype, b.shape) and torch.equal(_bits(a), _bits(b))
    if isinstance(a, Mapping):
        return isinstance(b, Mapping) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.reshape(-1).contiguous().view(torch.uint8) if t.numel() else t.reshape(-1)


def entries(td: TensorDict) -> dict[str, Any]:
    """Every key's value, ``NonTensorData`` as its data, ``NonTensorStack`` as its list."""
    out = {}
    for k in td.keys():
        v = td.get(k)
        out[k] = v.data if isinstance(v, NonTensorData) else v.tolist() if isinstance(v, NonTensorStack) else v
    return out


def _rejects(schema: ts.Schema, batch: Any, layout: Any, row: int, what: str) -> None:
    found = schema.batch_violations(batch, layout=layout, depth="shapes")
    assert any(v.sample == row for v in found), f"{what}: row {row} not named: {found[:3]}"
    assert all(v.sample in (row, None) for v in found), f"{what}: other rows named: {found[:3]}"


def verify(
    schema: ts.Schema,
    samples: list[dict[str, Any]],
    td: TensorDict,
    thd: ts.PackedLayout,
    verl_nopad: Callable[[TensorDict], TensorDict] | None,
) -> tuple[ts.PackedBatch, TensorDict]:
    """The candidates do the same job, the batches pass and broken copies fail (see the module doc)."""
    before = {k: td.get(k) for k in td.keys()}
    sums = {k: float(v.double().sum()) for k, v in before.items() if isinstance(v, torch.Tensor)}
    ours = schema.pack_dense(td, layout="verl_nopad")
    assert ours["loss_mask"] is ours["response_mask"]
    nopad = ours
    if verl_nopad is not None:
        theirs = verl_nopad(td.copy())
        assert theirs["loss_mask"] is theirs["response_mask"]
        got, want = entries(ours), entries(theirs)
        assert got.keys() == want.keys(), (sorted(got), sorted(want))
        for k, v in want.items():
            assert same(got[k], v), f"pack_dense differs from verl's left_right_2_no_padding at {k!r}"
        nopad = theirs
    after = {k: td.get(k) for k in td.keys()}
    assert after.keys() == before.keys() and all(after[k] is v for k, v in before.items()), "the dense batch changed"
    assert all(float(td.get(k).double().sum()) == s for k, s in sums.items()), "the dense batch's values changed"

    packed = schema.to_packed(samples, layout=thd)
    assert same(dict(packed), dict(pack_by_hand(samples, ALIGNMENT))), "to_packed differs from the hand-written pack"
    assert same(schema.from_packed(packed, layout=thd), samples), "from_packed did not give the samples back"
    assert same(unpack_by_hand(packed), samples), "the hand-written unpack did not give the samples back"

    for layout, batch in ((thd, packed), ("verl_nopad", nopad), ("verl_dataproto", td)):
        for depth in ("shapes", "values"):
            found = schema.batch_violations(batch, layout=layout, depth=depth)
            assert not found, f"{getattr(layout, 'name', layout)}, depth={depth}: the good batch fails: {found[:3]}"

    lengths = packed["cu_seqlens"].diff()
    short = ((packed["cu_seqlens_padded"].diff() > lengths) & (lengths > 0)).nonzero().flatten().tolist()
    row = short[len(short) // 2]  # a sequence with alignment padding after it
    start, end = int(packed["cu_seqlens_padded"][row]), int(packed["cu_seqlens_padded"][row + 1])
    bad = packed.copy()
    bad["loss_mask"] = packed["loss_mask"].clone()
    bad["loss_mask"][end - 1] = 1
    _rejects(schema, bad, thd, row, "thd, loss mask on an alignment pad")
    bad = packed.copy()
    bad["position_ids"] = packed["position_ids"].clone()
    bad["position_ids"][start : start + 2] += 1
    _rejects(schema, bad, thd, row, "thd, positions not restarting")
    bad = nopad.copy()
    pos = nopad["position_ids"]
    values = pos.values().clone()
    values[int(pos.offsets()[row]) : int(pos.offsets()[row]) + 2] += 1
    bad["position_ids"] = torch.nested.nested_tensor_from_jagged(values, pos.offsets())
    _rejects(schema, bad, "verl_nopad", row, "verl_nopad, positions shifted")
    left = (td["attention_mask"][:, 0] == 0).nonzero().flatten().tolist()
    bad = td.copy()
    bad["input_ids"] = td["input_ids"].clone()
    bad["input_ids"][left[len(left) // 2], 0] = 7
    _rejects(schema, bad, "verl_dataproto", left[len(left) // 2], "dense, a token in the left padding")
    return packed, nopad


# ---------------------------------------------------------------------------
# The rows


def _mb(tensors: Sequence[torch.Tensor]) -> str:
    return f"{sum(t.numel() * t.element_size() for t in tensors) / 1e6:.0f} MB"


def packed_sizes(n: int, prompt_range: tuple[int, int], response_range: tuple[int, int], layers: int, topk: int) -> str:
    """What part 9 ran on, for the report's header."""
    return (
        f"{n} verl_sample samples of moe_routed (layers={layers}, topk={topk}, int16 routes) and of text, P uniform "
        f"in {prompt_range[0]}..{prompt_range[1]}, R uniform in {response_range[0]}..{response_range[1]}; dense: "
        f"verl_dataproto padded to P={prompt_range[1]}, R={response_range[1]} (pad id {PAD_TOKEN_ID}) in a "
        f"TensorDict; verl_nopad: verl {_verl_version()}'s left_right_2_no_padding of it; thd: to_packed, "
        f"alignment {ALIGNMENT}"
    )


def _verl_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def packed_rows(
    *,
    timing: Mapping[str, Any],
    n: int = BATCH,
    prompts: Sequence[int],
    responses: Sequence[int],
    prompt_range: tuple[int, int] = PROMPT_RANGE,
    response_range: tuple[int, int] = RESPONSE_RANGE,
    layers: int,
    topk: int,
    say: Callable[[str], None] = print,
    profile: Callable[[str, Callable[[], Any], int], str] | None = None,
) -> tuple[list[Row], list[str]]:
    """The part-9 rows and (when ``profile`` is given) its cProfile tables of the three shapes checks.

    ``prompts`` and ``responses`` are the ``n`` samples' lengths; the dense batch is padded
    to the ranges' upper ends (verl pads to its configured lengths).
    """
    assert len(prompts) == len(responses) == n
    verl_nopad, why = load_verl_nopad()
    if verl_nopad is None:
        say(f"[9] the verl rows are skipped: {why}")
    widths = {"prompt": prompt_range[1], "response": response_range[1]}
    rows: list[Row] = []
    profiles: list[str] = []
    for name in SCHEMAS:
        schema = ts.load_schema(name)
        samples = make_samples(schema, prompts, responses, layers=layers, topk=topk)
        r, prof = _schema_rows(schema, samples, widths, timing, verl_nopad, why, say, profile)
        rows += r
        profiles += prof
    return rows, profiles


def _schema_rows(
    schema: ts.Schema,
    samples: list[dict[str, Any]],
    widths: Mapping[str, int],
    timing: Mapping[str, Any],
    verl_nopad: Callable[[TensorDict], TensorDict] | None,
    why: str,
    say: Callable[[str], None],
    profile: Callable[[str, Callable[[], Any], int], str] | None,
) -> tuple[list[Row], list[str]]:
    name, n = schema.name, len(samples)
    thd = ts.load_layout("thd").with_pad_token(PAD_TOKEN_ID).with_alignment(ALIGNMENT)
    td = dense_td(schema, samples, widths)
    packed, nopad = verify(schema, samples, td, thd, verl_nopad)
    reads = {"thd": batch_tensors(packed), "nopad": batch_tensors(nopad), "dense": batch_tensors(td)}
    say(
        f"      {name}: {n} samples, dense {_mb(reads['dense'])}, verl_nopad {_mb(reads['nopad'])}, thd "
        f"{_mb(reads['thd'])} ({int(packed['cu_seqlens_padded'][-1])} tokens); pack_dense equals verl's, the round "
        "trips are exact, the batches pass and broken copies fail at their row; timing..."
    )
    checked = {"thd": (thd, packed), "nopad": ("verl_nopad", nopad), "dense": ("verl_dataproto", td)}
    fns: dict[str, Callable[[], Any]] = {
        "to": lambda: schema.to_packed(samples, layout=thd),
        "to_hand": lambda: pack_by_hand(samples, ALIGNMENT),
        "from": lambda: schema.from_packed(packed, layout=thd),
        "from_shapes": lambda: schema.from_packed(packed, layout=thd, depth="shapes"),
        "from_hand": lambda: unpack_by_hand(packed),
    }
    words = {label: as_words(tensors) for label, tensors in reads.items() if narrow_share(tensors) >= 0.1}
    for label, (layout, batch) in checked.items():
        for depth in ("shapes", "values"):
            fns[f"{label}_{depth}"] = lambda b=batch, lay=layout, d=depth: schema.batch_violations(
                b, layout=lay, depth=d
            )
        fns[f"{label}_read"] = lambda tensors=reads[label]: read_pass(tensors)
        if label in words:
            fns[f"{label}_words"] = lambda tensors=words[label]: read_pass(tensors)
    t = measure(fns, **timing)

    # pack_dense against verl's function, which rebinds keys of the TensorDict it is given: each of its calls
    # gets a fresh shallow copy, made untimed (measure_calls' set-up); both were called once by verify().
    fresh: dict[str, TensorDict] = {}
    calls = {"pack": Call(lambda: schema.pack_dense(td, layout="verl_nopad"))}
    if verl_nopad is not None:
        calls["verl"] = Call(
            lambda: verl_nopad(fresh["td"]), before=lambda: fresh.update(td=td.copy()), after=fresh.clear
        )
    t.update(measure_calls(calls, repeats=timing["repeats"]))

    rows: list[Row] = []
    verl_label = f"verl {_verl_version()} left_right_2_no_padding (on a shallow td.copy(), untimed)"
    pack_op = f'{name}: pack_dense(td of {n}, layout="verl_nopad"), checks depth="values" first'
    if verl_nopad is None:
        rows.append(Row(pack_op, t["pack"], verl_label, None, None, kind="overhead", skipped=why))
    else:
        rows.append(Row(pack_op, t["pack"], verl_label, t["verl"], None, kind="overhead"))
    hand_pack = f"hand-written torch.cat per field + cumsum offsets, {n} samples"
    hand_unpack = f"hand-written torch.split + clone per field, {n} samples"
    rows += [
        Row(
            f'{name}: to_packed({n} samples, thd), checks depth="values" first',
            t["to"],
            hand_pack,
            t["to_hand"],
            None,
            kind="overhead",
        ),
        Row(f"{name}: from_packed(thd batch of {n})", t["from"], hand_unpack, t["from_hand"], None, kind="overhead"),
        Row(
            f'{name}: from_packed(thd batch of {n}, depth="shapes")',
            t["from_shapes"],
            hand_unpack,
            t["from_hand"],
            None,
            kind="overhead",
        ),
    ]
    names = {"thd": f"thd batch of {n}", "nopad": f"verl_nopad batch of {n}", "dense": f"dense td of {n}"}
    layouts = {"thd": "thd", "nopad": '"verl_nopad"', "dense": '"verl_dataproto"'}
    for depth, target in (("shapes", READ_TARGET), ("values", None)):
        for label in checked:
            rows.append(
                Row(
                    f'{name}: batch_violations({names[label]}, layout={layouts[label]}, depth="{depth}")',
                    t[f"{label}_{depth}"],
                    f"read pass: torch.sum of every tensor ({_mb(reads[label])})",
                    t[f"{label}_read"],
                    target,
                    kind="overhead",
                )
            )
    for label in checked:
        if label in words:
            rows.append(
                Row(
                    f'{name}: batch_violations({names[label]}, layout={layouts[label]}, depth="shapes")',
                    t[f"{label}_shapes"],
                    f"read pass, narrow integers summed as int64 words ({_mb(reads[label])}, the same bytes)",
                    t[f"{label}_words"],
                    None,
                    kind="overhead",
                )
            )
    profiles: list[str] = []
    if profile is not None:
        for label, (layout, batch) in checked.items():
            profiles.append(
                profile(
                    f'{name}.batch_violations({names[label]}, layout={layouts[label]}, depth="shapes")',
                    lambda b=batch, lay=layout: schema.batch_violations(b, layout=lay, depth="shapes"),
                    3,
                )
            )
    return rows, profiles


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"256 samples instead of {BATCH}, 0.02 s blocks, 3 repeats")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--batch", type=int, default=None, help=f"samples (default {BATCH}, --quick 256)")
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    quick = {"min_block_s": 0.02, "repeats": 3, "warmup_s": 0.02}
    timing = quick if args.quick else {"min_block_s": 0.25, "repeats": 9, "warmup_s": 0.2}
    n = args.batch or (256 if args.quick else BATCH)
    gen = torch.Generator().manual_seed(args.seed + 9)
    prompts = torch.randint(PROMPT_RANGE[0], PROMPT_RANGE[1] + 1, (n,), generator=gen).tolist()
    responses = torch.randint(RESPONSE_RANGE[0], RESPONSE_RANGE[1] + 1, (n,), generator=gen).tolist()
    rows, _ = packed_rows(
        timing=timing,
        n=n,
        prompts=prompts,
        responses=responses,
        layers=args.layers,
        topk=args.topk,
        say=lambda m: print(m, file=sys.stderr),
    )
    print(render(rows, args.markdown))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    sys.exit(main())
