"""trajschema.testing.assert_valid and assert_padding_invariant (no Ray)."""

from __future__ import annotations

import math
import pickle
import warnings
from decimal import Decimal
from fractions import Fraction

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensordict import TensorDict

import trajschema as ts
from trajschema.check.columns import batch_view
from trajschema.testing import assert_padding_invariant, assert_valid, tq_batch, verl_sample
from trajschema.testing.assertions import _compare

SCHEMAS = ts.schema_names()
TEXT = ts.load_schema("text")
LAYOUTS = ["list", "tensordict"]


def sample_for(schema, p, r, **kw):
    dims = {k: 2 for k in ("layers", "topk", "teacher_topk") if k in schema.dims}
    return verl_sample(schema, p, r, **{**dims, **kw})


def as_layout(samples, layout):
    return list(samples) if layout == "list" else tq_batch(samples)


def real_groups(schema=TEXT, sizes=(2, 3), seed=0):
    """GRPO groups of real samples (group i has uid q<i>) with varied response lengths and log-probs."""
    out = []
    for gi, size in enumerate(sizes):
        for j in range(size):
            out.append(sample_for(schema, 3 + j, 1 + (gi + 2 * j) % 5, uid=f"q{gi}", seed=seed + 10 * gi + j))
    return out


def rows(batch):
    """Samples as dicts, whichever layout fn receives."""
    return batch_view(batch).rows()


# -- realistic functions ---------------------------------------------------------------------


def score(sample):
    # An outcome reward that depends on the tokens, so groups do not all tie.
    return float(sample["rm_scores"].sum()) + float(sample["responses"][0] % 7) / 7


def grpo_advantage(batch, tags, eps=1e-6):
    """verl-style outcome advantage: each score normalized within its uid group (one value per sample)."""
    samples = rows(batch)
    scores = torch.tensor([score(s) for s in samples], dtype=torch.float32)
    out = torch.zeros_like(scores)
    for uid in dict.fromkeys(s["uid"] for s in samples):
        idx = torch.tensor([i for i, s in enumerate(samples) if s["uid"] == uid])
        group = scores[idx]
        if len(group) > 1:
            out[idx] = (group - group.mean()) / (group.std() + eps)
    return out


def token_mean_loss(batch, tags):
    """Token-mean of the negative log-probs over loss_mask (verl's token-mean aggregation)."""
    samples = rows(batch)
    num = torch.zeros((), dtype=torch.float32)
    den = torch.zeros((), dtype=torch.float32)
    for s in samples:
        mask = s["loss_mask"].to(torch.float32)
        num = num + (-s["rollout_log_probs"] * mask).sum()
        den = den + mask.sum()
    return {"loss": num / den, "tokens": int(den)}


def batch_mean_response_length(batch, tags):
    """A metric over every row: padding rows dilute it."""
    return {"response_length/mean": sum(s["responses"].numel() for s in rows(batch)) / len(rows(batch))}


def seq_mean_with_global_batch(batch, tags):
    """seq-mean-token-mean divided by the global batch size, which counts padding rows."""
    samples = rows(batch)
    per_seq = [(-s["rollout_log_probs"] * s["loss_mask"]).sum() / s["loss_mask"].sum().clamp(min=1) for s in samples]
    return torch.stack(per_seq).sum() / len(samples)


# -- assert_valid ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", SCHEMAS)
def test_a_valid_sample_and_batch_pass_in_every_layout(name):
    schema = ts.load_schema(name)
    samples = [sample_for(schema, 4, r, seed=r) for r in (1, 3, 6)]
    assert_valid(samples[0], schema)
    assert_valid(samples[0], name, tags={"prompt_len": 4})
    assert_valid(samples, schema, tags=[{}, None, {"is_padding": False}])
    assert_valid(tq_batch(samples), name)
    assert_valid([], schema)
    assert_valid(TensorDict({}, batch_size=[0]), schema)


def broken(sample):
    bad = dict(sample)
    bad["loss_mask"] = torch.full_like(sample["loss_mask"], 5)  # values: [0, 1]
    bad["input_ids"] = sample["input_ids"][:-1]  # seq != prompt + response
    del bad["num_turns"]
    return bad


