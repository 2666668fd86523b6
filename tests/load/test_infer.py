"""infer_schema: drafts from real samples that validate them, match the packaged families and round-trip."""

from __future__ import annotations

import pickle

import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import trajschema as ts
from trajschema.load.infer import infer_schema
from trajschema.testing import tq_batch, verl_sample

KW = {
    "moe_routed": {"layers": 3, "topk": 2},
    "vlm_mrope_moe": {"layers": 5, "topk": 8},
    "distill": {"teacher_topk": 6},
}
LENGTHS = [(5, 3), (9, 2), (4, 11)]


def _samples(family, lengths=LENGTHS, seed=0, **extra):
    return [
        verl_sample(family, p, r, seed=seed + i, uid=f"q{i}", **{**KW.get(family, {}), **extra})
        for i, (p, r) in enumerate(lengths)
    ]


def _shape_up_to_renaming(schema, other):
    """Every field's shape in ``schema`` maps onto ``other``'s by one consistent dim renaming."""
    rename: dict[str, str] = {}
    for name, f in schema.fields.items():
        g = other.fields[name]
        assert len(f.shape or ()) == len(g.shape or ()), name
        for a, b in zip(f.shape or (), g.shape or ()):
            key, want = str(a), str(b)
            if a.is_int or b.is_int:
                assert a.is_int and b.is_int and a.args == b.args, (name, key, want)
                continue
            assert rename.setdefault(key, want) == want, (name, key, want)
    return rename


def _reload(schema, tmp_path):
    text = schema.to_yaml()
    path = tmp_path / f"{schema.name}.yaml"
    path.write_text(text)
    by_path = ts.load_schema(path)
    by_dict = ts.schema_from_dict(yaml.safe_load(text))
    assert by_dict == schema
    assert (by_path.dims, by_path.fields, by_path.tags, by_path.padding_sizes) == (
        schema.dims,
        schema.fields,
        schema.tags,
        schema.padding_sizes,
    )
    return text


@pytest.mark.parametrize("family", ts.schema_names())
@pytest.mark.parametrize("layout", ["list", "tq"])
def test_draft_of_each_family(family, layout, tmp_path):
    samples = _samples(family)
    draft = infer_schema(samples if layout == "list" else tq_batch(samples), name=f"draft_{family}")
    packaged = ts.load_schema(family)
    assert set(draft.fields) == set(packaged.fields)
    for name, f in draft.fields.items():
        want = packaged.fields[name]
        assert (f.kind, f.required, f.dtypes, f.pad, f.values, f.min, f.finite) == (
            want.kind,
            want.required,
            want.dtypes,
            want.pad,
            want.values,
            want.min,
            want.finite,
        ), name
    rename = _shape_up_to_renaming(draft, packaged)
    assert rename.get("seq") == "seq" and str(draft.dims["seq"].expr) == "prompt + response"
    _reload(draft, tmp_path)
    draft.validate_batch(samples)
    draft.validate_batch(tq_batch(samples))
    # New lengths validate; broken samples do not.
    fresh = _samples(family, [(2, 0), (31, 17)], seed=50)
    draft.validate_batch(fresh)
    bad = dict(fresh[1], input_ids=fresh[1]["input_ids"][:-1])  # seq != prompt + response
    assert any(v.field == "input_ids" for v in draft.violations(bad))
    bad = dict(fresh[1], prompts=fresh[1]["prompts"].to(torch.int32))
    assert [v.code for v in draft.violations(bad) if v.field == "prompts"] == ["dtype"]
    # Padding like a real sample validates.
    pad = draft.padding(3, eos_token_id=2, like=samples[0])
    draft.validate_batch(pad.samples, tags=pad.tags)
    assert pickle.loads(pickle.dumps(draft)) == draft


