"""Metrics see only real samples: padding never dilutes them, nor shifts GRPO advantages."""

from __future__ import annotations

import math
import re
import warnings
from collections import defaultdict

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensordict import TensorDict

import trajschema as ts
from trajschema.contract.contract import check_padding_contract, is_padding
from trajschema.contract.metrics import PaddingOnlyBatchWarning, exclude_padding, select_real
from trajschema.testing import tq_batch, verl_sample

SCHEMAS = ts.schema_names()
LAYOUTS = ["list", "tensordict"]


def as_layout(samples, layout):
    """The samples as the trainer holds them: a list, or TransferQueue's TensorDict."""
    if layout == "list":
        return list(samples)
    return tq_batch(samples) if samples else TensorDict({}, batch_size=[0])


def padded_batch(schema_name="text", n_pad=3):
    """Two GRPO groups of real samples with distinct rewards, then padding.

    Returns (real samples, real tags, all samples, all tags).
    """
    schema = ts.load_schema(schema_name)
    real = [
        verl_sample(schema, 5, 4, uid="q0", seed=0),
        verl_sample(schema, 5, 6, uid="q0", seed=1),
        verl_sample(schema, 3, 2, uid="q1", seed=2),
        verl_sample(schema, 3, 5, uid="q1", seed=3),
    ]
    for s, reward in zip(real, [1.0, 0.0, 1.0, 1.0]):
        s["rm_scores"][-1] = reward
    real_tags = [{"is_padding": False}, {}, None, {"seq_len": 8}]
    pad = schema.padding(n_pad, eos_token_id=2, like=real[0])
    return real, real_tags, [*real, *pad.samples], [*real_tags, *pad.tags]


def rows(batch, key):
    """One tensor per sample, from a list of samples or a TensorDict column."""
    if isinstance(batch, TensorDict):
        return list(batch.get(key).unbind(0))
    return [s[key] for s in batch]


def uids(batch):
    return batch.get("uid").tolist() if isinstance(batch, TensorDict) else [s["uid"] for s in batch]


def sequence_rewards(batch):
    """verl's sequence score: the sum of the token-level rewards."""
    return torch.stack([r.sum() for r in rows(batch, "rm_scores")])


def rollout_metrics(batch, tags):
    """Metrics a trainer logs per step; the per-sequence means count every row."""
    nll = [-lp for lp in rows(batch, "rollout_log_probs")]
    masks = rows(batch, "loss_mask")
    token_nll = torch.cat([x * m for x, m in zip(nll, masks)]).sum() / (torch.cat(masks).sum() + 1e-8)
    seq_ppl = [torch.exp((x * m).sum() / m.sum().clamp(min=1)) for x, m in zip(nll, masks)]
    return {
        "perplexity/token_mean": float(torch.exp(token_nll)),
        "perplexity/seq_mean": float(torch.stack(seq_ppl).mean()),
        "reward/seq_mean": float(sequence_rewards(batch).mean()),
        "response_length/mean": float(torch.tensor([float(len(m)) for m in masks]).mean()),
    }


real_metrics = exclude_padding(rollout_metrics)


def grpo_advantages(scores, index, eps=1e-6):
    """verl's compute_grpo_outcome_advantage on per-sample scalar scores.

    Groups by uid; a group of one gets mean 0 and std 1; (score - mean) / (std + eps).
    """
    scores = scores.clone()
    groups = defaultdict(list)
    for i, u in enumerate(index):
        groups[u].append(scores[i])
    mean, std = {}, {}
    for u, group in groups.items():
        if len(group) == 1:
            mean[u], std[u] = torch.tensor(0.0), torch.tensor(1.0)
        else:
            stacked = torch.stack(group)
            mean[u], std[u] = torch.mean(stacked), torch.std(stacked)
    for i, u in enumerate(index):
        scores[i] = (scores[i] - mean[u]) / (std[u] + eps)
    return scores


def assert_same_samples(got, want):
    if isinstance(want, TensorDict):
        assert isinstance(got, TensorDict)
        assert got.batch_size == want.batch_size
        assert set(got.keys()) == set(want.keys())
        for key in want.keys():
            g, w = got.get(key), want.get(key)
            if isinstance(w, torch.Tensor):
                assert all(torch.equal(a, b) for a, b in zip(g.unbind(0), w.unbind(0), strict=True)), key
            else:
                assert g.tolist() == w.tolist(), key
    else:
        assert got == want


