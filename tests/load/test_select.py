"""Choosing a schema from a sample."""

from __future__ import annotations

import pytest
import torch

import trajschema as ts
from trajschema.load import choose_schema
from trajschema.testing import verl_sample


@pytest.mark.parametrize("name", ts.schema_names())
def test_each_packaged_schemas_own_sample_picks_it(name):
    schema = ts.load_schema(name)
    kw = {k: 2 for k in ("layers", "topk", "teacher_topk") if k in schema.dims}
    assert ts.schema_for_sample(verl_sample(schema, 6, 3, **kw)).name == name


def test_the_schema_declaring_more_fields_wins_so_padding_copies_nothing_stale():
    moe = verl_sample(ts.load_schema("vlm_mrope_moe"), 100, 11, layers=48, topk=8)
    chosen = ts.schema_for_sample(moe)
    assert chosen.name == "vlm_mrope_moe"
    chosen.padding(2, eos_token_id=2, like=moe)  # vlm_mrope would refuse: routed_experts undeclared


def test_no_fitting_schema_is_a_schema_error_with_the_closest_candidates_violations():
    sample = {"input_ids": torch.zeros(3, dtype=torch.int64)}
    with pytest.raises(ts.SchemaError, match=r"closest is 'text'.*prompts: required field is missing") as info:
        ts.schema_for_sample(sample, candidates=["text", "vlm_mrope_moe"])
    err = info.value
    assert isinstance(err, ts.SchemaMatchError) and isinstance(
        err, ts.SchemaNotFoundError
    )  # old callers still catch it
    assert err.schema_name == "text"
    assert err.violations == ts.load_schema("text").violations(sample, depth="shapes")
    assert "vlm_mrope_moe (" in str(err)
    with pytest.raises(TypeError):
        ts.schema_for_sample([1, 2])
    with pytest.raises(ts.SchemaMatchError, match="empty"):
        ts.schema_for_sample(sample, candidates=[])


def test_the_tag_is_checked_too():
    sample = verl_sample(ts.load_schema("text"), 5, 3)
    assert ts.schema_for_sample(sample, {"is_padding": False, "seq_len": 8}, candidates=["text"]).name == "text"
    with pytest.raises(ts.SchemaError, match="is_padding"):
        ts.schema_for_sample(sample, {"is_padding": "no"}, candidates=["text"])
    with pytest.raises(ts.SchemaError, match="seq_len"):
        ts.schema_for_sample(sample, {"seq_len": 9}, candidates=["text"])


def test_a_schema_leaving_a_tensor_field_undeclared_does_not_fit():
    # text allows extra fields, but would pad routed_experts by copying the real sample's.
    moe = verl_sample(ts.load_schema("moe_routed"), 5, 3, layers=2, topk=2)
    assert ts.load_schema("text").violations(moe, depth="shapes") == []
    with pytest.raises(ts.SchemaError, match=r"routed_experts.*not declared by schema 'text'"):
        ts.schema_for_sample(moe, candidates=["text"])
    assert ts.schema_for_sample(moe, candidates=["text", "moe_routed"]).name == "moe_routed"


def test_a_remaining_tie_names_the_tied_schemas(tmp_path, monkeypatch):
    text = (ts.schema_search_path()[-1] / "text.yaml").read_text()
    (tmp_path / "text_twin.yaml").write_text(text.replace("name: text", "name: text_twin", 1))
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    sample = verl_sample(ts.load_schema("text"), 5, 3)
    with pytest.raises(ts.SchemaMatchError, match=r"\['text', 'text_twin'\] fit the sample equally well") as info:
        ts.schema_for_sample(sample, candidates=["text", "text_twin"])
    assert info.value.tied == ["text", "text_twin"] and info.value.violations == []
    assert ts.schema_for_sample(sample, candidates=["text_twin"]).name == "text_twin"


