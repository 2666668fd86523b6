"""Reading a verl 0.9.1 trainer config: the batch multiple it needs and the padding length its layout needs.

The config is whatever verl's trainer holds (an OmegaConf ``DictConfig``), a plain nested
dict of the same keys, or attribute objects (verl's config dataclasses). Nothing here
imports verl or OmegaConf.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

from trajschema.core import MAX_SIZE, REPR, FreeDim, check_bool, check_int, is_int, shown_value

__all__ = [
    "CP_LAYOUTS",
    "VerlConfigError",
    "layout_multiple",
    "padding_dims",
    "padding_dims_for",
    "required_batch_multiple",
    "sequence_alignment",
]

_MISSING = object()  # lookup's "no default"
_ABSENT = object()  # a default that no config value can be

#: The roles whose workers see padding rows, and where verl keeps their configs.
_ROLES = ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic")


class VerlConfigError(ValueError):
    """A verl config lacks a key trajschema reads, or holds a value of the wrong type there.

    The message names the dotted key at fault (``config.critic`` when ``critic: 5`` stands
    where verl reads ``config.critic.ppo_mini_batch_size``), what verl needs there and
    what was found.
    """

    __module__ = "trajschema.verl"


def _found(value: Any) -> str:
    """``value`` for a message, with its type: ``an int 5``, ``a str 'x'``, ``a bool True``, ``None``."""
    if value is None:
        return "None"
    name = type(value).__name__
    try:
        text = REPR.repr(value)
    except Exception:  # a repr that raises (an OmegaConf node, a hostile object): its type alone
        return f"a {name}"
    return f"{'an' if name[0] in 'aeiouAEIOU' else 'a'} {name} {text}"


def _is_section(node: Any) -> bool:
    """Whether ``node`` can hold config keys: a mapping (a ``DictConfig``, verl's config
    dataclasses) or an attribute object, not a scalar or a sequence."""
    if isinstance(node, Mapping):
        return True
    if node is None or isinstance(node, (str, bytes, bytearray, numbers.Number)):
        return False
    return not hasattr(type(node), "__iter__")  # lists, tuples, ListConfigs, tensors, arrays hold no keys


def _where(parts: list[str]) -> str:
    return ".".join(["config", *parts])


def lookup(config: Any, path: str, default: Any = _MISSING) -> Any:
    """The value at the dotted ``path`` of ``config``.

    A missing key gives ``default`` (or an error when there is none). A section that is
    not a mapping is an error whatever the default: ``critic: 5`` is not a config without
    a critic, and reading past it would report a key missing where the fix is the type.
    """
    parts = path.split(".")
    node = config
    for depth, part in enumerate(parts):
        if not _is_section(node):
            raise VerlConfigError(
                f"{_where(parts[:depth])} must be a mapping (verl reads config.{path}), found {_found(node)}"
            )
        try:
            node = node.get(part, _MISSING) if isinstance(node, Mapping) else getattr(node, part, _MISSING)
        except Exception as exc:  # an OmegaConf interpolation that does not resolve, a raising property
            where = _where(parts[: depth + 1])
            raise VerlConfigError(f"{where} cannot be read: {type(exc).__name__}: {exc}") from exc
        if node is _MISSING:
            if default is not _MISSING:
                return default
            raise VerlConfigError(f"{_where(parts[: depth + 1])} is missing; verl's trainer reads config.{path}")
    return node


def _int(config: Any, path: str, *, minimum: int, default: Any = _MISSING) -> int:
    value = lookup(config, path, default)
    if not is_int(value) or value < minimum:
        raise VerlConfigError(f"config.{path} must be an int >= {minimum}, found {_found(value)}")
    return int(value)


def _positive(name: str, value: object, minimum: int = 1) -> int:
    return check_int(name, value, minimum=minimum)


def uses_critic(config: Any) -> bool:
    """verl's ``need_critic``: ``critic.enable`` when set, else whether the estimator is GAE."""
    enable = lookup(config, "critic.enable", None)
    if enable is not None:
        if not isinstance(enable, bool):
            raise VerlConfigError(f"config.critic.enable must be true, false or null, found {_found(enable)}")
        return enable
    estimator = lookup(config, "algorithm.adv_estimator")
    if not isinstance(estimator, str):
        raise VerlConfigError(f"config.algorithm.adv_estimator must be a str, found {_found(estimator)}")
    return estimator == "gae"  # verl's AdvantageEstimator is a str enum: its members compare equal too


