"""`trajschema.openrlhf.layout`: OpenRLHF 0.11.2's ``Experience`` read as a schema's samples,
and its layout's rules, on experiences OpenRLHF's own sample generator and batching make.

The oracle for where prompt and response sit is the vLLM-like response dict a sample is made
from (its ``observation_tokens`` and ``action_ranges``), not the code under test.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trajschema as ts
import trajschema.openrlhf as to
from tests.openrlhf_support import EOS, TrainStep, args_for, rollout
from trajschema.cli.app import main


def _response(i: int, prompt: int, turns: list[tuple[int, int]], logprobs: bool) -> dict[str, Any]:
    """A vLLM-like response as OpenRLHF's agent executor returns it: ``prompt`` tokens, then
    per turn ``(action, observation)`` tokens; rollout log-probs 0 on every non-action token."""
    tokens = [3 + (i * 7 + j) % 50 for j in range(prompt)]
    ranges, scores = [], [0.0] * prompt
    for action, observation in turns:
        ranges.append((len(tokens), len(tokens) + action))
        tokens += [60 + (i + j) % 30 for j in range(action)]
        scores += [-0.5 - 0.01 * j for j in range(action)]
        tokens += [90 + j % 5 for j in range(observation)]
        scores += [0.0] * observation
    tokens[-1] = EOS
    return {
        "observation_tokens": tokens,
        "action_ranges": ranges,
        "reward": float(i % 2),
        "scores": float(i % 2),
        "rollout_log_probs": scores if logprobs else None,
        "prompt": f"prompt {i}",
        "label": "",
    }


def _made(openrlhf, responses: list[dict[str, Any]]) -> list[Any]:
    own = openrlhf.samples_generator.SamplesGenerator._process_response_into_experience
    return [own(None, r) for r in responses]


def _expected(response: dict[str, Any]) -> dict[str, list]:
    """Where the schema's fields sit, read from the response dict alone."""
    tokens, ranges = response["observation_tokens"], response["action_ranges"]
    start = min((a for a, b in ranges if a < b), default=len(tokens))
    acted = [any(a <= j < b for a, b in ranges) for j in range(len(tokens))]
    out = {
        "input_ids": tokens,
        "prompts": tokens[:start],
        "responses": tokens[start:],
        "response_mask": [int(x) for x in acted[start:]],
    }
    if response["rollout_log_probs"] is not None:  # OpenRLHF holds them as float32
        out["rollout_log_probs"] = torch.tensor(response["rollout_log_probs"][start:]).tolist()
    return out


def test_openrlhfs_own_rollout_reads_clean_one_by_one_batched_and_padded(openrlhf) -> None:
    samples = rollout(openrlhf, [(3, 2), (2, 4), (4, 1)], [1.0, 0.0, 0.5])
    assert to.experience_violations(samples) == []
    padded = to.pad_rollout_samples(samples, 8)
    batch = openrlhf.experience.Experience.concat_experiences(padded, 0)  # split_rollout_samples' merge
    assert to.experience_violations(batch) == [] and to.experience_violations(padded) == []
    items = openrlhf.experience.split_experience_batch(batch)
    collated = openrlhf.experience.make_experience_batch(items)  # the replay buffer's collate
    assert to.experience_violations(collated, depth="shapes") == []
    rows = to.experience_samples(batch)
    assert [len(r["prompts"]) for r in rows[:3]] == [3, 2, 4] and [len(r["responses"]) for r in rows[:3]] == [2, 4, 1]
    assert all(r["responses"].numel() == 0 and r["input_ids"].eq(EOS).all() for r in rows[3:])  # padding: no action


