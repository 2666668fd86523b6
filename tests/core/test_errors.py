"""The error families: ``Violation`` records and the ``SchemaError`` report, and the loaders'
``SchemaDefinitionError`` and ``SchemaNotFoundError``."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import multiprocessing
import pickle
import re
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import trajschema as ts
from tests.loading_cases import edit_base as _edit
from tests.loading_support import write_schema as _write
from trajschema.core import closest, did_you_mean
from trajschema.testing import verl_sample

DISTINCT = 123456789  # a value that must never show up in a report


def _sample(prompt: int = 5, response: int = 3) -> dict:
    """A text sample laid out as verl's TransferQueue trainer writes it."""
    return verl_sample("text", prompt, response, uid="q-0001", optional=False)


def _strict_schema() -> ts.Schema:
    return ts.schema_from_dict({"name": "strict", "extends": "text", "extra": "forbid"})


def _one_bad_thing_per_sample() -> tuple[list[dict], list[dict], list[tuple[int, str, str]]]:
    """Ten samples, each broken in one way; the (sample, field, code) each should report."""
    batch = [_sample() for _ in range(10)]
    tags = [{"seq_len": 8} for _ in batch]
    del batch[0]["responses"]
    batch[1]["num_turns"] = "1"
    batch[2]["loss_mask"] = batch[2]["loss_mask"].float()
    batch[3]["position_ids"] = batch[3]["position_ids"].expand(2, 8).clone()
    batch[4]["input_ids"] = torch.arange(9)
    batch[5] = _sample(prompt=0)
    tags[5] = {"seq_len": 3}
    batch[6]["response_mask"] = torch.tensor([0, 1, 2])
    tags[7] = {"seq_len": 9}
    batch[8]["debug"] = torch.zeros(3)
    batch[9]["responses"] = torch.full((7,), DISTINCT)
    expected = [
        (0, "responses", "missing"),
        (1, "num_turns", "kind"),
        (2, "loss_mask", "dtype"),
        (3, "position_ids", "rank"),
        (4, "input_ids", "dim_mismatch"),
        (5, "prompts", "dim_range"),
        (6, "response_mask", "value"),
        (7, "seq_len", "tag"),
        (8, "debug", "extra"),
        (9, "responses", "dim_mismatch"),
    ]
    return batch, tags, expected


@pytest.fixture
def batch_error() -> ts.SchemaError:
    batch, tags, _ = _one_bad_thing_per_sample()
    with pytest.raises(ts.SchemaError) as info:
        _strict_schema().validate_batch(batch, tags=tags)
    return info.value


def _violation(i: int) -> ts.Violation:
    return ts.Violation(i, f"field_{i}", "shape", "(seq=8)", "(9,)", f"shape (9,) does not match (seq=8) #{i}")


# ---------------------------------------------------------------------------
# Violation