# ---------------------------------------------------------------------------
# select_real


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("schema_name", SCHEMAS)
def test_select_real_keeps_the_real_samples_in_order(schema_name, layout):
    real, _, samples, tags = padded_batch(schema_name)
    # Interleave, so the test does not rely on padding sitting at the end.
    order = [4, 0, 1, 5, 2, 6, 3]
    mixed = [samples[i] for i in order]
    mixed_tags = [tags[i] for i in order]
    got = select_real(as_layout(mixed, layout), mixed_tags)
    assert_same_samples(got, as_layout(real, layout))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_select_real_keeps_a_real_sample_with_an_all_zero_loss_mask(layout):
    _, _, samples, tags = padded_batch()
    samples[1]["loss_mask"] = torch.zeros_like(samples[1]["loss_mask"])
    got = select_real(as_layout(samples, layout), tags)
    assert len(got) == 4
    assert uids(got) == ["q0", "q0", "q1", "q1"]
    assert not rows(got, "loss_mask")[1].any()


@pytest.mark.parametrize("layout", LAYOUTS)
def test_select_real_returns_a_batch_without_padding_as_is(layout):
    real, real_tags, _, _ = padded_batch()
    batch = as_layout(real, layout)
    assert select_real(batch, real_tags) is batch


@pytest.mark.parametrize(
    ("layout", "n_pad", "message"),
    [
        pytest.param("list", 3, "all 3 samples of the batch are padding", id="all padding, list"),
        pytest.param("tensordict", 3, "all 3 samples of the batch are padding", id="all padding, tensordict"),
        pytest.param("list", 0, "the batch is empty", id="empty list"),
        pytest.param("tensordict", 0, "the batch is empty", id="empty tensordict"),
    ],
)
def test_select_real_of_a_batch_without_real_samples_warns(layout, n_pad, message):
    pad = ts.load_schema("text").padding(n_pad, eos_token_id=2)
    with pytest.warns(PaddingOnlyBatchWarning, match=f"^{message}; no metrics computed") as record:
        assert select_real(as_layout(pad.samples, layout), pad.tags) is None
    assert record[0].filename == __file__  # points at the caller, not at trajschema


def test_the_warning_is_a_user_warning_under_the_package_name():
    assert issubclass(PaddingOnlyBatchWarning, UserWarning)
    assert PaddingOnlyBatchWarning.__module__ == "trajschema"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_select_real_needs_one_tag_per_sample(layout):
    _, _, samples, tags = padded_batch()
    with pytest.raises(ValueError, match=re.escape("the batch has 7 samples but tags has 6 tag dicts")):
        select_real(as_layout(samples, layout), tags[:-1])


@pytest.mark.parametrize(
    ("batch", "tags", "error", "match"),
    [
        pytest.param(
            42, [{}], TypeError, "a batch must be a list of samples or a TensorDict, found int", id="int batch"
        ),
        pytest.param("ab", [{}, {}], TypeError, "found str", id="str batch"),
        pytest.param([{}], None, TypeError, "tags must be a sequence of tag dicts, found NoneType", id="tags None"),
        pytest.param(
            [{}],
            [{"is_padding": "yes"}],
            TypeError,
            r"tags\[0\]: is_padding must be True or False",
            id="non-bool is_padding",
        ),
        pytest.param(
            TensorDict({}, batch_size=[2, 3]),
            [{}, {}],
            ValueError,
            r"one batch dim, found batch_size \[2, 3\]",
            id="two batch dims",
        ),
    ],
)
def test_select_real_misuse(batch, tags, error, match):
    with pytest.raises(error, match=match):
        select_real(batch, tags)


def test_select_real_handles_strided_nested_columns():
    """TransferQueue falls back to strided nested tensors, which cannot be indexed by a tensor."""
    real, _, samples, tags = padded_batch()
    td = tq_batch(samples)
    strided = torch.nested.nested_tensor([s["input_ids"] for s in samples])
    td.set("input_ids", strided)
    got = select_real(td, tags)
    want = tq_batch(real)
    want.set("input_ids", torch.nested.nested_tensor([s["input_ids"] for s in real]))
    assert_same_samples(got, want)
    assert got.get("input_ids").layout == torch.strided


