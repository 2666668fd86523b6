"""trajschema.verl against verl 0.9.1's own code as the oracle.

Every test marked ``verl`` calls verl's functions (imported through
``verl_support.verl_module``: a missing verl skips, and fails under
``TRAJSCHEMA_REQUIRE_VERL=1``). The unmarked tests need no verl: argument checking,
the padding-length arithmetic against a brute-force reference, the metrics mask's
contract, and importing ``trajschema.verl`` where verl is absent.

Nothing here starts Ray or TransferQueue: padding goes through a small in-memory fake
TransferQueue client, for verl's ``upsample_batch_to_divisible_size`` and ours alike.
"""

from __future__ import annotations

import ast
import copy
import inspect
import itertools
import json
import math
import pickle
import re
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import trajschema as ts
import trajschema.verl as tv
from tests.verl_support import verl_module
from trajschema.check.columns import batch_view
from trajschema.testing import verl_sample
from trajschema.tq.wire import wire_batch
from trajschema.verl import config as _verl_config
from trajschema.verl import patch as _verl_patch

TRAINER_BASE = "verl.trainer.ppo.v1.trainer_base"
EOS = 7
_DELETE = object()


def _omegaconf() -> Any:
    """verl's config library (a dependency of verl, not of trajschema)."""
    return verl_module("omegaconf").OmegaConf


def _need_critic(dictconfig: Any) -> bool:
    need_critic = verl_module("verl.trainer.ppo.utils").need_critic
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # verl warns that a non-GAE estimator disables the critic
        return bool(need_critic(dictconfig))


def _namespace(node: Any) -> Any:
    """A nested dict as attribute objects, the way verl's config dataclasses are read."""
    if isinstance(node, Mapping):
        return SimpleNamespace(**{k: _namespace(v) for k, v in node.items()})
    return node