def required_batch_multiple(config: Any, dp_size: int, *, global_steps: int) -> int:
    """The size a batch must be a multiple of, read from verl's config as verl's trainer reads it.

    ``PPOTrainer._get_required_batch_multiple`` of verl 0.9.1, for a config object it
    cannot read itself too (a plain nested dict): the lcm of ``dp_size``, the critic's
    ``ppo_mini_batch_size * rollout.n`` when verl uses a critic (``critic.enable`` when
    set, else ``algorithm.adv_estimator == "gae"``) and the actor's
    ``ppo_mini_batch_size * rollout.n`` once ``trainer.critic_warmup <= global_steps``.

    Examples:
        >>> from trajschema.verl import required_batch_multiple
        >>> config = {"critic": {"enable": False}, "trainer": {"critic_warmup": 0},
        ...           "actor_rollout_ref": {"rollout": {"n": 8}, "actor": {"ppo_mini_batch_size": 15}}}
        >>> required_batch_multiple(config, 2, global_steps=1)
        120

    Raises:
        VerlConfigError: a key verl reads is missing or holds a value of the wrong type
            (the message names the key).
        ValueError: ``dp_size`` is not a positive int or ``global_steps`` not an int >= 0.
    """
    multiple = _positive("dp_size", dp_size)
    steps = _positive("global_steps", global_steps, minimum=0)
    if uses_critic(config):
        n = _int(config, "actor_rollout_ref.rollout.n", minimum=1)
        multiple = math.lcm(multiple, _int(config, "critic.ppo_mini_batch_size", minimum=1) * n)
    if _int(config, "trainer.critic_warmup", minimum=0) <= steps:
        n = _int(config, "actor_rollout_ref.rollout.n", minimum=1)
        multiple = math.lcm(multiple, _int(config, "actor_rollout_ref.actor.ppo_mini_batch_size", minimum=1) * n)
    return multiple


def padding_dims_for(multiple: int, min_len: int) -> dict[str, int]:
    """Prompt/response sizes of a padding row: total the smallest multiple of ``multiple`` >= ``min_len``.

    The total is the first size a free dim ``{min: 2, multiple_of: multiple}`` allows from
    ``min_len`` on: at least 2, a row holds one prompt and one response token; ``multiple``
    is at most ``2**63 - 1`` (``layout_multiple`` and `padding_dims` check it).

    Raises:
        ValueError: that total is longer than a torch tensor can be (``2**63 - 1``).
    """
    total = FreeDim("row", min=2, multiple_of=multiple).first_size(min_len)
    assert total is not None  # a dim without max allows sizes from its first on
    if total > MAX_SIZE:
        raise ValueError(
            f"a padding row of at least {min_len} tokens whose length is a multiple of {multiple} has {total} "
            f"tokens, more than a torch tensor holds (2**63 - 1)"
        )
    return {"prompt": total - 1, "response": 1}


#: verl's context-parallel layouts (``cp_layout`` of ``preprocess_thd_engine``).
CP_LAYOUTS = ("zigzag", "contiguous")


