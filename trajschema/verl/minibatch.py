"""The actor's mini-batches in verl 0.9.1, and how much its seq-mean losses are scaled in each.

After ``PPOTrainer._balance_batch`` the batch's order fixes which rows train together:

- the dispatch gives data-parallel rank ``r`` the ``r``-th of ``dp`` contiguous chunks
  (``KVBatchMeta.chunk``); ``_balance_batch`` made each chunk one balanced partition,
  its rows in batch order (``get_seqlen_balanced_partitions`` sorts them), so the padding
  rows, appended after the real ones, come last on every rank;
- each rank's worker splits its chunk into mini-batches of ``ppo_mini_batch_size *
  rollout.n / dp`` rows (``train_mini_batch`` through ``tensordict_utils.make_iterator``:
  in order, or shuffled with the seed ``data_loader_seed + rank`` when ``actor.shuffle``),
  once per PPO epoch;
- global mini-batch ``j`` is the ``j``-th mini-batch of every rank: one optimizer step.

verl's seq-mean ``loss_agg_mode``s divide a global mini-batch's summed sequence losses by
``ppo_mini_batch_size * rollout.n``, padding rows included, so its loss is scaled by the
real rows it holds over that size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from trajschema.core import check_int, positive_int
from trajschema.verl.config import VerlConfigError, _found, _int, lookup
from trajschema.verl.loss import SEQ_MEAN_MODES

__all__ = ["actor_mini_batches", "actor_seq_mean_scales", "mini_batches", "seq_mean_loss_scales"]

#: verl 0.9.1's ``ActorConfig`` defaults for what ``_update_actor`` passes the workers.
_ACTOR_DEFAULTS = {"ppo_epochs": 1, "shuffle": False, "data_loader_seed": 42}
_LOWEST_SEED = -(2**63)  # torch.Generator.manual_seed takes -2**63 .. 2**64-1


def mini_batches(
    rows: int,
    *,
    dp_size: int,
    mini_batch_size: int,
    epochs: int = 1,
    shuffle: bool = False,
    seed: int = 42,
    make_iterator: Callable[..., Any] | None = None,
) -> list[list[int]]:
    """The rows (positions in the balanced batch) of each global mini-batch, in training order.

    ``mini_batch_size`` is the global one (``ppo_mini_batch_size * rollout.n``). With
    ``shuffle=True`` the order within each rank is verl's own: pass
    ``verl.utils.tensordict_utils.make_iterator`` as ``make_iterator``, which runs the
    DataLoader verl's workers run, seeded ``seed + rank``.

    Examples:
        >>> mini_batches(8, dp_size=2, mini_batch_size=4)
        [[0, 1, 4, 5], [2, 3, 6, 7]]

    Raises:
        ValueError: a size is not a positive int, or the batch does not split as verl's
            workers require (``rows`` and ``mini_batch_size`` multiples of ``dp_size``,
            each rank's rows a multiple of its mini-batch; verl asserts the same), or
            ``shuffle=True`` without ``make_iterator``.
    """
    n = check_int("rows", rows)
    dp = positive_int("dp_size", dp_size)
    size = positive_int("mini_batch_size", mini_batch_size)
    runs = positive_int("epochs", epochs)
    if size % dp or n % dp or (n // dp) % (size // dp):
        raise ValueError(
            f"verl's workers cannot split {n} rows over {dp} data-parallel ranks into mini-batches of {size} "
            f"rows: the rows and the mini-batch size must be multiples of dp_size, and each rank's "
            f"{n / dp:g} rows a multiple of its {size / dp:g}"
        )
    per_rank, local = n // dp, size // dp
    if shuffle:
        if make_iterator is None:
            raise ValueError("shuffle=True needs verl's make_iterator (verl.utils.tensordict_utils.make_iterator)")
        orders = [_shuffled(make_iterator, per_rank, local, runs, seed + r) for r in range(dp)]
    else:
        once = [list(range(start, start + local)) for start in range(0, per_rank, local)]
        orders = [once * runs] * dp
    steps = len(orders[0])
    return [[r * per_rank + i for r in range(dp) for i in orders[r][j]] for j in range(steps)]


def _shuffled(make_iterator: Callable[..., Any], rows: int, local: int, epochs: int, seed: int) -> list[list[int]]:
    """One rank's mini-batches as verl's worker draws them: positions in its chunk."""
    import torch
    from tensordict import TensorDict

    positions = TensorDict({"row": torch.arange(rows)}, batch_size=[rows])
    it = make_iterator(positions, mini_batch_size=local, epochs=epochs, seed=seed, dataloader_kwargs={"shuffle": True})
    return [[int(i) for i in batch["row"].tolist()] for batch in it]


def seq_mean_loss_scales(real: Sequence[bool], batches: Sequence[Sequence[int]], mini_batch_size: int) -> list[float]:
    """Per mini-batch, the real rows it holds over ``mini_batch_size``: what verl's seq-mean losses are scaled by.

    Examples:
        >>> seq_mean_loss_scales([True, True, True, False], [[0, 1], [2, 3]], 2)
        [1.0, 0.5]
    """
    size = positive_int("mini_batch_size", mini_batch_size)
    return [sum(1 for i in batch if real[i]) / size for batch in batches]


def _actor_split(config: Any) -> dict[str, Any]:
    """What ``_update_actor`` passes the workers for splitting: the global mini-batch size, epochs, shuffle, seed."""
    actor = "actor_rollout_ref.actor"
    size = _int(config, f"{actor}.ppo_mini_batch_size", minimum=1)
    size *= _int(config, "actor_rollout_ref.rollout.n", minimum=1)
    epochs = _int(config, f"{actor}.ppo_epochs", minimum=1, default=_ACTOR_DEFAULTS["ppo_epochs"])
    shuffle = lookup(config, f"{actor}.shuffle", _ACTOR_DEFAULTS["shuffle"])
    if not isinstance(shuffle, bool):
        raise VerlConfigError(f"config.{actor}.shuffle must be true or false, found {_found(shuffle)}")
    seed = _int(config, f"{actor}.data_loader_seed", minimum=_LOWEST_SEED, default=_ACTOR_DEFAULTS["data_loader_seed"])
    return {"mini_batch_size": size, "epochs": epochs, "shuffle": shuffle, "seed": seed}


def actor_mini_batches(
    config: Any, rows: int, dp_size: int, make_iterator: Callable[..., Any] | None = None
) -> list[list[int]]:
    """`mini_batches` of the actor, with the sizes, epochs and shuffling verl's ``_update_actor`` reads from ``config``.

    Raises:
        VerlConfigError: a key verl reads is missing or of the wrong type.
        ValueError: the batch does not split as verl's workers require (see `mini_batches`).
    """
    return mini_batches(rows, dp_size=dp_size, make_iterator=make_iterator, **_actor_split(config))


def actor_seq_mean_scales(
    config: Any, real: Sequence[bool], dp_size: int, make_iterator: Callable[..., Any] | None = None
) -> list[float]:
    """The actor's loss scale per mini-batch, in training order: real rows / mini-batch size in a seq-mean mode, else 1.

    ``real`` is one flag per row of the balanced batch. A batch verl's workers cannot
    split gives ``[nan]``: verl refuses it there, in its own words.

    Raises:
        VerlConfigError: a key verl reads is missing or of the wrong type.
    """
    split = _actor_split(config)
    seq_mean = lookup(config, "actor_rollout_ref.actor.loss_agg_mode", "token-mean") in SEQ_MEAN_MODES
    exact = not seq_mean or all(real)
    if exact:
        split["shuffle"] = False  # every scale is 1: only the count matters, not verl's shuffled order
    try:
        batches = mini_batches(len(real), dp_size=dp_size, make_iterator=make_iterator, **split)
    except ValueError:
        return [math.nan]
    if exact:
        return [1.0] * len(batches)
    return seq_mean_loss_scales(real, batches, split["mini_batch_size"])
