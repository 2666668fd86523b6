#!/usr/bin/env python
"""Fastest way to read a non-tensor batch column as one Python value per row.

Run from the repository root, inside a venv (any tensordict from 0.10 on):

    python benchmarks/bench_nontensor.py [--quick] [--markdown]

TransferQueue returns non-tensor fields (``uid``, ``num_turns``, ``multi_modal_inputs``,
...) as ``NonTensorStack`` columns, and ``validate_batch`` needs their per-row values.
``NonTensorStack.tolist()`` is the public way to get them; this script checks candidate
recipes against it on every kind of column we could think of (TransferQueue-packed
columns of ints, strs, dicts, Nones and tensors; ``NonTensorData`` columns; empty,
indexed, concatenated, shared-memory, memory-mapped and 2-D columns; verl's
``list_of_dict_to_tensordict`` columns), then times them with ``bench_core.measure``.

A recipe "matches" a case when it returns a ``list`` whose items are the very objects
``tolist()`` returns (``is``), or, where ``tolist()`` itself builds new objects on
every call (shared-memory values it unwraps), items equal to them and of the same type.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing.managers
import multiprocessing.sharedctypes
import sys
import tempfile
import warnings
from collections.abc import Callable
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

import tensordict
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict

from harness import Row, measure, render
from workload import quiet_transfer_queue, same_value, tq_pack_function

sys.path.insert(0, str(Path(__file__).parent))


# ---------------------------------------------------------------------------
# The recipes. Each takes a column and returns what ``col.tolist()`` returns; each has a
# fast path for the 1-D columns TransferQueue returns and falls back to ``tolist()``.

#: The value types tensordict unwraps when a shared or memory-mapped NonTensorData's
#: ``data`` is read (``tensordict.tensorclass._from_shared_nontensor``, 0.10 to 0.15).
SHARED_VALUE_TYPES = (
    multiprocessing.managers.ListProxy,
    multiprocessing.managers.DictProxy,
    multiprocessing.sharedctypes.Synchronized,
    multiprocessing.sharedctypes.SynchronizedArray,
)
_members_state = attrgetter("_non_tensordict")
_data_of_state = itemgetter("data")


def tolist(col: Any) -> Any:
    return col.tolist()


def member_data(col: Any) -> Any:
    """Public API only: each member's ``.data``."""
    if type(col) is NonTensorStack and col.batch_dims == 1:
        return [m.data for m in col.tensordicts]
    return col.tolist()


def raw_unguarded(col: Any) -> Any:
    """Each member's stored value, unchecked (wrong for shared memory: shown to fail)."""
    if type(col) is NonTensorStack and col.batch_dims == 1:
        return [m._non_tensordict["data"] for m in col.tensordicts]
    return col.tolist()


def raw_flag_guard(col: Any) -> Any:
    """Each member's stored value, after checking the member's type and shared/memmap flags."""
    if type(col) is NonTensorStack and col.batch_dims == 1:
        out = []
        append = out.append
        for m in col.tensordicts:
            if type(m) is not NonTensorData:
                return col.tolist()
            inner = m._tensordict
            if inner._is_shared or inner._is_memmap:
                return col.tolist()
            append(m._non_tensordict["data"])
        return out
    return col.tolist()


def _type_guarded(col: Any, values_of: Callable[[list[Any]], list[Any]]) -> Any:
    if type(col) is NonTensorStack and col.batch_dims == 1:
        members = col.tensordicts
        if set(map(type, members)) <= {NonTensorData}:
            values = values_of(members)
            if not any(issubclass(t, SHARED_VALUE_TYPES) for t in set(map(type, values))):
                return values
    elif type(col) is NonTensorData and col.batch_dims == 1:
        value = col._non_tensordict["data"]
        if not isinstance(value, SHARED_VALUE_TYPES):
            return [value] * col.batch_size[0]
    return col.tolist()


def raw_type_guard(col: Any) -> Any:
    """The stored values, kept when every member is a plain NonTensorData and no value is a shared wrapper.

    ``.data`` returns the stored value unchanged unless the value is one of the
    shared-memory wrappers tensordict unwraps, so checking the values' types (a
    set of one or two types in practice) is enough, whatever the member's flags.
    A ``NonTensorData`` column (one value for every row) gives that value per row.
    """
    return _type_guarded(col, lambda members: [m._non_tensordict["data"] for m in members])


def raw_type_guard_map(col: Any) -> Any:
    """``raw_type_guard`` with the values read by C-level ``map`` over attrgetter/itemgetter."""
    return _type_guarded(col, lambda members: list(map(_data_of_state, map(_members_state, members))))


