"""`layout_multiple` reading Megatron's FP8 padding from verl's config, without verl.

verl 0.9.1's Megatron engine builds each role's model with the role's
``megatron.override_transformer_config`` on top, and its forward pads every packed
sequence to ``lcm(16, alignment)`` when the model's ``fp8`` is ``e4m3`` or ``hybrid``.
``tests/verl/test_verl_alignment.py`` holds the numbers to verl's own packing; here are the
readings: each role on and off, the roles it is not read for, and the values refused.
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest

import trajschema.verl as tv
from trajschema.verl import config as _verl_config

ROLES = ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic")
FP8_ON = ("e4m3", "hybrid")
FP8_OFF = (None, False)


def _namespace(node: Any) -> Any:
    """A nested dict as attribute objects, the way verl's config dataclasses are read."""
    if isinstance(node, Mapping):
        return SimpleNamespace(**{k: _namespace(v) for k, v in node.items()})
    return node


def _config(role: str, megatron: Mapping[str, Any], *, strategy: str = "megatron", critic: bool = True) -> dict:
    """A trainer config whose ``role`` has the engine section ``megatron`` and the other roles verl's defaults."""
    plain: dict[str, Any] = {"actor_rollout_ref": {"actor": {}, "ref": {}}, "critic": {"enable": critic}}
    *parents, last = role.split(".")
    node = plain
    for part in parents:
        node = node[part]
    node[last] = {**node[last], "strategy": strategy, "megatron": copy.deepcopy(dict(megatron))}
    return plain


def _megatron(tp: int, cp: int, fp8: Any = None) -> dict[str, Any]:
    section: dict[str, Any] = {"tensor_model_parallel_size": tp, "context_parallel_size": cp}
    section["override_transformer_config"] = {"recompute_granularity": None, "fp8": fp8}
    return section


@pytest.mark.parametrize("role", ROLES)
def test_fp8_padding_makes_a_megatron_roles_rows_multiples_of_16_too(role):
    """Off: ``2 * tp * cp``. On (e4m3, hybrid): also a multiple of lcm(16, verl's alignment)."""
    for tp, cp in itertools.product((1, 2, 3, 4, 6, 8, 16, 32), (1, 2, 3, 4)):
        for fp8 in FP8_OFF:
            plain = _config(role, _megatron(tp, cp, fp8))
            assert _verl_config.layout_multiple(plain) == 2 * tp * cp, plain
        align = tv.sequence_alignment(tp_size=tp, cp_size=cp, use_fp8_padding=True)
        for fp8 in FP8_ON:
            plain = _config(role, _megatron(tp, cp, fp8))
            for form in (plain, _namespace(plain)):
                got = _verl_config.layout_multiple(form)
                assert got == math.lcm(2 * tp * cp, align) == math.lcm(16, 2 * tp * cp), plain
                assert got % 16 == 0 and got % (2 * tp * cp) == 0


def test_each_role_is_read_for_its_own_fp8():
    """The lcm over the roles: FP8 on the actor alone, the ref alone, the critic alone, or several."""
    plain = {
        "actor_rollout_ref": {
            "actor": {"strategy": "megatron", "megatron": _megatron(3, 1, "e4m3")},  # lcm(16, 6) = 48
            "ref": {"strategy": "megatron", "megatron": _megatron(5, 1, None)},  # 10
        },
        "critic": {"enable": True, "strategy": "megatron", "megatron": _megatron(1, 2, "hybrid")},  # lcm(16, 4) = 16
    }
    assert _verl_config.layout_multiple(plain) == math.lcm(48, 10, 16) == 240
    plain["critic"]["enable"] = False  # a critic verl does not use is not read
    assert _verl_config.layout_multiple(plain) == math.lcm(48, 10) == 240
    plain["actor_rollout_ref"]["actor"]["megatron"]["override_transformer_config"]["fp8"] = None
    assert _verl_config.layout_multiple(plain) == math.lcm(6, 10) == 30
    plain["actor_rollout_ref"]["ref"]["megatron"]["override_transformer_config"]["fp8"] = "hybrid"
    assert _verl_config.layout_multiple(plain) == math.lcm(6, 80) == 240


