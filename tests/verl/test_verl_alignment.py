"""`trajschema.verl.sequence_alignment`, `padding_dims` and `layout_multiple` against verl 0.9.1's own packing.

The oracle is verl's ``verl/models/mcore/util.py``, run unchanged: ``preprocess_packed_seqs``
(the zigzag path every Megatron model forward of verl 0.9.1 takes) and
``preprocess_thd_engine`` (the model engine's, with ``cp_layout``). It imports
``megatron.core``, which needs Python 3.12 from megatron-core 0.17 on, so the module is
loaded from the installed verl with stand-ins for the three ``megatron.core`` names it
reads: ``parallel_state``'s world-size and rank getters (answering the ``tp``/``cp`` of
each case) and ``PackedSeqParams`` (a record of its keyword arguments). verl's functions
then compute the padded offsets ``cu_seqlens_padded`` themselves; the test reads the
alignment off them.

``layout_multiple`` is held to the same alignment for the TP, CP and FP8 that verl's own
``McoreEngineConfig`` reads from each Megatron role's section, with the FP8 formats verl pads
for read from the source of its Megatron engine forwards (parsed, not imported).
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import math
import sys
import types
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import trajschema.verl as tv
from tests.verl_support import verl_module
from trajschema.verl.config import layout_multiple

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


# -- what the drop-in reads from verl's config: each Megatron role's TP, CP and FP8 ----------------


def _verl_source(relative: str) -> ast.Module:
    """A module of the installed verl, parsed (not imported: those below import megatron.core)."""
    path = Path(verl_module("verl").__file__).parent / relative
    return ast.parse(path.read_text(encoding="utf-8"))


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name]
    assert len(found) == 1, f"verl 0.9.1 defines {name} once; found {len(found)}"
    return found[0]


def _fp8_formats_in(fn: ast.FunctionDef) -> tuple[str, ...]:
    """The formats of ``use_fp8_padding = fp8 in [...]`` in ``fn``, where ``fp8 = <model>.config.fp8``."""
    reads = [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign)
        and [ast.unparse(t) for t in n.targets] == ["fp8"]
        and ast.unparse(n.value).endswith(".config.fp8")
    ]
    rules = [
        n.value
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign) and [ast.unparse(t) for t in n.targets] == ["use_fp8_padding"]
    ]
    assert len(reads) == 1 and len(rules) == 1, f"{fn.name}: {len(reads)} fp8 reads, {len(rules)} rules"
    rule = rules[0]
    assert isinstance(rule, ast.Compare) and ast.unparse(rule.left) == "fp8" and isinstance(rule.ops[0], ast.In)
    return tuple(ast.literal_eval(rule.comparators[0]))


@pytest.fixture(scope="module")
def verl_fp8_formats() -> tuple[str, ...]:
    """The fp8 values verl 0.9.1's Megatron engine forwards pad for, read from their source."""
    plain = _fp8_formats_in(_function(_verl_source("models/mcore/model_forward.py"), "gptmodel_forward_model_engine"))
    fused = _fp8_formats_in(
        _function(_verl_source("models/mcore/model_forward_fused.py"), "fused_forward_model_engine_inner")
    )
    assert plain == fused, (plain, fused)
    return plain


@pytest.mark.verl
def test_verls_megatron_engine_reads_fp8_and_the_cp_layout_where_layout_multiple_expects():
    """The model's TransformerConfig takes the role's override_transformer_config; the CP layout is no config key.

    ``MegatronEngine._build_tf_config`` builds the model config on
    ``engine_config.override_transformer_config`` (``McoreEngineConfig``, the role's ``megatron``
    section), and ``_get_context_parallel_layout`` picks ``contiguous`` or ``zigzag`` from the
    model's own config: both are covered by the zigzag multiple (the test below).
    """
    engine = _verl_source("workers/engine/megatron/transformer_impl.py")
    build = ast.unparse(_function(engine, "_build_tf_config"))
    assert "{**self.engine_config.override_transformer_config}" in build
    layout = _function(engine, "_get_context_parallel_layout")
    returned = {ast.literal_eval(n.value) for n in ast.walk(layout) if isinstance(n, ast.Return) and n.value}
    assert returned == set(tv.CP_LAYOUTS)
    assert "config" not in {a.arg for a in layout.args.args} and "engine_config" not in ast.unparse(layout)
    fields = verl_module("verl.workers.config").McoreEngineConfig.__dataclass_fields__
    assert {"tensor_model_parallel_size", "context_parallel_size", "override_transformer_config"} <= set(fields)