@pytest.mark.parametrize("family", ["vlm_mrope", "moe_routed", "distill", "vlm_mrope_moe"])
def test_with_base_the_draft_holds_only_what_differs(family, tmp_path):
    samples = _samples(family)
    draft = infer_schema(samples, name=f"child_{family}", base="text")
    doc = yaml.safe_load(draft.to_yaml())
    assert doc["extends"] == ["text"]
    text = ts.load_schema("text")
    new = set(ts.load_schema(family).fields) - set(text.fields)
    changed = {"position_ids"} if "vlm" in family else set()
    assert set(doc.get("fields", {})) == new | changed
    assert not set(doc.get("dims", {})) & {"prompt", "response", "seq"}
    assert "tags" not in doc and "padding" not in doc
    _reload(draft, tmp_path)
    draft.validate_batch(samples)
    draft.validate_batch(_samples(family, [(3, 1), (20, 6)], seed=9))
    pad = draft.padding(2, eos_token_id=2, like=samples[0])
    draft.validate_batch(pad.samples, tags=pad.tags)


def test_base_as_schema_and_a_field_base_requires_but_samples_lack():
    samples = [{k: v for k, v in s.items() if k != "num_turns"} for s in _samples("text")]
    draft = infer_schema(samples, name="no_turns", base=ts.load_schema("text"))
    assert draft.fields["num_turns"].required is False
    assert "fields.num_turns" in draft._comments and "# in no sample" in draft.to_yaml()
    draft.validate_batch(samples)


def test_unknown_fields_get_generic_dims_literals_and_commented_guesses(tmp_path):
    samples = []
    for i, (a, b) in enumerate([(3, 4), (5, 2), (6, 6)]):
        samples.append(
            {
                "tokens": torch.randint(0, 9, (a + b,)),
                "head": torch.randint(0, 9, (a,)),
                "tail": torch.rand(b),
                "keep_mask": torch.ones(b, dtype=torch.uint8),
                "box": torch.zeros(a + b, 7, 3, dtype=torch.bfloat16),
                "flag": torch.zeros(5, dtype=torch.bool),
                "grid": torch.zeros(5, 2, dtype=torch.float16),
                "neg": torch.tensor([-1, 2], dtype=torch.int8),
                "group_uid": f"g{i}",
                "step": i,
                "meta": {"k": i},
            }
        )
    draft = infer_schema(samples, name="odd")
    f = draft.fields
    total = f["tokens"].shape[0].args[0]
    assert str(draft.dims[total].expr) in {
        f"{f['head'].shape[0]} + {f['tail'].shape[0]}",
        f"{f['tail'].shape[0]} + {f['head'].shape[0]}",
    }
    assert f["keep_mask"].shape == f["tail"].shape and f["keep_mask"].values == (0, 1)
    assert [str(e) for e in f["box"].shape[1:]] == ["7", "3"]  # one field's constant axes: literals
    assert f["flag"].shape[0] == f["grid"].shape[0] and not f["flag"].shape[0].is_int  # shared: a named dim
    assert f["tokens"].pad.rule == "eos" and f["tokens"].min == 0 and f["neg"].min is None
    assert f["tail"].finite and f["grid"].finite
    assert (f["group_uid"].pad.rule, f["step"].kind, f["step"].min, f["meta"].pad.rule) == ("uid", "int", 0, "empty")
    text = _reload(draft, tmp_path)
    assert "# unnamed dim" in text and "written as a literal" in text and "pad guessed" in text
    draft.validate_batch(samples)
    draft.validate_batch(tq_batch(samples))
    pad = draft.padding(2, eos_token_id=1, like=samples[0])
    draft.validate_batch(pad.samples, tags=pad.tags)


def test_optional_fields_dtype_sets_and_the_comments_do_not_change_equality():
    samples = _samples("text", optional=False) + _samples("text", [(6, 6)], seed=7)
    samples[1] = dict(samples[1], rm_scores=torch.zeros(2, dtype=torch.float64))
    draft = infer_schema(samples, name="mixed")
    assert draft.fields["rm_scores"].required is False
    assert set(draft.fields["rm_scores"].dtypes) == {torch.float32, torch.float64}
    assert draft.fields["attention_mask"].required is False
    draft.validate_batch(samples)
    plain = ts.schema_from_dict(yaml.safe_load(draft.to_yaml()))
    assert plain == draft and hash(plain) == hash(draft) and not hasattr(plain, "_comments")
    again = pickle.loads(pickle.dumps(draft))
    assert again == draft and again._comments == draft._comments


