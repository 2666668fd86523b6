"""The is_padding contract: padding is known from its tag alone, and must be inert."""

from __future__ import annotations

import pickle
import re

import pytest
import torch
from tensordict import TensorDict

import trajschema as ts
from tests.meta_support import on_meta
from trajschema.contract.contract import (
    _zeroed_masks,
    check_padding_contract,
    is_padding,
    padding_contract_violations,
    real_count,
    real_mask,
)
from trajschema.testing import tq_batch, verl_sample

SCHEMAS = ts.schema_names()
LAYOUTS = ["list", "tensordict"]
PAD_UID = "pad" + "0123456789abcdef" * 2


def as_layout(samples, layout):
    """The samples as the trainer holds them: a list, or TransferQueue's TensorDict."""
    return list(samples) if layout == "list" else tq_batch(samples)


def padded_batch(schema_name, n_pad=3):
    """Two GRPO groups of real samples (as verl writes them) followed by padding.

    Returns (schema, samples, tags); samples and tags are fresh lists of fresh dicts that
    a test may tamper with.
    """
    schema = ts.load_schema(schema_name)
    real = [
        verl_sample(schema, 5, 4, uid="q0", seed=0),
        verl_sample(schema, 5, 6, uid="q0", seed=1),
        verl_sample(schema, 3, 2, uid="q1", seed=2),
    ]
    real_tags = [{"is_padding": False, "prompt_len": 5, "response_len": 4, "seq_len": 9}, {}, None]
    pad = schema.padding(n_pad, eos_token_id=2, like=real[0])
    samples = [*real, *(dict(s) for s in pad.samples)]
    tags = [*real_tags, *(dict(t) for t in pad.tags)]
    return schema, samples, tags


# ---------------------------------------------------------------------------
# is_padding, real_mask, real_count


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        pytest.param({"is_padding": True}, True, id="is_padding True"),
        pytest.param({"is_padding": True, "seq_len": 128}, True, id="with length tags"),
        pytest.param({"is_padding": False}, False, id="is_padding False"),
        pytest.param({}, False, id="empty tag dict"),
        pytest.param({"seq_len": 9}, False, id="no is_padding key"),
        pytest.param(None, False, id="no tag dict"),
    ],
)
def test_is_padding(tag, expected):
    assert is_padding(tag) is expected


@pytest.mark.parametrize(
    ("value", "named"),
    [
        pytest.param(1, "int 1", id="int 1"),
        pytest.param(0, "int 0", id="int 0"),
        pytest.param("true", "str 'true'", id="string true"),
        pytest.param("False", "str 'False'", id="string False"),
        pytest.param(None, "NoneType", id="None"),
        pytest.param(1.0, "float 1.0", id="float"),
        pytest.param(torch.tensor(True), "b[]", id="bool tensor"),
    ],
)
def test_is_padding_refuses_to_guess(value, named):
    with pytest.raises(TypeError, match=re.escape(f"is_padding must be True or False, found {named};")):
        is_padding({"is_padding": value})


def test_is_padding_rejects_a_tag_that_is_not_a_mapping():
    with pytest.raises(TypeError, match="a tag dict must be a mapping or None, found list of 1"):
        is_padding([True])


def test_real_mask_and_count():
    tags = [{}, {"is_padding": True}, None, {"is_padding": False}, {"is_padding": True}]
    mask = real_mask(tags)
    assert mask.dtype == torch.bool
    assert mask.tolist() == [True, False, True, True, False]
    assert real_count(tags) == 3


def test_real_mask_of_no_tags():
    assert real_mask([]).shape == (0,)
    assert real_mask([]).dtype == torch.bool
    assert real_count([]) == 0


def test_real_mask_names_the_bad_tag():
    with pytest.raises(TypeError, match=r"tags\[2\]: is_padding must be True or False, found str 'yes'"):
        real_mask([{}, {"is_padding": True}, {"is_padding": "yes"}])