def test_a_bad_sample_fails_with_schema_errors_report_of_every_violation():
    bad = broken(verl_sample(TEXT, 4, 3))
    with pytest.raises(ts.SchemaError) as reference:
        TEXT.validate(bad)
    with pytest.raises(AssertionError) as info:
        assert_valid(bad, "text")
    assert not isinstance(info.value, ts.SchemaError)
    assert str(info.value) == str(reference.value)
    assert info.value.violations == TEXT.violations(bad) == reference.value.violations
    assert {v.field for v in info.value.violations} >= {"loss_mask", "input_ids", "num_turns"}
    restored = pickle.loads(pickle.dumps(info.value))  # crosses xdist / process boundaries
    assert str(restored) == str(info.value) and restored.violations == info.value.violations


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_bad_batch_reports_every_sample_as_validate_batch_does(layout):
    good = [verl_sample(TEXT, 4, r, seed=r) for r in (2, 3, 4)]
    if layout == "list":
        batch = [good[0], broken(good[1]), good[2]]
    else:  # a TransferQueue batch cannot lack a field in one row: break values and shapes only
        bad = {**good[1], "loss_mask": torch.full_like(good[1]["loss_mask"], 7), "input_ids": good[1]["input_ids"][:-1]}
        batch = tq_batch([good[0], bad, good[2]])
    tags = [{}, {"is_padding": "yes"}, {}]
    with pytest.raises(ts.SchemaError) as reference:
        TEXT.validate_batch(batch, tags=tags)
    with pytest.raises(AssertionError) as info:
        assert_valid(batch, TEXT, tags=tags)
    assert str(info.value) == str(reference.value)
    assert info.value.violations == TEXT.batch_violations(batch, tags=tags)
    assert {v.sample for v in info.value.violations} == {1}
    assert "is_padding" in {v.field for v in info.value.violations}


def test_past_the_table_every_violation_is_still_listed():
    good = verl_sample(TEXT, 2, 2)
    bad = [{**good, "loss_mask": torch.full((2,), 9)} for _ in range(60)]
    with pytest.raises(AssertionError) as info:
        assert_valid(bad, TEXT)
    vs = info.value.violations
    assert len(vs) == 60 and "and 20 more" in str(info.value)
    for v in vs[40:]:
        assert f"  {v}" in str(info.value)


def test_depth_shapes_reads_no_values_and_works_on_meta_tensors():
    sample = verl_sample(TEXT, 3, 2)
    sample["loss_mask"] = torch.full((2,), 3)
    assert_valid(sample, TEXT, depth="shapes")
    with pytest.raises(AssertionError, match="loss_mask"):
        assert_valid(sample, TEXT)
    meta = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in sample.items()}
    assert_valid(meta, TEXT, depth="shapes")
    meta["prompts"] = meta["prompts"].to(torch.int8)
    with pytest.raises(AssertionError, match="dtype"):
        assert_valid(meta, TEXT, depth="shapes")


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        pytest.param(lambda s: assert_valid(s, object()), TypeError, "Schema or a schema name", id="not-a-schema"),
        pytest.param(lambda s: assert_valid(s, "no_such_schema"), ts.SchemaNotFoundError, "no_such", id="unknown-name"),
        pytest.param(lambda s: assert_valid(s, TEXT, depth="deep"), ValueError, "depth", id="bad-depth"),
        pytest.param(lambda s: assert_valid(s, TEXT, depth=None), ValueError, "depth", id="depth-none"),
        pytest.param(lambda s: assert_valid([s, s], TEXT, tags=[{}]), ValueError, "one tag dict", id="tags-short"),
        pytest.param(lambda s: assert_valid([s], TEXT, tags={}), TypeError, "list of tag dicts", id="tags-a-dict"),
        pytest.param(lambda s: assert_valid([s], TEXT, tags=[3]), TypeError, r"tags\[0\]", id="tag-not-mapping"),
        pytest.param(lambda s: assert_valid(s, TEXT, tags=[{}]), TypeError, "its tag dict", id="single-tags-list"),
        pytest.param(lambda s: assert_valid("abc", TEXT), TypeError, "found str", id="a-string"),
        pytest.param(lambda s: assert_valid(42, TEXT), TypeError, "found int", id="an-int"),
        pytest.param(lambda s: assert_valid([s, 3], TEXT), TypeError, "mapping", id="a-non-mapping-sample"),
    ],
)
def test_bad_arguments_are_type_or_value_errors_not_assertion_errors(call, error, match):
    with pytest.raises(error, match=match) as info:
        call(verl_sample(TEXT, 3, 2))
    assert not isinstance(info.value, AssertionError)


