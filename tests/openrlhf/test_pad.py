"""`trajschema.openrlhf.pad`: padding experiences of OpenRLHF's own ``Experience`` class, the
multiple, and the refusals (typed, naming what was expected, changing nothing)."""

from __future__ import annotations

import pickle
from types import SimpleNamespace

import pytest
import torch

import trajschema as ts
import trajschema.openrlhf as to
from tests.openrlhf_support import EOS, args_for, rollout


@pytest.fixture
def samples(openrlhf):
    return rollout(openrlhf, [(3, 2), (2, 4), (4, 1)], [1.0, 0.0, 0.5])


def test_padding_experiences_batch_with_openrlhfs_own_functions(openrlhf, samples) -> None:
    padded = to.pad_rollout_samples(samples, 4)
    assert len(padded) == 4 and padded[:3] == samples
    [pad] = padded[3:]
    assert pad.sequences.tolist() == [[EOS] * 5] and pad.attention_mask.tolist() == [[1] * 5]
    assert not pad.action_mask.any() and float(pad.rewards) == 0 and float(pad.total_length) == 5
    batch = openrlhf.experience.Experience.concat_experiences(padded, 0)  # split_rollout_samples' merge
    assert batch.info["is_padding"].tolist() == [False, False, False, True]
    items = openrlhf.experience.split_experience_batch(batch)
    again = openrlhf.experience.make_experience_batch(items)  # the replay buffer's collate
    assert to.padding_flags(again) == [False, False, False, True]
    assert pickle.loads(pickle.dumps(pad)).sequences.tolist() == pad.sequences.tolist()


def test_no_padding_needed_adds_only_the_tags(samples) -> None:
    assert to.pad_rollout_samples(samples, 3) == samples
    assert [s.info["is_padding"].tolist() for s in samples] == [[False]] * 3


@pytest.mark.parametrize(
    ("kw", "multiple"),
    [
        ({}, 4),
        ({"rollout_mbs": 2}, 8),
        ({"rollout_mbs": 2, "train_mbs": 3}, 24),
        ({"rollout_mbs": 2, "dynamic": True}, 4),
        ({"actors": 2, "critic": True}, 2),
    ],
    ids=["actors", "rollout-micro", "both-micro", "dynamic", "critic"],
)
def test_pad_multiple(kw, multiple) -> None:
    args = args_for(**kw)
    groups = ("actor", "critic") if kw.get("critic") else ("actor",)
    assert to.pad_multiple(args, groups=groups) == multiple


def test_a_critic_of_another_size_joins_the_multiple() -> None:
    args = args_for(actors=4)
    args.critic = SimpleNamespace(num_nodes=1, num_gpus_per_node=3)
    assert to.pad_multiple(args, groups=("actor", "critic")) == 12


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda s: to.pad_rollout_samples([], 4), ValueError, "no rollout samples"),
        (lambda s: to.pad_rollout_samples(s, 0), ValueError, "multiple must be a positive int, found 0"),
        (lambda s: to.pad_rollout_samples("abc", 2), TypeError, "samples must be a list of OpenRLHF Experiences"),
        (lambda s: to.pad_rollout_samples([*s, object()], 2), TypeError, "expected an OpenRLHF Experience"),
        (lambda s: to.padding_experiences(s[0], -1), ValueError, "count must be an int"),
        (lambda s: to.pad_rollout_samples(s, 4, eos_token_id=-2), ValueError, "eos_token_id must be an int"),
    ],
    ids=["empty", "zero-multiple", "a-string", "not-an-experience", "negative-count", "negative-eos"],
)
def test_misuse_is_refused_and_changes_nothing(samples, call, error, match) -> None:
    with pytest.raises(error, match=match):
        call(samples)
    assert all("is_padding" not in s.info for s in samples)


def test_bad_is_padding_tags_are_refused(samples) -> None:
    samples[0].info["is_padding"] = torch.tensor([[True, False]])
    with pytest.raises(ValueError, match=r"one bool per row \(1\), found bool\[1, 2\]"):
        to.padding_flags(samples[0])
    samples[0].info["is_padding"] = torch.ones(1, dtype=torch.bool)
    with pytest.raises(ValueError, match="the first sample must be a real one"):
        to.pad_rollout_samples(samples, 4)


def test_a_sample_without_a_real_token_is_refused(samples) -> None:
    samples[0].attention_mask = torch.zeros_like(samples[0].attention_mask)
    with pytest.raises(ts.SchemaError, match="attention_mask row 0: has no real token"):
        to.pad_rollout_samples(samples, 4)
    assert all("is_padding" not in s.info for s in samples)


def test_the_audit_flags_padding_rows_that_are_not_inert(openrlhf, samples) -> None:
    padded = to.pad_rollout_samples(samples, 4)
    batch = openrlhf.experience.Experience.concat_experiences(padded, 0)
    batch.advantages = torch.zeros(batch.action_mask.shape)
    assert to.audit_experiences([batch]).faults == ()
    batch.action_mask[3, 0] = 1
    batch.advantages[3, 1] = 0.5
    found = to.audit_experiences([batch])
    assert found.figures["trajschema/padding_loss_tokens"] == 1.0
    assert found.figures["trajschema/padding_advantage_rows"] == 1.0
    with pytest.raises(Exception, match="padding_loss_tokens = 1"):
        found.raise_if_broken()