def sequence_alignment(
    *, tp_size: int = 1, cp_size: int = 1, cp_layout: str = "zigzag", use_fp8_padding: bool = False
) -> int:
    """What verl 0.9.1 pads every packed sequence to a multiple of on its Megatron THD path.

    As ``preprocess_packed_seqs`` and ``preprocess_thd_engine`` (``verl/models/mcore/util.py``)
    compute it: ``tp_size * cp_size``, twice that when ``cp_size > 1`` and the layout is
    ``zigzag`` (each context-parallel rank takes a chunk from both ends of every sequence;
    ``preprocess_packed_seqs`` always does), and with ``use_fp8_padding`` (verl sets it for
    ``fp8`` ``e4m3`` or ``hybrid``) the lcm of that and 16. FP8 also pads the batch's last
    sequence until the total is a multiple of 128 times the alignment before the lcm: a
    property of the whole packed batch, not of one row, so it is not in this number.

    Examples:
        >>> from trajschema.verl import sequence_alignment
        >>> sequence_alignment(tp_size=4), sequence_alignment(tp_size=4, cp_size=2)
        (4, 16)
        >>> sequence_alignment(tp_size=4, cp_size=2, cp_layout="contiguous", use_fp8_padding=True)
        16

    Raises:
        ValueError: ``tp_size`` or ``cp_size`` is not a positive int, or ``cp_layout`` is not
            one of `CP_LAYOUTS`.
        TypeError: ``use_fp8_padding`` is not a bool.
    """
    tp = _positive("tp_size", tp_size)
    cp = _positive("cp_size", cp_size)
    if not isinstance(cp_layout, str) or cp_layout not in CP_LAYOUTS:
        raise ValueError(f"cp_layout must be 'zigzag' or 'contiguous', found {shown_value(cp_layout)}")
    check_bool("use_fp8_padding", use_fp8_padding)
    align = tp * cp * (2 if cp > 1 and cp_layout == "zigzag" else 1)
    return math.lcm(16, align) if use_fp8_padding else align


def padding_dims(
    *,
    tp_size: int = 1,
    cp_size: int = 1,
    cp_layout: str = "zigzag",
    use_fp8_padding: bool = False,
    min_len: int = 128,
) -> dict[str, int]:
    """The ``prompt``/``response`` sizes of the smallest padding row verl's packing leaves as it is.

    verl pads every packed sequence to a multiple of `sequence_alignment` (tensor and
    context parallelism, the zigzag layout, FP8). A padding row has 1 response token and as
    many prompt tokens as make its length the smallest such multiple that is at least
    ``min_len`` (and at least 2), so verl adds no alignment tokens to it. Pass the result
    as ``dims=`` wherever padding is made.

    Examples:
        >>> from trajschema.verl import padding_dims
        >>> padding_dims()
        {'prompt': 127, 'response': 1}
        >>> padding_dims(tp_size=8, cp_size=16)
        {'prompt': 255, 'response': 1}
        >>> padding_dims(tp_size=3, min_len=1), padding_dims(tp_size=3, use_fp8_padding=True, min_len=1)
        ({'prompt': 2, 'response': 1}, {'prompt': 47, 'response': 1})

    Raises:
        ValueError / TypeError: an argument `sequence_alignment` refuses, ``min_len`` not a
            positive int, or an alignment that makes every row longer than a torch tensor
            can be (``2**63 - 1`` tokens).
    """
    align = sequence_alignment(tp_size=tp_size, cp_size=cp_size, cp_layout=cp_layout, use_fp8_padding=use_fp8_padding)
    minimum = _positive("min_len", min_len)
    if align > MAX_SIZE:  # no row length is a multiple of it
        raise ValueError(
            f"a padding row whose length is a multiple of {align} (tp_size={tp_size}, cp_size={cp_size}) has at "
            "least that many tokens, more than a torch tensor holds (2**63 - 1)"
        )
    return padding_dims_for(align, minimum)


#: Megatron's ``TransformerConfig.fp8``: off (``null``, ``false``) or one of the two formats Megatron runs
#: (any other value that is set makes Megatron raise "E4M3 and HYBRID are the only supported FP8 formats").
#: verl 0.9.1 pads for FP8 exactly when it is one of these (``fp8 in ["e4m3", "hybrid"]``).
_FP8_FORMATS = ("e4m3", "hybrid")


def _uses_fp8_padding(config: Any, role: str) -> bool:
    """Whether verl pads a Megatron role's sequences for FP8: ``<role>.megatron.override_transformer_config.fp8``.

    verl's Megatron engine builds the model's ``TransformerConfig`` with the role's
    ``override_transformer_config`` on top (``McoreEngineConfig``), and its forward sets
    ``use_fp8_padding`` from that config's ``fp8``. Missing reads as Megatron's default, off.
    """
    path = f"{role}.megatron.override_transformer_config.fp8"
    fp8 = lookup(config, path, None)
    if fp8 is None or fp8 is False:
        return False
    if isinstance(fp8, str) and fp8 in _FP8_FORMATS:
        return True
    raise VerlConfigError(
        f"config.{path} must be null, false, 'e4m3' or 'hybrid' (Megatron's FP8 formats), found {_found(fp8)}"
    )