@pytest.mark.parametrize("tags", [None, "abc", {"is_padding": True}], ids=["None", "str", "one tag dict"])
def test_real_mask_needs_a_sequence(tags):
    with pytest.raises(TypeError, match="tags must be a sequence of tag dicts"):
        real_mask(tags)


def test_a_real_sample_with_an_all_zero_loss_mask_is_real():
    """A truncated or filtered response has a zero loss mask; it is still a real sample."""
    schema, samples, tags = padded_batch("text")
    samples[1]["loss_mask"] = torch.zeros_like(samples[1]["loss_mask"])
    samples[1]["response_mask"] = torch.zeros_like(samples[1]["response_mask"])
    assert real_mask(tags).tolist() == [True, True, True, False, False, False]
    for layout in LAYOUTS:
        check_padding_contract(as_layout(samples, layout), tags, schema)


# ---------------------------------------------------------------------------
# check_padding_contract


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("schema_name", SCHEMAS)
def test_padding_from_the_schema_keeps_the_contract(schema_name, layout):
    schema, samples, tags = padded_batch(schema_name)
    check_padding_contract(as_layout(samples, layout), tags, schema)
    assert padding_contract_violations(as_layout(samples, layout), tags, schema_name) == []


def _set_loss_mask(samples, tags):
    samples[3]["loss_mask"] = torch.ones_like(samples[3]["loss_mask"])
    return (3, "loss_mask", "padding")


def _set_response_mask(samples, tags):
    samples[4]["response_mask"] = torch.ones_like(samples[4]["response_mask"])
    return (4, "response_mask", "padding")


def _reuse_real_uid(samples, tags):
    samples[5]["uid"] = "q1"
    return (5, "uid", "padding")


def _untag_padding(samples, tags):
    tags[4]["is_padding"] = False
    return (4, "is_padding", "padding")


def _drop_padding_tag_dict(samples, tags):
    tags[4] = None
    return (4, "is_padding", "padding")


def _drop_is_padding_key(samples, tags):
    del tags[4]["is_padding"]
    return (4, "is_padding", "padding")


def _real_sample_with_padding_uid(samples, tags):
    samples[2]["uid"] = PAD_UID
    return (2, "is_padding", "padding")


def _wrong_seq_len(samples, tags):
    tags[3]["seq_len"] = 9
    return (3, "seq_len", "tag")


def _wrong_response_len(samples, tags):
    tags[5]["response_len"] = 4
    return (5, "response_len", "tag")


def _non_bool_is_padding(samples, tags):
    tags[5]["is_padding"] = 1
    return (5, "is_padding", "tag")


