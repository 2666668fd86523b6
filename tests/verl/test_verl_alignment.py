"""`trajschema.verl.sequence_alignment` and `padding_dims` against verl 0.9.1's own packing.

The oracle is verl's ``verl/models/mcore/util.py``, run unchanged: ``preprocess_packed_seqs``
(the zigzag path every Megatron model forward of verl 0.9.1 takes) and
``preprocess_thd_engine`` (the model engine's, with ``cp_layout``). It imports
``megatron.core``, which needs Python 3.12 from megatron-core 0.17 on, so the module is
loaded from the installed verl with stand-ins for the three ``megatron.core`` names it
reads: ``parallel_state``'s world-size and rank getters (answering the ``tp``/``cp`` of
each case) and ``PackedSeqParams`` (a record of its keyword arguments). verl's functions
then compute the padded offsets ``cu_seqlens_padded`` themselves; the test reads the
alignment off them.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import torch

import trajschema.verl as tv
from tests.verl_support import verl_module

#: The parallel sizes verl asks megatron for, set per case.
_SIZES = {"tp": 1, "cp": 1}


class _PackedSeqParams:
    """megatron.core.packed_seq_params.PackedSeqParams as verl builds it: keyword arguments kept."""

    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


def _megatron_stand_ins() -> dict[str, types.ModuleType]:
    state = types.ModuleType("megatron.core.parallel_state")
    state.get_tensor_model_parallel_world_size = lambda: _SIZES["tp"]  # type: ignore[attr-defined]
    state.get_context_parallel_world_size = lambda: _SIZES["cp"]  # type: ignore[attr-defined]
    state.get_context_parallel_rank = lambda: 0  # type: ignore[attr-defined]
    packed = types.ModuleType("megatron.core.packed_seq_params")
    packed.PackedSeqParams = _PackedSeqParams  # type: ignore[attr-defined]
    core = types.ModuleType("megatron.core")
    core.parallel_state = state  # type: ignore[attr-defined]
    core.packed_seq_params = packed  # type: ignore[attr-defined]
    megatron = types.ModuleType("megatron")
    megatron.core = core  # type: ignore[attr-defined]
    return {
        "megatron": megatron,
        "megatron.core": core,
        "megatron.core.parallel_state": state,
        "megatron.core.packed_seq_params": packed,
    }


@pytest.fixture(scope="module")
def mcore_util() -> types.ModuleType:
    """verl's ``verl/models/mcore/util.py``, loaded from the installed verl under the stand-ins."""
    verl = verl_module("verl")
    path = Path(verl.__file__).parent / "models" / "mcore" / "util.py"
    verl_module("verl.utils.model")  # what util.py imports besides megatron: real, CPU-importable
    saved = {name: sys.modules.get(name) for name in _megatron_stand_ins()}
    sys.modules.update(_megatron_stand_ins())
    try:
        spec = importlib.util.spec_from_file_location("verl_mcore_util_under_test", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    return module


def _padded_lengths(util: types.ModuleType, lengths: list[int], tp: int, cp: int, layout: str, fp8: bool) -> list[int]:
    """The per-sequence lengths verl pads ``lengths`` to (its ``cu_seqlens_padded``), on its THD path."""
    _SIZES.update(tp=tp, cp=cp)
    if layout == "packed_seqs":  # preprocess_packed_seqs: dense input, always the zigzag rule
        mask = torch.zeros(len(lengths), max(lengths), dtype=torch.bool)
        for i, n in enumerate(lengths):
            mask[i, :n] = True
        ids = torch.ones(mask.shape, dtype=torch.int64)
        _, params = util.preprocess_packed_seqs(ids, mask, pre_process=False, use_fp8_padding=fp8)
    else:
        ids = torch.nested.nested_tensor([torch.ones(n, dtype=torch.int64) for n in lengths], layout=torch.jagged)
        _, params, _ = util.preprocess_thd_engine(ids, pre_process=False, use_fp8_padding=fp8, cp_layout=layout)
    return params.cu_seqlens_q_padded.diff().tolist()


_GRID = list(itertools.product((1, 2, 3, 4, 8), (1, 2, 3, 4), ("packed_seqs", "zigzag", "contiguous"), (False, True)))


@pytest.mark.verl
@pytest.mark.parametrize(("tp", "cp", "layout", "fp8"), _GRID)
def test_sequence_alignment_is_what_verl_pads_every_sequence_to(mcore_util, tp, cp, layout, fp8):
    lengths = [*range(1, 50), 1]  # the last one may take FP8's batch total: read the others
    padded = _padded_lengths(mcore_util, lengths, tp, cp, layout, fp8)
    cp_layout = "zigzag" if layout == "packed_seqs" else layout
    align = tv.sequence_alignment(tp_size=tp, cp_size=cp, cp_layout=cp_layout, use_fp8_padding=fp8)
    assert padded[0] == align  # a one-token sequence is padded to exactly the alignment
    for n, got in zip(lengths[:-1], padded[:-1], strict=True):
        assert got == -(-n // align) * align, (n, got, align)


@pytest.mark.verl
@pytest.mark.parametrize(("tp", "cp", "layout", "fp8"), _GRID)
@pytest.mark.parametrize("min_len", [1, 2, 5, 128, 129])
def test_a_padding_row_is_the_shortest_that_verl_leaves_as_it_is(mcore_util, tp, cp, layout, fp8, min_len):
    cp_layout = "zigzag" if layout == "packed_seqs" else layout
    dims = tv.padding_dims(tp_size=tp, cp_size=cp, cp_layout=cp_layout, use_fp8_padding=fp8, min_len=min_len)
    total = dims["prompt"] + dims["response"]
    assert dims["response"] == 1 and dims["prompt"] >= 1 and total >= min_len
    shorter = list(range(max(min_len, 2), total))
    padded = _padded_lengths(mcore_util, [total, *shorter, 1], tp, cp, layout, fp8)
    assert padded[0] == total  # verl adds no alignment tokens to the padding row
    assert all(got != n for n, got in zip(shorter, padded[1:-1], strict=True))  # and no shorter row would do


def test_sequence_alignment_refuses_what_verl_would_not_run():
    with pytest.raises(ValueError, match=r"^cp_layout must be 'zigzag' or 'contiguous', found 'ring'"):
        tv.sequence_alignment(cp_layout="ring")
    for arg, value in (("tp_size", 0), ("cp_size", True), ("use_fp8_padding", 1)):
        with pytest.raises(ValueError, match=arg) if arg != "use_fp8_padding" else pytest.raises(TypeError, match=arg):
            tv.sequence_alignment(**{arg: value})
    with pytest.raises(ValueError, match="more than a torch tensor holds"):
        tv.padding_dims(tp_size=2**61, cp_size=4)
