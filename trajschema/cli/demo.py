"""``trajschema demo``: one PPO/GRPO step's data path on an embedded local Ray + TransferQueue.

`run_demo` generates a multi-trajectory rollout (`trajschema.cli.rollout`),
starts a local Ray + TransferQueue ([`start_local_transfer_queue`][trajschema.start_local_transfer_queue]),
writes the rollout through a [`TransferQueueWriter`][trajschema.TransferQueueWriter], pads it to the
multiple the step needs, reads it back, validates every sample (the schema and the
is_padding contract), computes metrics with and without the padding filter, stops
everything, and prints a short report. Rich, Ray and TransferQueue are imported only
when it runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from trajschema.cli.rollout import EOS_TOKEN_ID, Rollout, build_rollout, rollout_metrics
from trajschema.contract import exclude_padding, padding_contract_violations
from trajschema.core import SchemaNotFoundError, Violation, check_int, positive_int
from trajschema.load import load_schema
from trajschema.padding import required_multiple
from trajschema.schema import Schema
from trajschema.tq import TransferQueueWriter, import_tq, start_local_transfer_queue

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

__all__ = ["DEMO_MAX_SAMPLES", "MAX_SEED", "DemoReport", "check_arguments", "report_json", "run_demo"]

_PARTITION = "train_step_1"
_WARMUP_PARTITION = "warmup"
_WARMUP_SAMPLES = 16
# Starting Ray + TransferQueue takes 10-20 s on a busy 2-core machine; allow for worse.
_START_TIMEOUT_S = 120.0
# How long Ray's processes may take to exit after ray.shutdown() returns.
_EXIT_WAIT_S = 10.0
_MAX_PROBLEMS = 5
# Progress steps: start, warm-up, write, pad, read back, validate, metrics, stop.
_STEPS = 8

# What the demo's own run logs although nothing is wrong: TransferQueue's per-call loggers.
# Only these, only while the demo runs. (torch's notes on nested tensors are kept off stderr
# where trajschema builds them, `trajschema.check.without_fx_note`.)
_HUSHED_LOGGER_PREFIXES = ("transfer_queue",)


@dataclasses.dataclass(frozen=True)
class DemoReport:
    """What `run_demo` measured. Times are in seconds; ``write_s`` etc. are warm (after a warm-up step).

    Attributes:
        schema: the schema's name.
        prompts: GRPO groups in the rollout.
        seed: the seed the rollout was generated from.
        real_samples: trajectories the rollout wrote.
        padding_samples: padding samples ``pad_to_multiple`` added.
        required_multiple: what the batch size must be a multiple of.
        total_samples: samples read back from TransferQueue.
        invalid_samples: samples with at least one violation (0 on success).
        problems: the first few violations, as text.
        start_s / stop_s: starting and stopping Ray + TransferQueue.
        write_s: ``writer.put`` of the real samples (validation and transfer).
        pad_s: ``writer.pad_to_multiple``.
        read_s: ``kv_batch_get`` of the padded batch.
        validate_s: checking the batch read back (schema and is_padding contract).
        metrics_unfiltered / metrics_filtered: metric name -> value, without and with
            [`exclude_padding`][trajschema.exclude_padding].
        processes_left: processes the demo started that outlived it (``None``: not checked,
            because psutil is missing or Ray was already running in this process).
        elapsed_s: the whole run.
    """

    schema: str
    prompts: int
    rollout_n: int
    dp_size: int
    mini_batch_size: int
    seed: int
    trajectories_per_prompt: tuple[int, int]
    real_samples: int
    padding_samples: int
    required_multiple: int
    total_samples: int
    invalid_samples: int
    problems: tuple[str, ...]
    start_s: float
    write_s: float
    pad_s: float
    read_s: float
    validate_s: float
    stop_s: float
    metrics_unfiltered: dict[str, float]
    metrics_filtered: dict[str, float]
    processes_left: int | None
    elapsed_s: float

    @property
    def ok(self) -> bool:
        """Every sample valid, the batch a multiple of ``required_multiple``, and nothing left running."""
        return (
            self.invalid_samples == 0
            and not self.problems
            and self.total_samples == self.real_samples + self.padding_samples
            and self.total_samples % self.required_multiple == 0
            and not self.processes_left
        )


@dataclasses.dataclass(frozen=True)
class _Step:
    """What one written, padded, read-back and checked batch gave."""

    padding: int
    total: int
    invalid: int
    problems: tuple[str, ...]
    write_s: float
    pad_s: float
    read_s: float
    validate_s: float
    unfiltered: dict[str, float]
    filtered: dict[str, float]


def run_demo(
    *,
    schema: str = "vlm_mrope_moe",
    prompts: int = 45,
    rollout_n: int = 8,
    dp_size: int = 2,
    mini_batch_size: int = 15,
    seed: int = 0,
    console: Console | None = None,
    progress: bool = True,
    show: bool = True,
) -> DemoReport:
    """Run one step's data path on a local Ray + TransferQueue, print a report, and return it.

    Examples:
        >>> report = run_demo(prompts=12, rollout_n=4)  # doctest: +SKIP
        >>> report.ok, report.total_samples % report.required_multiple  # doctest: +SKIP
        (True, 0)

    Args:
        schema: the schema name (or file) of the samples.
        prompts: GRPO groups in the rollout; each gets 1 to ``2 * rollout_n - 1`` trajectories.
        rollout_n: the rollout's ``n`` (trajectories per prompt it asks for).
        dp_size: data-parallel ranks.
        mini_batch_size: the actor's ``ppo_mini_batch_size``, in prompts.
        seed: for the rollout's lengths, rewards and token ids.
        console: where the report (and progress) goes; a rich Console on stdout by default.
        progress: show a transient progress bar (only on a terminal).
        show: print the report on ``console`` (``False``: only return it, as ``demo --json`` does).

    Raises:
        ValueError: an argument is not a positive integer (``seed``: not from 0 to
            ``MAX_SEED``), the rollout plus padding could exceed ``DEMO_MAX_SAMPLES``, or the
            demo cannot generate samples that fit ``schema``; before anything starts.
        SchemaNotFoundError: no schema ``schema``; before anything starts.
        ImportError: Ray or TransferQueue is not installed (the ``tq`` extra:
            ``pip install -e '.[tq]'`` in a trajschema checkout).
        TransferQueueStartError: Ray + TransferQueue did not start.
    """
    started = time.perf_counter()
    loaded = check_arguments(
        schema=schema, prompts=prompts, rollout_n=rollout_n, dp_size=dp_size, mini_batch_size=mini_batch_size, seed=seed
    )
    multiple = required_multiple(dp_size, actor_mini_batch_size=mini_batch_size, rollout_n=rollout_n)
    rollout = build_rollout(loaded, prompts, rollout_n, seed)
    _check_rollout(loaded, rollout)
    ray, _ = import_tq()  # an ImportError naming the extra, before anything starts
    if console is None and (show or progress):
        from rich.console import Console

        console = Console()
    with _quiet() as hush, _progress(console if progress else None, progress) as advance:
        # A Ray that was already running is left running, its idle workers with it: only
        # processes of a Ray the demo starts must be gone afterwards.
        before = None if ray.is_initialized() else _descendants()
        advance("starting Ray + TransferQueue")
        t0 = time.perf_counter()
        with start_local_transfer_queue(timeout_s=_START_TIMEOUT_S) as tq:
            hush()  # loggers of TransferQueue modules imported while it started
            start_s = time.perf_counter() - t0
            step = _run_step(loaded, tq, rollout, multiple, advance)
            advance("stopping Ray + TransferQueue")
            t0 = time.perf_counter()
        stop_s = time.perf_counter() - t0
        left = _survivors(before)
    report = _report(
        loaded, rollout, (rollout_n, dp_size, mini_batch_size, seed), multiple, step, start_s, stop_s, left
    )
    report = dataclasses.replace(report, elapsed_s=time.perf_counter() - started)
    if show and console is not None:
        console.print(render_report(report))
    return report


# -- arguments, checked before anything starts -----------------------------------------


#: The most samples (rollout plus padding) the demo writes: more would not fit in memory.
DEMO_MAX_SAMPLES = 100_000
#: The largest seed: the demo derives a torch seed per sample from it, which must stay below 2**64.
MAX_SEED = 2**32 - 1


def check_arguments(
    *, schema: Any, prompts: Any, rollout_n: Any, dp_size: Any, mini_batch_size: Any, seed: Any
) -> Schema:
    """Check the demo's arguments, before anything is built or started, and return the loaded schema."""
    _check_counts(prompts=prompts, rollout_n=rollout_n, dp_size=dp_size, mini_batch_size=mini_batch_size)
    _check_seed(seed)
    _check_size(prompts, rollout_n, dp_size, mini_batch_size)
    return _load(schema)