def test_one_sample_keeps_dims_free():
    sample = verl_sample("text", 6, 3)
    draft = infer_schema([sample], name="single")
    draft.validate_batch([verl_sample("text", 2, 9)])


@pytest.mark.parametrize(
    ("batch", "kwargs", "error", "words"),
    [
        ([], {}, ValueError, "at least one sample"),
        ({"a": 1}, {}, TypeError, "list of sample mappings"),
        ("abc", {}, TypeError, "list of sample mappings"),
        ([{"a": 1}, 3], {}, TypeError, "sample 1"),
        ([{"a": torch.zeros(2)}, {"a": 1}], {}, ValueError, "'a' is a tensor in some samples"),
        ([{"a": torch.zeros(2)}, {"a": torch.zeros(2, 2)}], {}, ValueError, "different ranks"),
        ([{"a": torch.zeros(2, dtype=torch.complex64)}], {}, ValueError, "complex64"),
        ([{"": 1}], {}, ValueError, "field name ''"),
        ([{3: 1}], {}, ValueError, "field name 3"),
        ([{"a": 1}], {"name": 5}, TypeError, "name must be a string"),
        ([{"a": 1}], {"name": " x"}, ts.SchemaDefinitionError, "whitespace"),
        ([{"a": 1}], {"base": 3}, TypeError, "base must be"),
        ([{"a": 1}], {"base": "nope"}, ts.SchemaNotFoundError, "nope"),
    ],
)
def test_typed_errors(batch, kwargs, error, words):
    with pytest.raises(error, match=None) as info:
        infer_schema(batch, **{"name": "x", **kwargs})
    assert words in str(info.value)


def test_nested_tensor_in_a_row_is_refused():
    nt = torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)])
    with pytest.raises(ValueError, match="dense tensor"):
        infer_schema([{"a": nt}], name="x")


def _renamed(samples):
    """The same samples under field names no known schema uses: nothing to lean on but the data."""
    return [{f"x_{k}": v for k, v in s.items()} for s in samples]


@pytest.mark.parametrize("family", ts.schema_names())
def test_unknown_names_still_find_the_dims_and_the_sum(family):
    samples = _renamed(_samples(family))
    draft = infer_schema(samples, name="anon")
    f = draft.fields
    seq, prompt, response = (f[n].shape[0] for n in ("x_input_ids", "x_prompts", "x_responses"))
    assert str(draft.dims[seq.args[0]].expr) == f"{prompt} + {response}"
    assert f["x_position_ids"].shape[-1] == seq and f["x_response_mask"].shape == (response,)
    assert f["x_response_mask"].values == (0, 1) and f["x_input_ids"].pad.rule == "eos"
    assert f["x_position_ids"].pad.rule == "positions" and f["x_uid"].pad.rule == "uid"
    if "x_routed_experts" in f:  # one field's constant axes: literals
        assert [str(e) for e in f["x_routed_experts"].shape] == [
            str(seq),
            *map(str, samples[0]["x_routed_experts"].shape[1:]),
        ]
    if "x_teacher_ids" in f:  # a constant axis two fields share: one named dim
        assert f["x_teacher_ids"].shape[1] == f["x_teacher_logprobs"].shape[1] and f["x_teacher_ids"].shape[1].is_name
    draft.validate_batch(samples)
    fresh = _renamed(_samples(family, [(2, 0), (31, 17)], seed=50))
    draft.validate_batch(fresh)
    bad = dict(fresh[1], x_input_ids=fresh[1]["x_input_ids"][:-1])
    assert any(v.field == "x_input_ids" for v in draft.violations(bad))
    bad = dict(fresh[1], x_responses=fresh[1]["x_responses"].float())
    assert any(v.code == "dtype" for v in draft.violations(bad))