TAMPERS = [
    pytest.param(_set_loss_mask, id="padding with a non-zero loss_mask"),
    pytest.param(_set_response_mask, id="padding with a non-zero response_mask"),
    pytest.param(_reuse_real_uid, id="padding reusing a real uid"),
    pytest.param(_untag_padding, id="padding tagged is_padding=False"),
    pytest.param(_drop_padding_tag_dict, id="padding without a tag dict"),
    pytest.param(_drop_is_padding_key, id="padding tag without is_padding"),
    pytest.param(_real_sample_with_padding_uid, id="untagged sample with a padding uid"),
    pytest.param(_wrong_seq_len, id="padding with a wrong seq_len tag"),
    pytest.param(_wrong_response_len, id="padding with a wrong response_len tag"),
    pytest.param(_non_bool_is_padding, id="is_padding=1"),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("tamper", TAMPERS)
def test_each_breach_is_caught(tamper, layout):
    schema, samples, tags = padded_batch("text")
    expected = tamper(samples, tags)
    with pytest.raises(ts.SchemaError) as info:
        check_padding_contract(as_layout(samples, layout), tags, schema)
    assert [(v.sample, v.field, v.code) for v in info.value.violations] == [expected]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("schema_name", SCHEMAS)
def test_every_breach_is_reported_together(schema_name, layout):
    schema, samples, tags = padded_batch(schema_name, n_pad=5)
    samples[3]["loss_mask"] = torch.ones_like(samples[3]["loss_mask"])
    samples[4]["uid"] = "q0"
    tags[5]["is_padding"] = False
    tags[6]["seq_len"] = 7
    samples[7]["response_mask"] = torch.ones_like(samples[7]["response_mask"])
    samples[7]["loss_mask"] = torch.ones_like(samples[7]["loss_mask"])
    with pytest.raises(ts.SchemaError) as info:
        check_padding_contract(as_layout(samples, layout), tags, schema)
    assert [(v.sample, v.field, v.code) for v in info.value.violations] == [
        (3, "loss_mask", "padding"),
        (4, "uid", "padding"),
        (5, "is_padding", "padding"),
        (6, "seq_len", "tag"),
        (7, "response_mask", "padding"),
        (7, "loss_mask", "padding"),
    ]
    assert str(info.value).startswith(f"6 violations of schema '{schema_name}' in 5 samples:")


def test_messages_say_what_is_wrong_and_why():
    schema, samples, tags = padded_batch("text")
    samples[3]["loss_mask"] = torch.ones_like(samples[3]["loss_mask"])
    samples[4]["uid"] = "q1"
    tags[5]["is_padding"] = False
    tags[3]["seq_len"] = 9
    found = {(v.sample, v.field): v for v in padding_contract_violations(samples, tags, schema)}
    assert str(found[3, "loss_mask"]) == (
        "sample 3, loss_mask: padding sample (is_padding=True) has 1 non-zero loss_mask elements of 1; "
        "padding must add nothing to the loss or metrics"
    )
    assert str(found[4, "uid"]) == (
        "sample 4, uid: padding sample reuses real sample 2's uid 'q1'; it would join that GRPO group "
        "and shift its advantages (use trajschema.new_padding_uid())"
    )
    uid = samples[5]["uid"]
    assert str(found[5, "is_padding"]) == (
        f"sample 5, is_padding: uid {uid!r} is a padding uid but the sample has is_padding=False; "
        "a padding sample must be tagged is_padding=True or metrics count it as real"
    )
    assert str(found[3, "seq_len"]) == "sample 3, seq_len: tag says 9 but the sample's seq is 128"
    assert (found[3, "seq_len"].expected, found[3, "seq_len"].actual) == ("128 (seq)", "9")


def test_real_samples_are_never_checked_as_padding():
    """Zero masks, odd length tags and shared uids are all fine on real samples."""
    schema, samples, tags = padded_batch("text", n_pad=0)
    samples[0]["loss_mask"] = torch.zeros_like(samples[0]["loss_mask"])
    samples[2]["uid"] = "q0"
    tags[0]["seq_len"] = 1  # validate_batch's business, not the padding contract's
    for layout in LAYOUTS:
        check_padding_contract(as_layout(samples, layout), tags, schema)


def test_tags_none_means_nothing_is_tagged():
    schema, samples, _ = padded_batch("text", n_pad=2)
    found = padding_contract_violations(samples, None, schema)
    assert [(v.sample, v.field, v.code) for v in found] == [(3, "is_padding", "padding"), (4, "is_padding", "padding")]
    assert found[0].actual == "no tag dict"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_tags_must_pair_with_samples(layout):
    schema, samples, tags = padded_batch("text")
    with pytest.raises(ts.SchemaError) as info:
        check_padding_contract(as_layout(samples, layout), tags[:-1], schema)
    (v,) = info.value.violations
    assert (v.sample, v.field, v.code, v.expected, v.actual) == (None, "<tags>", "batch", "6 tag dicts", "5 tag dicts")


def test_a_tag_that_is_not_a_mapping_is_reported():
    schema, samples, tags = padded_batch("text")
    tags[1] = "padding"
    (v,) = padding_contract_violations(samples, tags, schema)
    assert (v.sample, v.field, v.code, v.actual) == (1, "<tag>", "tag", "str 'padding'")


@pytest.mark.parametrize("batch", [42, "samples", {"uid": "q0"}], ids=["int", "str", "one sample"])
def test_rejects_what_is_not_a_batch(batch):
    with pytest.raises(TypeError, match="a batch must be a list of sample mappings or a TensorDict"):
        check_padding_contract(batch, [{}], "text")


def test_an_empty_batch_keeps_the_contract():
    check_padding_contract([], [], "text")
    check_padding_contract(TensorDict({}, batch_size=[0]), [], "text")


def test_the_error_crosses_process_boundaries():
    schema, samples, tags = padded_batch("text")
    samples[4]["uid"] = "q0"
    with pytest.raises(ts.SchemaError) as info:
        check_padding_contract(samples, tags, schema)
    again = pickle.loads(pickle.dumps(info.value))
    assert again.violations == info.value.violations
    assert str(again) == str(info.value)


@pytest.mark.parametrize("schema_name", SCHEMAS)
def test_the_zeroed_masks_come_from_the_schema(schema_name):
    """loss/response masks pad with 0 and are checked; attention_mask pads with 1 and is not."""
    assert _zeroed_masks(ts.load_schema(schema_name)) == ["response_mask", "loss_mask"]


# The TensorDict path reads masks column-wise; every layout TransferQueue (or a user
# slicing its result) can hand back must count the same non-zero elements.


def _dense(col_samples):
    return torch.stack(col_samples)


def _strided(col_samples):
    return torch.nested.nested_tensor(col_samples)


def _narrowed_jagged(col_samples):
    # A jagged tensor with gaps between rows (lengths shorter than the offsets' steps).
    width = max(t.shape[0] for t in col_samples) + 2
    dense = torch.zeros(len(col_samples), width, dtype=col_samples[0].dtype)
    starts = torch.tensor([1] * len(col_samples))
    for i, t in enumerate(col_samples):
        dense[i, 1 : 1 + t.shape[0]] = t
        dense[i, 0] = 1  # outside every row: must not be counted
        dense[i, -1] = 1
    lengths = torch.tensor([t.shape[0] for t in col_samples])
    return torch.nested.narrow(dense, 1, starts, lengths, layout=torch.jagged)


@pytest.mark.parametrize(
    "make_column", [_dense, _strided, _narrowed_jagged], ids=["dense", "strided nested", "narrowed jagged"]
)
def test_masks_are_read_from_every_column_layout(make_column):
    schema = ts.load_schema("text")
    real = [verl_sample(schema, 4, 3, uid=f"q{i}", seed=i) for i in range(2)]
    pad = schema.padding(3, eos_token_id=2, like=real[0], dims={"prompt": 4, "response": 3})
    samples = [*real, *pad.samples]
    tags = [{}, {}, *pad.tags]
    td = tq_batch(samples)
    masks = [s["loss_mask"].clone() for s in samples]
    masks[0][:] = 0  # real: fine
    masks[3][1] = 1
    masks[4][:] = 1
    td.set("loss_mask", make_column(masks))
    found = padding_contract_violations(td, tags, schema)
    assert [(v.sample, v.field, v.actual) for v in found] == [
        (3, "loss_mask", "1 of 3 elements non-zero"),
        (4, "loss_mask", "3 of 3 elements non-zero"),
    ]


# --- arguments (issue 14): what is not a batch, tags or schema is named; tags are data

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_REAL = verl_sample(ts.load_schema("text"), 3, 2)

#: id -> (samples_or_batch, tags, schema, exception type (exactly), message regex).
BAD_CONTRACT_ARGUMENTS = {
    "schema-int": ([_REAL], None, 3, TypeError, r"^schema must be a trajschema\.Schema or a schema name, found int 3$"),
    "schema-bytes": ([_REAL], None, b"text", TypeError, r"^schema must be .*found bytes$"),
    "schema-none": ([_REAL], None, None, TypeError, r"^schema must be .*found NoneType$"),
    "schema-typo": ([_REAL], None, "txt", ts.SchemaNotFoundError, r"^no schema 'txt'; did you mean 'text'\?"),
    "batch-int": (3, None, "text", TypeError, r"^a batch must be a list of sample mappings or a TensorDict, found int"),
    "batch-of-ints": ([1], None, "text", TypeError, r"^batch\[0\]: a sample must be a mapping .*found int 1$"),
    "batch-with-none": ([_REAL, None], None, "text", TypeError, r"^batch\[1\]: a sample must be a mapping"),
}


@pytest.mark.parametrize("check", [check_padding_contract, padding_contract_violations], ids=["check", "violations"])
@pytest.mark.parametrize(
    ("batch", "tags", "schema", "exc", "match"),
    list(BAD_CONTRACT_ARGUMENTS.values()),
    ids=list(BAD_CONTRACT_ARGUMENTS),
)
def test_bad_batches_and_schemas_are_refused_by_name(check, batch, tags, schema, exc, match):
    with pytest.raises(Exception) as info:
        check(batch, tags, schema)
    assert type(info.value) is exc
    assert re.search(match, str(info.value)), str(info.value)


#: id -> (tags for a batch of two samples (the second one padding-shaped), the (sample, field, code) reported).
ODD_CONTRACT_TAGS = {
    "short": ([{}], [(None, "<tags>", "batch")]),
    "long": ([{}, {}, {}], [(None, "<tags>", "batch")]),
    "a-dict": ({"is_padding": True}, [(None, "<tags>", "batch")]),
    "a-str": ("ab", [(None, "<tags>", "batch")]),
    "an-int": (3, [(None, "<tags>", "batch")]),
    "an-iterator": (iter([{}, {}]), [(None, "<tags>", "batch")]),
    "a-tensor": (torch.zeros(2), [(None, "<tags>", "batch")]),
    "a-tuple": (({}, None), []),
    "non-mapping-tags": ([1, [True]], [(0, "<tag>", "tag"), (1, "<tag>", "tag")]),
    "is_padding-not-a-bool": (
        [{"is_padding": 1}, {"is_padding": "true"}],
        [(0, "is_padding", "tag"), (1, "is_padding", "tag")],
    ),
    "non-str-tag-keys": ([{1: 2}, {(1,): True}], []),
    "length-tag-of-wrong-kind": (
        [{}, {"is_padding": True, "seq_len": [1]}],
        [(1, "response_mask", "padding"), (1, "loss_mask", "padding"), (1, "seq_len", "tag")],
    ),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("tags", "expected"), list(ODD_CONTRACT_TAGS.values()), ids=list(ODD_CONTRACT_TAGS))
def test_tags_of_every_odd_kind_are_violations(layout, tags, expected):
    samples = [_REAL, verl_sample(ts.load_schema("text"), 3, 2, uid="q1")]
    if isinstance(tags, type(iter([]))):
        tags = iter(list(tags))
    found = padding_contract_violations(as_layout(samples, layout), tags, "text")
    assert [(v.sample, v.field, v.code) for v in found] == expected


_TAG_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=3),
    st.lists(st.booleans(), max_size=2),
    st.sampled_from([torch.tensor(True), torch.tensor([True, False]), object()]),
)
_TAGS = st.one_of(
    st.none(), _TAG_VALUES, st.dictionaries(st.sampled_from(["is_padding", "x"]), _TAG_VALUES, max_size=2)
)