def test_match_errors_pickle():
    import pickle

    with pytest.raises(ts.SchemaMatchError) as info:
        ts.schema_for_sample({"input_ids": torch.zeros(3, dtype=torch.int64)}, candidates=["text"])
    back = pickle.loads(pickle.dumps(info.value))
    assert str(back) == str(info.value) and back.violations == info.value.violations and back.schema_name == "text"


def test_a_broken_file_on_the_path_fails_the_choice_and_says_how_to_avoid_it(tmp_path, monkeypatch):
    """Without candidates= every file on the search path is a candidate: the one broken could be the best fit."""
    (tmp_path / "mine.yaml").symlink_to(tmp_path / "moved.yaml")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    sample = verl_sample(ts.load_schema("text"), 5, 3)
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.schema_for_sample(sample)
    err = info.value
    assert (err.source, err.path) == (str(tmp_path / "mine.yaml"), "")
    assert err.problem == (
        f"is a symbolic link to {tmp_path / 'moved.yaml'}, which does not exist; schema_for_sample tries every "
        "schema on the search path: fix the file, or pass candidates="
    )
    # Naming the candidates leaves the broken file out, and the error as load_schema gives it when named.
    assert ts.schema_for_sample(sample, candidates=["text", "moe_routed"]).name == "text"
    with pytest.raises(ts.SchemaDefinitionError) as named:
        ts.schema_for_sample(sample, candidates=["text", "mine"])
    assert named.value.problem == f"is a symbolic link to {tmp_path / 'moved.yaml'}, which does not exist"


@pytest.mark.parametrize("candidates", [5, {"text": 1}, [5], ["text", None], b"text", iter(["text"])])
def test_candidates_that_are_not_names_are_a_type_error(candidates):
    sample = verl_sample(ts.load_schema("text"), 5, 3)
    with pytest.raises(TypeError, match=r"^candidates must be"):
        ts.schema_for_sample(sample, candidates=candidates)


def test_a_candidate_named_twice_is_one_candidate(tmp_path):
    """'text' twice, or by name and by path, is not a tie between two schemas."""
    sample = verl_sample(ts.load_schema("text"), 5, 3)
    path = ts.schema_search_path()[-1] / "text.yaml"
    assert ts.schema_for_sample(sample, candidates=["text", "text"]).name == "text"
    assert ts.schema_for_sample(sample, candidates=["text", str(path), path]).name == "text"
    assert ts.schema_for_sample(sample, candidates=path).name == "text"
    assert ts.schema_for_sample(sample, candidates={"text", "moe_routed"}).name == "text"


def test_schema_for_sample_with_one_candidate_name():
    """candidates='text' means the schema 'text' (or is a TypeError), never a lookup of the schemas 't', 'e', 'x'."""
    try:
        chosen = ts.schema_for_sample(verl_sample("text", 5, 3), candidates="text")
    except TypeError:
        return
    assert chosen.name == "text"


# -- leaving out what does not load (`check --schema auto`, issue 15) ------------------------------


def _broken_path(tmp_path, monkeypatch):
    """A search path with a broken file of each kind beside a good one: a dangling link, bad YAML, a wrong name."""
    (tmp_path / "dangling.yaml").symlink_to(tmp_path / "moved.yaml")
    (tmp_path / "bad.yaml").write_text("name: bad\nfeilds: {}\n")
    (tmp_path / "typo3.yaml").write_text("name: other\nextends: [text]\n")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    return {str(tmp_path / f) for f in ("bad.yaml", "dangling.yaml", "typo3.yaml")}