def _edited(base: Mapping[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``base`` with the dotted ``path`` set to ``value`` (or deleted: ``_DELETE``)."""
    out = copy.deepcopy(dict(base))
    *parents, last = path.split(".")
    node = out
    for part in parents:
        node = node.setdefault(part, {})
    if value is _DELETE:
        node.pop(last, None)
    else:
        node[last] = value
    return out


# -- 1. the required batch multiple, on a grid of configs ---------------------------------

_GRID_N = (1, 5, 8)
_GRID_ACTOR_MB = (1, 4, 15)
_GRID_CRITIC_MB = (6, 16)
_GRID_ENABLE = (None, True, False)
_GRID_ESTIMATORS = ("gae", "grpo", "rloo")
_GRID_WARMUP = (0, 2, 5)
_GRID_DP = (1, 3, 8)
_GRID_STEPS = (0, 2, 5)


def _trainer_config(n: int, actor_mb: int, critic_mb: int, enable: Any, estimator: str, warmup: int) -> dict:
    """The keys verl's ``_get_required_batch_multiple`` and ``need_critic`` read."""
    return {
        "actor_rollout_ref": {"rollout": {"n": n}, "actor": {"ppo_mini_batch_size": actor_mb}},
        "critic": {"enable": enable, "ppo_mini_batch_size": critic_mb},
        "algorithm": {"adv_estimator": estimator},
        "trainer": {"critic_warmup": warmup},
    }


def _verl_multiple(dictconfig: Any, dp_size: int, global_steps: int, use_critic: bool | None = None) -> int:
    """verl's own ``PPOTrainer._get_required_batch_multiple`` on a trainer stub (PPOTrainer is abstract).

    ``use_critic`` is what verl's trainer sets it to, ``need_critic(config)``, unless given (already computed).
    """
    trainer_base = verl_module(TRAINER_BASE)
    use_critic = _need_critic(dictconfig) if use_critic is None else use_critic
    stub = SimpleNamespace(config=dictconfig, global_steps=global_steps, use_critic=use_critic)
    return trainer_base.PPOTrainer._get_required_batch_multiple(stub, dp_size)


@pytest.mark.verl
def test_required_batch_multiple_equals_verls_on_a_grid_of_configs():
    """Ours equals verl's _get_required_batch_multiple on >= 1000 configs, read as DictConfig, dict and attributes."""
    omegaconf = _omegaconf()
    checked = 0
    params = itertools.product(_GRID_N, _GRID_ACTOR_MB, _GRID_CRITIC_MB, _GRID_ENABLE, _GRID_ESTIMATORS, _GRID_WARMUP)
    for n, actor_mb, critic_mb, enable, estimator, warmup in params:
        plain = _trainer_config(n, actor_mb, critic_mb, enable, estimator, warmup)
        dictconfig = omegaconf.create(plain)
        as_dict, as_attrs = omegaconf.to_container(dictconfig), _namespace(plain)
        use_critic = _need_critic(dictconfig)
        for dp, steps in itertools.product(_GRID_DP, _GRID_STEPS):
            want = _verl_multiple(dictconfig, dp, steps, use_critic)
            for config in (dictconfig, as_dict, as_attrs):
                got = tv.required_batch_multiple(config, dp, global_steps=steps)
                assert got == want, (plain, dp, steps, type(config).__name__)
            checked += 1
    assert checked >= 1000
    # The grid's values reach every branch of verl's function: critic, actor, both and neither.
    branches = [(enable, steps) for enable in (True, False) for steps in (0, 5)]
    config = omegaconf.create(_trainer_config(8, 15, 6, True, "gae", 5))
    results = set()
    for enable, steps in branches:
        config.critic.enable = enable
        results.add(_verl_multiple(config, 1, steps))
    assert len(results) == len(branches)


@pytest.mark.verl
def test_required_batch_multiple_accepts_verls_enum_estimator_and_numpy_sizes():
    """verl's AdvantageEstimator members (a str enum) and numpy ints read as verl reads them."""
    estimator_enum = verl_module("verl.trainer.ppo.core_algos").AdvantageEstimator
    omegaconf = _omegaconf()
    for member in estimator_enum:
        plain = _trainer_config(4, 6, 10, None, member.value, 0)
        want = _verl_multiple(omegaconf.create(plain), 3, 1)
        plain["algorithm"]["adv_estimator"] = member
        assert tv.required_batch_multiple(plain, np.int64(3), global_steps=np.int64(1)) == want, member


# -- 2. config and argument errors ----------------------------------------------------------

_VALID = _trainer_config(8, 16, 4, True, "gae", 0)

#: (dotted path, value or _DELETE, the key the message must name).
_CONFIG_ERRORS = [
    ("trainer.critic_warmup", _DELETE, "config.trainer.critic_warmup"),
    ("trainer", _DELETE, "config.trainer"),
    ("trainer", None, "config.trainer"),  # a section of the wrong type is named, not the key under it
    ("trainer", [1, 2], "config.trainer"),
    ("actor_rollout_ref.rollout.n", _DELETE, "config.actor_rollout_ref.rollout.n"),
    ("actor_rollout_ref.rollout.n", None, "config.actor_rollout_ref.rollout.n"),
    ("actor_rollout_ref.rollout", _DELETE, "config.actor_rollout_ref.rollout"),
    ("actor_rollout_ref.actor.ppo_mini_batch_size", _DELETE, "config.actor_rollout_ref.actor.ppo_mini_batch_size"),
    ("critic.ppo_mini_batch_size", _DELETE, "config.critic.ppo_mini_batch_size"),
    ("trainer.critic_warmup", "0", "config.trainer.critic_warmup"),
    ("trainer.critic_warmup", -1, "config.trainer.critic_warmup"),
    ("trainer.critic_warmup", 1.0, "config.trainer.critic_warmup"),
    ("actor_rollout_ref.actor.ppo_mini_batch_size", "16", "config.actor_rollout_ref.actor.ppo_mini_batch_size"),
    ("actor_rollout_ref.actor.ppo_mini_batch_size", 2.5, "config.actor_rollout_ref.actor.ppo_mini_batch_size"),
    ("actor_rollout_ref.actor.ppo_mini_batch_size", True, "config.actor_rollout_ref.actor.ppo_mini_batch_size"),
    ("actor_rollout_ref.actor.ppo_mini_batch_size", 0, "config.actor_rollout_ref.actor.ppo_mini_batch_size"),
    ("critic.ppo_mini_batch_size", -4, "config.critic.ppo_mini_batch_size"),
    ("actor_rollout_ref.rollout.n", False, "config.actor_rollout_ref.rollout.n"),
    ("critic.enable", "yes", "config.critic.enable"),
    ("critic.enable", 1, "config.critic.enable"),
]

#: With ``critic.enable`` unset, verl decides by the estimator.
_ESTIMATOR_ERRORS = [
    ("algorithm", _DELETE, "config.algorithm"),
    ("algorithm.adv_estimator", _DELETE, "config.algorithm.adv_estimator"),
    ("algorithm.adv_estimator", 3, "config.algorithm.adv_estimator"),
]

#: What only OmegaConf can hold: a mandatory '???' and interpolations that do not resolve.
_OMEGACONF_ERRORS = [
    ("actor_rollout_ref.actor.ppo_mini_batch_size", "???", "config.actor_rollout_ref.actor.ppo_mini_batch_size"),
    ("actor_rollout_ref.rollout.n", "${no.such.key}", "config.actor_rollout_ref.rollout.n"),
    ("critic.enable", "${oc.env:TRAJSCHEMA_NO_SUCH_VARIABLE}", "config.critic.enable"),
    ("trainer.critic_warmup", "${actor_rollout_ref.rollout}", "config.trainer.critic_warmup"),
]


def _names_exactly(key: str) -> str:
    """A regex for ``key`` as a whole dotted key (``config.trainer`` does not match ``config.trainer.x``)."""
    return re.escape(key) + r"(?![\w.])"


def _assert_config_error(config: Any, key: str) -> None:
    with pytest.raises(tv.VerlConfigError, match=_names_exactly(key)) as info:
        tv.required_batch_multiple(config, 2, global_steps=3)
    assert isinstance(info.value, ValueError)


def _broken(path: str, value: Any) -> dict[str, Any]:
    """_VALID with ``path`` set to ``value``; with critic.enable unset when the case is about the estimator."""
    base = _edited(_VALID, "critic.enable", None) if path.startswith("algorithm") else _VALID
    return _edited(base, path, value)


@pytest.mark.parametrize(("path", "value", "key"), _CONFIG_ERRORS + _ESTIMATOR_ERRORS)
def test_a_bad_config_is_a_verl_config_error_naming_the_dotted_key(path, value, key):
    """Missing keys and wrong types are VerlConfigErrors (ValueErrors) naming the key: never KeyError/AttributeError."""
    config = _broken(path, value)
    _assert_config_error(config, key)
    _assert_config_error(_namespace(config), key)


@pytest.mark.parametrize(("path", "value", "key"), _CONFIG_ERRORS + _ESTIMATOR_ERRORS + _OMEGACONF_ERRORS)
def test_a_bad_dictconfig_is_a_verl_config_error_naming_the_dotted_key(path, value, key):
    """The same on OmegaConf DictConfigs, including '???' values and interpolations that do not resolve.

    Needs OmegaConf (verl's config library), not verl itself.
    """
    omegaconf = pytest.importorskip("omegaconf").OmegaConf
    _assert_config_error(omegaconf.create(_broken(path, value)), key)


#: The sections required_batch_multiple reads under, each with a key it reads there.
_SECTIONS = {
    "actor_rollout_ref": "actor_rollout_ref.rollout.n",
    "actor_rollout_ref.rollout": "actor_rollout_ref.rollout.n",
    "actor_rollout_ref.actor": "actor_rollout_ref.actor.ppo_mini_batch_size",
    "critic": "critic.enable",
    "algorithm": "algorithm.adv_estimator",  # read when critic.enable is null
    "trainer": "trainer.critic_warmup",
}
#: Values that cannot hold config keys, as a plain config and a DictConfig can hold them.
_NOT_SECTIONS = [None, True, False, 0, 5, -1, 1.5, float("nan"), "", "x", "critic", [], [1, 2], [{"n": 8}], ("a",)]


def _is_a(value: Any) -> str:
    """How a message says what it found: ``None``, else the value's type name (e.g. ``int``, ``ListConfig``)."""
    return "found None" if value is None else f" {type(value).__name__} "


def _wrong_section(config: Any, section: str, value: Any) -> str:
    """The VerlConfigError message of required_batch_multiple on ``config``, checked to name ``section`` first."""
    with pytest.raises(tv.VerlConfigError) as info:
        tv.required_batch_multiple(config, 2, global_steps=3)
    message = str(info.value)
    assert message.startswith(f"config.{section} must be a mapping (verl reads config.{section}."), message
    assert "is missing" not in message  # the defect: 'critic: 5' read as a config lacking critic.ppo_mini_batch_size
    return message


@pytest.mark.parametrize("section", sorted(_SECTIONS))
@pytest.mark.parametrize("value", _NOT_SECTIONS, ids=repr)
def test_a_section_of_the_wrong_type_is_named_with_what_was_found(section, value):
    """``critic: 5``, ``actor_rollout_ref: "x"``, a list or null where verl reads keys: the key holding it is named.

    Before: a wrong-typed section read as if its keys were missing, and the message named a
    key under it ("config.critic.ppo_mini_batch_size is missing").
    """
    config = _broken(section, value)
    for form in (config, _namespace(config)):
        message = _wrong_section(form, section, value)
        assert message.endswith(_is_a(value).rstrip() + (f" {value!r}" if value is not None else "")), message


@pytest.mark.parametrize("section", sorted(_SECTIONS))
@pytest.mark.parametrize("value", [v for v in _NOT_SECTIONS if not isinstance(v, tuple)], ids=repr)
def test_a_dictconfig_section_of_the_wrong_type_is_named(section, value):
    """The same on a DictConfig, as verl passes it: lists arrive as ListConfigs, and are named so."""
    omegaconf = pytest.importorskip("omegaconf").OmegaConf
    config = omegaconf.create(_broken(section, value))
    omegaconf.set_struct(config, True)  # verl's trainer config is in struct mode
    held = omegaconf.select(config, section)
    assert _is_a(held) in _wrong_section(config, section, held) + " "


#: Sections layout_multiple reads under, every key there having a default (strategy fsdp, sizes 1).
_LAYOUT_SECTIONS = [
    "actor_rollout_ref",
    "actor_rollout_ref.actor",
    "actor_rollout_ref.ref",
    "actor_rollout_ref.actor.fsdp_config",
    "actor_rollout_ref.ref.fsdp_config",
    "actor_rollout_ref.ref.megatron",
    "critic",
    "critic.fsdp",
    "critic.megatron",
]


def _layout_with_every_section() -> dict[str, Any]:
    fsdp = {"strategy": "fsdp", "fsdp_config": {"ulysses_sequence_parallel_size": 2}}
    megatron = {"strategy": "megatron", "megatron": {"tensor_model_parallel_size": 2}}
    arr = {"actor": copy.deepcopy(fsdp), "ref": copy.deepcopy(megatron)}
    return {"actor_rollout_ref": arr, "critic": {"enable": True, "strategy": "megatron", "megatron": {}, "fsdp": {}}}


@pytest.mark.parametrize("section", _LAYOUT_SECTIONS)
@pytest.mark.parametrize("value", _NOT_SECTIONS, ids=repr)
def test_layout_multiple_names_a_wrong_section_though_every_key_under_it_has_a_default(section, value):
    """``critic.megatron: 5`` is not a critic with the default layout: the section is named."""
    plain = _layout_with_every_section()
    role, _, engine = section.rpartition(".")
    if engine in ("fsdp", "fsdp_config", "megatron"):  # the engine section the role's strategy reads
        plain = _edited(plain, f"{role}.strategy", "megatron" if engine == "megatron" else "fsdp")
    config = _edited(plain, section, value)
    for form in (config, _namespace(config)):
        with pytest.raises(tv.VerlConfigError) as info:
            _verl_config.layout_multiple(form)
        message = str(info.value)
        assert message.startswith(f"config.{section} must be a mapping"), message
        assert _is_a(value) in message + " "


@pytest.mark.parametrize("role", ["actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic"])
@pytest.mark.parametrize("value", [None, 5, True, ["megatron"], {"name": "megatron"}], ids=repr)
def test_layout_multiple_names_a_strategy_that_is_not_a_string(role, value):
    """A strategy that is not a str was read as FSDP; it is named instead."""
    config = _edited(_layout_with_every_section(), f"{role}.strategy", value)
    with pytest.raises(tv.VerlConfigError, match=rf"^config\.{re.escape(role)}\.strategy must be a str"):
        _verl_config.layout_multiple(config)


def test_a_layout_no_row_length_can_meet_is_named():
    """Sizes whose lcm is beyond int64: a VerlConfigError naming the role, not an error deep inside padding."""
    plain = _layout_with_every_section()
    plain["critic"]["megatron"] = {"tensor_model_parallel_size": 2**61, "context_parallel_size": 3}
    with pytest.raises(tv.VerlConfigError, match=r"^the parallel layouts up to config\.critic .*2\*\*63 - 1"):
        _verl_config.layout_multiple(plain)
    with pytest.raises(ValueError, match=r"more than a torch tensor holds"):
        tv.padding_dims(tp_size=2**61, cp_size=3)
    with pytest.raises(ValueError, match=r"more than a torch tensor holds"):
        tv.padding_dims(min_len=2**63)
    # The largest that fits still works, and is what the brute force below would count up to.
    assert tv.padding_dims(tp_size=2**61, cp_size=1, min_len=2) == {"prompt": 2**61 - 1, "response": 1}
    assert tv.padding_dims(tp_size=2**60, cp_size=2, min_len=2) == {"prompt": 2**62 - 1, "response": 1}


@pytest.mark.parametrize("config", [None, 5, "config", [1, 2], True], ids=repr)
def test_a_config_that_is_not_a_mapping_is_named_config(config):
    with pytest.raises(tv.VerlConfigError, match=r"^config must be a mapping \(verl reads config\.critic\.enable\)"):
        tv.required_batch_multiple(config, 2, global_steps=0)
    with pytest.raises(tv.VerlConfigError, match=r"^config must be a mapping"):
        _verl_config.layout_multiple(config)


#: Keys read as ints, with their minimum, and values that are not such ints (bools are not ints here).
_INT_KEYS = {
    "actor_rollout_ref.rollout.n": 1,
    "actor_rollout_ref.actor.ppo_mini_batch_size": 1,
    "critic.ppo_mini_batch_size": 1,
    "trainer.critic_warmup": 0,
}
_NOT_INTS = [None, True, False, 1.0, 2.5, float("inf"), "8", "", [8], {"n": 8}, (8,), b"8", -1, -(2**70)]


@pytest.mark.parametrize("key", sorted(_INT_KEYS))
@pytest.mark.parametrize("value", _NOT_INTS, ids=repr)
def test_an_int_key_of_the_wrong_type_says_what_was_expected_and_found(key, value):
    if isinstance(value, int) and not isinstance(value, bool) and value >= _INT_KEYS[key]:
        pytest.skip("a valid value")
    config = _broken(key, value)
    for form, held in ((config, value), (_namespace(config), _namespace(value))):
        with pytest.raises(tv.VerlConfigError) as info:
            tv.required_batch_multiple(form, 2, global_steps=3)
        message = str(info.value)
        assert message.startswith(f"config.{key} must be an int >= {_INT_KEYS[key]}, found "), message
        assert _is_a(held) in message + " "


def test_a_huge_or_unprintable_wrong_value_keeps_the_message_short():
    """The message shows a bounded repr, and a repr that raises does not escape."""

    class Hostile:
        def __iter__(self):  # iterable: not a section
            return iter(())

        def __repr__(self):
            raise RuntimeError("no repr")

    for value in ("x" * 1_000_000, list(range(100_000)), Hostile()):
        with pytest.raises(tv.VerlConfigError) as info:
            tv.required_batch_multiple(_broken("critic", value), 2, global_steps=3)
        assert len(str(info.value)) < 300
        assert str(info.value).startswith("config.critic must be a mapping")


@pytest.mark.verl
@pytest.mark.parametrize("section", sorted(_SECTIONS))
@pytest.mark.parametrize("value", [None, 5, "x", [1, 2]], ids=repr)
def test_verl_itself_cannot_read_a_section_we_refuse(section, value):
    """We refuse only what verl's own trainer fails on: its need_critic or _get_required_batch_multiple raises too."""
    omegaconf = _omegaconf()
    config = omegaconf.create(_broken(section, value))
    with pytest.raises(Exception) as info:  # verl raises whatever reading an int or a list as a section raises
        _verl_multiple(config, 2, 3)
    assert not isinstance(info.value, tv.VerlConfigError)
    with pytest.raises(tv.VerlConfigError):
        tv.required_batch_multiple(config, 2, global_steps=3)


_WRONG_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(alphabet="abc xyz", max_size=8),  # no '${' or '???': OmegaConf would read those as its own
    st.lists(st.integers(), max_size=3),
)


@pytest.mark.verl
@settings(deadline=None)
@given(
    base=st.tuples(
        st.sampled_from(_GRID_N),
        st.sampled_from(_GRID_ACTOR_MB),
        st.sampled_from(_GRID_CRITIC_MB),
        st.sampled_from(_GRID_ENABLE),
        st.sampled_from(_GRID_ESTIMATORS),
        st.sampled_from(_GRID_WARMUP),
    ),
    section=st.sampled_from(sorted(_SECTIONS)),
    value=_WRONG_VALUES,
    steps=st.sampled_from(_GRID_STEPS),
)
def test_a_wrong_section_fails_exactly_when_verl_reads_through_it(base, section, value, steps):
    """verl's own trainer as the oracle, on DictConfigs: we fail exactly when verl fails (it reads
    through the wrong section), naming that section; when verl never reads it, neither do we."""
    omegaconf = _omegaconf()
    config = omegaconf.create(_edited(_trainer_config(*base), section, value))
    try:
        want = _verl_multiple(config, 3, steps)
    except Exception:  # AttributeError, ConfigAttributeError, ...: verl cannot read it
        want = None
    if want is None:
        with pytest.raises(tv.VerlConfigError, match=rf"^config\.{re.escape(section)} must be a mapping"):
            tv.required_batch_multiple(config, 3, global_steps=steps)
    else:
        assert tv.required_batch_multiple(config, 3, global_steps=steps) == want


@pytest.mark.parametrize("dp_size", [0, -1, True, False, 2.0, "2", None])
def test_a_bad_dp_size_is_a_value_error(dp_size):
    """dp_size must be a positive int: an argument error (ValueError), not a config error."""
    with pytest.raises(ValueError, match="dp_size") as info:
        tv.required_batch_multiple(_VALID, dp_size, global_steps=1)
    assert not isinstance(info.value, tv.VerlConfigError)


@pytest.mark.parametrize("global_steps", [-1, True, False, 1.5, "3", None])
def test_a_bad_global_steps_is_a_value_error(global_steps):
    """global_steps must be an int >= 0 (0 is verl's first step before any update)."""
    with pytest.raises(ValueError, match="global_steps") as info:
        tv.required_batch_multiple(_VALID, 2, global_steps=global_steps)
    assert not isinstance(info.value, tv.VerlConfigError)


# -- 3. padding lengths and the parallel layout -----------------------------------------------


def _brute_force_padding_dims(tp: int, cp: int, min_len: int) -> dict[str, int]:
    """The smallest total >= min_len (and >= 2) that verl's zigzag alignment divides, found by counting up.

    verl 0.9.1 aligns each packed sequence to tp * cp * 2 with context parallelism, to tp
    without (tests/verl/test_verl_alignment.py holds that rule to verl's own code).
    """
    align = tp * cp * 2 if cp > 1 else tp
    total = max(min_len, 2)
    while total % align:
        total += 1
    return {"prompt": total - 1, "response": 1}


def test_padding_dims_equals_a_brute_force_search():
    """padding_dims is the smallest multiple of verl's alignment >= min_len, as 1 response token and the rest prompt."""
    sizes = (1, 2, 3, 4, 5, 7, 8, 16)
    for tp, cp, min_len in itertools.product(sizes, sizes, (2, 3, 5, 64, 127, 128, 129, 255, 256, 257, 1000)):
        assert tv.padding_dims(tp_size=tp, cp_size=cp, min_len=min_len) == _brute_force_padding_dims(tp, cp, min_len), (
            tp,
            cp,
            min_len,
        )
    assert tv.padding_dims() == _brute_force_padding_dims(1, 1, 128)


@pytest.mark.parametrize("arg", ["tp_size", "cp_size", "min_len"])
@pytest.mark.parametrize("value", [0, -1, -8, True, False, 2.0, "2", None])
def test_padding_dims_rejects_non_positive_ints(arg, value):
    """0, negatives, bools, floats, strings and None are ValueErrors naming the argument."""
    with pytest.raises(ValueError, match=arg):
        tv.padding_dims(**{arg: value})


def test_padding_dims_answers_every_positive_min_len_by_the_rule():
    """min_len 1 is answered too: the row is at least 2 tokens (a prompt and a response token), the
    smallest multiple of the alignment from there (it was refused as if the row could be 1 token long)."""
    for tp, cp in itertools.product((1, 2, 3, 8), (1, 2, 5)):
        for min_len in range(1, 4 * 2 * tp * cp + 2):
            got = tv.padding_dims(tp_size=tp, cp_size=cp, min_len=min_len)
            assert got == _brute_force_padding_dims(tp, cp, min_len), (tp, cp, min_len)
            assert got["prompt"] >= 1 and got["response"] == 1
    assert tv.padding_dims(min_len=1) == {"prompt": 1, "response": 1}
    assert tv.padding_dims(tp_size=4, cp_size=2, min_len=1) == {"prompt": 15, "response": 1}
    assert tv.padding_dims(tp_size=4, min_len=1) == {"prompt": 3, "response": 1}  # no cp: tp alone


#: (strategy, role section): Ulysses at the role level and/or in its engine (fsdp_config).
_FSDP_ACTORS = [
    ("fsdp", {}),
    ("fsdp", {"ulysses_sequence_parallel_size": 2}),
    ("fsdp2", {"fsdp_config": {"ulysses_sequence_parallel_size": 4}}),
    ("fsdp", {"ulysses_sequence_parallel_size": 4, "fsdp_config": {"ulysses_sequence_parallel_size": 2}}),
    ("fsdp", {"ulysses_sequence_parallel_size": 8, "fsdp_config": {"ulysses_sequence_parallel_size": 8}}),
    ("fsdp", {"ulysses_sequence_parallel_size": 2, "fsdp_config": {"ulysses_sequence_parallel_size": 3}}),
]
_MEGATRON_ROLES = [
    ("megatron", {}),
    ("megatron", {"megatron": {"tensor_model_parallel_size": 8}}),
    ("megatron", {"megatron": {"context_parallel_size": 3}}),
    ("megatron", {"megatron": {"tensor_model_parallel_size": 4, "context_parallel_size": 16}}),
]
_CRITICS = [
    ("fsdp", {}),
    ("megatron", {"megatron": {"tensor_model_parallel_size": 2, "context_parallel_size": 2}}),
    ("megatron", {"megatron": {"tensor_model_parallel_size": 16}}),
    ("fsdp", {"fsdp": {"ulysses_sequence_parallel_size": 4}}),  # the critic's engine lives at critic.fsdp
    ("fsdp", {"ulysses_sequence_parallel_size": 4}),  # deprecated for critics: verl never uses it
]


def _verl_engine(role: str, strategy: str, section: Mapping[str, Any]) -> Any:
    """The engine config verl's own role dataclass builds from ``section`` (verl's rules pick the engine)."""
    config = verl_module("verl.workers.config")
    kwargs: dict[str, Any] = {"ppo_micro_batch_size_per_gpu": 1, "ppo_mini_batch_size": 4, "rollout_n": 1}
    kwargs["strategy"] = strategy
    critic = role == "critic"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # McoreEngineConfig notes that TP 1 turns sequence parallelism off
        if strategy == "megatron":
            kwargs["megatron"] = config.McoreEngineConfig(**section.get("megatron", {}))
            return (config.McoreCriticConfig if critic else config.McoreActorConfig)(**kwargs).engine
        engine_key = "fsdp" if critic else "fsdp_config"  # where verl's FSDP role dataclasses keep their engine
        kwargs[engine_key] = config.FSDPEngineConfig(**section.get(engine_key, {}))
        if "ulysses_sequence_parallel_size" in section:
            kwargs["ulysses_sequence_parallel_size"] = section["ulysses_sequence_parallel_size"]
        return (config.FSDPCriticConfig if critic else config.FSDPActorConfig)(**kwargs).engine


def _engine_size(engine: Any) -> int:
    """How many ways one sequence is split: Megatron's TP x CP, or FSDP's Ulysses size."""
    if hasattr(engine, "tensor_model_parallel_size"):
        return engine.tensor_model_parallel_size * engine.context_parallel_size
    return engine.ulysses_sequence_parallel_size


def _layout_config(actor, ref, critic, enable, estimator) -> dict[str, Any]:
    arr: dict[str, Any] = {"actor": {"strategy": actor[0], **copy.deepcopy(actor[1])}}
    if ref is not None:
        arr["ref"] = {"strategy": ref[0], **copy.deepcopy(ref[1])}
    return {
        "actor_rollout_ref": arr,
        "critic": {"strategy": critic[0], "enable": enable, **copy.deepcopy(critic[1])},
        "algorithm": {"adv_estimator": estimator},
    }


def _verl_layout_multiple(plain: Mapping[str, Any], use_critic: bool | None = None) -> int:
    """lcm of 2 x each role's split as verl's dataclasses build its engine.

    The roles are those trajschema pads for: actor; ref whenever configured (conservative: verl builds a ref
    worker only when a KL term needs it); critic when verl's need_critic says so.
    """
    roles = [("actor", plain["actor_rollout_ref"]["actor"])]
    if "ref" in plain["actor_rollout_ref"]:
        roles.append(("ref", plain["actor_rollout_ref"]["ref"]))
    if _need_critic(_omegaconf().create(plain)) if use_critic is None else use_critic:
        roles.append(("critic", plain["critic"]))
    multiple = 2
    for role, section in roles:
        body = {k: v for k, v in section.items() if k != "strategy"}
        multiple = math.lcm(multiple, 2 * _engine_size(_verl_engine(role, section["strategy"], body)))
    return multiple


@pytest.mark.verl
def test_layout_multiple_equals_verls_engines_on_a_grid_of_layouts():
    """layout_multiple reads each role's TP x CP / Ulysses where verl's role dataclasses put its engine."""
    roles = _FSDP_ACTORS + _MEGATRON_ROLES
    checked = 0
    for actor, ref, critic, enable, estimator in itertools.product(
        roles, [None, roles[2], roles[7]], _CRITICS, (None, True, False), ("gae", "grpo")
    ):
        plain = _layout_config(actor, ref, critic, enable, estimator)
        dictconfig = _omegaconf().create(plain)
        use_critic = _need_critic(dictconfig)
        want = _verl_layout_multiple(plain, use_critic)
        assert _verl_config.layout_multiple(plain) == want, plain
        assert _verl_config.layout_multiple(dictconfig) == want, plain
        checked += 1
    assert checked >= 300


@pytest.mark.verl
def test_layout_multiple_defaults_are_verls_engine_defaults():
    """Missing sizes read as verl's engine dataclass defaults; a config with no roles needs rows of even length."""
    config = verl_module("verl.workers.config")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # McoreEngineConfig notes that TP 1 turns sequence parallelism off
        mcore, fsdp = config.McoreEngineConfig(), config.FSDPEngineConfig()
    cases = [
        ({"critic": {"enable": False}}, 1),  # no role configured: nothing splits a row
        ({"actor_rollout_ref": {"actor": {"strategy": "megatron"}}, "critic": {"enable": False}}, _engine_size(mcore)),
        ({"actor_rollout_ref": {"actor": {}}, "critic": {"enable": True}}, _engine_size(fsdp)),
    ]
    for plain, size in cases:
        assert _verl_config.layout_multiple(plain) == math.lcm(2, 2 * size), plain


#: Layouts an earlier trajschema read wrongly (found by the grid above), pinned with what verl's engines need.
LAYOUT_REGRESSIONS: dict[str, tuple[dict[str, Any], int]] = {
    # verl's FSDPCriticConfig keeps its engine at critic.fsdp, not fsdp_config: rows split 4 ways.
    "critic-engine-ulysses": (
        _layout_config(("fsdp", {}), None, ("fsdp", {"fsdp": {"ulysses_sequence_parallel_size": 4}}), True, "gae"),
        8,
    ),
    # critic.ulysses_sequence_parallel_size is deprecated and never copied into the critic's engine.
    "critic-deprecated-ulysses": (
        _layout_config(("fsdp", {}), None, ("fsdp", {"ulysses_sequence_parallel_size": 4}), True, "gae"),
        2,
    ),
    # A role-level size > 1 overrides fsdp_config's for the actor (verl splits 2 ways, not 3).
    "actor-role-level-ulysses-wins": (
        _layout_config(
            ("fsdp", {"ulysses_sequence_parallel_size": 2, "fsdp_config": {"ulysses_sequence_parallel_size": 3}}),
            None,
            ("fsdp", {}),
            False,
            "grpo",
        ),
        4,
    ),
}


@pytest.mark.verl
@pytest.mark.parametrize("case", sorted(LAYOUT_REGRESSIONS))
def test_layout_multiple_regressions_agree_with_verls_engines(case):
    plain, want = LAYOUT_REGRESSIONS[case]
    assert _verl_config.layout_multiple(plain) == want == _verl_layout_multiple(plain)


_GENERATED = {  # verl's own default trainer configs, and layouts to set on them (ref follows the actor)
    "_generated_ppo_trainer.yaml": [
        {},
        {"actor_rollout_ref.actor.ulysses_sequence_parallel_size": 4},
        {"actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size": 8, "critic.enable": False},
    ],
    "_generated_ppo_megatron_trainer.yaml": [
        {},
        {
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size": 4,
            "actor_rollout_ref.actor.megatron.context_parallel_size": 16,
            "critic.megatron.tensor_model_parallel_size": 8,
            "critic.megatron.context_parallel_size": 3,
        },
    ],
}


def _generated_config(name: str, updates: Mapping[str, Any]) -> Any:
    """verl's generated trainer config ``name`` (loaded by OmegaConf, no hydra needed), with ``updates`` set."""
    omegaconf = _omegaconf()
    path = Path(verl_module("verl").__file__).parent / "trainer" / "config" / name
    if not path.is_file():
        pytest.fail(f"verl 0.9.1 ships {path}; it is missing")
    config = omegaconf.load(path)
    for key, value in updates.items():
        omegaconf.update(config, key, value, merge=False)
    return config


#: How verl's ActorRolloutRefWorker.init_model renames the ref's keys before building its ActorConfig.
_REF_RENAMES = {
    "log_prob_micro_batch_size": "ppo_micro_batch_size",
    "log_prob_micro_batch_size_per_gpu": "ppo_micro_batch_size_per_gpu",
    "log_prob_use_dynamic_bsz": "use_dynamic_bsz",
    "log_prob_max_token_len_per_gpu": "ppo_max_token_len_per_gpu",
}


def _verl_worker_engines(config: Any) -> list[Any]:
    """The engine configs verl's workers build from the whole config (as ActorRolloutRefWorker / the trainer do)."""
    omegaconf, to_dataclass = _omegaconf(), verl_module("verl.utils.config").omega_conf_to_dataclass
    resolved = omegaconf.create(omegaconf.to_container(config, resolve=True))
    actor, ref, critic = resolved.actor_rollout_ref.actor, resolved.actor_rollout_ref.ref, resolved.critic
    actor.ppo_micro_batch_size_per_gpu = 1  # batch sizes verl checks at build time; no bearing on the layout
    ref.ppo_mini_batch_size = actor.ppo_mini_batch_size
    for old, new in _REF_RENAMES.items():
        ref[new] = ref.pop(old, None)
    ref.ppo_micro_batch_size_per_gpu, ref.use_dynamic_bsz = 1, bool(ref.use_dynamic_bsz)
    critic.pop("model")  # HFModelConfig would load the model's files; the critic's engine does not need it
    critic.ppo_micro_batch_size_per_gpu = 1
    roles = [actor, ref, critic] if _need_critic(resolved) else [actor, ref]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # McoreEngineConfig notes that TP 1 turns sequence parallelism off
        return [to_dataclass(role).engine for role in roles]


@pytest.mark.verl
@pytest.mark.parametrize(
    ("name", "updates"), [(n, u) for n, cases in _GENERATED.items() for u in cases], ids=lambda v: str(v)[:40]
)
def test_verls_generated_default_configs(name, updates):
    """On verl's own generated configs: the layout equals verl's built engines', the multiple verl's own."""
    omegaconf = _omegaconf()
    config = _generated_config(name, updates)
    want = 2
    for engine in _verl_worker_engines(config):
        want = math.lcm(want, 2 * _engine_size(engine))
    assert _verl_config.layout_multiple(config) == want
    assert _verl_config.layout_multiple(omegaconf.to_container(config, resolve=True)) == want
    for dp, steps in itertools.product((1, 3, 8), (0, 1)):
        expected = _verl_multiple(config, dp, steps)
        assert tv.required_batch_multiple(config, dp, global_steps=steps) == expected
        assert tv.required_batch_multiple(omegaconf.to_container(config, resolve=True), dp, global_steps=steps) == (
            expected
        )


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("actor_rollout_ref.actor.megatron.tensor_model_parallel_size", "2"),
        ("actor_rollout_ref.actor.megatron.context_parallel_size", 0),
        ("actor_rollout_ref.ref.megatron.tensor_model_parallel_size", 2.0),
        ("critic.megatron.context_parallel_size", True),
    ],
)
def test_layout_multiple_names_a_bad_megatron_size(path, value):
    """A Megatron TP/CP that is not a positive int is a VerlConfigError naming its key."""
    roles = {"strategy": "megatron", "megatron": {"tensor_model_parallel_size": 2}}
    arr = {"actor": copy.deepcopy(roles), "ref": copy.deepcopy(roles)}
    plain = {"actor_rollout_ref": arr, "critic": {"enable": True, **copy.deepcopy(roles)}}
    with pytest.raises(tv.VerlConfigError, match=_names_exactly("config." + path)):
        _verl_config.layout_multiple(_edited(plain, path, value))