@settings(deadline=None)
@given(tag=_TAGS)
def test_is_padding_answers_a_bool_or_names_what_it_will_not_guess(tag):
    # The reference: no tag dict or no key is real; only a bool answers; anything else is refused.
    if tag is None or (isinstance(tag, dict) and "is_padding" not in tag):
        refusal = None
    elif not isinstance(tag, dict):
        refusal = "a tag dict must be a mapping or None, found "
    elif type(tag["is_padding"]) is not bool:
        refusal = "is_padding must be True or False, found "
    else:
        refusal = None
    if refusal is None:
        got = is_padding(tag)
        assert got is (isinstance(tag, dict) and tag.get("is_padding") is True)
        assert real_mask([{}, tag]).tolist() == [True, not got]
        assert real_count([{}, tag]) == 2 - got
        return
    with pytest.raises(TypeError, match=f"^{re.escape(refusal)}"):
        is_padding(tag)
    for over_a_list in (real_mask, real_count):  # the same refusal, naming the tag's index
        with pytest.raises(TypeError, match=f"^tags\\[1\\]: {re.escape(refusal)}"):
            over_a_list([{}, tag])


# -- odd batches, tags and schemas (each test failed when written) ---------------------------------

TEXT = ts.load_schema("text")


def _codes(found):
    return [(v.sample, v.field, v.code) for v in found]