def test_a_row_of_a_batch_tensordict_is_a_single_sample():
    samples = [verl_sample(TEXT, 4, r, seed=r) for r in (2, 3)]
    td = tq_batch(samples)
    assert_valid(td[1], TEXT, tags={"response_len": 3})
    with pytest.raises(AssertionError, match="response_len"):
        assert_valid(td[1], TEXT, tags={"response_len": 2})


def test_a_tensordict_without_one_batch_dim_is_reported_as_a_batch_violation():
    td = TensorDict({"x": torch.zeros(2, 3)}, batch_size=[2, 3])
    with pytest.raises(AssertionError, match="batch_size"):
        assert_valid(td, TEXT)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(SCHEMAS),
    r=st.integers(0, 4),
    field=st.sampled_from(["loss_mask", "responses", "position_ids", "uid", None]),
    how=st.sampled_from(["dtype", "truncate", "value", "drop"]),
)
def test_assert_valid_fails_exactly_when_the_schema_reports_a_violation(name, r, field, how):
    schema = ts.load_schema(name)
    sample = sample_for(schema, 3, r)
    if field is not None:
        v = sample[field]
        if how == "drop":
            del sample[field]
        elif not isinstance(v, torch.Tensor):
            sample[field] = 7
        elif how == "dtype":
            sample[field] = v.to(torch.uint8)
        elif how == "truncate":
            sample[field] = v[..., : max(0, v.shape[-1] - 1)]
        else:
            sample[field] = v - 5
    expected = schema.violations(sample)
    if expected:
        with pytest.raises(AssertionError) as info:
            assert_valid(sample, schema)
        assert info.value.violations == expected
    else:
        assert_valid(sample, schema)


# -- assert_padding_invariant: realistic functions ------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("multiple", [2, 4, 8])
def test_grpo_advantage_is_invariant_because_padding_is_its_own_group(layout, multiple):
    real = real_groups()
    assert_padding_invariant(grpo_advantage, as_layout(real, layout), None, TEXT, eos_token_id=2, multiple=multiple)


def test_grpo_advantage_would_not_be_invariant_if_padding_joined_a_real_group():
    real = real_groups(sizes=(2, 3))

    def grpo_with_padding_in_group_q1(batch, tags):
        samples = [dict(s) for s in rows(batch)]
        for s, t in zip(samples, tags):
            if t and t.get("is_padding"):
                s["uid"] = "q1"
        return grpo_advantage(samples, tags)

    with pytest.raises(AssertionError, match=r"the result: tensor \(5,\) float32 \(real rows\)"):
        assert_padding_invariant(grpo_with_padding_in_group_q1, real, None, TEXT, eos_token_id=2, multiple=8)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", SCHEMAS)
def test_token_mean_loss_over_loss_mask_is_invariant(layout, name):
    real = real_groups(ts.load_schema(name), sizes=(3,))
    assert_padding_invariant(token_mean_loss, as_layout(real, layout), None, name, eos_token_id=2, multiple=8)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_batch_mean_metric_is_not_invariant_and_the_message_says_where(layout):
    real = real_groups(sizes=(1, 2))
    lengths = [s["responses"].numel() for s in real]
    want, got = sum(lengths) / 3, (sum(lengths) + 1) / 4  # a padding sample has one response token
    with pytest.raises(AssertionError) as info:
        assert_padding_invariant(
            batch_mean_response_length, as_layout(real, layout), None, TEXT, eos_token_id=2, multiple=4
        )
    msg = str(info.value)
    assert "3 real samples padded with 1 padding samples to a multiple of 4" in msg
    assert f"key 'response_length/mean': {want!r} unpadded, {got!r} padded (abs difference {abs(got - want)!r})" in msg


