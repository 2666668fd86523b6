"""Every problem of a schema (or layout) file in one run, each with its line and column."""

from __future__ import annotations

import itertools
import pickle
from pathlib import Path

import pytest

import trajschema as ts
from tests.loading_cases import BASE, MISTAKES, Mistake, with_mistakes


def _write(tmp_path: Path, text: str, name: str = "bad") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def _error(path: Path | str, **kwargs) -> ts.SchemaDefinitionError:
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema(path, **kwargs)
    return info.value


def _found(err: ts.SchemaDefinitionError) -> list[tuple[str, int | None, int | None]]:
    return [(p.path, p.line, p.column) for p in err.errors]


def _assert_reports(err: ts.SchemaDefinitionError, expected: list[tuple[str, str, int, int]]) -> None:
    """``err`` has exactly the problems ``expected`` (path, words, line, column), in any order."""
    assert sorted(_found(err)) == sorted((path, line, col) for path, _, line, col in expected), str(err)
    for path, words, _, _ in expected:
        assert any(p.path == path and words in p.problem for p in err.errors), (words, str(err))


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.id for m in MISTAKES])
def test_each_mistake_alone_is_one_problem_at_its_place(tmp_path: Path, mistake: Mistake) -> None:
    text, expected = with_mistakes(mistake)
    _assert_reports(_error(_write(tmp_path, text)), expected)


def test_a_file_with_every_mistake_reports_them_all(tmp_path: Path) -> None:
    text, expected = with_mistakes(*MISTAKES)
    path = _write(tmp_path, text)
    err = _error(path)
    _assert_reports(err, expected)
    lines = str(err).splitlines()
    assert lines[0] == f"{len(MISTAKES)} problems in {path}:"
    assert lines[1:] == [f"  {p.source}:{p.line}:{p.column}: {p.path}: {p.problem}" for p in err.errors]
    # The first problem is the error's own: what callers of one problem read.
    first = err.errors[0]
    assert (err.source, err.path, err.problem, err.line, err.column) == (
        first.source,
        first.path,
        first.problem,
        first.line,
        first.column,
    )


# Every pair, each in its own entry: neither may hide the other.
PAIRS = list(itertools.combinations(MISTAKES, 2))


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a.id}+{b.id}" for a, b in PAIRS])
def test_two_mistakes_report_both(tmp_path: Path, a: Mistake, b: Mistake) -> None:
    text, expected = with_mistakes(a, b)
    _assert_reports(_error(_write(tmp_path, text)), expected)


def test_first_mode_gives_exactly_the_first(tmp_path: Path) -> None:
    path = _write(tmp_path, with_mistakes(*MISTAKES)[0])
    every = _error(path)
    first = _error(path, errors="first")
    assert first.errors == every.errors[:1]
    assert str(first) == str(every.errors[0])


def test_first_mode_of_schema_from_dict() -> None:
    data = {"name": "d", "fields": {"a": {"kind": "int", "pad": "eso"}, "b": {"kind": "strr", "pad": 0}}}
    with pytest.raises(ts.SchemaDefinitionError) as every:
        ts.schema_from_dict(data)
    assert [p.path for p in every.value.errors] == ["fields.a.pad", "fields.b.kind"]
    assert all(p.line is None for p in every.value.errors)  # a mapping has no lines
    with pytest.raises(ts.SchemaDefinitionError) as first:
        ts.schema_from_dict(data, errors="first")
    assert first.value.errors == every.value.errors[:1]


@pytest.mark.parametrize("errors", ["some", "", "FIRST"])
def test_an_unknown_errors_mode_is_refused(errors: str) -> None:
    with pytest.raises(ValueError, match=f"errors must be 'all' or 'first', found {errors!r}"):
        ts.load_schema("text", errors=errors)


def test_an_errors_mode_of_another_type_is_refused() -> None:
    with pytest.raises(TypeError, match="errors must be 'all' or 'first', found bool"):
        ts.load_schema("text", errors=True)  # type: ignore[arg-type]


def test_one_field_with_several_independent_mistakes(tmp_path: Path) -> None:
    """An unknown dim in the shape, an unknown dtype and a pad rule typo: three problems, one field."""
    text = BASE.replace("{shape: [seq], dtype: int64, pad: eos}", "{shape: [sq], dtype: int46, pad: eso}")
    err = _error(_write(tmp_path, text))
    assert [p.path for p in err.errors] == [
        "fields.input_ids.shape[0]",
        "fields.input_ids.dtype",
        "fields.input_ids.pad",
    ]
    line = text.splitlines()[7]
    assert [(p.line, p.column) for p in err.errors] == [(8, line.index(w) + 1) for w in ("sq]", "int46", "eso")]