def test_the_split_pads_with_installs_eos_even_when_it_is_0(samples) -> None:
    """``install(eos_token_id=0)`` wins over the tokenizer's EOS (0 is an id, not "not given")."""
    from trajschema.openrlhf.experience import settings
    from trajschema.openrlhf.trainer import split_for

    split = split_for(lambda self, rollout: rollout)
    maker = SimpleNamespace(args=args_for(), tokenizer=SimpleNamespace(eos_token_id=EOS), actor_model_group=object())
    settings.update(eos_token_id=0)
    try:
        padded = split(maker, samples)
    finally:
        settings.clear()
    assert padded[3].sequences.tolist() == [[0] * 5]
    assert split(maker, samples)[3].sequences.tolist() == [[EOS] * 5]  # not installed: the tokenizer's


# -- what a hostile rollout gets: a typed error naming the field, nothing tagged ------------


@pytest.mark.parametrize(
    ("mask", "match"),
    [
        (torch.ones(1, 9, dtype=torch.long), r"attention_mask .* must be \(1, 5\), found int64\[1, 9\]"),
        (torch.full((1, 5), 2, dtype=torch.long), "attention_mask row 0: holds values other than 0 and 1"),
        (torch.full((1, 5), float("nan")), "attention_mask .* must be 0/1 integers, found float32"),
        (torch.ones(1, 5, dtype=torch.long, device="meta"), r"attention_mask .* found int64\[1, 5\] meta"),
        (torch.nested.nested_tensor([torch.ones(5, dtype=torch.long)]), "attention_mask .* found int64 nested"),
    ],
    ids=["wider-than-sequences", "values-2", "nan", "meta", "nested"],
)
def test_a_malformed_attention_mask_is_named_and_nothing_is_tagged(samples, mask, match) -> None:
    samples[0].attention_mask = mask
    with pytest.raises(ts.SchemaError, match=match):
        to.pad_rollout_samples(samples, 4)
    assert all("is_padding" not in s.info for s in samples)


def test_a_nested_episode_field_is_named(samples) -> None:
    samples[0].rewards = torch.nested.nested_tensor([torch.ones(1)])
    with pytest.raises(ts.SchemaError, match=r"experience.rewards .* must be \(1, \.\.\.\), found float32 nested"):
        to.pad_rollout_samples(samples, 4)


@pytest.mark.parametrize(("dtype", "eos"), [(torch.int32, 2**31 + 1), (torch.uint8, 300)])
def test_an_eos_the_sequences_dtype_cannot_hold_is_refused_not_wrapped(samples, dtype, eos) -> None:
    samples[0].sequences = samples[0].sequences.to(dtype)
    with pytest.raises(ValueError, match=f"eos_token_id {eos} does not fit experience.sequences' dtype"):
        to.pad_rollout_samples(samples, 4, eos_token_id=eos)
    assert all("is_padding" not in s.info for s in samples)


def test_a_schema_with_only_input_ids_pads_response_less_rows(samples, tmp_path) -> None:
    path = tmp_path / "ids.yaml"
    path.write_text(
        "name: ids\ndims:\n  prompt: {min: 1}\n  response: {min: 0}\n  seq: prompt + response\n"
        "fields:\n  input_ids: {shape: [seq], dtype: int64, pad: eos}\n"
    )
    padded = to.pad_rollout_samples(samples, 4, schema=ts.load_schema(str(path)))
    assert padded[3].sequences.tolist() == [[EOS] * 5] and not padded[3].action_mask.any()


@pytest.mark.parametrize(
    ("breakage", "match"),
    [
        ("ds", "args has no ds.ring_attn_size"),
        ("train.dynamic_batch_enable", "args has no train.dynamic_batch_enable"),
        ("actor.num_nodes", "args has no actor.num_nodes"),
    ],
)
def test_pad_multiple_names_what_args_lacks(breakage, match) -> None:
    args = args_for()
    owner, _, name = breakage.rpartition(".")
    delattr(args if not owner else getattr(args, owner), name)
    with pytest.raises(TypeError, match=match):
        to.pad_multiple(args)
    with pytest.raises(TypeError, match="groups must be a sequence of args section names, found str"):
        to.pad_multiple(args_for(), groups="actor")


def test_padding_before_a_real_row_is_refused(samples) -> None:
    samples[1].info["is_padding"] = torch.ones(1, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"samples\[2\] row 0 is real but comes after padding \(samples\[1\] row 0\)"):
        to.pad_rollout_samples(samples, 4)


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("advantages", torch.tensor(0.0), r"experience.advantages must be a \(B, \.\.\.\) tensor .* found float32\[\]"),
        ("action_mask", torch.zeros(1, 4, device="meta"), r"experience.action_mask .* found float32\[1, 4\] meta"),
        ("advantages", torch.nested.nested_tensor([torch.zeros(4)]), "experience.advantages .* found float32 nested"),
    ],
    ids=["0d-advantages", "meta-action-mask", "nested-advantages"],
)
def test_the_audit_names_a_column_it_cannot_read(samples, field, value, match) -> None:
    samples[0].info["is_padding"] = torch.ones(1, dtype=torch.bool)
    setattr(samples[0], field, value)
    with pytest.raises(TypeError, match=match):
        to.audit_experiences([samples[0]])


def test_a_meta_padding_tag_is_refused(samples) -> None:
    samples[0].info["is_padding"] = torch.zeros(1, dtype=torch.bool, device="meta")
    with pytest.raises(ValueError, match=r"must hold one bool per row \(1\), found bool\[1\] meta"):
        to.padding_flags(samples[0])