def test_a_seq_mean_over_a_global_batch_size_that_counts_padding_is_not_invariant():
    real = real_groups(sizes=(3,))
    want = seq_mean_with_global_batch(real, None)
    with pytest.raises(AssertionError) as info:
        assert_padding_invariant(seq_mean_with_global_batch, real, None, TEXT, eos_token_id=2, multiple=5)
    msg = str(info.value)
    assert "the result: tensor () float32: 1 of 1 values differ" in msg
    assert f"{want.item()!r} unpadded, {(want * 3 / 5).item()!r} padded" in msg
    # Dividing by the real count instead (what is_padding tags allow) makes it invariant.
    assert_padding_invariant(
        lambda b, tags: (
            seq_mean_with_global_batch(b, tags) * len(tags) / sum(not (t or {}).get("is_padding") for t in tags)
        ),
        real,
        None,
        TEXT,
        eos_token_id=2,
        multiple=5,
        rtol=1e-6,
    )


def vectorized_token_mean_loss(batch, tags):
    samples = rows(batch)
    per_token = torch.cat([-s["rollout_log_probs"] for s in samples])
    mask = torch.cat([s["loss_mask"] for s in samples]).to(torch.float32)
    return (per_token * mask).sum() / mask.sum()


@pytest.mark.parametrize("seed", range(6))
def test_a_vectorized_token_mean_is_invariant_up_to_summation_order(seed):
    # Padding adds exact zeros, but a longer torch.sum may group the real terms differently
    # (about 1 in 4 such batches differ in the last bit here): rtol covers exactly that.
    lengths = torch.randint(1, 300, (7,), generator=torch.Generator().manual_seed(seed)).tolist()
    real = [verl_sample(TEXT, 3, r, seed=10 * seed + i) for i, r in enumerate(lengths)]
    assert_padding_invariant(vectorized_token_mean_loss, real, None, TEXT, eos_token_id=2, multiple=64, rtol=1e-6)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    name=st.sampled_from(SCHEMAS),
    lengths=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 5)), min_size=1, max_size=6),
    multiple=st.integers(1, 9),
    layout=st.sampled_from(LAYOUTS),
    seed=st.integers(0, 2**16),
)
def test_a_token_sum_over_loss_mask_is_always_invariant(name, lengths, multiple, layout, seed):
    schema = ts.load_schema(name)
    real = [sample_for(schema, p, r, uid=f"q{i % 2}", seed=seed + i) for i, (p, r) in enumerate(lengths)]

    def token_sums(batch, tags):
        samples = rows(batch)
        weights = [(s["responses"] % 101).to(torch.float32) for s in samples]
        per_row = torch.stack([(w * s["loss_mask"]).sum() for w, s in zip(weights, samples)])
        return {
            "per_row": per_row,
            "tokens": sum(int(s["loss_mask"].sum()) for s in samples),
            "sum": float(per_row.sum(dtype=torch.float64)),
        }

    assert_padding_invariant(token_sums, as_layout(real, layout), None, schema, eos_token_id=2, multiple=multiple)


# -- assert_padding_invariant: what is compared and how -------------------------------------


def by_size(real_value, padded_value, n=3):
    """fn returning one thing for the n-sample batch and another for the padded one."""
    return lambda batch, tags: real_value if len(tags) == n else padded_value


def check(fn, n=3, multiple=4, **kw):
    assert_padding_invariant(fn, real_groups(sizes=(n,)), None, TEXT, eos_token_id=2, multiple=multiple, **kw)


def test_per_row_tensors_are_compared_on_the_real_rows_only():
    check(by_size(torch.arange(3.0), torch.tensor([0.0, 1.0, 2.0, 99.0])))
    check(by_size(torch.ones(3, 2, dtype=torch.int8), torch.cat([torch.ones(3, 2), torch.zeros(1, 2)]).to(torch.int8)))
    with pytest.raises(AssertionError, match=r"first at index \[1\]: 1\.0 unpadded, 5\.0 padded"):
        check(by_size(torch.arange(3.0), torch.tensor([0.0, 5.0, 2.0, 0.0])))


def test_other_tensors_are_compared_whole():
    with pytest.raises(AssertionError, match=r"tensor \(3,\) float32 on cpu unpadded, tensor \(4,\) float32"):
        check(by_size(torch.arange(3.0), torch.arange(4.0)), multiple=5)  # 4 is not the padded size 5
    with pytest.raises(AssertionError, match=r"\(2,\) int64: 1 of 2 values differ; max abs difference 1"):
        check(by_size(torch.tensor([1, 2]), torch.tensor([1, 3])))