@settings(deadline=None)
@given(
    family=st.sampled_from(ts.schema_names()),
    lengths=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 40)), min_size=1, max_size=5, unique=True),
    tq=st.booleans(),
    rename=st.booleans(),
)
def test_any_family_at_random_lengths_validates_and_round_trips(family, lengths, tq, rename):
    samples = _samples(family, lengths)
    if rename:
        samples = _renamed(samples)
    draft = infer_schema(tq_batch(samples) if tq else samples, name="prop")
    draft.validate_batch(samples)
    assert ts.schema_from_dict(yaml.safe_load(draft.to_yaml())) == draft
    pad = draft.padding(2, eos_token_id=2, like=samples[0])
    draft.validate_batch(pad.samples, tags=pad.tags)


def _check_draft(samples, batch=None, **kw):
    draft = infer_schema(samples if batch is None else batch, name="attack", **kw)
    draft.validate_batch(samples)
    assert ts.schema_from_dict(yaml.safe_load(draft.to_yaml())) == draft
    pad = draft.padding(2, eos_token_id=2, like=samples[0])
    draft.validate_batch(pad.samples, tags=pad.tags)
    return draft


def test_equal_prompt_and_response_lengths_stay_two_dims():
    draft = _check_draft([verl_sample("text", n, n, seed=n) for n in (3, 5, 8)])
    assert str(draft.dims["seq"].expr) == "prompt + response"
    assert str(draft.fields["prompts"].shape[0]) == "prompt" and str(draft.fields["responses"].shape[0]) == "response"


def test_empty_responses_do_not_make_prompt_a_sum():
    """response is 0 everywhere, so prompt == seq + response also holds: the known relation wins."""
    draft = _check_draft([verl_sample("text", p, 0, seed=p) for p in (1, 2, 3)])
    assert str(draft.dims["seq"].expr) == "prompt + response" and type(draft.dims["prompt"]).__name__ == "FreeDim"
    draft.validate(verl_sample("text", 4, 5))


def test_a_constant_seq_keeps_the_known_relation():
    draft = _check_draft([verl_sample("text", 5, 3), verl_sample("text", 6, 2, seed=1)])  # seq is 8 in both
    assert str(draft.dims["seq"].expr) == "prompt + response"


def test_mixed_rope_rows_strided_nested_layout():
    samples = [verl_sample("vlm_mrope", 5, 3), verl_sample("vlm_mrope", 6, 4, seed=1)]
    samples[1]["position_ids"] = samples[1]["position_ids"][1:]  # 3 rows
    draft = _check_draft(samples, tq_batch(samples))
    assert type(draft.dims["rope_rows"]).__name__ == "FreeDim"
    assert "fixes it at 4" in draft._comments["dims.rope_rows"]


def test_meta_tensors_give_shapes_and_no_value_checks():
    samples = [
        {"a": torch.empty(n, 2, device="meta"), "b": torch.empty(n, device="meta", dtype=torch.int64)} for n in (2, 5)
    ]
    draft = infer_schema(samples, name="meta")
    assert not draft.fields["a"].has_value_checks and not draft.fields["b"].has_value_checks
    assert draft.fields["a"].shape[0] == draft.fields["b"].shape[0]
    draft.validate_batch(samples)


def test_an_empty_tensordict_and_a_dense_one():
    with pytest.raises(ValueError, match="at least one sample"):
        infer_schema(tq_batch([]), name="e")
    from tensordict import TensorDict

    td = TensorDict({"a": torch.zeros(3, 5), "b": torch.arange(3)}, batch_size=[3])
    draft = infer_schema(td, name="dense")
    assert [str(e) for e in draft.fields["a"].shape] == ["5"] and draft.fields["b"].shape == ()
    draft.validate_batch(td)


def test_odd_dtypes_and_non_finite_values():
    s = {
        "f": torch.tensor([1.0, float("nan")]),
        "g": torch.tensor([float("inf")], dtype=torch.float16),
        "h": torch.ones(3, dtype=torch.bfloat16),
        "i": torch.tensor([-3], dtype=torch.int8),
        "u": torch.tensor([255], dtype=torch.uint8),
        "b": torch.tensor([True]),
        "pos_mask": torch.tensor([0, 2]),
    }
    f = _check_draft([s, s]).fields
    assert (f["f"].finite, f["g"].finite, f["h"].finite) == (False, False, True)
    assert (f["i"].min, f["u"].min, f["pos_mask"].values, f["pos_mask"].min) == (None, 0, None, 0)
    assert f["b"].pad.value is False and f["b"].dtypes == (torch.bool,)