def _check_size(prompts: int, rollout_n: int, dp_size: int, mini_batch_size: int) -> None:
    """Refuse sizes whose rollout or padding would not fit in memory."""
    most = prompts * (2 * rollout_n - 1)  # each GRPO group holds 1 to 2 x rollout_n - 1 trajectories
    multiple = required_multiple(dp_size, actor_mini_batch_size=mini_batch_size, rollout_n=rollout_n)
    if most + multiple - 1 > DEMO_MAX_SAMPLES:
        raise ValueError(
            f"--prompts {prompts} x up to {2 * rollout_n - 1} trajectories, padded to a multiple of "
            f"{multiple} (--dp-size, --actor-mini-batch-size x --rollout-n), may reach {most + multiple - 1} samples; "
            f"the demo writes at most {DEMO_MAX_SAMPLES:,}"
        )


def _check_counts(**counts: Any) -> None:
    for name, value in counts.items():
        positive_int(f"--{name.replace('_', '-')}", value)


def _check_seed(seed: Any) -> None:
    check_int("--seed", seed, maximum=MAX_SEED)


def _load(schema: Any) -> Schema:
    if not isinstance(schema, (str, os.PathLike)) or not str(schema):
        raise ValueError(f"--schema must be a schema name or file, got {schema!r}")
    try:
        return load_schema(schema)
    except SchemaNotFoundError as exc:
        raise SchemaNotFoundError(f"--schema: {exc}") from None