RECIPES: dict[str, Callable[[Any], Any]] = {
    "tolist()": tolist,
    "[m.data for m in col.tensordicts]": member_data,
    "[m._non_tensordict['data'] for m in col.tensordicts], unguarded": raw_unguarded,
    "the same, with per-member type and shared/memmap flag checks": raw_flag_guard,
    "the same list comprehension, then type-set guards": raw_type_guard,
    "map(itemgetter('data'), map(attrgetter('_non_tensordict'), ...)), then type-set guards": raw_type_guard_map,
}
WINNER = "the same list comprehension, then type-set guards"

# ---------------------------------------------------------------------------
# The cases


def _cases() -> dict[str, Callable[[], Any]]:
    """name -> a function building the column (it may raise: the case is then n/a)."""
    pack = None
    with contextlib.suppress(ImportError):
        tq_pack_column = tq_pack_function()

        def pack(values: list[Any]) -> Any:
            with quiet_transfer_queue():  # the fallbacks to strided / NonTensorStack log warnings
                return tq_pack_column(values)

    grid = torch.tensor([[1, 2, 2]])
    n = 16
    base = TensorDict(
        {
            "uid": NonTensorStack(*[f"u{i // 4}" for i in range(n)]),
            "num_turns": NonTensorStack(*[1 + i % 3 for i in range(n)]),
            "mm": NonTensorStack(*[{"image_grid_thw": grid.clone()} for _ in range(n)]),
        },
        batch_size=[n],
    )
    cases: dict[str, Callable[[], Any]] = {}
    if pack is not None:
        cases.update(
            {
                "TQ-packed ints": lambda: pack([1 + i % 3 for i in range(n)]),
                "TQ-packed strs": lambda: pack([f"u{i // 4}" for i in range(n)]),
                "TQ-packed equal strs": lambda: pack(["openai/gsm8k"] * n),
                "TQ-packed dicts holding tensors": lambda: pack([{"image_grid_thw": grid.clone()} for _ in range(n)]),
                "TQ-packed empty dicts": lambda: pack([{} for _ in range(n)]),
                "TQ-packed bools, floats, None, tuples": lambda: pack([True, 1.5, None, (1, 2)] * 4),
                "TQ-packed tensors of different ranks": lambda: pack([torch.ones(2), torch.ones(2, 2)] * 8),
                "TQ-packed tensors and None": lambda: pack([torch.ones(2), None] * 8),
                "TQ-packed lists": lambda: pack([[i, i + 1] for i in range(n)]),
                "TQ-packed, one sample": lambda: pack(["only"]),
            }
        )
    cases.update(
        {
            "NonTensorStack(*strs)": lambda: NonTensorStack(*[f"s{i}" for i in range(n)]),
            "NonTensorStack.from_list(ints)": lambda: NonTensorStack.from_list(list(range(n))),
            "NonTensorStack of NonTensorData args": lambda: NonTensorStack(*[NonTensorData(i) for i in range(n)]),
            "NonTensorData column (td.set_non_tensor)": lambda: _set_const(base, "c", "const"),
            "NonTensorData column of a dict": lambda: _set_const(base, "c", {"k": grid}),
            "NonTensorData column, shared memory": lambda: _set_const(base, "c", "const", share=True),
            "NonTensorData(batch_size=[n]) of None": lambda: NonTensorData(None, batch_size=[n]),
            "empty NonTensorStack()": lambda: NonTensorStack(),
            "empty NonTensorStack.from_list([])": lambda: NonTensorStack.from_list([]),
            "empty slice td[:0]": lambda: base[:0].get("uid"),
            "empty TensorDict(batch_size=[0]) column": lambda: TensorDict({"u": NonTensorStack()}, batch_size=[0]).get(
                "u"
            ),
            "empty NonTensorData(batch_size=[0])": lambda: NonTensorData("x", batch_size=[0]),
            "indexed td[[0, 5, 2]]": lambda: base[[0, 5, 2]].get("mm"),
            "masked td[mask]": lambda: base[torch.arange(n) % 3 == 0].get("num_turns"),
            "sliced td[1::2]": lambda: base[1::2].get("uid"),
            "torch.cat([td, td])": lambda: torch.cat([base, base]).get("uid"),
            "torch.stack of per-sample TDs": lambda: torch.stack(
                [TensorDict({"u": NonTensorData(f"x{i}")}, batch_size=[]) for i in range(n)]
            ).get("u"),
            "shared memory: ints": lambda: base.clone().share_memory_().get("num_turns"),
            "shared memory: strs": lambda: base.clone().share_memory_().get("uid"),
            "shared memory: dicts": lambda: base.clone().share_memory_().get("mm"),
            "memory-mapped strs": lambda: _memmap(base).get("uid"),
            "2-D NonTensorStack.from_list": lambda: NonTensorStack.from_list([[1, 2], [3, 4], [5, 6]]),
        }
    )
    try:
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict
    except Exception:
        pass
    else:
        cases["verl list_of_dict_to_tensordict column"] = lambda: list_of_dict_to_tensordict(
            [{"uid": f"u{i}", "mm": {"image_grid_thw": grid}} for i in range(n)]
        ).get("mm")
    return cases