def test_a_base_field_with_another_dtype_is_overridden_with_a_comment():
    samples = []
    for p in (2, 4):
        s = verl_sample("text", p, 2, seed=p)
        samples.append(dict(s, input_ids=s["input_ids"].int()))
    draft = _check_draft(samples, base="text")
    assert draft.fields["input_ids"].dtypes == (torch.int32,) and set(draft._draft["fields"]) == {"input_ids"}
    assert "int32 where schema 'text' has int64" in draft._comments["fields.input_ids"]


def test_a_draft_named_like_its_base_is_a_definition_error():
    with pytest.raises(ts.SchemaDefinitionError, match="text"):
        infer_schema([verl_sample("text", 2, 2)], name="text", base="text")


def test_samples_that_break_a_known_dim_get_their_own_with_comments():
    samples = [verl_sample("text", 0, 3), verl_sample("text", 0, 5, seed=1)]  # prompt 0: text says prompt >= 1
    samples[1]["loss_mask"] = torch.ones(2, dtype=torch.int64)  # not response-long
    draft = _check_draft(samples)
    assert draft.dims["prompt"].min == 0 and "which the samples break" in draft._comments["dims.prompt"]
    assert draft.fields["loss_mask"].shape != draft.fields["response_mask"].shape
    assert "is not response" in draft._comments["fields.loss_mask"]
    assert "is not response" in draft.to_yaml()


def test_a_base_from_a_file_off_the_search_path(tmp_path):
    (tmp_path / "mybase.yaml").write_text(ts.load_schema("text").to_yaml().replace("name: text\n", "name: mybase\n", 1))
    base = ts.load_schema(tmp_path / "mybase.yaml")
    samples = _samples("moe_routed")
    draft = infer_schema(samples, name="mine", base=base)
    assert draft.lineage == ("mine", "mybase") and set(draft._draft["fields"]) == {"routed_experts"}
    (tmp_path / "mine.yaml").write_text(draft.to_yaml())  # beside its base: found there
    again = ts.load_schema(tmp_path / "mine.yaml")
    assert (again.fields, again.dims, again.lineage) == (draft.fields, draft.dims, draft.lineage)
    draft.validate_batch(samples)


# -- value checks read in bounded memory -----------------------------------------------

import math  # noqa: E402
from unittest import mock  # noqa: E402

from trajschema.core import elements as _elements  # noqa: E402
from trajschema.load import infer as _infer  # noqa: E402


def _extremes_before_blocks(o):
    """``_infer._extremes`` as it was before it read tensors in blocks: one reduction over each whole tensor."""
    lo, hi, finite, seen = math.inf, -math.inf, True, False
    for t in o.values:
        if t.is_meta or not t.numel() or t.dtype == torch.bool:
            continue
        a, b = (float(v) for v in torch.aminmax(t.detach()))
        seen = True
        lo, hi = min(lo, a), max(hi, b)
        finite = finite and (not t.is_floating_point() or bool(torch.isfinite(t).all()))
    return (lo, hi, finite) if seen else None


_NUMBERS = {
    torch.int64: st.integers(-2, 3),
    torch.uint8: st.integers(0, 3),
    torch.int16: st.integers(-(2**15), 2**15 - 1),
    torch.float32: st.sampled_from([0.0, 1.0, -2.5, math.inf, -math.inf, math.nan]),
    torch.bfloat16: st.sampled_from([0.0, 1.0, 3e38, math.inf, math.nan]),
    torch.bool: st.booleans(),
}


@st.composite
def _viewed(draw, dtype, rows, cols):
    """A ``rows x cols`` tensor as a copy, an expanded row, a transpose or every other row of a bigger one."""
    how = draw(st.sampled_from(["copy", "expanded", "transposed", "stepped"]))
    size = (cols, rows) if how == "transposed" else (2 * rows, cols) if how == "stepped" else (rows, cols)
    data = draw(st.lists(_NUMBERS[dtype], min_size=size[0] * size[1], max_size=size[0] * size[1]))
    base = torch.tensor(data, dtype=dtype).reshape(size)
    if how == "expanded":
        return base[:1].expand(rows, cols)
    return base.t() if how == "transposed" else base[::2] if how == "stepped" else base