def test_the_message_names_key_shapes_dtypes_max_difference_and_first_index():
    want = torch.zeros(2, 3)
    got = want.clone()
    got[0, 2] = 0.25
    got[1, 1] = -4.0
    with pytest.raises(AssertionError) as info:
        check(by_size({"stats": {"hist": want}}, {"stats": {"hist": got}}))
    msg = str(info.value)
    assert (
        "key 'stats.hist': tensor (2, 3) float32: 2 of 6 values differ; max abs difference 4; first at index [0, 2]: "
        "0.0 unpadded, 0.25 padded"
    ) in msg


def test_bit_identity_by_default_and_rtol_relaxes_floats_only():
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    y = x.clone()
    y[2] = torch.nextafter(y[2], torch.tensor(4.0, dtype=torch.float64))
    with pytest.raises(AssertionError, match=r"max abs difference 4\.44089e-16"):
        check(by_size(x, y))
    check(by_size(x, y), rtol=1e-12)
    with pytest.raises(AssertionError):
        check(by_size(x, y * 1.01), rtol=1e-3)
    with pytest.raises(AssertionError, match="1 unpadded, 2 padded"):
        check(by_size(1, 2), rtol=10.0)  # ints stay exact
    check(by_size(1.0, 1.0 + 1e-9), rtol=1e-6)
    with pytest.raises(AssertionError):
        check(by_size(1.0, 1.0 + 1e-9))
    check(by_size(0.0, -0.0))  # equal numbers, like torch.equal


def test_nan_matches_nan_only_in_the_same_places():
    nan = float("nan")
    check(by_size(torch.tensor([nan, 1.0]), torch.tensor([nan, 1.0])))
    check(by_size(nan, nan))
    check(by_size(torch.tensor([nan, 1.0]), torch.tensor([nan, 1.0])), rtol=0.1)
    with pytest.raises(AssertionError, match=r"first at index \[0\]: nan unpadded, 1\.0 padded"):
        check(by_size(torch.tensor([nan, 1.0]), torch.tensor([1.0, 1.0])))
    with pytest.raises(AssertionError, match="max abs difference nan"):
        check(by_size(torch.tensor([1.0, nan]), torch.tensor([1.0, 2.0])), rtol=0.5)


@pytest.mark.parametrize(
    "dtype", [torch.bool, torch.int8, torch.uint8, torch.int16, torch.float16, torch.bfloat16, torch.complex64]
)
def test_odd_dtypes_compare_exactly_and_report_their_difference(dtype):
    a = torch.tensor([1, 0, 1]).to(dtype)
    check(by_size(a, torch.cat([a, torch.zeros(1, dtype=dtype)])))
    b = a.clone()
    b[1] = 1
    with pytest.raises(AssertionError, match=r"1 of 3 values differ; max abs difference 1; first at index \[1\]"):
        check(by_size(a, b))
    with pytest.raises(AssertionError, match="shape, dtype or device changed"):
        check(by_size(a, a.to(torch.complex128 if dtype.is_complex else torch.float64)))


def test_uint8_and_int64_differences_do_not_wrap_or_round():
    with pytest.raises(AssertionError, match="max abs difference 255"):
        check(by_size(torch.tensor([0], dtype=torch.uint8), torch.tensor([255], dtype=torch.uint8)))
    big = torch.tensor([2**62], dtype=torch.int64)
    with pytest.raises(AssertionError, match="max abs difference 1;"):
        check(by_size(big, big + 1))


def test_structure_changes_fail():
    with pytest.raises(AssertionError, match=r"keys changed: missing after padding \['b'\], new after padding \['c'\]"):
        check(by_size({"a": 1, "b": 2}, {"a": 1, "c": 2}))
    with pytest.raises(AssertionError, match="key 'a': the type changed: float unpadded, tensor"):
        check(by_size({"a": 1.0}, {"a": torch.tensor(1.0)}))
    with pytest.raises(AssertionError, match="the type changed: int unpadded, bool padded"):
        check(by_size(1, True))
    with pytest.raises(AssertionError, match=r"key 'x': the type changed: dict unpadded, tensor \(\) float32"):
        check(by_size({"x": {"y": 1}}, {"x": torch.tensor(1.0)}))