def test_a_multi_turn_rollout_with_log_probs_reads_where_its_response_dict_says(openrlhf) -> None:
    responses = [_response(0, 4, [(3, 2), (2, 0)], True), _response(1, 2, [(1, 3), (4, 1)], True)]
    made = _made(openrlhf, responses)
    batch = openrlhf.experience.Experience.concat_experiences(made, 0)
    assert to.experience_violations(batch) == []
    for row, response in zip(to.experience_samples(batch), responses, strict=True):
        want = _expected(response)
        assert {k: row[k].tolist() for k in want} == want
        assert row["loss_mask"].tolist() == want["response_mask"]  # holes at the tool's tokens


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.integers(1, 6),
            st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3)), min_size=0, max_size=3),
            st.booleans(),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_every_row_reads_as_its_response_dict_says(openrlhf, shapes) -> None:
    responses = [_response(i, p, turns, lp) for i, (p, turns, lp) in enumerate(shapes)]
    responses = [r for r in responses if len(r["observation_tokens"]) >= 2]
    if not responses:
        return
    if any(r["rollout_log_probs"] is None for r in responses):  # OpenRLHF keeps a field only when the first has it
        for r in responses:
            r["rollout_log_probs"] = None
    batch = openrlhf.experience.Experience.concat_experiences(_made(openrlhf, responses), 0)
    assert to.experience_violations(batch, depth="shapes") == []
    for row, response in zip(to.experience_samples(batch), responses, strict=True):
        want = _expected(response)
        assert {k: row[k].tolist() for k in want} == want


@pytest.fixture
def batch(openrlhf):
    made = _made(openrlhf, [_response(i, 3, [(2, 0)], True) for i in range(3)])
    return openrlhf.experience.Experience.concat_experiences(made, 0)


def _codes(found: list[ts.Violation]) -> list[tuple[int | None, str, str]]:
    return [(v.sample, v.field, v.code) for v in found]


@pytest.mark.parametrize(
    ("break_it", "expected"),
    [
        (lambda b: b.attention_mask[1].__setitem__(0, 0), [(1, "attention_mask", "mask")]),
        (lambda b: b.attention_mask[2].__setitem__(slice(None), 0), [(2, "attention_mask", "mask")]),
        (lambda b: b.action_mask[0].__setitem__(-1, 2), [(0, "action_mask", "mask")]),
        (lambda b: b.rollout_log_probs[1].__setitem__(0, -0.3), [(1, "rollout_log_probs", "boundary")]),
        (lambda b: b.total_length.__setitem__(2, 9.0), [(2, "total_length", "length")]),
        (lambda b: b.response_length.__setitem__(0, 7), [(0, "response_length", "length")]),
        (lambda b: b.rollout_log_probs[2].__setitem__(3, float("nan")), [(2, "rollout_log_probs", "value")]),
    ],
    ids=["mask-gap", "no-real-token", "mask-value", "boundary", "total-length", "response-length", "nan"],
)
def test_each_defect_is_named_at_its_row_and_experience_field(batch, break_it, expected) -> None:
    break_it(batch)
    assert _codes(to.experience_violations(batch)) == expected


def test_an_action_past_the_real_tokens_is_a_mask_violation(openrlhf) -> None:
    made = _made(openrlhf, [_response(0, 3, [(2, 0)], False), _response(1, 3, [(4, 0)], False)])
    batch = openrlhf.experience.Experience.concat_experiences(made, 0)
    batch.action_mask[0, -1] = 1  # row 0 has 5 real tokens of 7: position 5 is padding
    found = to.experience_violations(batch)
    assert _codes(found) == [(0, "action_mask", "mask")]
    assert "a loss on padding" in found[0].message


def test_misshapen_fields_are_shape_violations_and_rows_are_not_read(batch) -> None:
    batch.action_mask = batch.action_mask[:, :-1]
    batch.rewards = batch.rewards[:2]
    found = to.experience_violations(batch)
    assert _codes(found) == [(None, "action_mask", "shape"), (None, "rewards", "shape")]
    assert "(3, 4, ...)" in found[0].message and "float32[2]" in found[1].message
    with pytest.raises(ts.SchemaError, match="action_mask"):
        to.experience_samples(batch)


def test_float_masks_and_ids_are_named_by_the_experience_field(batch) -> None:
    batch.sequences = batch.sequences.float()
    found = to.experience_violations(batch, depth="shapes")
    assert {(v.field, v.code) for v in found} == {("sequences", "dtype")}
    assert all("schema field" in v.message for v in found)
    batch.action_mask = batch.action_mask.float()
    assert (None, "action_mask", "mask") in _codes(to.experience_violations(batch))


def test_a_bool_action_mask_reads_as_its_annotation_says(batch) -> None:
    batch.action_mask = batch.action_mask.bool()  # Experience annotates a BoolTensor; 0.11.2 makes int64
    assert to.experience_violations(batch) == []


