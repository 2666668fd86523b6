"""Bundles on the command line: ``check BUNDLE`` (as recorded, or against ``--schema`` after the ``diff``
report), ``show BUNDLE`` (the summary), their ``--json``, and what is no usable bundle."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

import trajschema as ts
from tests.cli.terminal_support import in_terminal, layout_problems, plain_environment
from tests.cli.terminal_support import piped as run
from tests.packed.packed_builders import rows_of, thd
from trajschema.cli.app import main
from trajschema.testing import tq_batch

SCHEMAS = ts.schema_names()
DENSE = "verl_dataproto"
PROVENANCE = {"step": 12, "trainer": "verl", "trainer_version": "0.5.0", "reason": "every 5 steps"}
#: What ``check --json`` says of every usable file, bundle or not (the keys before bundles came).
FILE_KEYS = {
    "file",
    "status",
    "format",
    "schema",
    "layout",
    "samples",
    "invalid_samples",
    "summary",
    "violations",
    "violations_omitted",
    "notes",
    "suggested_layout",
}
SHOW_KEYS = {
    "version",
    "command",
    "bundle",
    "format",
    "format_version",
    "trajschema",
    "created",
    "step",
    "trainer",
    "trainer_version",
    "reason",
    "schema",
    "layout",
    "rows",
    "padding_rows",
    "keys",
    "payloads",
    "depth",
    "valid",
    "violations",
    "check_error",
}


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch):
    plain_environment(monkeypatch)


def record(path: Path, name: str = "text", *, layout: str | None = None, broken: bool = False, **kw: Any) -> Path:
    """A bundle of the four real rows of ``name`` (jagged as TransferQueue returns them, or dense in
    ``layout``); ``broken``: sample 2's first response_mask value is 2 (one ``value`` violation)."""
    schema, rows = ts.load_schema(name), rows_of(name)
    if layout is None:
        if broken:
            rows[2]["response_mask"][0] = 2
        batch, tags = tq_batch(rows), [{"is_padding": False}] * len(rows)
        return ts.record_batch(batch, path, schema=schema, tags=tags, **kw)
    fitted = ts.load_layout(layout).with_pad_token(0)
    dense = schema.to_dense(rows, layout=fitted)
    if broken:
        dense["response_mask"][2, 0] = 2
    return ts.record_batch(dense, path, schema=schema, layout=fitted, **kw)


def manifest(path: Path) -> dict[str, Any]:
    return json.loads((path / "manifest.json").read_text())


def provenance_line(path: Path) -> str:
    created = manifest(path)["created"]
    return (
        f"bundle {path}: step 12, trainer verl 0.5.0, recorded by trajschema {ts.__version__} at {created}, "
        "reason: every 5 steps"
    )


@pytest.fixture
def jagged(tmp_path) -> Path:
    return record(tmp_path / "jagged", **PROVENANCE)


@pytest.fixture
def dense(tmp_path) -> Path:
    return record(tmp_path / "dense", layout=DENSE, **PROVENANCE)


@pytest.fixture
def broken(tmp_path) -> Path:
    return record(tmp_path / "broken", broken=True, **PROVENANCE)


# -- check BUNDLE ---------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["jagged", "dense"])
def test_a_clean_bundle_checks_against_its_recorded_schema_and_layout(capsys, tmp_path, form):
    path = record(tmp_path / form, layout=DENSE if form == "dense" else None, **PROVENANCE)
    code, out, err = run(capsys, "check", path)
    in_layout = f" in layout {DENSE!r} (recorded)" if form == "dense" else ""
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        provenance_line(path),
        f"valid: {path}: all 4 samples follow schema 'text' (recorded){in_layout} at depth values",
    ]


@pytest.mark.parametrize("form", ["jagged", "dense"])
def test_an_injected_defect_is_found_where_it_was_put(capsys, tmp_path, form):
    path = record(tmp_path / form, layout=DENSE if form == "dense" else None, broken=True, **PROVENANCE)
    code, out, err = run(capsys, "check", path)
    rows = [line.split("\t") for line in out.splitlines() if "\t" in line]
    assert (code, err) == (1, "")
    assert out.splitlines()[0] == provenance_line(path)
    assert [r[:3] for r in rows] == [["sample", "field", "code"], ["2", "response_mask", "value"]]
    assert out.splitlines()[-1].startswith(f"invalid: {path}: 1 violation in 1 of 4 samples of schema 'text'")


