"""Batch-size planning: the multiple a PPO/GRPO batch must reach, and the padding it needs."""

from __future__ import annotations

import math

from trajschema.core import check_int, positive_int

__all__ = ["padding_needed", "required_multiple"]


def required_multiple(
    dp_size: int,
    *,
    actor_mini_batch_size: int | None = None,
    critic_mini_batch_size: int | None = None,
    rollout_n: int = 1,
) -> int:
    """The size a training batch must be a multiple of, following verl's rule.

    The lcm of ``dp_size``, ``critic_mini_batch_size * rollout_n`` (if given) and
    ``actor_mini_batch_size * rollout_n`` (if given): every data-parallel rank gets the
    same number of samples and every PPO mini-batch is full.

    Examples:
        >>> ts.required_multiple(2, actor_mini_batch_size=15, rollout_n=8)
        120

    Raises:
        ValueError: an argument is not a positive int (the message names it).
    """
    multiple = positive_int("dp_size", dp_size)
    n = positive_int("rollout_n", rollout_n)
    if critic_mini_batch_size is not None:
        multiple = math.lcm(multiple, positive_int("critic_mini_batch_size", critic_mini_batch_size) * n)
    if actor_mini_batch_size is not None:
        multiple = math.lcm(multiple, positive_int("actor_mini_batch_size", actor_mini_batch_size) * n)
    return multiple


def padding_needed(batch_size: int, multiple: int) -> int:
    """How many padding samples grow ``batch_size`` to the next multiple of ``multiple``.

    Examples:
        >>> ts.padding_needed(353, 120)
        7

    Raises:
        ValueError: ``batch_size`` is negative or ``multiple`` is not positive.
    """
    batch_size = check_int("batch_size", batch_size)
    multiple = positive_int("multiple", multiple)
    return -int(batch_size) % multiple