@pytest.mark.parametrize(
    "path",
    [
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
        "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size",
        "actor_rollout_ref.ref.ulysses_sequence_parallel_size",
    ],
)
@pytest.mark.parametrize("value", [0, "4", True, 1.5])
def test_layout_multiple_names_a_bad_ulysses_size(path, value):
    """A Ulysses size that is not a positive int is a VerlConfigError naming its key."""
    plain = {"actor_rollout_ref": {"actor": {"strategy": "fsdp"}, "ref": {}}, "critic": {"enable": False}}
    with pytest.raises(tv.VerlConfigError, match=_names_exactly("config." + path)):
        _verl_config.layout_multiple(_edited(plain, path, value))


# -- 4. loss aggregation over the real rows ------------------------------------------------------

_FLOAT_BITS = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}
_FLOAT_BITS[torch.float64] = torch.int64


def _same_bits(got: Any, want: Any) -> bool:
    """Bit-identical tensors (NaN equal to the very same NaN), of one dtype and shape."""
    if not (isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor)):
        return False
    if got.dtype != want.dtype or got.shape != want.shape:
        return False
    if got.dtype in _FLOAT_BITS:
        return torch.equal(got.view(_FLOAT_BITS[got.dtype]), want.view(_FLOAT_BITS[want.dtype]))
    return torch.equal(got, want)