def test_violation_is_frozen() -> None:
    v = _violation(3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.code = "dtype"  # type: ignore[misc]


def test_violation_pickles() -> None:
    v = _violation(3)
    back = pickle.loads(pickle.dumps(v))
    assert back == v
    assert type(back) is ts.Violation


@pytest.mark.parametrize(
    ("violation", "text"),
    [
        pytest.param(_violation(3), "sample 3, field_3: shape (9,) does not match (seq=8) #3", id="in-a-batch"),
        pytest.param(
            ts.Violation(None, "uid", "missing", "str", "absent", "required field is missing"),
            "uid: required field is missing",
            id="single-sample",
        ),
        pytest.param(
            ts.Violation(0, "uid", "kind", "str", "int 3", "expected str"),
            "sample 0, uid: expected str",
            id="sample-zero-is-not-none",
        ),
    ],
)
def test_violation_str(violation: ts.Violation, text: str) -> None:
    assert str(violation) == text


def test_violations_from_real_checks_hold_only_str_int_none(batch_error: ts.SchemaError) -> None:
    assert len(batch_error.violations) == 10
    for v in batch_error.violations:
        for f in dataclasses.fields(v):
            value = getattr(v, f.name)
            assert type(value) in (str, int, type(None)), (f.name, type(value))
        assert pickle.loads(pickle.dumps(v)) == v


def test_each_broken_sample_reports_its_own_violation(batch_error: ts.SchemaError) -> None:
    _, _, expected = _one_bad_thing_per_sample()
    assert [(v.sample, v.field, v.code) for v in batch_error.violations] == expected


# ---------------------------------------------------------------------------
# SchemaError


def test_schema_error_is_a_value_error_under_the_package() -> None:
    assert issubclass(ts.SchemaError, ValueError)
    assert ts.SchemaError.__module__ == "trajschema"


def test_schema_error_carries_bindings(batch_error: ts.SchemaError) -> None:
    assert batch_error.schema_name == "strict"
    assert set(batch_error.bindings) == set(range(10))
    assert batch_error.bindings[4] == {"prompt": 5, "response": 3, "seq": 8}
    assert batch_error.bindings[5] == {"prompt": 0, "response": 3, "seq": 3}


def test_single_sample_bindings_are_keyed_by_none() -> None:
    sample = _sample()
    sample["loss_mask"] = sample["loss_mask"].float()
    with pytest.raises(ts.SchemaError) as info:
        ts.load_schema("text").validate(sample)
    assert info.value.bindings == {None: {"prompt": 5, "response": 3, "seq": 8}}
    assert [v.sample for v in info.value.violations] == [None]


def test_schema_error_renders_a_table(batch_error: ts.SchemaError) -> None:
    lines = str(batch_error).splitlines()
    assert lines[0] == "10 violations of schema 'strict' in 10 samples:"
    assert re.fullmatch(r"\s+sample\s+field\s+code\s+expected\s+actual", lines[1])
    rows = lines[2:12]
    for row, v in zip(rows, batch_error.violations):
        cells = row.split()
        assert cells[:3] == [str(v.sample), v.field, v.code]
        assert v.expected in row
        assert v.actual in row
    # Columns line up: every row's field starts where the header's does.
    col = lines[1].index("field")
    assert all(row[col - 2 : col] == "  " and row[col] != " " for row in rows)
    assert "dims bound:" in lines
    assert "  sample 4: prompt=5, response=3, seq=8" in lines
    assert lines[-1] == "first problem: sample 0, responses: required field is missing (expected int64[response])"


def test_schema_error_caps_the_bindings_it_prints(batch_error: ts.SchemaError) -> None:
    text = str(batch_error)
    assert "  ... and 2 more samples" in text
    assert "  sample 9:" not in text
    assert set(batch_error.bindings) == set(range(10))


@pytest.mark.parametrize(
    ("count", "more"),
    [
        pytest.param(1, None, id="one"),
        pytest.param(40, None, id="exactly-at-the-cap"),
        pytest.param(41, "  ... and 1 more (see .violations)", id="one-over"),
        pytest.param(100, "  ... and 60 more (see .violations)", id="hundred"),
        pytest.param(5000, "  ... and 4960 more (see .violations)", id="thousands"),
    ],
)
def test_schema_error_caps_long_reports(count: int, more: str | None) -> None:
    violations = [_violation(i) for i in range(count)]
    err = ts.SchemaError(violations, schema_name="text")
    text = str(err)
    assert err.violations == violations
    noun = "violation" if count == 1 else "violations"
    sample_noun = "sample" if count == 1 else "samples"
    assert text.splitlines()[0] == f"{count} {noun} of schema 'text' in {count} {sample_noun}:"
    shown = [line for line in text.splitlines() if re.match(r"  \d+\s+field_", line)]
    assert len(shown) == min(count, 40)
    if more is None:
        assert "more (see .violations)" not in text
    else:
        assert more in text.splitlines()
    assert f"field_{min(count, 40) - 1} " in text
    assert f"field_{min(count, 40)} " not in text
    assert len(text) < 8000


def test_long_cells_are_clipped() -> None:
    v = ts.Violation(0, "f" * 200, "value", "e" * 200, "a" * 200, "m")
    lines = str(ts.SchemaError([v])).splitlines()
    row = lines[2]
    assert "f" * 48 not in row
    assert "f" * 47 + "…" in row
    assert "a" * 63 + "…" in row
    assert "a" * 64 not in row


def test_schema_error_never_prints_tensor_contents() -> None:
    sample = _sample()
    sample["responses"] = torch.full((7,), DISTINCT, dtype=torch.int64)  # wrong shape
    sample["position_ids"] = torch.full((8,), float(DISTINCT))  # wrong dtype
    sample["input_ids"] = torch.full((2, 8), DISTINCT, dtype=torch.int64)  # wrong rank
    sample["debug"] = torch.full((10_000,), DISTINCT)
    with pytest.raises(ts.SchemaError) as info:
        ts.load_schema("text").validate(sample)
    err = info.value
    assert {v.code for v in err.violations} == {"dim_mismatch", "dtype", "rank"}
    assert str(DISTINCT) not in str(err)
    assert str(DISTINCT) not in repr(err)
    assert "1.2346e+08" not in str(err)
    for v in err.violations:
        assert str(DISTINCT) not in repr(v)
    assert "(7,)" in str(err)


def test_schema_error_pickles_in_process(batch_error: ts.SchemaError) -> None:
    back = pickle.loads(pickle.dumps(batch_error))
    assert type(back) is ts.SchemaError
    assert back.violations == batch_error.violations
    assert back.bindings == batch_error.bindings
    assert back.schema_name == batch_error.schema_name
    assert str(back) == str(batch_error)


# ---------------------------------------------------------------------------
# The loaders' errors: SchemaDefinitionError and SchemaNotFoundError


def test_schema_definition_error_is_a_value_error_under_the_package() -> None:
    assert issubclass(ts.SchemaDefinitionError, ValueError)
    assert ts.SchemaDefinitionError.__module__ == "trajschema"


def test_schema_definition_error_pickles(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad", _edit("pad: eos", "pad: eso"))
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema(path)
    err = info.value
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is ts.SchemaDefinitionError
    assert str(back) == str(err)
    assert (back.source, back.path, back.problem) == (str(path), "fields.input_ids.pad", err.problem)
    assert back.args == err.args


def test_schema_not_found_error_is_a_lookup_error() -> None:
    assert issubclass(ts.SchemaNotFoundError, LookupError)
    assert ts.SchemaNotFoundError.__module__ == "trajschema"


# ---------------------------------------------------------------------------
# Crossing a real process boundary (as across Ray or multiprocessing workers)


def _raise_in_worker(kind: str) -> None:
    if kind == "schema_error":
        batch, tags, _ = _one_bad_thing_per_sample()
        _strict_schema().validate_batch(batch, tags=tags)
    elif kind == "definition_error":
        ts.schema_from_dict({"name": "bad", "dims": {"seq": "prompt, response"}})
    elif kind == "not_found":
        ts.load_schema("vlm_mrop")
    raise AssertionError("the worker should have raised")


@pytest.fixture(scope="module")
def pool():
    # spawn, not fork: the error must really be pickled into a fresh interpreter and back.
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as executor:
        yield executor


@pytest.mark.slow
def test_schema_error_survives_a_process_pool(pool, batch_error: ts.SchemaError) -> None:
    with pytest.raises(ts.SchemaError) as info:
        pool.submit(_raise_in_worker, "schema_error").result(timeout=120)
    err = info.value
    assert err.violations == batch_error.violations
    assert err.bindings == batch_error.bindings
    assert err.schema_name == "strict"
    assert str(err) == str(batch_error)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "exc", "match"),
    [
        pytest.param(
            "definition_error",
            ts.SchemaDefinitionError,
            r"^<mapping>: dims\.seq: .*\[prompt, response\]$",
            id="schema-definition-error",
        ),
        pytest.param("not_found", ts.SchemaNotFoundError, r"did you mean 'vlm_mrope'", id="schema-not-found"),
    ],
)
def test_other_errors_survive_a_process_pool(pool, kind: str, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match) as info:
        pool.submit(_raise_in_worker, kind).result(timeout=120)
    if exc is ts.SchemaDefinitionError:
        assert (info.value.source, info.value.path) == ("<mapping>", "dims.seq")