def _set_const(td: TensorDict, key: str, value: Any, share: bool = False) -> Any:
    td = td.clone()
    td.set_non_tensor(key, value)
    if share:
        td.share_memory_()
    col = td.get(key)
    assert type(col) is NonTensorData, type(col)
    return col


_MEMMAP_DIRS: list[tempfile.TemporaryDirectory] = []


def _memmap(td: TensorDict) -> TensorDict:
    d = tempfile.TemporaryDirectory()
    _MEMMAP_DIRS.append(d)
    return td.select("uid").memmap_(d.name)


def _matches(got: Any, want: Any, fresh: bool) -> str:
    """ "same objects", "equal" (when tolist() makes new objects), or why not."""
    if type(got) is not type(want):
        return f"DIFFERENT: {type(got).__name__} vs {type(want).__name__}"
    if isinstance(want, list):
        if len(got) != len(want):
            return f"DIFFERENT: {len(got)} vs {len(want)} items"
        if all(a is b for a, b in zip(got, want)):
            return "same objects"
        if fresh and all(type(a) is type(b) and same_value(a, b) for a, b in zip(got, want)):
            return "equal"
        return "DIFFERENT items"
    return "same objects" if got is want else ("equal" if fresh and same_value(got, want) else "DIFFERENT")


def check_cases() -> tuple[list[tuple[str, str, str, dict[str, str]]], bool]:
    """Per case: (name, column type, tolist() result type, recipe -> match); and whether the winner matched all."""
    results = []
    ok = True
    for name, build in _cases().items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                col = build()
                want = col.tolist()
            except Exception as e:
                results.append((name, "n/a", f"{type(e).__name__}: {str(e)[:60]}", {}))
                continue
            # tolist() of shared/memory-mapped values makes new objects each call.
            fresh = not _matches(col.tolist(), want, fresh=False).startswith("same")
            shape = f"{type(col).__name__}{list(col.batch_size)}"
            got = {}
            for label, recipe in RECIPES.items():
                try:
                    got[label] = _matches(recipe(col), want, fresh)
                except Exception as e:
                    got[label] = f"RAISES {type(e).__name__}"
        ok &= not got[WINNER].startswith(("DIFF", "RAISES"))
        results.append((name, shape, f"{type(want).__name__} of {len(want)}", got))
    return results, ok


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="short blocks, 3 repeats")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--rows", type=int, default=4096, help="rows per timed column")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)

    results, ok = check_cases()
    print(f"tensordict {tensordict.__version__}, torch {torch.__version__}")
    print()
    short = {label: f"R{i}" for i, label in enumerate(RECIPES)}
    print("Recipes: " + "; ".join(f"{v} = {k}" for k, v in short.items()))
    print()
    header = ["case", "column", "tolist() gives", *short.values()]
    lines = [header] + [[n, c, w, *(g.get(label, "—") for label in RECIPES)] for n, c, w, g in results]
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" for _ in header) + "|")
        for line in lines[1:]:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        for line in lines:
            print("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
    print()
    print(f"{short[WINNER]} matches tolist() on every case: {ok}")
    print()

    n = args.rows
    grid = torch.tensor([[1, 2, 2]])
    pack = tq_pack_function()
    columns = {
        "str": pack([f"{i // 8:032x}" for i in range(n)]),
        "int": pack([1 + i % 3 for i in range(n)]),
        "dict": pack([{"image_grid_thw": grid} for _ in range(n)]),
        "NonTensorData": NonTensorData("openai/gsm8k", batch_size=[n]),
    }
    timing = {"min_block_s": 0.02, "repeats": 3, "warmup_s": 0.02} if args.quick else {}
    timing = {"min_block_s": 0.1, "repeats": 9, "warmup_s": 0.1} | timing
    rows = []
    for kind, col in columns.items():
        t = measure({label: (lambda r=recipe, c=col: r(c)) for label, recipe in RECIPES.items()}, **timing)
        for label in RECIPES:
            if label != "tolist()":
                rows.append(Row(f"{kind} column of {n}: {short[label]}", t[label], "tolist()", t["tolist()"], None))
    print(render(rows, args.markdown, header=("column: recipe", "recipe", "vs", "tolist()", "speed-up", "—", "—")))
    print()
    print("ratio = tolist() time / recipe time.")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