def test_depth_shapes_leaves_the_values_unchecked(capsys, broken):
    code, out, _ = run(capsys, "check", broken, "--depth", "shapes", "--quiet")
    assert code == 0 and out == f"valid: {broken}: all 4 samples follow schema 'text' (recorded) at depth shapes\n"


def test_schema_auto_is_the_recorded_schema(capsys, broken):
    assert run(capsys, "check", broken, "--schema", "auto") == run(capsys, "check", broken)


def _diff(capsys, old: str, new: str, *json_flag: str) -> tuple[int, str]:
    code, out, err = run(capsys, "diff", old, new, *json_flag)
    assert err == ""
    return code, out


@pytest.mark.parametrize(("given", "status"), [("text", 0), ("moe_routed", 1)], ids=["compatible", "incompatible"])
def test_with_schema_the_diff_report_comes_first_then_the_check_against_it(capsys, jagged, given, status):
    _, diff_lines = _diff(capsys, "text", given)
    code, out, err = run(capsys, "check", jagged, "--schema", given)
    lines = out.splitlines()
    assert (code, err) == (status, "")
    assert lines[:2] == [
        provenance_line(jagged),
        f"compatibility of the recorded schema 'text' with schema {given!r} (backward):",
    ]
    assert lines[2 : 2 + len(diff_lines.splitlines())] == diff_lines.splitlines()  # diff's own report
    if given == "text":
        assert diff_lines == "no changes\n" and lines[-1].startswith(f"valid: {jagged}: all 4 samples follow")
    else:
        assert "BREAKING fields.routed_experts  added" in diff_lines
        assert lines[-1] == f"invalid: {jagged}: 4 violations in 4 of 4 samples of schema 'moe_routed' at depth values"


def test_with_schema_a_dense_bundle_is_checked_in_its_recorded_layout(capsys, dense):
    code, out, _ = run(capsys, "check", dense, "--schema", "moe_routed", "--quiet")
    assert code == 1 and out.splitlines() == [
        f"invalid: {dense}: 1 violation in 0 of 4 samples of schema 'moe_routed' in layout {DENSE!r} (recorded) "
        "at depth values"
    ]


def test_json_adds_the_bundle_and_the_compatibility_diff_json_gives(capsys, jagged, tmp_path):
    samples = tmp_path / "samples.pt"
    torch.save(rows_of("text"), samples)
    _, diff_json = _diff(capsys, "text", "moe_routed", "--json")
    code, out, err = run(capsys, "check", jagged, samples, "--schema", "moe_routed", "--json")
    report = json.loads(out)
    bundle, plain = report["files"]
    expected_diff = {k: v for k, v in json.loads(diff_json).items() if k not in ("version", "command")}
    assert (code, err) == (1, "")
    assert set(bundle) == set(plain) == FILE_KEYS | {"bundle", "compatibility"}
    assert bundle["compatibility"] == expected_diff and expected_diff["compatible"] is False
    assert bundle["bundle"] == {
        "path": str(jagged),
        **PROVENANCE,
        "trajschema": ts.__version__,
        "created": manifest(jagged)["created"],
        "schema": "text",
        "layout": None,
    }
    assert (bundle["format"], bundle["schema"], bundle["layout"], bundle["samples"]) == (
        "bundle",
        "moe_routed",
        None,
        4,
    )
    assert (plain["format"], plain["bundle"], plain["compatibility"]) == ("torch.save", None, None)
    assert report["totals"]["samples"] == 8 and report["layout"] is None


def test_json_without_schema_has_no_compatibility_and_names_the_recorded_layout(capsys, dense):
    code, out, _ = run(capsys, "check", dense, "--json")
    (f,) = json.loads(out)["files"]
    assert code == 0 and f["compatibility"] is None and f["layout"] == DENSE
    assert f["bundle"]["layout"] == DENSE and f["bundle"]["schema"] == "text" and f["status"] == "valid"


def test_bundles_and_sample_files_mix_and_a_sample_file_needs_schema(capsys, jagged, broken, tmp_path):
    samples = tmp_path / "samples.pt"
    torch.save(rows_of("text"), samples)
    code, out, err = run(capsys, "check", jagged, broken, samples, "--quiet")
    assert code == 2
    assert err == (
        f"trajschema check: error: {samples}: is no bundle, and a file of samples is checked against a schema: "
        "name it with --schema (a schema name, a .yaml file, or auto)\n"
    )
    assert out.splitlines()[-1] == f"checked 3 files: 1 valid, 1 invalid, 1 unusable ({samples})"
    code, out, _ = run(capsys, "check", jagged, samples, "--schema", "text", "--quiet")
    assert code == 0 and out.splitlines()[-1] == "checked 2 files: 2 valid, 0 invalid, 0 unusable"


