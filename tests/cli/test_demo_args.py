"""``trajschema demo`` without Ray: its arguments, its step on an in-memory TransferQueue, its metrics and report.

Bad arguments must raise before anything starts; the step (write, pad, read back,
validate, score) runs here against :class:`~trajschema.testing.MemoryTransferQueue`, and
its metrics are checked against a computation of their own over the sample dicts. The
real run (a subprocess with its own Ray) is ``tests/integration/test_demo.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import logging
import re
import warnings

import pytest
import torch

import trajschema as ts
from tests.demo_support import expected_metrics
from trajschema.cli import demo as _demo
from trajschema.cli.app import main
from trajschema.cli.demo import DemoReport, render_report, report_json, run_demo
from trajschema.cli.rollout import EOS_TOKEN_ID, MAX_RESPONSE_LEN, Rollout, build_rollout, rollout_metrics
from trajschema.core.errors import Violation
from trajschema.testing import MemoryTransferQueue


@pytest.fixture
def nothing_starts(monkeypatch):
    """Fail the test if the demo gets as far as importing or starting Ray + TransferQueue."""

    def refuse(*args, **kwargs):
        raise AssertionError("the demo started Ray/TransferQueue before checking its arguments")

    monkeypatch.setattr(_demo, "import_tq", refuse)
    monkeypatch.setattr(_demo, "start_local_transfer_queue", refuse)


BAD_ARGS = [
    pytest.param({"prompts": 0}, "--prompts must be a positive int, found 0", id="prompts-zero"),
    pytest.param({"prompts": -3}, "--prompts must be a positive int, found -3", id="prompts-negative"),
    pytest.param({"prompts": 2.0}, "--prompts must be a positive int, found 2.0", id="prompts-float"),
    pytest.param({"prompts": "45"}, "--prompts must be a positive int, found '45'", id="prompts-str"),
    pytest.param({"prompts": True}, "--prompts must be a positive int, found True", id="prompts-bool"),
    pytest.param({"rollout_n": 0}, "--rollout-n must be a positive int, found 0", id="rollout-n-zero"),
    pytest.param({"dp_size": 0}, "--dp-size must be a positive int, found 0", id="dp-size-zero"),
    pytest.param({"dp_size": None}, "--dp-size must be a positive int, found None", id="dp-size-none"),
    pytest.param(
        {"mini_batch_size": -1}, "--mini-batch-size must be a positive int, found -1", id="mini-batch-negative"
    ),
    pytest.param({"seed": -1}, "--seed must be an int in 0..4294967295, found -1", id="seed-negative"),
    pytest.param({"seed": 0.5}, "--seed must be an int in 0..4294967295, found 0.5", id="seed-float"),
    pytest.param(
        {"seed": 2**64}, "--seed must be an int in 0..4294967295, found 18446744073709551616", id="seed-past-torch"
    ),
    pytest.param(
        {"prompts": 10**9},
        "--prompts 1000000000 x up to 15 trajectories, padded to a multiple of 120 (--dp-size, "
        "--actor-mini-batch-size x --rollout-n), may reach 15000000119 samples; the demo writes at most 100,000",
        id="prompts-past-memory",
    ),
    pytest.param({"schema": 3}, "--schema must be a schema name or file, got 3", id="schema-int"),
    pytest.param({"schema": ""}, "--schema must be a schema name or file, got ''", id="schema-empty"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_ARGS)
def test_bad_arguments_raise_one_line_naming_the_option(nothing_starts, kwargs, message):
    with pytest.raises(ValueError) as info:
        run_demo(**kwargs, progress=False)
    assert str(info.value) == message


def test_an_unknown_schema_raises_schema_not_found_naming_the_option(nothing_starts):
    with pytest.raises(ts.SchemaNotFoundError) as info:
        run_demo(schema="vlm_mrop", progress=False)
    assert str(info.value).startswith("--schema: no schema 'vlm_mrop'; did you mean 'vlm_mrope'?")
    assert "\n" not in str(info.value)


def test_a_schema_the_demo_cannot_fill_is_refused_before_anything_starts(nothing_starts, tmp_path):
    path = tmp_path / "needs_more.yaml"
    path.write_text(
        "name: needs_more\nextends: [text]\nfields:\n  advantages: {shape: [response], dtype: float32, pad: 0.0}\n"
    )
    with pytest.raises(ValueError) as info:
        run_demo(schema=str(path), prompts=2, rollout_n=2, progress=False)
    message = str(info.value)
    assert message.startswith("--schema needs_more: the demo's samples")
    assert "advantages: required field is missing" in message and "\n" not in message


def test_arguments_are_checked_before_the_schema_is_loaded(nothing_starts):
    with pytest.raises(ValueError, match=r"^--prompts "):
        run_demo(schema="no_such_schema", prompts=0, progress=False)


# Importing the demo imports neither rich nor Ray nor TransferQueue:
# one of the import claims of tests/test_public_api.py, which one interpreter checks together.


# -- the rollout -----------------------------------------------------------------------------


def test_the_rollout_is_deterministic_and_uneven(schema):
    a = build_rollout(schema, prompts=20, rollout_n=4, seed=7)
    b = build_rollout(schema, prompts=20, rollout_n=4, seed=7)
    assert a.keys == b.keys and len(set(a.keys)) == len(a.keys)
    assert all(torch.equal(x["input_ids"], y["input_ids"]) for x, y in zip(a.samples, b.samples))
    fewest, most = a.trajectories_per_prompt
    assert 1 <= fewest < most <= 2 * 4 - 1
    lengths = [len(s["responses"]) for s in a.samples]
    assert max(lengths) == MAX_RESPONSE_LEN and min(lengths) >= 1  # some responses are clipped
    assert schema.batch_violations(a.samples) == []
    assert build_rollout(schema, prompts=20, rollout_n=4, seed=8).keys != a.keys


# -- the step, on an in-memory TransferQueue --------------------------------------------------


def test_the_step_pads_validates_and_scores_real_samples_only(schema):
    rollout = build_rollout(schema, prompts=6, rollout_n=3, seed=1)
    multiple = ts.required_multiple(2, actor_mini_batch_size=5, rollout_n=3)
    client = MemoryTransferQueue()
    seen: list[str] = []
    step = _demo._run_step(schema, client, rollout, multiple, seen.append)
    real = len(rollout.keys)
    assert step.padding == ts.padding_needed(real, multiple) > 0
    assert step.total == real + step.padding and step.total % multiple == 0
    assert (step.invalid, step.problems) == (0, ())
    assert min(step.write_s, step.pad_s, step.read_s, step.validate_s) > 0
    pad = schema.padding(step.padding, eos_token_id=EOS_TOKEN_ID, like=rollout.samples[-1])
    assert step.filtered == pytest.approx(expected_metrics(rollout.samples), abs=1e-6)
    assert step.unfiltered == pytest.approx(expected_metrics([*rollout.samples, *pad.samples]), abs=1e-6)
    assert step.filtered["prompt_length/mean"] != pytest.approx(step.unfiltered["prompt_length/mean"])
    assert seen[0] == "warming up" and seen[-1] == "computing metrics" and len(seen) == _demo._STEPS - 2
    assert client.kv_list() in ({}, {"warmup": {}, "train_step_1": {}})  # both partitions were cleared


@pytest.mark.parametrize(
    ("prompts", "rollout_n", "dp_size", "mini_batch_size"),
    [
        pytest.param(1, 1, 2, 15, id="one-sample-29-padding"),
        pytest.param(3, 1, 1, 1, id="no-padding-needed"),
        pytest.param(2, 3, 7, 1, id="odd-dp"),
    ],
)
def test_the_step_at_edge_sizes(prompts, rollout_n, dp_size, mini_batch_size):
    schema = ts.load_schema("vlm_mrope_moe")
    rollout = build_rollout(schema, prompts, rollout_n, seed=0)
    multiple = ts.required_multiple(dp_size, actor_mini_batch_size=mini_batch_size, rollout_n=rollout_n)
    step = _demo._run_step(schema, MemoryTransferQueue(), rollout, multiple, lambda _: None)
    assert step.padding == ts.padding_needed(len(rollout.keys), multiple)
    assert step.total % multiple == 0 and step.invalid == 0
    assert step.filtered == pytest.approx(expected_metrics(rollout.samples), abs=1e-9)
    if step.padding == 0:
        assert step.unfiltered == step.filtered


class _CastingClient(MemoryTransferQueue):
    """A TransferQueue that hands back one column cast to float64 (what TransferQueue does to mixed dtypes)."""

    def kv_batch_get(self, *args, **kwargs):
        batch = super().kv_batch_get(*args, **kwargs)
        batch["rm_scores"] = batch["rm_scores"].to(torch.float64)
        return batch


def test_the_step_counts_invalid_samples_read_back():
    schema = ts.load_schema("text")
    rollout = build_rollout(schema, prompts=3, rollout_n=2, seed=0)
    step = _demo._run_step(schema, _CastingClient(), rollout, 4, lambda _: None)
    assert step.invalid == step.total > 0
    assert 0 < len(step.problems) <= _demo._MAX_PROBLEMS
    assert all("rm_scores" in p and "float64" in p for p in step.problems)


def test_a_violation_of_the_whole_batch_makes_every_sample_invalid():
    one = Violation(3, "loss_mask", "value", "0 or 1", "2", "bad")
    whole = Violation(None, "tags", "batch", "one per sample", "2", "bad")
    assert _demo._invalid_count([one, one], 10) == 1
    assert _demo._invalid_count([one, whole], 10) == 10
    assert _demo._invalid_count([], 10) == 0


def test_the_metrics_filter_keeps_an_all_zero_loss_mask_real_sample():
    schema = ts.load_schema("text")
    rollout = build_rollout(schema, prompts=2, rollout_n=2, seed=0)
    rollout.samples[0]["response_mask"] = torch.zeros_like(rollout.samples[0]["response_mask"])
    tags = [{"is_padding": False}] * len(rollout.samples)
    assert ts.exclude_padding(rollout_metrics)(rollout.samples, tags) == rollout_metrics(rollout.samples, tags)
    assert rollout_metrics(rollout.samples, tags) == pytest.approx(expected_metrics(rollout.samples))


# -- the report ---------------------------------------------------------------------------------


def _report(**changes) -> DemoReport:
    base = DemoReport(
        schema="text", prompts=3, rollout_n=2, dp_size=2, mini_batch_size=2, seed=7, trajectories_per_prompt=(1, 3),
        real_samples=7, padding_samples=1, required_multiple=4, total_samples=8, invalid_samples=0, problems=(),
        start_s=10.0, write_s=0.02, pad_s=0.01, read_s=0.03, validate_s=0.004, stop_s=1.5,
        metrics_unfiltered={"score/mean": 0.25}, metrics_filtered={"score/mean": 2 / 7},
        processes_left=0, elapsed_s=12.0,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize(
    ("changes", "failure"),
    [
        pytest.param({"invalid_samples": 2}, "2 invalid samples", id="invalid"),
        pytest.param({"problems": ("sample 1, x: bad",)}, "0 invalid samples", id="problems"),
        pytest.param({"total_samples": 12}, "read back 12 samples, wrote 8", id="count"),
        pytest.param({"padding_samples": 2, "total_samples": 9}, "9 samples is not a multiple of 4", id="multiple"),
        pytest.param({"processes_left": 3}, "3 processes still running", id="processes"),
    ],
)
def test_a_report_is_ok_only_when_everything_held(changes, failure):
    assert _report().ok
    bad = _report(**changes)
    assert not bad.ok
    assert failure in _render(bad)
    assert "FAILED: " in _render(bad) and "ok: " not in _render(bad)


def test_a_report_without_the_process_check_can_still_be_ok():
    assert _report(processes_left=None).ok
    assert "leftovers not checked" in _render(_report(processes_left=None))


def _render(report: DemoReport, width: int = 80) -> str:
    from rich.console import Console

    out = io.StringIO()
    Console(file=out, width=width, color_system=None).print(render_report(report))
    return out.getvalue()


def test_the_report_fits_80_columns_and_says_what_was_measured():
    text = _render(_report())
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert "required multiple  4 = lcm(dp_size 2, mini_batch_size 2 x rollout_n 2)" in text
    assert "padding added      1 -> 8 samples" in text
    assert "write              20.0 ms to put 7 samples" in text
    assert "validate           4.0 ms to check 8 samples read back" in text
    assert "score/mean" in text and "0.2857" in text and "0.2500" in text
    assert text.rstrip().endswith("ok: every sample valid, padding kept out of the metrics")


# -- --json ---------------------------------------------------------------------------------------


def test_report_json_holds_the_report_and_its_help_names_every_key():
    from trajschema.cli.app import DEMO_JSON_HELP

    report = _report(problems=("sample 1, x: bad",), processes_left=None)
    shown = report_json(report)
    assert json.loads(json.dumps(shown)) == shown  # plain JSON, nothing lost on the way
    assert shown["ok"] is False and shown["problems"] == ["sample 1, x: bad"] and shown["processes_left"] is None
    sizes = ("prompts", "rollout_n", "dp_size", "seed", "real_samples", "padding_samples", "total_samples")
    assert {k: shown[k] for k in sizes} == {k: getattr(report, k) for k in sizes}
    assert shown["actor_mini_batch_size"] == report.mini_batch_size
    assert shown["trajectories_per_prompt"] == dict(zip(("fewest", "most"), report.trajectories_per_prompt))
    assert shown["metrics"] == {"score/mean": {"real": 2 / 7, "all": 0.25}}
    assert shown["seconds"]["write"] == report.write_s and shown["seconds"]["total"] == report.elapsed_s
    help_words = set(re.findall(r"[a-z_]+", DEMO_JSON_HELP))
    keys = {*shown, *shown["seconds"], *shown["trajectories_per_prompt"], *shown["metrics"]["score/mean"]}
    assert keys | {"version", "command"} <= help_words, keys - help_words


def test_demo_json_prints_one_object_and_nothing_else(capsys, monkeypatch):
    calls = []

    def stand_in(**kwargs):
        calls.append(kwargs)
        return _report()

    monkeypatch.setattr(_demo, "run_demo", stand_in)
    code = main(["demo", "--json", "--prompts", "3", "--seed", "7"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    assert json.loads(out) == {"version": 1, "command": "demo", **report_json(_report())}
    [kwargs] = calls
    assert (kwargs["show"], kwargs["progress"], kwargs["prompts"], kwargs["seed"]) == (False, False, 3, 7)


def test_demo_json_exits_1_when_a_step_failed(capsys, monkeypatch):
    monkeypatch.setattr(_demo, "run_demo", lambda **kwargs: _report(invalid_samples=2))
    assert main(["demo", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["ok"] is False


# -- quiet and progress ---------------------------------------------------------------------------


def test_quiet_hushes_only_transfer_queue_loggers_and_restores_them():
    tq_logger = logging.getLogger("transfer_queue.client")
    tq_logger.setLevel(logging.WARNING)
    other = logging.getLogger("someone.else")
    other.setLevel(logging.INFO)
    torch_note = logging.getLogger("torch.fx._symbolic_trace")  # the library keeps its note quiet itself
    torch_level = torch_note.level
    filters_before = list(warnings.filters)
    with _demo._quiet() as hush:
        assert tq_logger.level == logging.ERROR and other.level == logging.INFO
        assert torch_note.level == torch_level
        late = logging.getLogger("transfer_queue.created_later")
        late.setLevel(logging.DEBUG)
        hush()
        assert late.level == logging.ERROR
        assert warnings.filters == filters_before
    assert tq_logger.level == logging.WARNING and late.level == logging.DEBUG and other.level == logging.INFO


def test_quiet_restores_the_loggers_when_the_demo_fails():
    logger = logging.getLogger("transfer_queue.controller")
    logger.setLevel(logging.INFO)
    with contextlib.suppress(RuntimeError), _demo._quiet():
        raise RuntimeError("boom")
    assert logger.level == logging.INFO


def test_progress_prints_nothing_on_a_file():
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, width=80)
    with _demo._progress(console, True) as advance:
        for what in ("a", "b", "c"):
            advance(what)
    assert out.getvalue() == ""


def test_rollout_dataclass_is_frozen():
    rollout = Rollout(keys=["k"], samples=[{"uid": "u"}], prompts=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rollout.prompts = 2  # type: ignore[misc]