def test_skip_unloadable_leaves_out_broken_files_says_which_and_still_picks_the_fit(tmp_path, monkeypatch):
    broken = _broken_path(tmp_path, monkeypatch)
    moe = verl_sample(ts.load_schema("vlm_mrope_moe"), 5, 3, layers=2, topk=2)
    choice = choose_schema(moe, skip_unloadable=True)
    assert choice.schema.name == "vlm_mrope_moe"
    assert {e.source for e in choice.skipped} == broken
    assert all(isinstance(e, ts.SchemaDefinitionError) for e in choice.skipped)
    # Without it, the first broken file fails the choice, as before.
    with pytest.raises(ts.SchemaDefinitionError, match="schema_for_sample tries every schema"):
        ts.schema_for_sample(moe)
    with pytest.raises(ts.SchemaDefinitionError):
        choose_schema(moe)


def test_skip_unloadable_is_the_choice_among_the_schemas_that_load(tmp_path, monkeypatch):
    """The reference: naming the loadable schemas as candidates."""
    _broken_path(tmp_path, monkeypatch)
    for name in ts.schema_names():
        try:
            schema = ts.load_schema(name)
        except ts.SchemaDefinitionError:
            continue
        kw = {k: 2 for k in ("layers", "topk", "teacher_topk") if k in schema.dims}
        sample = verl_sample(schema, 4, 2, **kw)
        loadable = [n for n in ts.schema_names() if n not in ("bad", "dangling", "typo3")]
        assert choose_schema(sample, skip_unloadable=True).schema == ts.schema_for_sample(sample, candidates=loadable)


def test_a_sample_nothing_fits_names_the_files_left_out_as_one_might_have(tmp_path, monkeypatch):
    broken = _broken_path(tmp_path, monkeypatch)
    with pytest.raises(ts.SchemaMatchError) as info:
        choose_schema({"input_ids": torch.zeros(3, dtype=torch.int64)}, skip_unloadable=True)
    left_out = str(info.value).rsplit(" (left out, as they do not load: ", 1)[1]
    assert set(left_out.rstrip(")").split(", ")) == broken


def test_when_nothing_on_the_path_loads_the_first_error_is_raised(tmp_path, monkeypatch):
    """Every packaged name shadowed by a broken file: there is nothing to choose from."""
    for name in ts.schema_names():
        (tmp_path / f"{name}.yaml").write_text(f"name: {name}\nfeilds: {{}}\n")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    sample = verl_sample(ts.load_schema(ts.schema_search_path()[-1] / "text.yaml"), 5, 3)
    with pytest.raises(ts.SchemaDefinitionError) as info:
        choose_schema(sample, skip_unloadable=True)
    assert info.value.source == str(tmp_path / f"{sorted(ts.schema_names())[0]}.yaml")
    assert info.value.problem.endswith("; no schema on the search path loads")


def test_an_entry_that_cannot_be_listed_fails_the_choice_or_is_left_out(tmp_path, monkeypatch):
    """Before: schema_for_sample went on without it silently, though the docs said it fails the choice."""
    a_file = tmp_path / "a_file"
    a_file.write_text("name: mine\n")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(a_file))
    sample = verl_sample(ts.load_schema("text"), 5, 3)
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.schema_for_sample(sample)
    assert (info.value.source, info.value.path) == (str(a_file), "")
    assert info.value.problem.startswith("is not a directory (TRAJSCHEMA_PATH lists directories of schema files)")
    assert info.value.problem.endswith("fix the entry, or pass candidates=")
    assert ts.schema_for_sample(sample, candidates=["text"]).name == "text"
    choice = choose_schema(sample, skip_unloadable=True)
    assert choice.schema.name == "text" and [e.source for e in choice.skipped] == [str(a_file)]


def test_named_candidates_are_never_left_out(tmp_path, monkeypatch):
    _broken_path(tmp_path, monkeypatch)
    sample = verl_sample(ts.load_schema("text"), 5, 3)
    with pytest.raises(ts.SchemaDefinitionError, match="declares name 'other'"):
        choose_schema(sample, candidates=["text", "typo3"], skip_unloadable=True)
    assert choose_schema(sample, candidates=["text"], skip_unloadable=True) == (ts.load_schema("text"), [])