def test_layout_is_refused_for_a_bundle_which_carries_its_own(capsys, dense):
    code, out, err = run(capsys, "check", dense, "--schema", "text", "--layout", DENSE)
    assert (code, out) == (2, "")
    assert (
        err
        == f"trajschema check: error: {dense}: is a bundle, which carries its own layout; check it without --layout\n"
    )
    code, _, err = run(capsys, "check", dense, "--layout", DENSE)
    assert code == 2 and "--layout checks dense batch files, which hold no schema; name it with --schema" in err


def test_a_bundle_named_twice_is_checked_once(capsys, monkeypatch, jagged):
    monkeypatch.chdir(jagged.parent)
    code, out, err = run(capsys, "check", jagged, "jagged/", "--quiet")
    assert code == 0 and len(out.splitlines()) == 1
    assert err == "trajschema check: warning: jagged/ is named more than once; checked once\n"


# -- what is no usable bundle ---------------------------------------------------------------


def _flip_a_tensor_byte(path: Path) -> None:
    data = path.joinpath("tensors.safetensors").read_bytes()
    path.joinpath("tensors.safetensors").write_bytes(data[:-1] + bytes([data[-1] ^ 1]))


def _newer_format(path: Path) -> None:
    m = manifest(path)
    path.joinpath("manifest.json").write_text(json.dumps({**m, "version": 2, "trajschema": "9.0.0"}))


UNUSABLE = {
    "tensor byte flipped": (_flip_a_tensor_byte, "payload tensors.safetensors is not the one recorded"),
    "batch.json deleted": (lambda p: p.joinpath("batch.json").unlink(), "payload batch.json is missing"),
    "newer format": (_newer_format, "written in bundle format version 2 (by trajschema 9.0.0)"),
    "no manifest": (lambda p: p.joinpath("manifest.json").unlink(), "no bundle here (no manifest.json)"),
    "manifest of another format": (
        lambda p: p.joinpath("manifest.json").write_text('{"format": "zip"}'),
        "not a trajschema bundle (its manifest's format is 'zip')",
    ),
}


@pytest.mark.parametrize(("spoil", "message"), list(UNUSABLE.values()), ids=list(UNUSABLE))
@pytest.mark.parametrize("command", ["check", "show"])
def test_a_spoilt_bundle_is_unusable_naming_why(capsys, jagged, spoil, message, command):
    spoil(jagged)
    code, out, err = run(capsys, command, jagged)
    assert (code, out) == (2, "")
    assert err.startswith(f"trajschema {command}: error: {jagged}: {message}") and err.count("\n") == 1


def test_a_spoilt_bundle_does_not_stop_the_others(capsys, jagged, broken):
    _flip_a_tensor_byte(jagged)
    code, out, err = run(capsys, "check", jagged, broken, "--json")
    report = json.loads(out)
    assert code == 2 and "payload tensors.safetensors" in err
    assert [f["status"] for f in report["files"]] == ["unusable", "invalid"]
    assert set(report["files"][0]) == {"file", "status", "error"}


def test_an_empty_bundle_has_nothing_to_check_and_shows_as_empty(capsys, tmp_path):
    path = ts.record_batch(tq_batch([]), tmp_path / "empty", schema="text")
    code, out, err = run(capsys, "check", path)
    assert (code, out) == (2, "")
    assert err == f"trajschema check: error: {path}: the bundle holds a batch of no rows; there is nothing to check\n"
    code, out, _ = run(capsys, "show", path, "--json")
    report = json.loads(out)
    assert code == 0 and (report["rows"], report["keys"], report["valid"]) == (0, [], None)
    assert report["violations"] == {"total": 0, "invalid_rows": 0, "by_code": {}}
    _, out, _ = run(capsys, "show", path)
    assert out.splitlines()[-1] == "empty: the batch holds no rows; there is nothing to check"


def test_a_path_that_does_not_exist(capsys, tmp_path):
    missing = tmp_path / "runs" / "step-00000012"
    code, _, err = run(capsys, "check", missing)
    assert code == 2 and err == f"trajschema check: error: {missing}: no such file or bundle directory\n"
    code, _, err = run(capsys, "show", missing)
    assert code == 2 and err == f"trajschema show: error: {missing}: no such bundle directory or schema file\n"