def _check_rollout(schema: Schema, rollout: Rollout) -> None:
    """The generated samples fit ``schema``; a schema with fields the demo does not fill cannot be demonstrated."""
    found = schema.batch_violations(rollout.samples)
    if found:
        raise ValueError(
            f"--schema {schema.name}: the demo's samples (verl's standard fields, as trajschema.testing.verl_sample "
            f"writes them) do not fit this schema: {found[0]}" + (f" (and {len(found) - 1} more)" if found[1:] else "")
        )


# -- the step: warm up, then write, pad, read back, validate, score ------------------------


def _run_step(schema: Schema, client: Any, rollout: Rollout, multiple: int, advance: Callable[[str], None]) -> _Step:
    """Write ``rollout`` to ``client`` (the ``transfer_queue`` module, or a stand-in), pad, read back and check it.

    A first, smaller round on a partition of its own warms every code path up (and is
    cleared), so the times reported are those of a trainer's later steps.
    """
    advance("warming up")
    n = min(_WARMUP_SAMPLES, len(rollout.keys))
    warm = Rollout(keys=rollout.keys[:n], samples=rollout.samples[:n], prompts=rollout.prompts)
    _round(schema, client, warm, multiple, _WARMUP_PARTITION, lambda _: None)
    return _round(schema, client, rollout, multiple, _PARTITION, advance)


def _round(
    schema: Schema, client: Any, rollout: Rollout, multiple: int, partition: str, advance: Callable[[str], None]
) -> _Step:
    writer = TransferQueueWriter(schema, partition_id=partition, eos_token_id=EOS_TOKEN_ID, client=client)
    advance(f"writing {len(rollout.keys)} samples")
    t0 = time.perf_counter()
    meta = writer.put(rollout.keys, rollout.samples)
    write_s, t0 = time.perf_counter() - t0, time.perf_counter()
    advance("padding")
    padded = writer.pad_to_multiple(meta, multiple)
    pad_s, t0 = time.perf_counter() - t0, time.perf_counter()
    advance("reading back")
    keys, tags = list(padded.keys), list(padded.tags)
    batch = writer._call("kv_batch_get", keys, partition)  # bounded by the writer's timeout
    read_s, t0 = time.perf_counter() - t0, time.perf_counter()
    advance(f"validating {len(keys)} samples")
    found = [*schema.batch_violations(batch, tags=tags), *padding_contract_violations(batch, tags, schema)]
    validate_s = time.perf_counter() - t0
    advance("computing metrics")
    unfiltered = rollout_metrics(batch, tags)
    filtered = exclude_padding(rollout_metrics)(batch, tags)
    writer._call("kv_clear", keys, partition)
    total = int(batch.batch_size[0])
    return _Step(
        padding=len(keys) - len(rollout.keys),
        total=total,
        invalid=_invalid_count(found, total),
        problems=tuple(str(v) for v in found[:_MAX_PROBLEMS]),
        write_s=write_s,
        pad_s=pad_s,
        read_s=read_s,
        validate_s=validate_s,
        unfiltered=unfiltered,
        filtered=filtered,
    )