def test_every_differing_key_is_reported():
    with pytest.raises(AssertionError) as info:
        check(by_size({"a": 1.0, "b": 2.0, "c": 3.0}, {"a": 1.5, "b": 2.0, "c": 0.0}))
    lines = str(info.value).splitlines()
    assert [ln.split(":")[0].strip() for ln in lines[1:]] == ["key 'a'", "key 'c'"]


def test_jagged_per_token_outputs_are_compared_row_by_row_on_real_rows():
    def per_token_advantage(batch, tags):
        adv = grpo_advantage(batch, tags)
        return torch.nested.nested_tensor([a * s["loss_mask"] for a, s in zip(adv, rows(batch))], layout=torch.jagged)

    real = real_groups()
    assert_padding_invariant(per_token_advantage, real, None, TEXT, eos_token_id=2, multiple=8)
    a = torch.nested.nested_tensor([torch.ones(2), torch.ones(3), torch.ones(1)], layout=torch.jagged)
    b = torch.nested.nested_tensor(
        [torch.ones(2), torch.tensor([1.0, 2.0, 1.0]), torch.ones(1), torch.ones(1)], layout=torch.jagged
    )
    with pytest.raises(AssertionError, match=r"the result\[1\]: tensor \(3,\) float32"):
        check(by_size(a, b))


def test_fn_sees_the_input_layout_and_the_padding_tags():
    seen = []

    def record(batch, tags):
        seen.append((type(batch).__name__, len(tags), [bool((t or {}).get("is_padding")) for t in tags]))
        return 0

    real = real_groups(sizes=(3,))
    assert_padding_invariant(record, real, [{}, None, {"is_padding": False}], TEXT, eos_token_id=2, multiple=4)
    assert_padding_invariant(record, tq_batch(real), None, TEXT, eos_token_id=2, multiple=4)
    assert seen == [
        ("list", 3, [False] * 3),
        ("list", 4, [False, False, False, True]),
        ("TensorDict", 3, [False] * 3),
        ("TensorDict", 4, [False, False, False, True]),
    ]


def test_the_padded_tensordict_is_what_transferqueue_returns_and_validates():
    real = real_groups(ts.load_schema("vlm_mrope_moe"), sizes=(2,))
    got = []

    def keep(batch, tags):
        got.append((batch, tags))
        return 0

    assert_padding_invariant(keep, tq_batch(real), None, "vlm_mrope_moe", eos_token_id=2, multiple=4)
    padded, tags = got[1]
    assert padded.batch_size == torch.Size([4]) and padded.get("responses").layout == torch.jagged
    assert_valid(padded, "vlm_mrope_moe", tags=tags)
    assert ts.real_count(tags) == 2


def test_an_already_full_batch_gets_no_padding_and_only_checks_determinism():
    real = real_groups(sizes=(4,))
    assert_padding_invariant(grpo_advantage, real, None, TEXT, eos_token_id=2, multiple=4)
    calls = iter(range(10))
    with pytest.raises(AssertionError, match="padded with 0 padding samples"):
        assert_padding_invariant(lambda b, t: next(calls), real, None, TEXT, eos_token_id=2, multiple=4)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        pytest.param({"fn": 3}, TypeError, "callable", id="fn-not-callable"),
        pytest.param({"batch": []}, ValueError, "at least one real sample", id="empty-batch"),
        pytest.param({"batch": "abc"}, TypeError, "list of sample mappings", id="batch-a-string"),
        pytest.param({"multiple": 0}, ValueError, "multiple", id="multiple-0"),
        pytest.param({"eos_token_id": -1}, ValueError, "eos_token_id", id="eos-negative"),
        pytest.param({"rtol": -1.0}, ValueError, "rtol", id="rtol-negative"),
        pytest.param({"rtol": float("nan")}, ValueError, "rtol", id="rtol-nan"),
        pytest.param({"rtol": True}, TypeError, "rtol", id="rtol-bool"),
        pytest.param({"tags": [{}]}, ValueError, "one tag dict per sample", id="tags-short"),
        pytest.param({"schema": 5}, TypeError, "schema", id="schema-not-a-schema"),
        pytest.param({"fn": lambda b, t: [1, 2]}, TypeError, "the result is list", id="fn-returns-a-list"),
        pytest.param({"fn": lambda b, t: {"a": None}}, TypeError, "key 'a' is NoneType", id="fn-returns-none"),
        pytest.param({"fn": lambda b, t: torch.empty(3, device="meta")}, TypeError, "meta", id="fn-returns-meta"),
    ],
)
def test_bad_arguments_are_not_assertion_errors(kwargs, error, match):
    args = {
        "fn": grpo_advantage,
        "batch": real_groups(sizes=(3,)),
        "tags": None,
        "schema": TEXT,
        "eos_token_id": 2,
        "multiple": 4,
        "rtol": None,
        **kwargs,
    }
    with pytest.raises(error, match=match) as info:
        assert_padding_invariant(
            args["fn"],
            args["batch"],
            args["tags"],
            args["schema"],
            eos_token_id=args["eos_token_id"],
            multiple=args["multiple"],
            rtol=args["rtol"],
        )
    assert not isinstance(info.value, AssertionError)