@pytest.fixture(scope="module")
def agg_loss():
    """verl 0.9.1's own ``core_algos.agg_loss``."""
    return verl_module("verl.trainer.ppo.core_algos").agg_loss


def _modes_in_source(fn: Any) -> set[str]:
    """The strings ``fn`` compares ``loss_agg_mode`` with (``==`` or ``in [...]``), read from its source."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "loss_agg_mode":
            for right in node.comparators:
                for const in ast.walk(right):
                    if isinstance(const, ast.Constant) and isinstance(const.value, str):
                        found.add(const.value)
    return found


@pytest.mark.verl
def test_loss_agg_modes_are_exactly_the_modes_verls_agg_loss_accepts(agg_loss):
    """LOSS_AGG_MODES is the set of modes verl's agg_loss branches on, and verl accepts each and nothing else."""
    in_source = _modes_in_source(agg_loss)
    assert set(tv.LOSS_AGG_MODES) == in_source and len(tv.LOSS_AGG_MODES) == len(in_source)
    loss, mask = torch.ones(2, 3), torch.ones(2, 3)
    for mode in in_source:
        assert torch.isfinite(agg_loss(loss, mask, mode))
    for bogus in ("token_mean", "seq-mean", "", "TOKEN-MEAN"):
        with pytest.raises(ValueError, match="Invalid loss_agg_mode"):
            agg_loss(loss, mask, bogus)
        with pytest.raises(ValueError, match="loss_agg_mode"):
            tv.agg_loss_real(loss, mask, bogus, real_rows=torch.ones(2, dtype=torch.bool))