def _invalid_count(found: Sequence[Violation], total: int) -> int:
    """Samples with a violation; a violation of the batch as a whole makes every sample invalid."""
    if any(v.sample is None for v in found):
        return total
    return len({v.sample for v in found})


def _report(
    schema: Schema,
    rollout: Rollout,
    sizes: tuple[int, int, int, int],
    multiple: int,
    step: _Step,
    start_s: float,
    stop_s: float,
    left: int | None,
) -> DemoReport:
    rollout_n, dp_size, mini_batch_size, seed = sizes
    return DemoReport(
        schema=schema.name,
        prompts=rollout.prompts,
        rollout_n=rollout_n,
        dp_size=dp_size,
        mini_batch_size=mini_batch_size,
        seed=seed,
        trajectories_per_prompt=rollout.trajectories_per_prompt,
        real_samples=len(rollout.keys),
        padding_samples=step.padding,
        required_multiple=multiple,
        total_samples=step.total,
        invalid_samples=step.invalid,
        problems=step.problems,
        start_s=start_s,
        write_s=step.write_s,
        pad_s=step.pad_s,
        read_s=step.read_s,
        validate_s=step.validate_s,
        stop_s=stop_s,
        metrics_unfiltered=step.unfiltered,
        metrics_filtered=step.filtered,
        processes_left=left,
        elapsed_s=0.0,
    )


# -- the report ----------------------------------------------------------------------------