def test_the_padded_run_gets_fresh_sample_dicts():
    real = real_groups(sizes=(3,))

    def writes_advantages(batch, tags):
        assert all("advantages" not in s for s in batch), "the padded run saw the unpadded run's writes"
        for s in batch:
            s["advantages"] = torch.zeros(1)
        return len([t for t in tags if not (t or {}).get("is_padding")])

    assert_padding_invariant(writes_advantages, real, None, TEXT, eos_token_id=2, multiple=4)


# -- numbers and tensors follow torch.allclose (issue 14) --------------------------------------

SPECIAL_FLOATS = [0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 1.7976931348623157e308, -1e308]


def _float_pairs():
    """(want, got): any floats, specials, and pairs near the edge of a relative tolerance."""
    any_float = st.one_of(st.floats(), st.sampled_from(SPECIAL_FLOATS))
    near = st.builds(
        lambda w, k: (w, w * (1 + k)), st.floats(allow_nan=False), st.sampled_from([0.0, 1e-9, -1e-6, 1e-3, 0.5, 2.0])
    )
    stepped = st.builds(lambda w, to: (w, math.nextafter(w, to)), any_float, st.sampled_from([math.inf, -math.inf]))
    return st.one_of(st.tuples(any_float, any_float), near, stepped)


RTOLS = st.one_of(st.none(), st.sampled_from([0.0, 1e-12, 1e-6, 1e-3, 0.5, 1.0, 10.0, 1e300]), st.floats(0, 1e3))


@settings(deadline=None)
@given(pair=_float_pairs(), rtol=RTOLS)
def test_float_results_are_compared_exactly_as_torch_allclose_compares_float64_tensors(pair, rtol):
    want, got = pair
    reference = torch.allclose(
        torch.tensor(got, dtype=torch.float64),
        torch.tensor(want, dtype=torch.float64),
        rtol=rtol or 0.0,
        atol=0.0,
        equal_nan=True,
    )
    assert (_compare(want, got, "", 3, 4, rtol) == []) == reference
    assert (_compare({"m": {"x": want}}, {"m": {"x": got}}, "", 3, 4, rtol) == []) == reference  # inside dicts too


@settings(deadline=None)
@given(want=st.floats(width=32), got=st.floats(width=32), rtol=RTOLS)
def test_numpy_float32_results_are_compared_as_float32_tensors(want, got, rtol):
    np = pytest.importorskip("numpy")
    reference = torch.allclose(
        torch.tensor(got, dtype=torch.float32),
        torch.tensor(want, dtype=torch.float32),
        rtol=rtol or 0.0,
        atol=0.0,
        equal_nan=True,
    )
    assert (_compare(np.float32(want), np.float32(got), "", 3, 4, rtol) == []) == reference


@pytest.mark.parametrize(
    ("want", "got", "rtol"),
    [
        pytest.param(1.0, math.inf, 0.5, id="finite-to-inf"),
        pytest.param(math.inf, 1.0, 0.5, id="inf-to-finite"),
        pytest.param(math.inf, -math.inf, 0.5, id="inf-to-minus-inf"),
        pytest.param(-1e308, 1e308, 10.0, id="overflowing-difference"),
        pytest.param(1.0, math.nan, 0.5, id="finite-to-nan"),
        pytest.param(math.nan, 1.0, None, id="nan-to-finite"),
        pytest.param(2**70, 2**70 + 1, 1.0, id="huge-int-exact"),
        pytest.param(True, False, 10.0, id="bool-exact"),
        pytest.param(1, 1.0, None, id="int-to-float-is-a-type-change"),
        pytest.param(complex(1, 0), complex(1, math.inf), 0.5, id="complex-inf"),
        pytest.param(Fraction(1, 3), Fraction(1, 3) + Fraction(1, 10**40), None, id="fraction-exact"),
    ],
)
def test_an_infinite_nan_or_integer_change_fails_whatever_rtol(want, got, rtol):
    with pytest.raises(AssertionError, match=r"unpadded"):
        check(by_size(want, got), rtol=rtol)
    with pytest.raises(AssertionError, match=r"key 'loss'"):
        check(by_size({"loss": want}, {"loss": got}), rtol=rtol)