@pytest.mark.parametrize("role", ROLES)
def test_missing_fp8_keys_read_as_megatrons_default_off(role):
    """No override_transformer_config, or one without fp8 (verl's generated configs): FP8 padding is off."""
    for megatron in (
        {"tensor_model_parallel_size": 3},
        {"tensor_model_parallel_size": 3, "override_transformer_config": {}},
    ):
        assert _verl_config.layout_multiple(_config(role, megatron)) == 6


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("fp8", [*FP8_ON, 5, "E4M3"], ids=repr)
def test_fp8_is_not_read_where_verl_does_not_read_it(role, fp8):
    """An FSDP role has no Megatron model, and a critic verl does not use has no model at all."""
    fsdp = _config(role, _megatron(3, 1, fp8), strategy="fsdp")
    assert _verl_config.layout_multiple(fsdp) == 2
    if role == "critic":
        assert _verl_config.layout_multiple(_config(role, _megatron(3, 1, fp8), critic=False)) == 2


def test_the_ref_inherits_the_actors_fp8_through_verls_interpolation():
    """verl's ref config reads ``${oc.select:actor_rollout_ref.actor.megatron.override_transformer_config,{}}``."""
    omegaconf = pytest.importorskip("omegaconf").OmegaConf
    actor = {"strategy": "megatron", "megatron": {"override_transformer_config": {"fp8": "e4m3"}}}
    inherited = "${oc.select:actor_rollout_ref.actor.megatron.override_transformer_config,{}}"
    ref = {
        "strategy": "megatron",
        "megatron": {"tensor_model_parallel_size": 3, "override_transformer_config": inherited},
    }
    config = omegaconf.create({"actor_rollout_ref": {"actor": actor, "ref": ref}, "critic": {"enable": False}})
    omegaconf.set_struct(config, True)  # verl's trainer config is in struct mode
    assert _verl_config.layout_multiple(config) == 48  # the ref's lcm(16, 2 * 3)
    config.actor_rollout_ref.actor.megatron.override_transformer_config.fp8 = None
    assert _verl_config.layout_multiple(config) == 6


#: fp8 values Megatron does not run: any other set value raises "E4M3 and HYBRID are the only supported FP8 formats".
_BAD_FP8 = [True, 0, 1, 5, 1.0, "", "E4M3", "e5m2", "fp8", ["e4m3"], ("hybrid",), {"format": "e4m3"}, b"e4m3"]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("fp8", _BAD_FP8, ids=repr)
def test_a_malformed_fp8_is_a_verl_config_error_naming_its_key(role, fp8):
    key = f"config.{role}.megatron.override_transformer_config.fp8"
    plain = _config(role, _megatron(2, 2, fp8))
    for form, held in ((plain, fp8), (_namespace(plain), _namespace(fp8))):
        with pytest.raises(tv.VerlConfigError) as info:
            _verl_config.layout_multiple(form)
        message = str(info.value)
        assert message.startswith(f"{key} must be null, false, 'e4m3' or 'hybrid' (Megatron's FP8 formats), found ")
        assert message.endswith(f" {type(held).__name__} {held!r}"), message


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("value", [None, 5, "fp8", ["fp8", "e4m3"], ("e4m3",)], ids=repr)
def test_an_override_transformer_config_that_is_not_a_mapping_is_named(role, value):
    """verl unpacks it into Megatron's TransformerConfig: it must be a mapping, whatever fp8 it lacks."""
    plain = _config(role, {"tensor_model_parallel_size": 2, "override_transformer_config": value})
    key = f"config.{role}.megatron.override_transformer_config"
    with pytest.raises(
        tv.VerlConfigError, match=rf"^{re.escape(key)} must be a mapping \(verl reads {re.escape(key)}\.fp8\)"
    ):
        _verl_config.layout_multiple(plain)


def test_fp8_padding_that_no_row_length_can_meet_is_named():
    """2 * tp fits in int64 but lcm(16, 2 * tp) does not: the role is named, not an error deep inside padding."""
    tp = 2**61 - 1  # odd: 2 * tp < 2**63 - 1, lcm(16, 2 * tp) = 8 * 2 * tp
    assert _verl_config.layout_multiple(_config("critic", _megatron(tp, 1, None))) == 2 * tp
    with pytest.raises(tv.VerlConfigError, match=r"^the parallel layouts up to config\.critic .*2\*\*63 - 1"):
        _verl_config.layout_multiple(_config("critic", _megatron(tp, 1, "hybrid")))