def _role_multiple(config: Any, role: str) -> int | None:
    """What one role's rows must be a multiple of (``None`` when the config has no such role).

    ``2 * tp * cp`` for Megatron (the zigzag split: ``cp_layout`` is not a config key in verl
    0.9.1, its engine takes ``contiguous`` only for a model whose attention needs it, and
    zigzag's multiple covers both), with FP8 padding also the lcm of 16 and that
    alignment; ``2 * ulysses`` for FSDP and the other engines.
    """
    section = lookup(config, role, _ABSENT)
    if section is _ABSENT:
        return None
    if not _is_section(section):  # verl reads the role's engine config under it
        raise VerlConfigError(f"config.{role} must be a mapping (a worker's config), found {_found(section)}")
    strategy = lookup(config, f"{role}.strategy", "fsdp")
    if not isinstance(strategy, str):
        raise VerlConfigError(f"config.{role}.strategy must be a str (fsdp, megatron, ...), found {_found(strategy)}")
    if strategy == "megatron":
        tp = _int(config, f"{role}.megatron.tensor_model_parallel_size", minimum=1, default=1)
        cp = _int(config, f"{role}.megatron.context_parallel_size", minimum=1, default=1)
        if _uses_fp8_padding(config, role):
            return math.lcm(2 * tp * cp, sequence_alignment(tp_size=tp, cp_size=cp, use_fp8_padding=True))
        return 2 * tp * cp
    # FSDP and the other engines: Ulysses sequence parallelism splits the sequence. verl's
    # FSDP critic keeps its engine at critic.fsdp (its role-level size is deprecated and never
    # used); the actor and ref keep theirs at fsdp_config, which a role-level size > 1 overrides.
    if role == "critic":
        return 2 * _int(config, f"{role}.fsdp.ulysses_sequence_parallel_size", minimum=1, default=1)
    top = _int(config, f"{role}.ulysses_sequence_parallel_size", minimum=1, default=1)
    engine = _int(config, f"{role}.fsdp_config.ulysses_sequence_parallel_size", minimum=1, default=1)
    return 2 * (top if top > 1 else engine)


def layout_multiple(config: Any) -> int:
    """What every row's length must be a multiple of for the trainer's workers, read from verl's config.

    The lcm over the roles that see padding rows (actor, ref, and the critic when verl uses
    one) of a multiple per role that holds what verl packs the role's sequences to, and is
    even: ``2 * tp * cp`` for ``strategy: megatron`` (``megatron.tensor_model_parallel_size``,
    ``megatron.context_parallel_size``; either context-parallel layout) and, when
    ``megatron.override_transformer_config.fp8`` is ``e4m3`` or ``hybrid``, its lcm with
    `sequence_alignment` under FP8 padding (``lcm(16, 2 * tp * cp)``); ``2 * ulysses`` for FSDP.

    Examples:
        >>> from trajschema.verl.config import layout_multiple
        >>> megatron = {"strategy": "megatron", "megatron": {"tensor_model_parallel_size": 3}}
        >>> layout_multiple({"actor_rollout_ref": {"actor": megatron}, "critic": {"enable": False}})
        6
        >>> megatron["megatron"]["override_transformer_config"] = {"fp8": "e4m3"}
        >>> layout_multiple({"actor_rollout_ref": {"actor": megatron}, "critic": {"enable": False}})
        48

    Raises:
        VerlConfigError: a key read is missing where verl needs it, or holds a value verl
            (or Megatron) would not run with (the message names the key), or the roles'
            multiples need rows longer than a torch tensor can be.
    """
    multiple = 2
    for role in _ROLES:
        if role == "critic" and not uses_critic(config):
            continue
        role_multiple = _role_multiple(config, role)
        if role_multiple is not None:
            multiple = math.lcm(multiple, role_multiple)
            if multiple > MAX_SIZE:  # no row can be that long: say so here, not deep inside padding
                raise VerlConfigError(
                    f"the parallel layouts up to config.{role} (its rows a multiple of {role_multiple} tokens) make "
                    f"every row a multiple of {multiple} tokens, more than a torch tensor holds (2**63 - 1)"
                )
    return multiple