def test_rows_count_across_the_list_and_padding_rows_must_train_on_nothing(openrlhf, batch) -> None:
    padded = to.pad_rollout_samples([batch], 4)
    assert to.experience_violations(padded) == []
    padded[1].action_mask[0, -1] = 1  # the padding experience, row 3 of the list
    padded[1].response_length[0] = 1
    assert _codes(to.experience_violations(padded)) == [(3, "action_mask", "padding")]


def test_not_an_experience_is_a_type_error_naming_it(batch) -> None:
    with pytest.raises(TypeError, match="Experience or a list"):
        to.experience_violations(3)
    with pytest.raises(TypeError, match=r"\(B, S\) sequences tensor, found dict"):
        to.experience_violations([{"sequences": batch.sequences}])
    batch.sequences = batch.sequences.to("meta")
    with pytest.raises(TypeError, match="meta"):
        to.experience_violations(batch)
    with pytest.raises(ValueError, match="depth must be one of"):
        to.experience_violations([], depth="deep")


def test_an_empty_rollout_has_nothing_to_report() -> None:
    assert to.experience_violations([]) == []


def test_the_rows_read_are_views_and_the_experience_is_unchanged(batch) -> None:
    before = pickle.dumps(batch)
    rows = to.experience_samples(batch)
    to.experience_violations(batch)
    assert pickle.dumps(batch) == before
    assert rows[0]["input_ids"].data_ptr() == batch.sequences.data_ptr()


def test_install_checks_the_rollout_and_reports_through_the_step_status(openrlhf, monkeypatch) -> None:
    to.install(mode="always")
    status = TrainStep(openrlhf, args_for(actors=2), monkeypatch).run(
        rollout(openrlhf, [(3, 2), (2, 4), (4, 1)], [1.0, 0.0, 0.5])
    )
    assert status["trajschema/violations"] == 0 and status["trajschema/check_ms"] > 0
    bad = rollout(openrlhf, [(3, 2), (2, 4), (4, 1)], [1.0, 0.0, 0.5])
    bad[1].total_length[0] = 99.0
    status = TrainStep(openrlhf, args_for(actors=2), monkeypatch).run(bad)
    assert status["trajschema/violations/length"] == 1 and status["trajschema/bad_samples"] == 1
    assert status["trajschema/violations"] == 1  # the check's and the audit's figure agree


def test_strict_install_refuses_a_broken_rollout_before_padding_it(openrlhf, monkeypatch) -> None:
    to.install(mode="always", strict=True)
    bad = rollout(openrlhf, [(3, 2), (2, 4), (4, 1)], [1.0, 0.0, 0.5])
    bad[2].attention_mask[0, 1] = 0
    with pytest.raises(ts.SchemaError, match=r"attention_mask row 2"):
        TrainStep(openrlhf, args_for(actors=2), monkeypatch).run(bad)
    assert all("is_padding" not in e.info for e in bad)  # nothing was tagged or padded


def test_once_stops_checking_after_a_clean_rollout(openrlhf, monkeypatch) -> None:
    to.install(mode="once")
    clean = rollout(openrlhf, [(3, 2), (2, 4)], [1.0, 0.0])
    assert "trajschema/check_ms" in TrainStep(openrlhf, args_for(actors=2), monkeypatch).run(clean)
    again = rollout(openrlhf, [(3, 2), (2, 4)], [1.0, 0.0])
    again[0].total_length[0] = 99.0  # not checked: a check made in "once" mode passed
    status = TrainStep(openrlhf, args_for(actors=2), monkeypatch).run(again)
    assert "trajschema/check_ms" not in status and status["trajschema/violations"] == 0


def test_a_shapes_check_leaves_the_values_to_a_values_check(batch) -> None:
    batch.rollout_log_probs[0, 2] = float("inf")
    assert to.experience_violations(batch, depth="shapes") == []
    assert _codes(to.experience_violations(batch, depth="values")) == [(0, "rollout_log_probs", "value")]


def test_a_check_that_fails_is_logged_unless_strict(openrlhf, monkeypatch, caplog) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("the check itself broke")

    monkeypatch.setattr("trajschema.openrlhf.trainer.experience_violations", broken)
    to.install(mode="always")
    with caplog.at_level("WARNING", logger="trajschema.openrlhf"):
        status = TrainStep(openrlhf, args_for(actors=2), monkeypatch).run(
            rollout(openrlhf, [(3, 2), (2, 4)], [1.0, 0.0])
        )
    assert "checking the rollout failed" in caplog.text and "trajschema/check_ms" not in status
    to.install(mode="always", strict=True)
    with pytest.raises(RuntimeError, match="the check itself broke"):
        TrainStep(openrlhf, args_for(actors=2), monkeypatch).run(rollout(openrlhf, [(3, 2), (2, 4)], [1.0, 0.0]))