def test_padding_contract_on_a_meta_batch_matches_the_list_of_meta_samples():
    """padding_contract_violations on a meta TensorDict reads no values, like it does for a list of meta samples."""
    samples = [verl_sample(TEXT, 5, 3), verl_sample(TEXT, 4, 3)]
    tags = [{}, {"is_padding": True}]
    as_list = [{k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in s.items()} for s in samples]
    expected = padding_contract_violations(as_list, tags, TEXT)
    assert padding_contract_violations(on_meta(tq_batch(samples)), tags, TEXT) == expected


def test_padding_contract_reports_a_non_int_length_tag_on_a_tensordict():
    """A padding sample tagged seq_len='128' breaks the contract on a TensorDict batch as on the list."""
    real = verl_sample(TEXT, 5, 3, uid="q0")
    pad = TEXT.padding(2, eos_token_id=2, like=real)
    batch, tags = [real, *pad.samples], [{}, *[dict(t) for t in pad.tags]]
    tags[1]["seq_len"] = "128"
    expected = _codes(padding_contract_violations(batch, tags, TEXT))
    assert expected == [(1, "seq_len", "tag")]
    assert _codes(padding_contract_violations(tq_batch(batch), tags, TEXT)) == expected


@pytest.mark.parametrize("schema", [123, None], ids=["int", "None"])
def test_padding_contract_with_a_non_schema(schema):
    """padding_contract_violations(schema=<not a Schema or name>) is a TypeError naming it, not an AttributeError."""
    with pytest.raises(TypeError, match="schema"):
        ts.padding_contract_violations([verl_sample(TEXT, 5, 3)], [{}], schema)