def test_a_file_is_no_bundle_and_a_directory_without_a_manifest_is_none(capsys, tmp_path):
    (tmp_path / "notes.txt").write_text("hello\n")
    code, _, err = run(capsys, "check", tmp_path / "notes.txt")
    assert code == 2 and "notes.txt: is no bundle, and a file of samples is checked against a schema" in err
    for command in ("check", "show"):
        code, out, err = run(capsys, command, tmp_path)
        assert (code, out) == (2, "")
        assert err == f"trajschema {command}: error: {tmp_path}: no bundle here (no manifest.json)\n"


# -- show BUNDLE ----------------------------------------------------------------------------


def _keys(out: str) -> dict[str, list[str]]:
    """The rows of the piped keys table, by key."""
    lines = out.splitlines()
    start = lines.index("keys") + 2
    end = lines.index("", start)
    return {cells[0]: cells[1:] for cells in (line.split("\t") for line in lines[start:end])}


def test_show_summarizes_a_jagged_bundle(capsys, broken):
    code, out, err = run(capsys, "show", broken)
    lines = out.splitlines()
    assert (code, err) == (0, "")
    assert lines[:6] == [
        f"bundle {broken}",
        "  " + provenance_line(broken).split(": ", 1)[1],
        "  schema: text (recorded)",
        "  layout: none (a jagged batch)",
        "  rows: 4 (padding rows: 0)",
        "  format: trajschema-bundle version 1",
    ]
    keys = _keys(out)
    assert keys["input_ids"] == ["jagged", "int64", "[1..9]", "160 B"]  # 1 + 5 + 9 + 5 tokens of 8 bytes
    assert keys["uid"] == ["values", "str", "[4]", "-"]
    assert set(keys) == set(rows_of("text")[0])
    sizes = manifest(broken)["payloads"]
    assert f"tensors.safetensors\t{sizes['tensors.safetensors']['bytes'] / 1024:.1f} KiB" in out
    assert "violations\ncode\tcount\nvalue\t1\n" in out
    assert lines[-1] == (
        "invalid: 1 violation in 1 of 4 rows of the recorded schema 'text' at depth values; "
        f"`trajschema check {broken}` lists them"
    )


def test_show_of_a_dense_bundle_lists_its_batch_shapes(capsys, dense):
    code, out, _ = run(capsys, "show", dense)
    keys = _keys(out)
    assert code == 0 and "  layout: verl_dataproto (recorded)" in out.splitlines()
    assert keys["input_ids"] == ["tensor", "int64", "[4, 9]", f"{4 * 9 * 8} B"]
    assert keys["rm_scores"] == ["tensor", "float32", "[4, 4]", f"{4 * 4 * 4} B"]
    assert (
        out.splitlines()[-1]
        == "valid: all 4 rows follow the recorded schema 'text' in layout 'verl_dataproto' at depth values"
    )


def test_show_json_is_one_object_of_the_documented_keys(capsys, broken):
    code, out, err = run(capsys, "show", broken, "--json")
    report = json.loads(out)
    m = manifest(broken)
    assert (code, err) == (0, "") and set(report) == SHOW_KEYS
    assert (report["version"], report["command"], report["bundle"]) == (1, "show", str(broken))
    assert {k: report[k] for k in PROVENANCE} == PROVENANCE and report["created"] == m["created"]
    assert (report["format"], report["format_version"], report["trajschema"]) == (
        "trajschema-bundle",
        1,
        ts.__version__,
    )
    assert (report["schema"], report["layout"], report["rows"], report["padding_rows"]) == ("text", None, 4, 0)
    assert report["payloads"] == [{"name": n, **e} for n, e in m["payloads"].items()]
    assert report["violations"] == {"total": 1, "invalid_rows": 1, "by_code": {"value": 1}}
    assert (report["valid"], report["check_error"], report["depth"]) == (False, None, "values")
    key = next(k for k in report["keys"] if k["name"] == "input_ids")
    assert key == {"name": "input_ids", "kind": "jagged", "dtype": "int64", "shape": "[1..9]", "bytes": 160}
    human = [line.split("\t") for line in run(capsys, "show", broken)[1].splitlines() if line.count("\t") == 4]
    assert human[1:] == [
        [k["name"], k["kind"], k["dtype"], k["shape"], f"{k['bytes']} B" if k["bytes"] else "-"] for k in report["keys"]
    ]