_FINITE = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False, width=32)
_ANYTHING = st.floats(allow_nan=True, allow_infinity=True, width=32)


@st.composite
def _padded_batches(draw) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss_mat, loss_mask, real_rows): real rows anywhere, padding rows with an all-zero mask and any loss."""
    real = draw(st.lists(st.booleans(), min_size=1, max_size=9))
    width = draw(st.integers(1, 6))
    loss_rows, mask_rows = [], []
    for is_real in real:
        loss_rows.append(draw(st.lists(_FINITE if is_real else _ANYTHING, min_size=width, max_size=width)))
        bits = draw(st.lists(st.booleans(), min_size=width, max_size=width)) if is_real else [False] * width
        mask_rows.append(bits)
    loss_dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    mask_dtype = draw(st.sampled_from([torch.float32, torch.int64, torch.bool]))
    loss = torch.tensor(loss_rows, dtype=torch.float32).to(loss_dtype)
    return loss, torch.tensor(mask_rows).to(mask_dtype), torch.tensor(real)


@st.composite
def _global_sizes(draw) -> dict[str, Any]:
    """agg_loss's keyword arguments: defaults with dp_size 1, or dp_size > 1 with (or without) global sizes."""
    as_tensor = draw(st.booleans())
    size = st.integers(1, 200).map(lambda v: torch.tensor(v) if as_tensor else v)
    dp_size = draw(st.sampled_from([1, 1, 2, 4]))
    kwargs: dict[str, Any] = {"dp_size": dp_size}
    if dp_size > 1 or draw(st.booleans()):
        kwargs["global_batch_size"] = draw(st.none() | size)
        kwargs["batch_num_tokens"] = draw(st.none() | size)
    kwargs["loss_scale_factor"] = draw(st.none() | st.integers(1, 4096))
    return kwargs


@pytest.mark.verl
@settings(deadline=None)
@given(batch=_padded_batches(), mode=st.sampled_from(tv.LOSS_AGG_MODES), kwargs=_global_sizes())
def test_agg_loss_real_is_bit_identical_to_verls_agg_loss_of_the_unpadded_batch(agg_loss, batch, mode, kwargs):
    """agg_loss_real(padded, real_rows=...) == verl's agg_loss(padded[real_rows]) bit for bit, errors alike."""
    loss, mask, real = batch
    try:
        want = agg_loss(loss[real], mask[real], mode, **kwargs)
    except ValueError:  # dp_size > 1 without the global size this mode divides by
        with pytest.raises(ValueError, match="required when dp_size > 1"):
            tv.agg_loss_real(loss, mask, mode, real_rows=real, **kwargs)
        return
    assert _same_bits(tv.agg_loss_real(loss, mask, mode, real_rows=real, **kwargs), want)
    assert _same_bits(tv.agg_loss_real(loss, mask, mode, real_rows=real.numpy(), **kwargs), want)
    assert _same_bits(tv.agg_loss_real(loss, mask, mode, real_rows=real.tolist(), **kwargs), want)


@pytest.mark.verl
@pytest.mark.parametrize("mode", tv.LOSS_AGG_MODES)
def test_verls_agg_loss_on_the_padded_batch_scales_seq_mean_modes_by_real_over_total(agg_loss, mode):
    """The hazard agg_loss_real removes: verl divides seq-mean losses by the padded batch size it is given."""
    g = torch.Generator().manual_seed(0)
    n_real, n_pad, width = 6, 2, 5
    loss = torch.rand(n_real + n_pad, width, generator=g) + 0.5
    mask = (torch.rand(n_real + n_pad, width, generator=g) > 0.3).float()
    mask[:, 0] = 1.0  # every real row has a token
    mask[n_real:] = 0.0  # padding rows: nothing to learn from
    real = torch.arange(n_real + n_pad) < n_real
    unpadded = agg_loss(loss[real], mask[real], mode, global_batch_size=n_real)
    padded = agg_loss(loss, mask, mode, global_batch_size=n_real + n_pad)  # verl's trainer passes the padded size
    ours = tv.agg_loss_real(loss, mask, mode, real_rows=real, global_batch_size=n_real)
    assert _same_bits(ours, unpadded)
    if mode.startswith("seq-mean"):
        torch.testing.assert_close(padded, unpadded * n_real / (n_real + n_pad))
        assert not torch.isclose(padded, unpadded)
    else:  # token modes count tokens, and padding has none
        torch.testing.assert_close(padded, unpadded)


def test_agg_loss_real_rejects_bad_arguments():
    """Unknown modes, mismatched or non-2-D shapes, non-bool or mis-sized real_rows, missing global sizes."""
    loss, mask, real = torch.ones(3, 4), torch.ones(3, 4), torch.tensor([True, False, True])
    bad_calls = [
        ("loss_agg_mode", lambda: tv.agg_loss_real(loss, mask, "mean", real_rows=real)),
        ("same shape", lambda: tv.agg_loss_real(loss, torch.ones(3, 5), "token-mean", real_rows=real)),
        ("same shape", lambda: tv.agg_loss_real(torch.ones(12), torch.ones(12), "token-mean", real_rows=real)),
        ("real_rows", lambda: tv.agg_loss_real(loss, mask, "token-mean", real_rows=torch.tensor([1, 0, 1]))),
        ("real_rows", lambda: tv.agg_loss_real(loss, mask, "token-mean", real_rows=torch.tensor([1.0, 0.0, 1.0]))),
        ("real_rows", lambda: tv.agg_loss_real(loss, mask, "token-mean", real_rows=torch.tensor([True, False]))),
        ("real_rows", lambda: tv.agg_loss_real(loss, mask, "token-mean", real_rows=torch.ones(3, 1, dtype=bool))),
        ("dp_size", lambda: tv.agg_loss_real(loss, mask, "token-sum", real_rows=real, dp_size=0)),
        ("dp_size", lambda: tv.agg_loss_real(loss, mask, "token-sum", real_rows=real, dp_size=True)),
        ("batch_num_tokens", lambda: tv.agg_loss_real(loss, mask, "token-mean", real_rows=real, dp_size=2)),
    ]
    for mode in [m for m in tv.LOSS_AGG_MODES if m.startswith("seq-mean")]:
        call = lambda m=mode: tv.agg_loss_real(loss, mask, m, real_rows=real, dp_size=2, batch_num_tokens=8)  # noqa: E731
        bad_calls.append(("global_batch_size", call))
    for match, call in bad_calls:
        with pytest.raises(ValueError, match=match):
            call()


# -- 5. the padding template, against verl's -------------------------------------------------