@settings(deadline=None)
@given(
    data=st.data(),
    dtypes=st.lists(st.sampled_from(sorted(_NUMBERS, key=str)), min_size=1, max_size=3),
    shapes=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3)), min_size=1, max_size=3),
    budget=st.sampled_from([1, 2, 5, 1 << 20]),
)
def test_drafts_from_views_are_todays_drafts_from_copies(data, dtypes, shapes, budget):
    names = ["attn_mask", "score", "ids"][: len(dtypes)]
    samples = [{n: data.draw(_viewed(d, r, c)) for n, d in zip(names, dtypes)} for r, c in shapes]
    copies = [{n: t.contiguous().clone() for n, t in s.items()} for s in samples]
    with mock.patch.object(_infer, "_extremes", _extremes_before_blocks):
        today = infer_schema(copies, name="v")
    with mock.patch.object(_elements, "_BUDGET", budget):
        draft = infer_schema(samples, name="v")
    assert draft.to_yaml() == today.to_yaml()
    assert draft == today


def test_a_trillion_element_expanded_sample_drafts_like_a_small_one():
    def sample(n):
        return {
            "attn_mask": torch.tensor([[0, 1]]).expand(n, 2),
            "score": torch.tensor([0.5], dtype=torch.bfloat16).expand(n),
            "ids": torch.tensor([7], dtype=torch.int16).expand(3, n).t(),
        }

    small = infer_schema([sample(8)], name="d").to_yaml()
    big = infer_schema([sample(2**40)], name="d").to_yaml()  # a full-size copy or mask would fail to allocate
    assert big == small.replace("size 8 ", f"size {2**40} ")
    assert "values: [0, 1]" in big and "finite: true" in big and "min: 0" in big


# -- routes: distinct slots, ids below an expert count ---------------------------------

from trajschema.core.dims import FreeDim  # noqa: E402
from trajschema.testing import random_routes  # noqa: E402

STRICT_MOE = """\
name: strictmoe
extends: [text]
dims:
  layers: {min: 1}
  topk: {min: 1}
  experts: {min: 1, from_config: [num_experts, n_routed_experts]}
fields:
  routed_experts:
    shape: [seq, layers, topk]
    dtype: [int16, int32, int64]
    min: 0
    max: experts - 1
    distinct: true
    pad: {spread: experts}
"""


def _routed(lengths=LENGTHS, name="x_routes", topk=3, experts=8):
    samples = _samples("moe_routed", lengths, topk=topk, experts=experts)
    for s in samples:
        s[name] = s.pop("routed_experts")
    return samples


def test_a_field_that_looks_like_routes_is_drafted_distinct_below_an_expert_count(tmp_path):
    samples = _routed()
    draft = infer_schema(samples, name="routes_draft")
    f = draft.fields["x_routes"]
    assert f.distinct and str(f.max_expr) == "experts - 1" and f.min == 0
    assert f.pad.rule == "spread" and f.pad.over == "experts"
    assert isinstance(draft.dims["experts"], FreeDim) and draft.dims["experts"].min == 1
    assert "looks like routes" in draft._comments["fields.x_routes"]
    # the packaged moe_routed declares experts: the draft takes its declaration (from_config too)
    assert draft.dims["experts"].from_config == ts.load_schema("moe_routed").dims["experts"].from_config
    assert "dims.experts" not in draft._comments
    _reload(draft, tmp_path)
    draft.validate_batch(samples, dims={"experts": 8})
    pad = draft.padding(2, eos_token_id=2, like=samples[0])
    draft.validate_batch([*samples, *pad.samples], tags=[{}] * 3 + pad.tags, dims={"experts": 8})
    broken = dict(samples[0], x_routes=samples[0]["x_routes"].clone())
    broken["x_routes"][0, 0, 1] = broken["x_routes"][0, 0, 0]
    assert [v.code for v in draft.violations(broken)] == ["repeated"]