def test_show_counts_the_rows_of_a_packed_bundle(capsys, tmp_path):
    schema, rows = ts.load_schema("text"), rows_of("text")
    packed = schema.to_packed(rows, layout=thd(), tags=[{"is_padding": False}] * 4)
    path = ts.record_batch(packed, tmp_path / "packed", schema=schema, layout=thd())
    assert manifest(path)["rows"] == 4  # counted from its offsets
    code, out, _ = run(capsys, "show", path, "--json")
    assert code == 0 and json.loads(out)["rows"] == 4 and json.loads(out)["layout"] == "thd"
    code, out, _ = run(capsys, "check", path, "--quiet")
    assert code == 0 and "all 4 samples follow schema 'text' (recorded) in layout 'thd' (recorded)" in out


@pytest.mark.parametrize("name", SCHEMAS)
def test_every_packaged_schemas_bundle_shows_every_key_and_checks_clean(capsys, tmp_path, name):
    path = record(tmp_path / name, name)
    code, out, _ = run(capsys, "show", path, "--json")
    report = json.loads(out)
    tensors = {k: v for k, v in rows_of(name)[0].items() if isinstance(v, torch.Tensor)}
    kinds = {k["name"]: k["kind"] for k in report["keys"]}
    assert code == 0 and report["valid"] is True and set(kinds) == set(rows_of(name)[0])
    assert all(kinds[k] in ("jagged", "nested") for k in tensors), kinds
    total = sum(sum(r[k].numel() * r[k].element_size() for r in rows_of(name)) for k in tensors)
    assert sum(k["bytes"] or 0 for k in report["keys"]) == total  # every tensor byte, counted once
    assert run(capsys, "check", path, "--quiet")[0] == 0


def test_a_schema_name_is_still_the_schema_and_dot_slash_is_the_directory(capsys, monkeypatch, tmp_path, jagged):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(jagged, tmp_path / "text")
    _, schema_out, _ = run(capsys, "show", "text")
    assert schema_out.startswith("schema text\n")
    code, out, _ = run(capsys, "show", "./text")
    assert code == 0 and out.startswith("bundle text\n")


def test_show_refuses_config_with_a_bundle(capsys, jagged):
    code, out, err = run(capsys, "show", jagged, "--config", "config.json")
    assert (code, out) == (2, "") and "--config pins the dims of a schema named on the command line" in err


# -- on a terminal --------------------------------------------------------------------------


def test_at_80_columns_nothing_a_user_copies_is_cut(monkeypatch, capsys, broken):
    code, out, _ = in_terminal(monkeypatch, capsys, "check", broken, "--schema", "moe_routed")
    assert code == 1 and layout_problems(out, ["fields.routed_experts", "response_mask", str(broken)]) == []
    code, out, _ = in_terminal(monkeypatch, capsys, "show", broken)
    sha = manifest(broken)["payloads"]["batch.json"]["sha256"]
    assert code == 0 and layout_problems(out, ["rollout_log_probs", "tensors.safetensors", sha]) == []


# -- hostile bundles (an adversarial review) ----------------------------------------


@pytest.mark.parametrize("command", ["check", "show"])
def test_cli_on_a_bundle_with_a_deep_schema_yaml_says_no_unexpected_error(tmp_path, command, capsys):
    from tests.bundle.test_hostile_bundles import _rehashed_manifest_edit

    bundle = ts.record_batch([], tmp_path / "b", schema="text")  # its schema YAML nested too deeply to read

    _rehashed_manifest_edit(bundle, lambda m: m["schema"]["yaml"].update(text="[" * 5000 + "]" * 5000))
    assert main([command, str(bundle)]) == 2
    err = capsys.readouterr().err
    assert "unexpected" not in err and len(err.strip().splitlines()) == 1


def test_cli_check_of_a_recorded_2d_nontensor_bundle_says_no_unexpected_error(tmp_path, capsys):
    """check BUNDLE of a bundle record_batch wrote itself: 'unexpected RuntimeError: Received a new batch size ...'."""
    from tensordict import NonTensorData, NonTensorStack, TensorDict

    s = NonTensorStack(*[NonTensorStack(*[NonTensorData(f"{i}{j}") for j in range(3)]) for i in range(2)])
    path = ts.record_batch(
        TensorDict({"a": torch.zeros(2, 3), "s": s}, batch_size=[2, 3]), tmp_path / "b", schema="text"
    )
    main(["show", str(path)])
    assert "unexpected" not in capsys.readouterr().err


# -- exports ------------------------------------------------------------------------------------------