#: Fields where our padding row differs from verl 0.9.1's ``construct_minimal_padding_template``,
#: each with when it differs (``"sample has it"`` / ``"sample lacks it"``) and why.
DIFFERENCES: dict[str, tuple[str, str]] = {
    "uid": (
        "sample has it",
        "verl's template keeps the source sample's uid; its upsample_batch_to_divisible_size then gives all "
        "padding rows one fresh 'pad' + 32-hex uid. trajschema's padding has its fresh 'pad' + 32-hex uid "
        "from the start (same format; the value is random on both sides by design)",
    ),
    "session_id": (
        "sample has it",
        "verl's template keeps the source sample's session_id; its upsample then sets session_id to each "
        "padding row's index (0, 1, ...). trajschema's padding is index-numbered from the start (pad: index)",
    ),
    "attention_mask": (
        "sample lacks it",
        "verl's template always adds attention_mask (ones), even where the real sample has none (verl's "
        "TQ agent loop computes attention_mask for the position ids but never stores it); trajschema emits "
        "exactly the real sample's fields, since TransferQueue reads a field only where every sample has it",
    ),
    "rm_scores": (
        "sample lacks it",
        "verl's template always adds rm_scores (zeros) even where the real sample has none (the agent loop "
        "stores it only when it computed a reward); trajschema emits exactly the real sample's fields",
    ),
    "rollout_log_probs": (
        "sample lacks it",
        "verl's template always adds rollout_log_probs (zeros) even where the real sample has none (the agent "
        "loop stores it only when the engine returned log-probs); trajschema emits exactly the real sample's fields",
    ),
    "routed_experts": (
        "schema spreads it",
        "verl's build_padding_routed_experts fills zeros: under routing replay every padding token goes to "
        "expert 0, topk times (one hot expert, one hot expert-parallel rank), and repeats one expert in a "
        "token, which no router emits. A schema with pad: {spread: experts} spreads the padding tokens "
        "evenly over the experts, distinct within a token (same shape and dtype as verl's)",
    ),
}


def _spreads(schema: ts.Schema, field: str) -> bool:
    f = schema.fields.get(field)
    return f is not None and f.pad.rule == "spread"


def _differs_by_rule(schema: ts.Schema, sample: Mapping[str, Any], field: str) -> bool:
    """Whether DIFFERENCES says ``field`` differs for this schema and sample."""
    when = DIFFERENCES[field][0]
    if when == "schema spreads it":
        return field in sample and _spreads(schema, field)
    return (field in sample) == (when == "sample has it")


def _assert_spread_routes(routes: torch.Tensor, verl_routes: torch.Tensor, experts: int) -> None:
    """The documented difference: verl's zeros, ours distinct per token and within the experts."""
    assert not verl_routes.any()
    assert routes.shape == verl_routes.shape and routes.dtype == verl_routes.dtype
    assert int(routes.min()) >= 0 and int(routes.max()) < experts
    slots = routes.reshape(-1, routes.shape[-1])
    assert (slots.sort(dim=-1).values.diff(dim=-1) != 0).all()


_TAG = {"is_padding": False, "status": "finished", "global_steps": 3, "min_global_steps": 2, "max_global_steps": 3}


def _agent_loop_sample(schema: ts.Schema, prompt_len: int, response_len: int, variant: str) -> dict[str, Any]:
    """A real sample as verl's TQ agent loop stores it (``variant``: which optional fields it has)."""
    kw = {k: v for k, v in (("layers", 3), ("topk", 2), ("teacher_topk", 4)) if k in schema.dims}
    sample = verl_sample(schema, prompt_len, response_len, optional=variant != "minimal", **kw)
    if variant == "minimal":
        return sample
    # AgentLoopOutput.as_dict() and the loop's kwargs: fields no schema declares, copied into padding.
    sample.update(
        session_id=5,
        num_turns=2,
        extra_fields={"min_global_steps": 2, "max_global_steps": 3, "reward_extra_info": {"acc": 1.0}},
        metrics={"generate_sequences": 0.25, "tool_calls": 0.0},
        data_source="openai/gsm8k",
        global_steps=3,
        index=17,
    )
    if variant == "agent_loop":  # no attention_mask (never stored) and no reward yet
        del sample["attention_mask"], sample["rm_scores"]
    return sample


def _tag_of(prompt_len: int, response_len: int) -> dict[str, Any]:
    lengths = {"prompt_len": prompt_len, "response_len": response_len, "seq_len": prompt_len + response_len}
    return {**_TAG, **lengths}


def _differing(verl_row: Mapping[str, Any], our_row: Mapping[str, Any]) -> dict[str, str]:
    """Fields that differ, with how: tensors by dtype, shape and values; others by type and value once pickled."""
    out = {}
    for name in sorted(set(verl_row) | set(our_row)):
        if name not in verl_row or name not in our_row:
            out[name] = "only verl emits it" if name in verl_row else "only trajschema emits it"
            continue
        a, b = verl_row[name], our_row[name]
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            same = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
            same = same and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
        else:
            # Through TransferQueue a value is pickled: our shared read-only {} arrives as a plain {}.
            b = pickle.loads(pickle.dumps(b))
            same = type(a) is type(b) and a == b
        if not same:
            out[name] = f"verl {a!r:.60} vs trajschema {b!r:.60}"
    return out


@pytest.mark.verl
def test_padding_template_equals_verls_but_for_the_listed_differences():
    """Field by field, Schema.padding(1, like=sample) is verl's template but for exactly DIFFERENCES."""
    template = verl_module("verl.trainer.ppo.padding_utils").construct_minimal_padding_template
    seen: dict[str, list[str]] = {}
    for name, variant in itertools.product(ts.schema_names(), ("full", "agent_loop", "minimal")):
        schema = ts.load_schema(name)
        sample = _agent_loop_sample(schema, 40, 9, variant)
        verl_row, verl_tag = template(sample, _tag_of(40, 9), EOS)
        pad = schema.padding(1, eos_token_id=EOS, like=sample)
        found = _differing(verl_row, pad.samples[0])
        expected = {f for f in DIFFERENCES if _differs_by_rule(schema, sample, f)}
        assert set(found) == expected, (name, variant, found)
        if "routed_experts" in found:
            experts = pad.dims["experts"]
            _assert_spread_routes(pad.samples[0]["routed_experts"], verl_row["routed_experts"], experts)
        for field in found:
            seen.setdefault(field, []).append(f"{name}/{variant}")
        # The length tags and is_padding are verl's; the other tags come from the writer (see below).
        assert pad.tags[0] == {k: verl_tag[k] for k in ("is_padding", "prompt_len", "response_len", "seq_len")}
    # every listed difference is real, and no other (routes differ once a packaged schema spreads them)
    spreading = any(_spreads(ts.load_schema(n), "routed_experts") for n in ts.schema_names())
    assert set(seen) == set(DIFFERENCES) - (set() if spreading else {"routed_experts"}), seen


class _FakeTQ:
    """An in-memory TransferQueue client: stores rows and tags, reads back with TransferQueue's layout."""

    def __init__(self, kv_batch_meta: Any) -> None:
        self.meta_type = kv_batch_meta
        self.store: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}

    def kv_batch_put(self, keys, partition_id, fields=None, tags=None):
        for key, row, tag in zip(keys, batch_view(fields).rows(), tags, strict=True):
            self.store[key] = (row, tag)
        return self.meta_type(keys=list(keys), tags=list(tags), partition_id=partition_id, fields=list(fields.keys()))

    def kv_batch_get(self, keys, partition_id, select_fields=None):
        return wire_batch([self.store[k][0] for k in keys])


def _pad_both_ways(schema: ts.Schema, multiple: int) -> tuple[Any, _FakeTQ, Any, _FakeTQ]:
    """The same 3-sample batch padded to ``multiple`` by verl's upsample and by ours, each in its own fake TQ."""
    padding_utils = verl_module("verl.trainer.ppo.padding_utils")
    to_td = verl_module("verl.utils.tensordict_utils").list_of_dict_to_tensordict
    samples = [_agent_loop_sample(schema, 30 + i, 9 - i, "full") for i in range(3)]
    keys = [f"q{i}_5_0" for i in range(3)]
    tags = [_tag_of(30 + i, 9 - i) for i in range(3)]
    out = []
    for upsample in ("verl", "trajschema"):
        client = _FakeTQ(padding_utils.KVBatchMeta)
        client.kv_batch_put(keys, "train", fields=to_td(samples), tags=copy.deepcopy(tags))
        meta = padding_utils.KVBatchMeta(keys=list(keys), tags=copy.deepcopy(tags), partition_id="train")
        if upsample == "verl":
            real_tq = padding_utils.tq
            padding_utils.tq = client  # verl's function reads the module's tq; no TransferQueue is started
            try:
                padded = padding_utils.upsample_batch_to_divisible_size(meta, multiple, EOS)
            finally:
                padding_utils.tq = real_tq
        else:
            padded = tv.upsample_batch_to_divisible_size(meta, multiple, EOS, client=client, schema=schema)
        out += [padded, client]
    return tuple(out)


@pytest.mark.verl
@pytest.mark.parametrize("name", ts.schema_names())
def test_upsample_writes_what_verls_upsample_writes(name):
    """verl's upsample and ours pad one batch alike: keys, tags (inherited ones too), every field but the uid."""
    verl_meta, verl_tq, our_meta, our_tq = _pad_both_ways(ts.load_schema(name), 8)
    assert len(verl_meta.keys) == len(our_meta.keys) == 8 and our_meta.keys[:3] == verl_meta.keys[:3]
    assert our_meta.tags == verl_meta.tags  # is_padding, the 127 + 1 lengths, and status/global_steps/... kept
    assert (our_meta.partition_id, our_meta.fields, our_meta.extra_info) == (
        verl_meta.partition_id,
        verl_meta.fields,
        verl_meta.extra_info,
    )
    key_format = re.compile(r"^(pad[0-9a-f]{32})_(\d+)_0$")
    for i, (verl_key, our_key) in enumerate(zip(verl_meta.keys[3:], our_meta.keys[3:], strict=True)):
        verl_row, verl_tag = verl_tq.store[verl_key]
        our_row, our_tag = our_tq.store[our_key]
        assert our_tag == verl_tag
        for key, row in ((verl_key, verl_row), (our_key, our_row)):
            uid, index = key_format.match(key).groups()
            assert (row["uid"], int(index), row["session_id"]) == (uid, i, i)
        # Only the uid differs: each side draws its own random one (DIFFERENCES["uid"]); and the
        # routes, where the schema spreads them (DIFFERENCES["routed_experts"]).
        schema = ts.load_schema(name)
        spread = {"routed_experts"} if _spreads(schema, "routed_experts") else set()
        assert set(_differing(verl_row, our_row)) == {"uid"} | spread, (i, _differing(verl_row, our_row))
        if spread:
            experts = 1 + max(int(r[0]["routed_experts"].max()) for r in our_tq.store.values())
            _assert_spread_routes(our_row["routed_experts"], verl_row["routed_experts"], experts)
    assert len({our_tq.store[k][0]["uid"] for k in our_meta.keys[3:]}) == 1  # one GRPO group of padding