def test_an_expert_dim_name_already_taken_gets_another():
    samples = _routed()
    for s in samples:
        s["experts_gate"] = torch.zeros(4)  # an axis group, not a named dim: experts stays free
    draft = infer_schema(samples, name="taken", base=None)
    assert draft.fields["x_routes"].pad.over in draft.dims


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda t: t.float(), "float values"),
        (lambda t: -t - 1, "negative ids"),
        (lambda t: t[..., :1], "one slot"),
        (lambda t: t.reshape(t.shape[0], -1)[:, :2].contiguous(), "rank 2 and no routes name"),
        (lambda t: t.to("meta"), "values unread"),
        (lambda t: t[..., :0], "no slot"),
    ],
    ids=["float", "negative", "one-slot", "rank-2-unnamed", "meta", "empty"],
)
def test_nothing_routes_like_is_drafted_distinct(change, why):
    samples = _routed(name="x_values")
    for s in samples:
        s["x_values"] = change(s["x_values"])
    f = infer_schema(samples, name="plain").fields["x_values"]
    assert not f.distinct and f.max_expr is None and f.pad.rule != "spread", why


def test_a_long_or_varying_last_axis_is_a_sequence_not_slots():
    seqs = [{"pos": torch.stack([torch.arange(n)] * 3).unsqueeze(0)} for n in (3, 5, 9)]  # [1, 3, seq]: distinct rows
    assert not infer_schema(seqs, name="seqs").fields["pos"].distinct
    wide = [{"x_expert_ids": torch.arange(65).repeat(4, 1)} for _ in range(2)]
    assert not infer_schema(wide, name="wide").fields["x_expert_ids"].distinct
    narrow = [{"x_expert_ids": torch.arange(64).repeat(4, 1)} for _ in range(2)]
    assert infer_schema(narrow, name="narrow").fields["x_expert_ids"].distinct


@given(
    tokens=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    topk=st.integers(2, 5),
    repeat=st.one_of(st.none(), st.tuples(st.integers(0, 3), st.integers(0, 99), st.integers(0, 3))),
    name=st.sampled_from(["routed_experts_x", "expert_choice", "moe_slots"]),
)
def test_distinct_is_drafted_exactly_when_no_slice_repeats(tokens, topk, repeat, name):
    samples = [{name: random_routes(n, 2, topk, experts=8, seed=i)} for i, n in enumerate(tokens)]
    if repeat is not None:
        i, row, slot = repeat
        t = samples[i % len(samples)][name].reshape(-1, topk)
        t[row % t.shape[0], (slot % (topk - 1)) + 1] = t[row % t.shape[0], 0]
    distinct = all(len(set(r)) == len(r) for s in samples for r in s[name].reshape(-1, topk).tolist())
    f = infer_schema(samples, name="prop").fields[name]
    assert f.distinct == distinct == (repeat is None)


def test_a_known_distinct_field_keeps_its_checks_and_brings_its_expert_dim(tmp_path):
    (tmp_path / "strictmoe.yaml").write_text(STRICT_MOE)
    base = ts.load_schema(tmp_path / "strictmoe.yaml")
    samples = _samples("moe_routed", topk=3, experts=8)
    full = infer_schema([{**s, "extra_ids": s["input_ids"]} for s in samples], name="mine", base=base)
    assert full._draft["fields"].keys() == {"extra_ids"}  # routed_experts as its base says: nothing to add
    assert full.fields["routed_experts"].distinct and "experts" in full.dims
    samples[1]["routed_experts"][0, 0, 1] = samples[1]["routed_experts"][0, 0, 0]
    repeated = infer_schema(samples, name="mine2", base=base)
    f = repeated.fields["routed_experts"]
    assert not f.distinct and f.pad.rule == "fill"
    assert "break schema 'strictmoe''s value checks" in repeated._comments["fields.routed_experts"]
    (tmp_path / "mine2.yaml").write_text(repeated.to_yaml())
    assert ts.load_schema(tmp_path / "mine2.yaml").fields == repeated.fields
    repeated.validate_batch(samples)