def test_the_uid_field_is_the_one_declared_pad_uid():
    schema = ts.schema_from_dict(
        {
            "name": "grouped",
            "fields": {
                "mask": {"shape": ["n"], "dtype": "int64", "values": [0, 1], "pad": 0},
                "group": {"kind": "str", "pad": "uid"},
            },
            "dims": {"n": {}},
        }
    )
    real = {"mask": torch.ones(3, dtype=torch.int64), "group": "g0"}
    pad = schema.padding(1, eos_token_id=0, like=real)
    pad.samples[0]["group"] = "g0"
    found = padding_contract_violations([real, *pad.samples], [{}, *pad.tags], schema)
    assert _codes(found) == [(1, "group", "padding")]


def test_the_is_padding_default_comes_from_its_tag_declaration():
    assert TEXT.plan.padding_default is False
    undeclared = ts.schema_from_dict({"name": "bare", "fields": {"n": {"kind": "int", "pad": 0}}})
    assert undeclared.plan.padding_default is False
    # A declaration that made untagged (real) samples padding would hide them from metrics.
    with pytest.raises(ts.SchemaDefinitionError, match=r"tags\.is_padding"):
        ts.schema_from_dict(
            {
                "name": "x",
                "fields": {"n": {"kind": "int", "pad": 0}},
                "tags": {"is_padding": {"kind": "bool", "default": True}},
            }
        )


def test_is_padding_names_a_numpy_bool_plainly():
    np = pytest.importorskip("numpy")
    with pytest.raises(TypeError, match=r"found numpy\.bool"):
        is_padding({"is_padding": np.True_})