@pytest.mark.verl
def test_upsample_of_a_full_batch_adds_nothing_like_verls():
    """A batch already a multiple of the size gets no padding keys and no writes, from verl and from us."""
    verl_meta, verl_tq, our_meta, our_tq = _pad_both_ways(ts.load_schema("text"), 3)
    assert verl_meta.keys == our_meta.keys and len(our_meta.keys) == 3
    assert len(verl_tq.store) == len(our_tq.store) == 3


# -- 6. the metrics mask ---------------------------------------------------------------------------

#: verl 0.9.1's ``PPOTrainer._compute_metrics`` builds its mask with exactly this expression.
_VERL_MASK_SOURCE = 'np.array([not tag.get("is_padding", False) for tag in batch.tags], dtype=bool)'


def _verl_mask(tags: list[Any]) -> np.ndarray:
    return np.array([not tag.get("is_padding", False) for tag in tags], dtype=bool)


_FLAGS = st.sampled_from([True, False, "false", "true", "", 1, 0, None, [], [0], 0.0, torch.tensor(False)])
_TAGS = st.lists(
    st.dictionaries(st.sampled_from(["is_padding", "seq_len", "status"]), _FLAGS, max_size=3),
    max_size=12,
)


@pytest.mark.verl
def test_the_lenient_mask_is_verls_own_expression():
    """The expression _verl_mask mirrors is the one in verl's _compute_metrics source."""
    trainer_base = verl_module(TRAINER_BASE)
    assert _VERL_MASK_SOURCE in inspect.getsource(trainer_base.PPOTrainer._compute_metrics)


@settings(deadline=None)
@given(tags=_TAGS)
def test_non_padding_mask_lenient_reads_tags_as_verl_does(tags):
    """strict=False is verl's truthiness reading, for any is_padding value ("false" and 1 count as padding)."""
    got = tv.non_padding_mask(tags, strict=False)
    assert got.dtype == np.bool_ and got.shape == (len(tags),)
    assert np.array_equal(got, _verl_mask(tags))


@settings(deadline=None)
@given(tags=_TAGS)
def test_non_padding_mask_strict_is_real_mask_and_refuses_non_bools(tags):
    """strict=True is trajschema.real_mask: a non-bool is_padding is a TypeError; bools agree with verl."""
    if all(type(t.get("is_padding", False)) is bool for t in tags):
        got = tv.non_padding_mask(tags)
        assert got.dtype == np.bool_ and np.array_equal(got, ts.real_mask(tags).numpy())
        assert np.array_equal(got, _verl_mask(tags))
    else:
        with pytest.raises(TypeError, match="is_padding"):
            tv.non_padding_mask(tags, strict=True)


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("bad", [["is_padding"], "is_padding", 3, (("is_padding", True),)])
def test_non_padding_mask_refuses_tags_that_are_not_mappings(strict, bad):
    """A tag that is not a dict is a TypeError in both modes (verl itself would fail on it)."""
    with pytest.raises(TypeError):
        tv.non_padding_mask([{"is_padding": False}, bad], strict=strict)


def test_non_padding_mask_none_tag_is_real_when_strict_and_refused_when_lenient():
    """None (no tag dict) is a real sample by trajschema's contract; verl's expression cannot read it."""
    assert (
        tv.non_padding_mask([None, {"is_padding": True}]).tolist()
        == ts.real_mask([None, {"is_padding": True}]).tolist()
    )
    with pytest.raises(AttributeError):
        _verl_mask([None])
    with pytest.raises(TypeError):
        tv.non_padding_mask([None], strict=False)


# -- 7. the signatures install() was written against, and install()/uninstall() ----------------------

_TRAINERS = {
    "verl.trainer.ppo.v1.trainer_sync": "PPOTrainerSync",
    "verl.trainer.ppo.v1.trainer_colocate_async": "PPOTrainerColocateAsync",
    "verl.trainer.ppo.v1.trainer_separate_async": "PPOTrainerSeparateAsync",
}


def _replaced(trainer_base: Any) -> dict[str, tuple[Any, str]]:
    """VERL_SIGNATURES' labels -> (owner, attribute name) in verl's trainer_base."""
    out = {}
    for label in tv.VERL_SIGNATURES:
        owner_name, _, attr = label.rpartition(".")
        out[label] = (getattr(trainer_base, owner_name) if owner_name else trainer_base, attr)
    return out


def _current(trainer_base: Any) -> dict[str, Any]:
    return {label: vars(owner)[attr] for label, (owner, attr) in _replaced(trainer_base).items()}


@pytest.fixture
def trainer_base():
    """verl's trainer_base, left exactly as found: uninstalled, every replaced attribute the original object."""
    module = verl_module(TRAINER_BASE)
    tv.uninstall()
    originals = _current(module)
    yield module
    tv.uninstall()
    assert all(_current(module)[k] is v for k, v in originals.items()), "a test left verl patched"


def _parameter_list(fn: Any) -> list[tuple[str, Any, Any]]:
    return [(p.name, p.default, p.kind) for p in inspect.signature(fn).parameters.values()]


def _function_of(pinned: str) -> Any:
    """A function with the pinned parameters, e.g. ``"(self, dp_size)"``: checks the pin without parameters()."""
    namespace: dict[str, Any] = {}
    exec(f"def pinned{pinned}: pass", namespace)  # the pins are trajschema's own constants
    return namespace["pinned"]


@pytest.mark.verl
def test_verl_signatures_are_verl_0_9_1s(trainer_base):
    """Each pinned signature is the real one of verl's function, names, order and defaults alike."""
    assert verl_module("verl").__version__ in tv.SUPPORTED_VERL_VERSIONS
    for label, (owner, attr) in _replaced(trainer_base).items():
        fn = vars(owner)[attr]
        assert _verl_patch.parameters(fn) == tv.VERL_SIGNATURES[label], label
        assert _parameter_list(fn) == _parameter_list(_function_of(tv.VERL_SIGNATURES[label])), label
    # The module attribute _balance_batch calls is padding_utils' function itself.
    padding_utils = verl_module("verl.trainer.ppo.padding_utils")
    assert trainer_base.upsample_batch_to_divisible_size is padding_utils.upsample_batch_to_divisible_size


@pytest.mark.verl
@pytest.mark.parametrize("module", sorted(_TRAINERS))
def test_no_verl_trainer_overrides_a_replaced_method(trainer_base, module):
    """The sync and both async trainers inherit every replaced method from PPOTrainer, so patching it reaches them."""
    cls = getattr(verl_module(module), _TRAINERS[module])
    assert issubclass(cls, trainer_base.PPOTrainer)
    methods = [attr for owner, attr in _replaced(trainer_base).values() if owner is trainer_base.PPOTrainer]
    assert len(methods) == len(tv.VERL_SIGNATURES) - 1
    for klass in cls.__mro__[: cls.__mro__.index(trainer_base.PPOTrainer)]:
        assert not set(methods) & set(vars(klass)), klass
    originals = {attr: getattr(cls, attr) for attr in methods}
    tv.install()
    try:
        for attr in methods:  # what the subclass resolves is the replacement installed on PPOTrainer
            assert getattr(cls, attr) is vars(trainer_base.PPOTrainer)[attr] is not originals[attr]
    finally:
        tv.uninstall()


@pytest.mark.verl
def test_install_then_uninstall_restores_every_original_by_identity(trainer_base):
    """install() replaces all five attributes; uninstall() puts back the very same objects and says so."""
    originals = _current(trainer_base)
    tv.install()
    patched = _current(trainer_base)
    assert tv.installed()
    assert all(patched[k] is not originals[k] for k in originals)
    assert tv.uninstall() is True and not tv.installed()
    assert all(_current(trainer_base)[k] is v for k, v in originals.items())
    assert trainer_base.upsample_batch_to_divisible_size is originals["upsample_batch_to_divisible_size"]
    assert tv.uninstall() is False


@pytest.mark.verl
def test_installing_twice_then_uninstalling_once_restores_the_originals(trainer_base):
    """A second install() re-installs over the originals, not over the first install's wrappers."""
    originals = _current(trainer_base)
    tv.install()
    tv.install(dims={"prompt": 255, "response": 1})
    assert tv.installed() and all(_current(trainer_base)[k] is not originals[k] for k in originals)
    assert tv.uninstall() is True
    assert all(_current(trainer_base)[k] is v for k, v in originals.items())
    assert tv.uninstall() is False


@pytest.mark.verl
def test_uninstall_without_install_changes_nothing(trainer_base):
    """uninstall() when not installed returns False and touches nothing."""
    originals = _current(trainer_base)
    assert tv.uninstall() is False
    assert all(_current(trainer_base)[k] is v for k, v in originals.items())


@pytest.mark.verl
def test_the_installed_batch_multiple_is_verls_on_a_trainer_stub(trainer_base):
    """While installed, PPOTrainer._get_required_batch_multiple reads self.config and self.global_steps as verl's."""
    omegaconf = _omegaconf()
    configs = [omegaconf.create(_trainer_config(n, 6, 4, e, "gae", 2)) for n in (1, 5) for e in (None, False)]
    want = {(i, dp, g): _verl_multiple(c, dp, g) for i, c in enumerate(configs) for dp in (1, 4) for g in (0, 3)}
    tv.install()
    try:
        for (i, dp, g), expected in want.items():
            stub = SimpleNamespace(config=configs[i], global_steps=g)
            assert trainer_base.PPOTrainer._get_required_batch_multiple(stub, dp) == expected
    finally:
        tv.uninstall()