def test_what_allclose_accepts_passes():
    check(by_size(math.inf, math.inf), rtol=0.5)
    check(by_size(-math.inf, -math.inf))
    check(by_size(10**400, 10**400))  # an int beyond float range, compared exactly, not through float
    check(by_size(1e308, 1e308 * (1 + 1e-15)), rtol=1e-12)
    check(by_size(Fraction(1, 3), Fraction(1, 3) + Fraction(1, 10**40)), rtol=1e-30)  # tolerance exact too
    check(by_size(complex(math.nan, 1), complex(1, math.nan)))  # torch.isnan of a complex: either part
    check(by_size(torch.tensor([math.inf, 1.0]), torch.tensor([math.inf, 1.0 + 1e-9])), rtol=1e-6)
    with pytest.raises(AssertionError, match="max abs difference inf"):
        check(by_size(torch.tensor([1.0, 2.0]), torch.tensor([1.0, math.inf])), rtol=1e6)


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2, torch.complex32])
def test_dtypes_torch_cannot_compare_directly_are_compared_by_their_values(dtype):
    a = torch.tensor([1.0, 2.0, math.nan]).to(dtype)
    b = torch.tensor([1.0, 2.5, math.nan]).to(dtype)
    check(by_size(a, a.clone()))
    check(by_size(a, a.clone()), rtol=0.1)
    check(by_size(a, b), rtol=0.3)  # 0.5 <= 0.3 * 2
    with pytest.raises(AssertionError, match=r"1 of 3 values differ; max abs difference 0\.5; first at index \[1\]"):
        check(by_size(a, b), rtol=0.1)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        pytest.param(lambda: torch.sparse_coo_tensor([[0]], [1.0], (3,)), "sparse_coo tensor", id="sparse"),
        pytest.param(lambda: torch.zeros(2, 3).to_sparse_csr(), "sparse_csr tensor", id="sparse-csr"),
        pytest.param(lambda: torch.zeros(2, dtype=torch.uint4), "dtype torch.uint4", id="uint4"),
        pytest.param(lambda: Decimal("1.5"), "is Decimal", id="decimal"),
        pytest.param(lambda: {"a": {"b": {}}}, None, id="fine"),
    ],
)
def test_results_without_comparable_values_are_type_errors(make, match):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's beta warnings for sparse layouts
        result = make()
    fn = by_size(result, result)
    if match is None:
        check(fn)
        return
    with pytest.raises(TypeError, match=match):
        check(fn)


def test_a_result_that_contains_itself_or_nests_too_deep_is_a_type_error():
    cyclic: dict = {}
    cyclic["a"] = cyclic
    with pytest.raises(TypeError, match="does a dict contain itself"):
        check(by_size(cyclic, cyclic))
    deep: dict = {}
    for _ in range(150):
        deep = {"k": deep}
    with pytest.raises(TypeError, match="more than 100 deep"):
        check(by_size(deep, deep))
    ok: dict = {"x": 1.0}
    for _ in range(99):
        ok = {"k": ok}
    check(by_size(ok, ok))


def test_a_quantized_result_is_a_type_error():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch deprecates quantize_per_tensor
        q = torch.quantize_per_tensor(torch.tensor([1.0, 2.0]), 0.1, 0, torch.qint8)
    with pytest.raises(TypeError, match="quantized tensor"):
        check(by_size(q, q))


@pytest.mark.parametrize("rtol", [10**400, Fraction(10**400), float("inf"), -0.5])
def test_an_rtol_beyond_float_range_is_a_value_error(rtol):
    with pytest.raises(ValueError, match="rtol must be a finite number >= 0"):
        check(by_size(1.0, 1.0), rtol=rtol)