def render_report(report: DemoReport) -> RenderableType:
    """The report as rich renderables: a summary, the metrics table, and the verdict."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="bold")
    summary.add_column()
    for label, value in _summary_lines(report):
        summary.add_row(label, value)
    metrics = Table(box=None, padding=(0, 2), pad_edge=False, header_style="bold")
    metrics.add_column("metric")
    metrics.add_column("real samples", justify="right")
    metrics.add_column("all (with padding)", justify="right")
    for name, real in report.metrics_filtered.items():
        metrics.add_row(name, f"{real:.4f}", f"{report.metrics_unfiltered.get(name, float('nan')):.4f}")
    verdict = (
        Text("ok: every sample valid, padding kept out of the metrics", style="green")
        if report.ok
        else Text("FAILED: " + "; ".join(_failures(report)), style="bold red")
    )
    title = Text(f"trajschema demo: {report.schema} on a local Ray + TransferQueue", style="bold")
    return Group(title, Text(""), summary, Text(""), metrics, Text(""), verdict)


def report_json(report: DemoReport) -> dict[str, Any]:
    """The report as the JSON-ready dict ``demo --json`` prints after its version and command.

    ``DEMO_JSON_HELP`` in `trajschema.cli.app` (the command's help) says what each key holds.
    """
    fewest, most = report.trajectories_per_prompt
    return {
        "ok": report.ok,
        "schema": report.schema,
        "prompts": report.prompts,
        "rollout_n": report.rollout_n,
        "dp_size": report.dp_size,
        "actor_mini_batch_size": report.mini_batch_size,
        "seed": report.seed,
        "trajectories_per_prompt": {"fewest": fewest, "most": most},
        "real_samples": report.real_samples,
        "required_multiple": report.required_multiple,
        "padding_samples": report.padding_samples,
        "total_samples": report.total_samples,
        "invalid_samples": report.invalid_samples,
        "problems": list(report.problems),
        "metrics": {
            name: {"real": real, "all": report.metrics_unfiltered.get(name)}
            for name, real in report.metrics_filtered.items()
        },
        "seconds": {
            "start": report.start_s,
            "write": report.write_s,
            "pad": report.pad_s,
            "read": report.read_s,
            "validate": report.validate_s,
            "stop": report.stop_s,
            "total": report.elapsed_s,
        },
        "processes_left": report.processes_left,
    }


def _summary_lines(r: DemoReport) -> list[tuple[str, str]]:
    fewest, most = r.trajectories_per_prompt
    valid = r.total_samples - r.invalid_samples
    checked = "schema and is_padding contract"
    lines = [
        ("rollout", f"{r.real_samples} samples from {r.prompts} prompts ({fewest} to {most} trajectories each)"),
        (
            "required multiple",
            f"{r.required_multiple} = lcm(dp_size {r.dp_size}, mini_batch_size {r.mini_batch_size} x "
            f"rollout_n {r.rollout_n})",
        ),
        ("padding added", f"{r.padding_samples} -> {r.total_samples} samples"),
        ("valid", f"{valid} of {r.total_samples} samples ({checked})"),
        ("write", f"{_ms(r.write_s)} to put {r.real_samples} samples (validation included)"),
        ("validate", f"{_ms(r.validate_s)} to check {r.total_samples} samples read back"),
        ("pad / read back", f"{_ms(r.pad_s)} / {_ms(r.read_s)}"),
        ("Ray + TQ", f"started in {r.start_s:.1f} s, stopped in {r.stop_s:.1f} s, {_left(r.processes_left)}"),
        ("total", f"{r.elapsed_s:.1f} s"),
    ]
    lines += [("problem", p) for p in r.problems]
    return lines


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def _left(count: int | None) -> str:
    if count is None:
        return "leftovers not checked"
    return "no process left" if count == 0 else f"{count} processes still running"


def _failures(r: DemoReport) -> list[str]:
    out = []
    if r.invalid_samples or r.problems:
        out.append(f"{r.invalid_samples} invalid samples")
    if r.total_samples != r.real_samples + r.padding_samples:
        out.append(f"read back {r.total_samples} samples, wrote {r.real_samples + r.padding_samples}")
    if r.total_samples % r.required_multiple:
        out.append(f"{r.total_samples} samples is not a multiple of {r.required_multiple}")
    if r.processes_left:
        out.append(f"{r.processes_left} processes still running")
    return out


# -- quiet, progress, and what is left running ----------------------------------------------


@contextlib.contextmanager
def _quiet() -> Iterator[Callable[[], None]]:
    """Silence the loggers listed above while the demo runs; yields ``hush`` to cover loggers created since.

    Logger levels are restored on exit.
    """
    saved: dict[str, int] = {}

    def hush() -> None:
        names = [n for n in list(logging.Logger.manager.loggerDict) if n.startswith(_HUSHED_LOGGER_PREFIXES)]
        for name in names:
            if name not in saved:
                logger = logging.getLogger(name)
                saved[name] = logger.level
                logger.setLevel(logging.ERROR)

    hush()
    try:
        yield hush
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)


@contextlib.contextmanager
def _progress(console: Console | None, enabled: bool) -> Iterator[Callable[[str], None]]:
    """A transient progress bar on ``console`` (only if ``enabled`` and a terminal); yields ``advance(what)``."""
    if not (enabled and console is not None and console.is_terminal):
        # Not even a disabled rich Progress: some rich versions print a blank line on stop.
        yield lambda what: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description:<32}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as bar:
        task = bar.add_task("", total=_STEPS)
        started = [False]

        def advance(what: str) -> None:
            bar.update(task, description=what, advance=1 if started[0] else 0)
            started[0] = True

        yield advance
        bar.update(task, completed=_STEPS)


def _descendants() -> set[int] | None:
    """Pids of this process's descendants, or ``None`` without psutil (a dependency of TransferQueue)."""
    try:
        import psutil  # type: ignore[import-untyped]  # no stubs installed; only Process.children is used
    except ImportError:
        return None
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _survivors(before: set[int] | None) -> int | None:
    """How many descendants started since ``before`` are still running, after waiting up to ``_EXIT_WAIT_S``."""
    if before is None:
        return None
    import psutil

    deadline = time.monotonic() + _EXIT_WAIT_S
    while True:
        alive = []
        for p in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
        if not alive or time.monotonic() >= deadline:
            return len(alive)
        time.sleep(0.2)