CORRUPTIONS = {
    "gap": lambda e: e.attention_mask[0].__setitem__(1, 0),
    "action-value": lambda e: e.action_mask[0].__setitem__(0, 3),
    "boundary": lambda e: e.rollout_log_probs[0].__setitem__(0, -1.0),
    "total": lambda e: e.total_length.__setitem__(0, 99.0),
    "span": lambda e: e.response_length.__setitem__(0, 99),
    "nan": lambda e: e.rollout_log_probs[0].__setitem__(-1, float("nan")),
    "no-token": lambda e: e.attention_mask.zero_(),
}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.tuples(st.integers(1, 5), st.integers(1, 4), st.integers(0, 2)), min_size=1, max_size=6),
    st.lists(st.tuples(st.integers(0, 5), st.sampled_from(sorted(CORRUPTIONS))), max_size=4),
    st.sampled_from(["shapes", "values"]),
)
def test_the_one_table_reading_equals_reading_each_experience(openrlhf, monkeypatch, shapes, breaks, depth) -> None:
    made = _made(openrlhf, [_response(i, p, [(a, o)], True) for i, (p, a, o) in enumerate(shapes)])
    for at, name in breaks:
        if at < len(made):
            CORRUPTIONS[name](made[at])
    table = to.experience_violations(made, depth=depth)
    with monkeypatch.context() as m:
        m.setattr("trajschema.openrlhf.layout.merge_experiences", lambda items: None)
        one_by_one = to.experience_violations(made, depth=depth)
    assert sorted((v.sample, v.field, v.code) for v in table) == sorted((v.sample, v.field, v.code) for v in one_by_one)


def test_experiences_that_are_no_one_table_are_read_one_by_one(openrlhf) -> None:
    made = _made(openrlhf, [_response(i, 3, [(2, 0)], True) for i in range(3)])
    made[1].sequences = made[1].sequences.to(torch.int32)  # another dtype: no common table
    from trajschema.openrlhf.layout import merge_experiences

    assert merge_experiences(made) is None
    # once for the three schema fields cut from it (input_ids, prompts, responses)
    assert [(v.sample, v.field, v.code) for v in to.experience_violations(made)] == [(1, "sequences", "dtype")]


def test_a_step_whose_rollout_breaks_is_recorded_with_its_raw_experiences(openrlhf, monkeypatch, tmp_path) -> None:
    to.install(mode="always", record=tmp_path, keep=2)
    bad = rollout(openrlhf, [(3, 2), (2, 4), (4, 1)], [1.0, 0.0, 0.5])
    bad[1].total_length[0] = 99.0
    TrainStep(openrlhf, args_for(actors=2), monkeypatch).run(bad)
    [path] = list(tmp_path.iterdir())
    bundle = ts.load_bundle(path)
    assert bundle.trainer == "OpenRLHF" and bundle.manifest["reason"].startswith("trajschema/violations = 1 ")
    assert [t["is_padding"] for t in bundle.tags] == [False, False, False, True]  # padded to 4 for 2 actors
    assert bundle.schema.name == "text_openrlhf" and bundle.schema.plan.lineage == ("text_openrlhf", "text")
    assert bundle.violations() == []  # the rows themselves are sound: the count was off
    raw = bundle.extras["experiences"]
    assert raw[0]["__class__"].endswith("experience.Experience")
    assert main(["check", str(path), "--quiet"]) == 0  # the command line reads it as Python does
    assert sorted(float(t) for e in raw for t in e["total_length"].reshape(-1)) == [5.0, 5.0, 5.0, 99.0]


def test_clean_steps_are_recorded_every_k_and_the_newest_kept(openrlhf, monkeypatch, tmp_path) -> None:
    to.install(record=tmp_path, every=1, keep=2)
    for _ in range(3):
        TrainStep(openrlhf, args_for(actors=2), monkeypatch).run(rollout(openrlhf, [(3, 2), (2, 4)], [1.0, 0.0]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-00000002", "step-00000003"]
    assert ts.load_bundle(tmp_path / "step-00000003").manifest["reason"] == "every 1 steps"