@pytest.mark.verl
def test_install_refuses_another_verl_version_and_patches_nothing(trainer_base, monkeypatch):
    """verl 0.9.2 is not 0.9.1: install() raises RuntimeError naming the version, and patches nothing."""
    originals = _current(trainer_base)
    monkeypatch.setattr(verl_module("verl"), "__version__", "0.9.2")
    with pytest.raises(RuntimeError, match=r"0\.9\.2"):
        tv.install()
    assert not tv.installed()
    assert all(_current(trainer_base)[k] is v for k, v in originals.items())


@pytest.mark.verl
@pytest.mark.parametrize("label", [k for k in tv.VERL_SIGNATURES if k.startswith("PPOTrainer.")])
def test_install_refuses_a_changed_signature_and_patches_nothing(trainer_base, monkeypatch, label):
    """A replaced method with another signature makes install() raise RuntimeError naming it; nothing is patched."""
    attr = label.split(".")[1]

    def changed(self, batch, metrics, *, extra=None):  # a signature none of the four methods has
        raise AssertionError("never called")

    monkeypatch.setattr(trainer_base.PPOTrainer, attr, changed)
    before = _current(trainer_base)
    with pytest.raises(RuntimeError, match=re.escape(label)):
        tv.install()
    assert not tv.installed()
    assert all(_current(trainer_base)[k] is v for k, v in before.items())
    assert vars(trainer_base.PPOTrainer)[attr] is changed


@pytest.mark.verl
@pytest.mark.parametrize(
    ("dims", "error"),
    [([("prompt", 255)], TypeError), ({"prompt": -1}, ValueError), ({"prompt": 2.0}, ValueError), ({1: 3}, ValueError)],
)
def test_install_refuses_bad_dims_and_patches_nothing(trainer_base, dims, error):
    """dims= that is not a mapping of names to sizes >= 0 is refused before anything is patched."""
    originals = _current(trainer_base)
    with pytest.raises(error, match="dims"):
        tv.install(dims=dims)
    assert not tv.installed() and all(_current(trainer_base)[k] is v for k, v in originals.items())


@pytest.mark.verl
def test_install_refuses_a_changed_module_function_and_patches_nothing(trainer_base, monkeypatch):
    """The module-level upsample_batch_to_divisible_size is checked too."""
    monkeypatch.setattr(trainer_base, "upsample_batch_to_divisible_size", lambda batch, batch_multiple: batch)
    before = _current(trainer_base)
    with pytest.raises(RuntimeError, match="upsample_batch_to_divisible_size"):
        tv.install()
    assert not tv.installed() and all(_current(trainer_base)[k] is v for k, v in before.items())


# -- 8. importable without verl ---------------------------------------------------------------------

_WITHOUT_VERL = """
import json, sys
if {block}:
    sys.modules["verl"] = None  # any "import verl" now raises ImportError
import trajschema.verl as tv
config = json.loads({config!r})
out = {{
    "multiple": tv.required_batch_multiple(config, 3, global_steps=2),
    "dims": tv.padding_dims(tp_size=8, cp_size=16),
    "verl_modules": sorted(m for m in sys.modules if m == "verl" or m.startswith("verl.")),
    "verl_entry": repr(sys.modules.get("verl", "absent")),
}}
if {install}:
    try:
        tv.install()
        out["install"] = "no error"
    except ImportError as exc:
        out["install"] = "ImportError: " + str(exc)
    finally:
        tv.uninstall()
print(json.dumps(out))
"""


def _run_without_verl(*, block: bool, install: bool) -> dict[str, Any]:
    """Run _WITHOUT_VERL in a fresh interpreter and return what it printed."""
    code = _WITHOUT_VERL.format(block=block, install=install, config=json.dumps(_VALID))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_trajschema_verl_imports_and_works_without_verl():
    """With verl blocked, the config helpers work and install() is an ImportError saying verl is needed."""
    out = _run_without_verl(block=True, install=True)
    assert out["multiple"] == tv.required_batch_multiple(_VALID, 3, global_steps=2)
    assert out["dims"] == tv.padding_dims(tp_size=8, cp_size=16)
    assert out["verl_modules"] == ["verl"] and out["verl_entry"] == "None"  # only our blocking entry
    assert out["install"].startswith("ImportError: ") and "needs verl 0.9.1" in out["install"]


# Importing trajschema.verl and using its config helpers leaves verl unimported:
# one of the import claims of tests/test_public_api.py, which one interpreter checks together.
# The run with verl blocked (above) keeps its own interpreter: trajschema.verl must be imported
# fresh under the poison, and that interpreter has imported it already.


# -- agg_loss_real's arguments (issue 14): named, and checked before any tensor is read ------

_LOSS, _MASK, _REAL = torch.ones(3, 4), torch.ones(3, 4), torch.tensor([True, False, True])

#: id -> (keyword arguments changed from a valid call, exception type (exactly), message regex).
BAD_AGG_LOSS_ARGUMENTS = {
    "loss-a-list": ({"loss_mat": [[1.0]]}, TypeError, r"^loss_mat must be a \(rows, tokens\) tensor, found list of 1$"),
    "mask-none": ({"loss_mask": None}, TypeError, r"^loss_mask must be a \(rows, tokens\) tensor, found NoneType$"),
    "mask-on-meta": ({"loss_mask": _MASK.to("meta")}, ValueError, r"^loss_mat and loss_mask must be on one device"),
    "mode-array": (
        {"loss_agg_mode": np.array(["token-mean", "token-sum"])},
        ValueError,
        r"^loss_agg_mode must be one of .*found array\(",
    ),
    "mode-none": ({"loss_agg_mode": None}, ValueError, r"^loss_agg_mode must be one of .*found None$"),
    "rows-a-str": (
        {"real_rows": "yes"},
        ValueError,
        r"^real_rows must be a bool mask of one entry per row \(3\), found",
    ),
    "rows-none": ({"real_rows": None}, ValueError, r"^real_rows must be a bool mask .*found NoneType$"),
    "rows-ragged": ({"real_rows": [[True], []]}, ValueError, r"^real_rows must be a bool mask .*found list of 2$"),
    "rows-objects": ({"real_rows": [object()] * 3}, ValueError, r"^real_rows must be a bool mask .*found list of 3$"),
    "rows-on-meta": ({"real_rows": _REAL.to("meta")}, ValueError, r"^real_rows must be .*on the meta device"),
    "dp-size-nan": ({"dp_size": float("nan")}, ValueError, r"^dp_size must be a positive int, found nan$"),
    "tokens-zero": ({"batch_num_tokens": 0}, ValueError, r"^batch_num_tokens must be a positive number .*found int 0$"),
    "tokens-str": ({"batch_num_tokens": "8"}, ValueError, r"^batch_num_tokens must be a positive number .*str '8'$"),
    "tokens-bool": ({"batch_num_tokens": True}, ValueError, r"^batch_num_tokens must be .*found bool True$"),
    "tokens-two-elements": ({"batch_num_tokens": torch.tensor([4, 4])}, ValueError, r"^batch_num_tokens .*i64\[2\]$"),
    "tokens-one-element-1d": ({"batch_num_tokens": torch.tensor([4])}, ValueError, r"^batch_num_tokens .*i64\[1\]$"),
    "global-size-past-int64": ({"global_batch_size": 2**64}, ValueError, r"^global_batch_size must be a positive"),
    "global-size-negative": ({"global_batch_size": -2}, ValueError, r"^global_batch_size must be a positive number"),
    "global-size-inf": ({"global_batch_size": math.inf}, ValueError, r"^global_batch_size must be .*found float inf$"),
    "scale-zero": ({"loss_scale_factor": 0}, ValueError, r"^loss_scale_factor must be a positive number"),
    "scale-bool-tensor": ({"loss_scale_factor": torch.tensor(True)}, ValueError, r"^loss_scale_factor must be"),
}


@pytest.mark.parametrize(
    ("changes", "exc", "match"), list(BAD_AGG_LOSS_ARGUMENTS.values()), ids=list(BAD_AGG_LOSS_ARGUMENTS)
)
def test_agg_loss_real_names_every_bad_argument(changes, exc, match):
    """Before, torch's, numpy's or a division's own error escaped, or an inf or NaN loss came back."""
    call = {
        "loss_mat": _LOSS,
        "loss_mask": _MASK,
        "loss_agg_mode": "seq-mean-token-sum-norm",
        "real_rows": _REAL,
        **changes,
    }
    with pytest.raises(Exception) as info:
        tv.agg_loss_real(call.pop("loss_mat"), call.pop("loss_mask"), call.pop("loss_agg_mode"), **call)
    assert type(info.value) is exc
    assert re.search(match, str(info.value)), str(info.value)


@settings(deadline=None)
@given(
    arg=st.sampled_from(["batch_num_tokens", "global_batch_size", "loss_scale_factor"]),
    value=st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=3),
        st.sampled_from([torch.tensor(3.0), torch.tensor([3]), torch.zeros(2), torch.tensor(True), 1 + 2j]),
    ),
)
def test_a_global_size_is_a_positive_number_or_a_0d_tensor(arg, value):
    tensor_ok = isinstance(value, torch.Tensor) and value.dim() == 0 and value.dtype != torch.bool
    number_ok = (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
        and (isinstance(value, float) or value < 2**63)  # torch takes an int scalar up to int64
    )
    mode = "token-mean" if arg == "batch_num_tokens" else "seq-mean-token-sum-norm"
    if value is None or tensor_ok or number_ok:
        assert tv.agg_loss_real(_LOSS, _MASK, mode, real_rows=_REAL, **{arg: value}).shape == ()
        return
    with pytest.raises(ValueError, match=f"^{arg} must be a positive number"):
        tv.agg_loss_real(_LOSS, _MASK, mode, real_rows=_REAL, **{arg: value})