# ---------------------------------------------------------------------------
# exclude_padding


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("schema_name", SCHEMAS)
def test_metrics_with_padding_equal_metrics_of_the_real_samples(schema_name, layout):
    real, real_tags, samples, tags = padded_batch(schema_name)
    assert real_metrics(as_layout(samples, layout), tags) == rollout_metrics(as_layout(real, layout), real_tags)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_padding_dilutes_unfiltered_metrics(layout):
    """The bug: padding rows (reward 0, zero masks) pull per-sequence means down."""
    real, real_tags, samples, tags = padded_batch()
    truth = rollout_metrics(as_layout(real, layout), real_tags)
    diluted = rollout_metrics(as_layout(samples, layout), tags)
    assert truth["reward/seq_mean"] == pytest.approx(0.75)
    assert diluted["reward/seq_mean"] == pytest.approx(3 / 7)
    assert diluted["perplexity/seq_mean"] != truth["perplexity/seq_mean"]
    assert real_metrics(as_layout(samples, layout), tags)["reward/seq_mean"] == truth["reward/seq_mean"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_real_sample_with_a_zero_loss_mask_stays_in_the_metrics(layout):
    """The opposite bug: dropping a real sample as if it were padding because its mask is zero."""
    real, real_tags, samples, tags = padded_batch()
    for s in (real[1], samples[1]):
        s["loss_mask"] = torch.zeros_like(s["loss_mask"])
    got = real_metrics(as_layout(samples, layout), tags)
    assert got == rollout_metrics(as_layout(real, layout), real_tags)
    assert got["reward/seq_mean"] == pytest.approx(0.75)  # 4 samples, not 3
    assert got["response_length/mean"] == pytest.approx((4 + 6 + 2 + 5) / 4)


def test_exclude_padding_passes_real_samples_their_tags_and_extra_arguments():
    seen = {}

    @exclude_padding
    def metric(batch, tags, scale, *, prefix):
        """Doc of the metric."""
        seen.update(batch=batch, tags=tags)
        return {f"{prefix}/n": scale * len(batch)}

    tags = [{"is_padding": True}, {"seq_len": 3}, None, {"is_padding": True}]
    assert metric(["p", "a", "b", "q"], tags, 10.0, prefix="x") == {"x/n": 20.0}
    assert seen == {"batch": ["a", "b"], "tags": [{"seq_len": 3}, None]}
    assert metric.__name__ == "metric"
    assert metric.__doc__ == "Doc of the metric."
    assert metric.__wrapped__.__name__ == "metric"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_an_all_padding_batch_has_no_metrics(layout):
    calls = []

    @exclude_padding
    def metric(batch, tags):
        calls.append(batch)
        return {"n": float(len(batch))}

    pad = ts.load_schema("text").padding(4, eos_token_id=2)
    with pytest.warns(PaddingOnlyBatchWarning, match="all 4 samples of the batch are padding") as record:
        assert metric(as_layout(pad.samples, layout), pad.tags) == {}
    assert calls == []
    assert record[0].filename == __file__


def test_a_batch_of_real_samples_warns_nothing():
    real, real_tags, _, _ = padded_batch(n_pad=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PaddingOnlyBatchWarning)
        assert real_metrics(real, real_tags) == rollout_metrics(real, real_tags)


# ---------------------------------------------------------------------------
# GRPO groups


def test_padding_that_reuses_a_real_uid_shifts_advantages_and_breaks_the_contract():
    """The bug: a padding sample in group q1 changes q1's mean and std."""
    real, _, samples, tags = padded_batch()
    truth = grpo_advantages(sequence_rewards(real), uids(real))
    assert torch.equal(grpo_advantages(sequence_rewards(samples), uids(samples))[:4], truth)

    samples[4] = dict(samples[4], uid="q1")
    shifted = grpo_advantages(sequence_rewards(samples), uids(samples))[:4]
    assert not torch.equal(shifted[2:], truth[2:])
    with pytest.raises(ts.SchemaError, match="padding sample reuses real sample 2's uid 'q1'"):
        check_padding_contract(samples, tags, "text")


# ---------------------------------------------------------------------------
# Properties: for any real batch, padding changes nothing the trainer computes.

# Token losses are multiples of 1/256: their float32 sums are exact in any order, so
# "identical" tests the masking, not floating-point reassociation.
dyadic = st.integers(-1024, 1024).map(lambda k: k / 256)
nonzero_dyadic = st.tuples(st.integers(1, 1024), st.sampled_from([-1, 1])).map(lambda t: t[0] * t[1] / 256)
rewards = st.floats(-10, 10, allow_nan=False, width=32)


@st.composite
def padded_batches(draw):
    """(schema, mixed samples, mixed tags, real samples in mixed order, their tags, real positions).

    Real samples come in GRPO groups of random sizes and lengths, with random rewards,
    loss masks (all-zero ones included) and token losses; padding is derived from the
    schema, given arbitrary non-zero token losses (its masks must zero them) and
    interleaved at random positions.
    """
    schema = ts.load_schema(draw(st.sampled_from(SCHEMAS)))
    group_sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    real, real_tags = [], []
    for g, size in enumerate(group_sizes):
        for _ in range(size):
            p, r = draw(st.integers(1, 6)), draw(st.integers(0, 6))
            s = verl_sample(schema, p, r, uid=f"g{g}", seed=len(real))
            s["rm_scores"] = torch.zeros(r)
            if r:
                s["rm_scores"][-1] = draw(rewards)
            s["loss_mask"] = torch.tensor(draw(st.lists(st.integers(0, 1), min_size=r, max_size=r)), dtype=torch.int64)
            s["rollout_log_probs"] = torch.tensor(draw(st.lists(dyadic, min_size=r, max_size=r)), dtype=torch.float32)
            real.append(s)
            real_tags.append(draw(st.sampled_from([{}, {"is_padding": False}, None])))
    pad = schema.padding(draw(st.integers(0, 5)), eos_token_id=2, like=real[0])
    pad_samples = [
        dict(s, rollout_log_probs=torch.full_like(s["rollout_log_probs"], draw(nonzero_dyadic))) for s in pad.samples
    ]
    everything = [*zip(real, real_tags), *zip(pad_samples, pad.tags)]
    order = draw(st.permutations(range(len(everything))))
    mixed = [everything[i] for i in order]
    positions = [k for k, (_, tag) in enumerate(mixed) if not is_padding(tag)]
    return (
        schema,
        [s for s, _ in mixed],
        [t for _, t in mixed],
        [mixed[k][0] for k in positions],
        [mixed[k][1] for k in positions],
        positions,
    )


PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("layout", LAYOUTS)
@PROPERTY
@given(data=padded_batches())
def test_grpo_advantages_of_real_samples_ignore_padding(layout, data):
    schema, samples, tags, real, _, positions = data
    batch, alone = as_layout(samples, layout), as_layout(real, layout)
    check_padding_contract(batch, tags, schema)
    with_padding = grpo_advantages(sequence_rewards(batch), uids(batch))
    assert torch.equal(with_padding[positions], grpo_advantages(sequence_rewards(alone), uids(alone)))


@pytest.mark.parametrize("layout", LAYOUTS)
@PROPERTY
@given(data=padded_batches())
def test_token_mean_loss_ignores_padding(layout, data):
    _, samples, _, real, _, _ = data

    def token_mean_loss(batch):
        loss = torch.cat(rows(batch, "rollout_log_probs"))
        mask = torch.cat(rows(batch, "loss_mask"))
        return (loss * mask).sum() / (mask.sum() + 1e-8)  # verl's masked_mean

    assert torch.equal(token_mean_loss(as_layout(samples, layout)), token_mean_loss(as_layout(real, layout)))


@pytest.mark.parametrize("layout", LAYOUTS)
@PROPERTY
@given(data=padded_batches())
def test_metrics_through_exclude_padding_ignore_padding(layout, data):
    _, samples, tags, real, real_tags, _ = data
    got = real_metrics(as_layout(samples, layout), tags)
    want = rollout_metrics(as_layout(real, layout), real_tags)
    assert got == want
    assert all(math.isfinite(v) for v in got.values())


# --- exclude_padding checks the metric and each call's arguments before reading the batch (issue 14)

import functools  # noqa: E402


def _two(batch, tags):
    return {"n": float(len(tags))}


class _CallableMetric:
    def __call__(self, batch, tags, scale=1.0):
        return {"n": scale * len(tags)}


#: id -> (what is decorated, message regex of the TypeError raised at decoration).
NOT_A_METRIC = {
    "int": (3, r"^exclude_padding decorates a metric function fn\(batch, tags, \.\.\.\), found int 3$"),
    "none": (None, r"^exclude_padding decorates a metric function .*found NoneType$"),
    "str": ("mean", r"^exclude_padding decorates a metric function .*found str 'mean'$"),
    "no-arguments": (
        lambda: None,
        r"^exclude_padding: metric '<lambda>' must take the batch and its tags .*signature is \(\)",
    ),
    "one-argument": (lambda batch: {}, r"must take the batch and its tags .*signature is \(batch\)"),
    "keyword-only": (lambda *, batch, tags: {}, r"must take the batch and its tags .*signature is \(\*, batch, tags\)"),
    "builtin-of-one": (len, r"^exclude_padding: metric 'len' must take the batch and its tags"),
    "partial-used-up": (functools.partial(_two, [], []), r"metric .*must take the batch and its tags"),
}


@pytest.mark.parametrize(("fn", "match"), list(NOT_A_METRIC.values()), ids=list(NOT_A_METRIC))
def test_exclude_padding_refuses_what_cannot_be_a_metric(fn, match):
    with pytest.raises(TypeError) as info:
        exclude_padding(fn)
    assert re.search(match, str(info.value)), str(info.value)


@pytest.mark.parametrize(
    "fn",
    [
        pytest.param(_two, id="function"),
        pytest.param(lambda *a: {"n": float(len(a[1]))}, id="varargs"),
        pytest.param(_CallableMetric(), id="callable-object"),
        pytest.param(functools.partial(lambda k, b, t: {"n": k * len(t)}, 1.0), id="partial"),
        pytest.param(lambda batch, tags, *, k=1: {"n": k * len(tags)}, id="keyword-default"),
    ],
)
def test_exclude_padding_accepts_every_callable_of_batch_and_tags(fn):
    assert exclude_padding(fn)([{}, {}], [{}, {"is_padding": True}]) == {"n": 1.0}


#: id -> (metric, extra call arguments that do not fit it, message regex).
CALLS_THAT_DO_NOT_FIT = {
    "extra-positional": (
        _two,
        ((1,), {}),
        r"^metric '_two' cannot be called as fn\(batch, tags, \*args, \*\*kwargs\) here: too many",
    ),
    "unknown-keyword": (
        _two,
        ((), {"scale": 2}),
        r"^metric '_two' cannot be called .*unexpected keyword argument 'scale'",
    ),
    "missing-argument": (
        lambda b, t, scale: {},
        ((), {}),
        r"^metric '<lambda>' cannot be called .*missing a required argument: 'scale'",
    ),
}


@pytest.mark.parametrize("padding_only", [False, True], ids=["mixed", "padding-only"])
@pytest.mark.parametrize(
    ("fn", "extra", "match"), list(CALLS_THAT_DO_NOT_FIT.values()), ids=list(CALLS_THAT_DO_NOT_FIT)
)
def test_a_call_that_does_not_fit_the_metric_is_refused_before_the_batch_is_read(fn, extra, match, padding_only):
    """Before, a batch of padding only returned {} with a warning, hiding the mistake until a real batch came."""
    calls = []
    recording = functools.wraps(fn)(lambda *a, **k: calls.append(a) or fn(*a, **k))  # fn's signature, via __wrapped__
    metric = exclude_padding(recording)
    tags = [{"is_padding": True}] * 2 if padding_only else [{}, {"is_padding": True}]
    args, kwargs = extra
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no PaddingOnlyBatchWarning: the batch is not read
        with pytest.raises(TypeError) as info:
            metric([{}, {}], tags, *args, **kwargs)
    assert re.search(match, str(info.value)), str(info.value)
    assert calls == []


@pytest.mark.parametrize(
    ("batch", "tags", "error", "match"),
    [
        pytest.param(
            {"uid": "q"},
            [{}],
            TypeError,
            "a batch must be a list of samples or a TensorDict, found dict",
            id="one sample",
        ),
        pytest.param(
            None, [], TypeError, "a batch must be a list of samples or a TensorDict, found NoneType", id="none batch"
        ),
        pytest.param(
            TensorDict({}, batch_size=[]), [], ValueError, r"one batch dim, found batch_size \[\]", id="no batch dim"
        ),
        pytest.param(
            [{}], {"is_padding": False}, TypeError, "tags must be a sequence of tag dicts, found dict", id="tags dict"
        ),
        pytest.param(
            [{}], iter([{}]), TypeError, "tags must be a sequence of tag dicts, found list_iterator", id="tags iterator"
        ),
        pytest.param([{}], [{}, {}], ValueError, "the batch has 1 samples but tags has 2 tag dicts", id="tags long"),
        pytest.param(
            [{}, {}],
            [None, 3],
            TypeError,
            r"^tags\[1\]: a tag dict must be a mapping or None, found int 3$",
            id="tag int",
        ),
    ],
)
def test_select_real_and_exclude_padding_refuse_alike(batch, tags, error, match):
    for call in (select_real, exclude_padding(_two)):
        with pytest.raises(error, match=match):
            call(batch, tags)