# A mistake, and what would only follow from it (left unsaid).
CONSEQUENCES = [
    pytest.param("prompt: {min: 1}", "prompt: {mn: 1}", "dims.prompt", id="field-over-a-dim-with-an-unknown-key"),
    pytest.param("rope_rows: 4", "rope_rows: four", "dims.rope_rows", id="dim-that-is-no-expression"),
    pytest.param("seq: prompt + response", "seq: prompt + respons", "dims.seq", id="derived-dim-unknown-name"),
    pytest.param("seq: prompt + response", "seq: prompt, response", "dims.seq", id="derived-dim-with-a-comma"),
    pytest.param("response: {}", "response: {min: 4, max: 2}", "dims.response", id="free-dim-without-sizes"),
]


@pytest.mark.parametrize(("old", "new", "path"), CONSEQUENCES)
def test_what_follows_from_a_mistake_is_not_reported(tmp_path: Path, old: str, new: str, path: str) -> None:
    # The tag and the padding size use the dims too: all of them rest on the broken one.
    text = BASE.replace(old, new) + "tags:\n  n: {equals: seq}\npadding:\n  prompt: 8\n  response: 8\n"
    text = text.replace("  uid: {", "  m: {shape: [rope_rows, seq], dtype: int64, pad: 0}\n  uid: {")
    err = _error(_write(tmp_path, text))
    assert [p.path for p in err.errors] == [path], str(err)


def test_a_parents_problem_comes_with_the_childs_own(tmp_path: Path) -> None:
    _write(tmp_path, "name: mom\nfields:\n  a: {kind: int, pad: eso}\n", name="mom")
    child = _write(tmp_path, "name: kid\nextends: [mom]\nfields:\n  b: {kind: int, pad: 0, requried: true}\n", "kid")
    err = _error(child)
    assert [(Path(p.source).name, p.path, p.line) for p in err.errors] == [
        ("kid.yaml", "fields.b", 4),
        ("mom.yaml", "fields.a.pad", 3),
    ]
    assert str(err).splitlines()[0] == "2 problems in 2 files:"


def test_a_misspelt_required_key_is_not_also_missing(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, BASE.replace("name: bad", "nmae: bad")))
    assert [p.problem for p in err.errors] == ["unknown key 'nmae'; did you mean 'name'?"]
    assert (err.line, err.column) == (1, 1)


def test_a_misspelt_dims_section_stops_at_the_file(tmp_path: Path) -> None:
    """Without dims: every field would be over unknown dims; only the cause is told."""
    err = _error(_write(tmp_path, BASE.replace("dims:", "dimz:")))
    assert [p.problem for p in err.errors] == ["unknown key 'dimz'; did you mean 'dims'?"]
    assert (err.line, err.column) == (2, 1)


def test_a_misspelt_fields_section_does_not_hide_the_dims(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, BASE.replace("fields:", "feilds:").replace("rope_rows: 4", "rope_rows: -4")))
    assert [p.path for p in err.errors] == ["", "dims.rope_rows"]


def test_a_yaml_problem_stays_the_first_and_only_error(tmp_path: Path) -> None:
    text = BASE.replace("pad: eos}", "pad: eos, pad: 0}").replace("dtype: int64", "dtype: int46")
    err = _error(_write(tmp_path, text))
    assert len(err.errors) == 1 and "given twice" in err.problem
    line = text.splitlines()[7]
    assert (err.line, err.column) == (8, line.rindex("pad") + 1)  # the second one


def test_a_yaml_syntax_error_has_its_place(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, "name: bad\nfields:\n  x: {shape: [seq, dtype: int64}\n"))
    assert (err.path, err.line) == ("", 3) and err.problem.startswith("invalid YAML")


def test_a_multi_problem_error_pickles(tmp_path: Path) -> None:
    err = _error(_write(tmp_path, with_mistakes(*MISTAKES[:3])[0]))
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is ts.SchemaDefinitionError
    assert back.errors == err.errors and str(back) == str(err) and back.line == err.line


def test_a_layout_problem_has_its_place(tmp_path: Path) -> None:
    text = "name: mine\naxes:\n  seq: {pad_side: left}\nsizes:\n  seq: seqlen\nfields:\n  x: {key: a, pda: 0}\n"
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    with pytest.raises(ts.LayoutDefinitionError) as info:
        ts.load_layout(path)
    err = info.value
    assert err.path == "fields.x.pda"
    assert (err.line, err.column) == (7, text.splitlines()[6].index("pda") + 1)
    assert str(err).startswith(f"{path}:7:")


def test_a_long_report_is_capped_but_errors_keeps_all(tmp_path: Path) -> None:
    """A file of many bad fields: the message stays readable, ``.errors`` has them all."""
    fields = "".join(f"  f{i}: {{kind: int, pad: eso}}\n" for i in range(60))
    err = _error(_write(tmp_path, BASE + fields))
    assert len(err.errors) == 60
    lines = str(err).splitlines()
    assert len(lines) == 1 + 40 + 1 and lines[-1] == "  ... and 20 more (see .errors)"
    assert [p.line for p in err.errors] == list(range(10, 70))