# -- did you mean ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "choices", "expected"),
    [
        ("JSON-SCHEMA", ["yaml", "json-schema"], "json-schema"),
        ("json_schema", ["yaml", "json-schema"], "json-schema"),
        ("j", ["yaml", "json-schema", "jaxtyping"], None),  # two begin with it: no guess
        ("ja", ["yaml", "json-schema", "jaxtyping"], "jaxtyping"),
        ("--DP-SIZE", ["--dp-size", "--tp-size"], "--dp-size"),
        ("string", ["int", "str", "float"], "str"),  # a choice it begins with
        ("side", ["pad_side", "length", "holds"], "pad_side"),  # the one choice it is part of
        ("id", ["uid", "pid"], None),  # too short to be a part
        ("eso", ["eos", "uid", "copy"], "eos"),  # two neighbouring letters swapped
        ("--dpeth", ["--depth", "--dims"], "--depth"),
        ("--strict", ["--trust", "--json"], None),  # not close enough to guess
        ("", ["plan"], None),
        ("shapes", [], None),
    ],
)
def test_closest(value, choices, expected):
    assert closest(value, choices) == expected


@given(st.text(max_size=8), st.lists(st.text(max_size=8), max_size=6))
def test_closest_is_one_of_the_choices_or_none_and_did_you_mean_says_it(value, choices):
    guess = closest(value, choices)
    assert guess is None or guess in choices
    assert did_you_mean(value, choices) == ("" if guess is None else f"; did you mean {guess!r}?")


@given(st.lists(st.text(alphabet="abcxyz", min_size=1, max_size=6), min_size=1, max_size=6, unique=True), st.data())
def test_a_choice_itself_is_its_own_guess(choices, data):
    value = data.draw(st.sampled_from(choices))
    if sum(c.lower() == value.lower() for c in choices) == 1:
        assert closest(value, choices) == value