def _role_config(role: str, megatron: dict[str, Any]) -> dict[str, Any]:
    """A trainer config with ``role`` on Megatron (its engine section ``megatron``), the others on FSDP defaults."""
    plain: dict[str, Any] = {"actor_rollout_ref": {"actor": {}, "ref": {}}, "critic": {"enable": True}}
    *parents, last = role.split(".")
    node = plain
    for part in parents:
        node = node[part]
    node[last] = {**node[last], "strategy": "megatron", "megatron": megatron}
    return plain


def _verl_row_multiple(util: types.ModuleType, engine: Any, formats: tuple[str, ...], layout: str) -> int:
    """What verl pads a one-token sequence to for ``engine`` (verl's McoreEngineConfig), on ``layout``."""
    fp8 = engine.override_transformer_config.get("fp8")  # what the model's TransformerConfig.fp8 is set to
    tp, cp = engine.tensor_model_parallel_size, engine.context_parallel_size
    return _padded_lengths(util, [1, 1], tp, cp, layout, fp8 in formats)[0]


@pytest.mark.verl
@pytest.mark.parametrize("role", ["actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic"])
def test_layout_multiple_is_a_multiple_of_what_verl_pads_each_megatron_role_to(mcore_util, verl_fp8_formats, role):
    """For every TP, CP and fp8 (off, or each format verl pads for), on every THD path and CP layout verl has.

    verl's own McoreEngineConfig reads the role's section; verl's preprocess functions give the
    alignment. layout_multiple is a multiple of it, and no more than ``lcm(2 * tp * cp, alignment)``.
    """
    mcore_engine = verl_module("verl.workers.config").McoreEngineConfig
    for tp, cp, fp8 in itertools.product((1, 2, 3, 4, 8), (1, 2, 3, 4), (None, False, *verl_fp8_formats)):
        section = {"tensor_model_parallel_size": tp, "context_parallel_size": cp}
        section["override_transformer_config"] = {"attention_backend": "flash", "fp8": fp8}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # McoreEngineConfig notes that TP 1 turns sequence parallelism off
            engine = mcore_engine(**section)
        got = layout_multiple(_role_config(role, section))
        aligns = {
            layout: _verl_row_multiple(mcore_util, engine, verl_fp8_formats, layout)
            for layout in ("packed_seqs", *tv.CP_LAYOUTS)
        }
        assert all(got % align == 0 for align in aligns.values()), (role, tp, cp, fp8, got, aligns)
        assert got == math.lcm(2 * tp * cp, aligns["zigzag"]), (role, tp, cp, fp8, got, aligns)
        assert (got % 16 == 0) == (fp8 in verl_fp8_formats or (2 * tp * cp) % 16 == 0)


@pytest.mark.verl
def test_layout_multiple_on_verls_generated_megatron_config_with_fp8(mcore_util, verl_fp8_formats):
    """verl's own generated Megatron trainer config, FP8 set on the actor (the ref inherits it) and the critic."""
    omegaconf = verl_module("omegaconf").OmegaConf
    to_dataclass = verl_module("verl.utils.config").omega_conf_to_dataclass
    path = Path(verl_module("verl").__file__).parent / "trainer" / "config" / "_generated_ppo_megatron_trainer.yaml"
    updates = {
        "actor_rollout_ref.actor.megatron.tensor_model_parallel_size": 3,
        "actor_rollout_ref.actor.megatron.override_transformer_config.fp8": verl_fp8_formats[0],
        "critic.megatron.tensor_model_parallel_size": 5,
        "critic.megatron.context_parallel_size": 2,
        "critic.megatron.override_transformer_config.fp8": verl_fp8_formats[-1],
    }
    config = omegaconf.load(path)
    for key, value in updates.items():
        omegaconf.update(config, key, value, merge=True)
    want = 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # McoreEngineConfig notes that TP 1 turns sequence parallelism off
        for role in ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic"):  # verl's GAE default: a critic
            engine = to_dataclass(omegaconf.select(config, f"{role}.megatron"))
            align = _verl_row_multiple(mcore_util, engine, verl_fp8_formats, "zigzag")
            want = math.lcm(want, 2 * engine.tensor_model_parallel_size * engine.context_parallel_size, align)
    assert want == math.lcm(48, 80)  # the actor and ref lcm(16, 2 * 3), the critic lcm(16, 2 * 5 * 2 * 2)
    assert layout_multiple(config) == want
    assert layout_multiple(omegaconf.to_container(config, resolve=True)) == want
