"""``trajschema check`` on real rollouts: several files, stdin, JSON Lines, wrong kinds, bounded grouped output."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from terminal_support import ANSI, in_terminal, layout_problems

import trajschema as ts
from trajschema.cli.app import main
from trajschema.cli.check import DEFAULT_MAX_VIOLATIONS
from trajschema.testing import verl_sample

FREE_DIMS = {"layers": 3, "topk": 2, "experts": 8, "teacher_topk": 2}


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch):
    for var in ("FORCE_COLOR", "NO_COLOR", "TRAJSCHEMA_DEBUG", "TRAJSCHEMA_PATH", "COLUMNS"):
        monkeypatch.delenv(var, raising=False)


def run(capsys, *argv: Any) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def sample_of(name: str = "text", p: int = 5, r: int = 3, **kw: Any) -> dict[str, Any]:
    schema = ts.load_schema(name)
    return verl_sample(schema, p, r, **{k: v for k, v in FREE_DIMS.items() if k in schema.dims}, **kw)


def as_json(value: Any) -> Any:
    """A sample as JSON holds it: tensors as (nested) lists, mappings (multi_modal_inputs) too."""
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    return value.tolist() if isinstance(value, torch.Tensor) else value


def jsonl(path: Path, samples: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(as_json(s)) + "\n" for s in samples))
    return path


def error_lines(err: str) -> list[str]:
    lines = err.splitlines()
    assert "Traceback" not in err and all(line.startswith("trajschema check: ") for line in lines), err
    return lines


def stdin_of(monkeypatch, data: bytes) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


@pytest.fixture
def good(tmp_path) -> Path:
    path = tmp_path / "good.pt"
    torch.save([sample_of(uid="q0"), sample_of(p=4, r=2, uid="q1")], path)
    return path


@pytest.fixture
def bad(tmp_path) -> Path:
    """Three samples whose loss_mask holds 7: one (loss_mask, value) violation each."""
    samples = [sample_of(uid=f"q{i}") for i in range(3)]
    for s in samples:
        s["loss_mask"] = torch.full((3,), 7)
    path = tmp_path / "bad.pt"
    torch.save(samples, path)
    return path


# -- several files and stdin ----------------------------------------------------------------


def test_several_files_are_each_reported_then_totalled(capsys, tmp_path, good, bad):
    lines_file = jsonl(tmp_path / "good.jsonl", [sample_of(uid="q2")])
    code, out, err = run(capsys, "check", good, bad, lines_file, "--schema", "text")
    assert (code, err) == (1, "")
    verdicts = [line for line in out.splitlines() if line.startswith(("valid:", "invalid:"))]
    assert verdicts == [
        f"valid: {good}: all 2 samples follow schema 'text' at depth values",
        f"invalid: {bad}: 3 violations in 3 of 3 samples of schema 'text' at depth values",
        f"valid: {lines_file}: its sample follows schema 'text' at depth values",
    ]
    assert out.splitlines()[-1] == "checked 3 files: 2 valid, 1 invalid, 0 unusable"


def test_an_unusable_file_exits_2_names_it_and_the_others_are_still_checked(capsys, tmp_path, good, bad):
    missing = tmp_path / "missing.pt"
    code, out, err = run(capsys, "check", missing, good, bad, "--schema", "text")
    assert code == 2
    assert error_lines(err) == [f"trajschema check: error: {missing}: no such file"]
    assert f"valid: {good}:" in out and f"invalid: {bad}:" in out
    assert out.splitlines()[-1] == f"checked 3 files: 1 valid, 1 invalid, 1 unusable ({missing})"


@pytest.mark.parametrize(("files", "status"), [(["good"], 0), (["good", "bad"], 1), (["bad", "good"], 1)])
def test_exit_status_is_the_worst_file(capsys, good, bad, files, status):
    paths = {"good": good, "bad": bad}
    assert run(capsys, "check", *(paths[f] for f in files), "--schema", "text")[0] == status


def test_one_unusable_file_alone_is_one_error_line_and_nothing_on_stdout(capsys, tmp_path):
    code, out, err = run(capsys, "check", tmp_path / "nope.pt", "--schema", "text")
    assert (code, out) == (2, "") and error_lines(err) == [
        f"trajschema check: error: {tmp_path / 'nope.pt'}: no such file"
    ]


def test_an_unknown_schema_stops_before_any_file(capsys, good):
    code, out, err = run(capsys, "check", good, good, "--schema", "nope")
    assert (code, out) == (2, "") and "no schema 'nope'" in err


@pytest.mark.parametrize("kind", ["torch.save", "JSON Lines"])
def test_stdin_is_read_once_as_bytes(capsys, monkeypatch, tmp_path, kind):
    samples = [sample_of(uid="q0"), sample_of(p=2, r=6, uid="q1")]
    if kind == "torch.save":
        buffer = io.BytesIO()
        torch.save(samples, buffer)
        data = buffer.getvalue()
    else:
        data = jsonl(tmp_path / "x.jsonl", samples).read_bytes()
    stdin_of(monkeypatch, data)
    code, out, err = run(capsys, "check", "-", "--schema", "auto", "--json")
    report = json.loads(out)
    assert (code, err) == (0, "")
    assert report["files"][0] | {"summary": None} == report["files"][0] | {
        "file": "<stdin>",
        "status": "valid",
        "format": kind,
        "schema": "text",
        "samples": 2,
        "summary": None,
    }


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        (b"", "<stdin>: is empty; check reads torch.save files (.pt) and JSON Lines"),
        (b"\n \r\n", "<stdin>: is empty (blank); check reads"),
        (None, "<stdin>: standard input is closed; pipe the samples in, or name a file"),
        ("pytest", "<stdin>: cannot be read (OSError: "),
    ],
    ids=["empty", "blank", "closed", "unreadable"],
)
def test_stdin_empty_closed_or_unreadable_is_unusable(capsys, monkeypatch, good, stdin, message):
    if isinstance(stdin, bytes):
        stdin_of(monkeypatch, stdin)
    elif stdin is None:
        monkeypatch.setattr(sys, "stdin", None)
    # else: pytest's own stdin, which refuses to be read
    code, out, err = run(capsys, "check", "-", good, "--schema", "text")
    assert code == 2 and f"valid: {good}" in out
    (line,) = error_lines(err)
    assert line.startswith(f"trajschema check: error: {message}"), line


def test_a_file_named_twice_is_checked_once_and_said(capsys, monkeypatch, tmp_path, bad):
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "check", bad, "bad.pt", "./bad.pt", "--schema", "text", "--quiet")
    assert code == 1 and out.splitlines() == [
        f"invalid: {bad}: 3 violations in 3 of 3 samples of schema 'text' at depth values"
    ]
    assert error_lines(err) == [
        "trajschema check: warning: bad.pt is named more than once; checked once",
        "trajschema check: warning: ./bad.pt is named more than once; checked once",
    ]


def test_stdin_named_twice_is_read_once(capsys, monkeypatch, tmp_path):
    stdin_of(monkeypatch, jsonl(tmp_path / "x.jsonl", [sample_of()]).read_bytes())
    code, out, err = run(capsys, "check", "-", "-", "--schema", "text", "--quiet")
    assert code == 0 and out.splitlines() == ["valid: <stdin>: its sample follows schema 'text' at depth values"]
    assert error_lines(err) == ["trajschema check: warning: - is named more than once; checked once"]


# -- JSON Lines -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ts.schema_names())
def test_json_lines_of_every_packaged_schema_are_read_by_field_name(capsys, tmp_path, name):
    samples = [sample_of(name, 5, 3, uid="q0"), sample_of(name, 3, 4, uid="q1")]
    path = jsonl(tmp_path / "rollout.jsonl", samples)
    for schema in (name, "auto"):
        code, out, err = run(capsys, "check", path, "--schema", schema)
        assert (code, err) == (0, ""), out
        assert out.startswith(f"valid: {path}: all 2 samples follow schema {name!r}")


def test_json_lines_take_each_fields_dtype_and_nested_shape(tmp_path):
    from trajschema.cli.read import open_source, read_jsonl

    schema = ts.load_schema("moe_routed")
    sample = sample_of("moe_routed", 5, 3)
    path = jsonl(tmp_path / "x.jsonl", [sample])
    (read,) = read_jsonl(open_source(str(path)), schema.fields).batch
    for key, value in sample.items():
        if isinstance(value, torch.Tensor):
            # routed_experts declares int16 first: the JSON numbers fit it, as verl writes it
            assert (read[key].dtype, read[key].shape) == (value.dtype, value.shape), key
            assert torch.equal(read[key], value), key
        else:
            assert read[key] == value, key


def test_json_lines_report_line_numbers_and_skip_blank_lines(capsys, tmp_path):
    broken = sample_of(uid="q1")
    broken["loss_mask"] = torch.full((3,), 5)
    text = "\n".join(json.dumps(as_json(s)) for s in [sample_of(), broken]).replace("\n", "\n\n\n") + "\n"
    path = tmp_path / "x.jsonl"
    path.write_text(text)
    code, out, _ = run(capsys, "check", path, "--schema", "text")
    assert code == 1
    assert out.splitlines()[:2] == [
        "line\tfield\tcode\tmessage",
        "4\tloss_mask\tvalue\t3 of 3 elements are not in {0, 1} (first at [0]: 5)",
    ]
    code, out, _ = run(capsys, "check", path, "--schema", "text", "--json")
    (violation,) = json.loads(out)["files"][0]["violations"]
    assert (violation["sample"], violation["line"]) == (1, 4)


def test_json_lines_with_a_bom_crlf_ends_and_no_final_newline_read_as_any(capsys, tmp_path):
    lines = [json.dumps(as_json(s)) for s in (sample_of(uid="q0"), sample_of(p=2, r=2, uid="q1"))]
    path = tmp_path / "windows.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode())
    code, out, err = run(capsys, "check", path, "--schema", "text")
    assert (code, err) == (0, "") and "all 2 samples follow" in out


def test_json_lines_are_sniffed_without_the_extension_even_through_a_bom(capsys, tmp_path):
    path = tmp_path / "rollout.txt"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(as_json(sample_of())).encode() + b"\n")
    code, _out, err = run(capsys, "check", path, "--schema", "text")
    assert (code, err) == (0, ""), err


def test_nan_and_infinity_are_numbers_that_finite_fields_refuse(capsys, tmp_path):
    sample = as_json(sample_of())
    sample["rollout_log_probs"] = [float("nan"), float("inf"), -1.5]
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(sample) + "\n")  # json writes NaN and Infinity, as verl's dump does
    assert "NaN, Infinity" in path.read_text()
    code, out, _ = run(capsys, "check", path, "--schema", "text", "--json")
    report = json.loads(out)  # still strict JSON: the report holds no NaN
    assert code == 1
    assert [(v["field"], v["code"]) for v in report["files"][0]["violations"]] == [("rollout_log_probs", "value")]


def _line_with(key: str, value: Any) -> str:
    sample = as_json(sample_of())
    sample[key] = value
    return json.dumps(sample)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"input_ids": [1, 2', "line 2: not JSON (Expecting ',' delimiter at column 20)"),
        ("[1, 2, 3]", "line 2: a list, not a sample (a JSON object of field name to value)"),
        ('"text"', "line 2: the string 'text', not a sample"),
        ('{"uid": "a", "uid": "b"}', "line 2: key 'uid' appears twice in one object"),
        (
            _line_with("input_ids", [1, 2.5, 3]),
            "line 2: key 'input_ids': expected integers for int64[seq], found a list holding the number 2.5",
        ),
        (
            _line_with("input_ids", [1, float("nan")]),
            "key 'input_ids': expected integers for int64[seq], found a list holding the number nan",
        ),
        (
            _line_with("input_ids", [True, False]),
            "key 'input_ids': expected integers for int64[seq], found a list holding true",
        ),
        (
            _line_with("input_ids", "hello"),
            "key 'input_ids': expected integers for int64[seq], found the string 'hello'",
        ),
        (_line_with("input_ids", None), "key 'input_ids': expected integers for int64[seq], found null"),
        (_line_with("input_ids", {"a": 1}), "key 'input_ids': expected integers for int64[seq], found an object"),
        (_line_with("input_ids", [[1, 2], [3]]), "key 'input_ids': ragged: lists of 1 and 2 items at depth 2"),
        (_line_with("input_ids", [[1, 2], 3]), "key 'input_ids': ragged: lists and single values mixed at depth 2"),
        (_line_with("input_ids", [2**63]), "key 'input_ids': 9223372036854775808 does not fit int64[seq]"),
        (_line_with("rm_scores", [1e300]), "key 'rm_scores': 1e+300 does not fit float32[response]"),
    ],
    ids=[
        "not json",
        "a list",
        "a string",
        "duplicate key",
        "float in int",
        "nan in int",
        "bools in int",
        "string",
        "null",
        "object",
        "ragged",
        "ragged mixed",
        "int64 overflow",
        "float32 overflow",
    ],
)
def test_bad_json_lines_name_the_file_line_and_key(capsys, tmp_path, line, message):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(as_json(sample_of())) + "\n" + line + "\n")
    code, out, err = run(capsys, "check", path, "--schema", "text")
    (error,) = error_lines(err)
    assert code == 2 and out == ""
    assert error.startswith(f"trajschema check: error: {path}: ") and message in error, error


def test_a_value_beyond_the_first_dtype_takes_the_next_one_allowed(tmp_path):
    from trajschema.cli.read import open_source, read_jsonl

    fields = ts.load_schema("moe_routed").fields  # routed_experts: int16, int32, int64, uint8
    sample = as_json(sample_of("moe_routed"))
    sample["routed_experts"] = [[[70000, 1]] * 3] * 8
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(sample))
    (read,) = read_jsonl(open_source(str(path)), fields).batch
    assert read["routed_experts"].dtype == torch.int32  # not int16, which would have wrapped
    sample["routed_experts"] = [[[-1, 1]] * 3] * 8  # int16 holds -1: uint8 (which wraps it to 255) is never tried
    path.write_text(json.dumps(sample))
    (read,) = read_jsonl(open_source(str(path)), fields).batch
    assert read["routed_experts"].dtype == torch.int16 and int(read["routed_experts"].min()) == -1


def test_a_10_mb_line_is_read_and_its_errors_stay_short(capsys, tmp_path):
    sample = as_json(sample_of())
    sample["output"] = "x" * 10_000_000  # verl's decoded response: an extra key of schema text
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps(sample) + "\n")
    code, _out, err = run(capsys, "check", path, "--schema", "text")
    assert (code, err) == (0, "")
    path.write_text(json.dumps(sample)[:-1] + "\n")  # the same line, its closing brace cut
    code, _, err = run(capsys, "check", path, "--schema", "text")
    assert code == 2 and "line 1: not JSON" in err and len(err) < 300


def test_a_huge_ragged_list_is_refused_in_one_short_line(capsys, tmp_path):
    sample = as_json(sample_of())
    sample["input_ids"] = [[1] * 1_000_000, [2] * 999_999]
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(sample))
    code, _, err = run(capsys, "check", path, "--schema", "text")
    assert code == 2 and err.strip().endswith("key 'input_ids': ragged: lists of 999999 and 1000000 items at depth 2")


def test_extra_keys_follow_the_schemas_extra_policy(capsys, tmp_path):
    strict = tmp_path / "strict.yaml"
    strict.write_text("name: strict\nextends: [text]\nextra: forbid\n")
    sample = as_json(sample_of())
    sample["score"] = 1.0
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(sample))
    assert run(capsys, "check", path, "--schema", "text")[0] == 0  # text: extra: allow
    code, out, _ = run(capsys, "check", path, "--schema", strict, "--json")
    assert code == 1 and [(v["field"], v["code"]) for v in json.loads(out)["files"][0]["violations"]] == [
        ("score", "extra")
    ]


def _verl_dump(path: Path, n: int) -> Path:
    """Lines as verl 0.9.1's `_write_generations` writes them (json.dumps(entry, ensure_ascii=False))."""
    rows = [
        {"input": "1+1=", "output": "2 ✓", "gts": "2", "score": 1.0, "step": 7, "uid": f"u{i}", "acc": float("nan")}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_a_verl_rollout_dump_is_said_to_hold_no_token_ids(capsys, tmp_path):
    path = _verl_dump(tmp_path / "7.jsonl", 3)
    code, out, _ = run(capsys, "check", path, "--schema", "text")
    assert code == 1
    assert out.splitlines()[-1].startswith("note: this looks like verl's rollout dump (trainer.rollout_data_dir)")
    assert "prompts, responses, input_ids, ..." in out.splitlines()[-1]
    code, out, _ = run(capsys, "check", path, "--schema", "text", "--json")
    assert json.loads(out)["files"][0]["notes"][0].startswith("this looks like verl's rollout dump")


def test_a_verl_rollout_dump_checks_against_a_schema_of_its_keys(capsys, tmp_path):
    schema = tmp_path / "dump.yaml"
    schema.write_text(
        "name: verl_dump\nfields:\n  input: {kind: str, pad: copy}\n  output: {kind: str, pad: copy}\n"
        "  score: {kind: float, pad: 0.0}\n  step: {kind: int, min: 0, pad: 0}\n"
        "  uid: {kind: str, pad: uid}\nextra: allow\n"
    )
    path = _verl_dump(tmp_path / "7.jsonl", 3)
    code, out, err = run(capsys, "check", path, "--schema", schema)
    assert (code, err) == (0, "") and "note:" not in out
    path.write_text(path.read_text().replace('"step": 7', '"step": -1', 1))
    code, out, _ = run(capsys, "check", path, "--schema", schema)
    assert code == 1 and "1\tstep\tvalue\t" in out and "note:" not in out


# -- a file of the wrong kind ---------------------------------------------------------------


_WRONG_KINDS = {
    "schema file": (
        "# my schema\nname: mine\nextends: [text]\nfields:\n  extra_ids: {shape: [seq], dtype: int32, pad: 0}\n",
        "looks like YAML, a schema file (pass a schema with --schema)",
    ),
    "yaml": (
        "# config\ntrainer:\n  rollout_data_dir: /tmp\n",
        "looks like YAML (a schema file? pass a schema with --schema)",
    ),
    "yaml document": ("---\n- a\n- b\n", "looks like YAML"),
    "json document": (
        '{\n  "input_ids": [1, 2]\n}\n',
        "looks like a JSON document (JSON Lines has one sample object on each line)",
    ),
    "json array": ("[1, 2, 3]\n", "looks like a JSON document"),
    "text": ("nothing to see here\n", "looks like text"),
    "empty": ("", "is empty; check reads"),
    "blank": ("\n\n  \n", "is empty (blank); check reads"),
}


@pytest.mark.parametrize("trust", [False, True])
@pytest.mark.parametrize("kind", list(_WRONG_KINDS))
def test_a_file_of_the_wrong_kind_says_what_it_looks_like(capsys, tmp_path, kind, trust):
    text, message = _WRONG_KINDS[kind]
    path = tmp_path / "given.pt"
    path.write_text(text)
    code, _, err = run(capsys, "check", path, "--schema", "text", *(["--trust"] if trust else []))
    (line,) = error_lines(err)
    assert code == 2 and message in line, line
    assert line.endswith("check reads torch.save files (.pt) and JSON Lines (.jsonl, one sample object a line)")
    assert "opcode" not in line and "--trust" not in line


@pytest.mark.parametrize("command", ["pad", "infer"])
def test_the_torch_only_commands_say_what_a_wrong_file_looks_like_too(capsys, tmp_path, command):
    path = tmp_path / "text.yaml"
    path.write_text("name: x\nextends: [text]\n")
    argv = {
        "pad": ["pad", "text", "--count", "1", "--eos-token-id", "2", "--like", path, "--out", tmp_path / "o.pt"],
        "infer": ["infer", path, "--name", "x"],
    }
    code, _, err = run(capsys, *argv[command])
    assert code == 2 and "looks like YAML, a schema file" in err and "this command reads torch.save files" in err
    lines_file = jsonl(tmp_path / "x.jsonl", [sample_of()])
    argv = {
        "pad": ["pad", "text", "--count", "1", "--eos-token-id", "2", "--like", lines_file, "--out", tmp_path / "o.pt"],
        "infer": ["infer", lines_file, "--name", "x"],
    }
    code, _, err = run(capsys, *argv[command])
    assert code == 2 and "is JSON Lines; this command reads torch.save files" in err


def test_a_legacy_torch_save_still_reads(capsys, tmp_path):
    path = tmp_path / "legacy.pt"
    torch.save([sample_of()], path, _use_new_zipfile_serialization=False)
    assert run(capsys, "check", path, "--schema", "text")[0] == 0


# -- bounded, grouped output ----------------------------------------------------------------


def same_problem(tmp_path: Path, n: int) -> Path:
    """``n`` samples with the same problem: loss_mask is int32 (a dtype violation, found without reading values)."""
    sample = sample_of()
    sample["loss_mask"] = sample["loss_mask"].int()
    path = tmp_path / f"same_{n}.pt"
    torch.save([sample] * n, path)
    return path


@pytest.fixture
def many(tmp_path) -> Path:
    return same_problem(tmp_path, 50)


def test_10000_identical_violations_print_a_bounded_grouped_report(capsys, tmp_path):
    path = same_problem(tmp_path, 10_000)
    code, out, err = run(capsys, "check", path, "--schema", "text", "--depth", "shapes")
    lines = out.splitlines()
    assert (code, err) == (1, "")
    assert len(lines) == 1 + DEFAULT_MAX_VIOLATIONS + 1 + 2 + 1, out
    assert lines[1].split("\t")[:3] == ["0", "loss_mask", "dtype"]
    assert lines[DEFAULT_MAX_VIOLATIONS + 1] == "... and 9980 more violations (--max-violations all lists them)"
    assert lines[-3:] == [
        "field\tcode\tcount\tsamples",
        "loss_mask\tdtype\t10000\t0-9999",
        f"invalid: {path}: 10000 violations in 10000 of 10000 samples of schema 'text' at depth shapes",
    ]


def test_max_violations_bounds_the_list_and_all_lifts_it(capsys, many):
    code, out, _ = run(capsys, "check", many, "--schema", "text", "--max-violations", "0")
    assert code == 1 and out.splitlines()[0] == "... and 50 more violations (--max-violations all lists them)"
    assert len(out.splitlines()) == 4
    code, out, _ = run(capsys, "check", many, "--schema", "text", "--max-violations", "3")
    assert [line.split("\t")[0] for line in out.splitlines()[1:4]] == ["0", "1", "2"]
    assert "... and 47 more violations" in out
    code, out, _ = run(capsys, "check", many, "--schema", "text", "--max-violations", "all")
    assert len(out.splitlines()) == 1 + 50 + 2 + 1 and "more violations" not in out


@pytest.mark.parametrize("value", ["-1", "x", "", "1.5"])
def test_max_violations_refuses_what_is_no_count(capsys, good, value):
    code, out, err = run(capsys, "check", good, "--schema", "text", "--max-violations", value)
    assert (code, out) == (2, "") and "--max-violations" in err and len(err.splitlines()) == 1
    assert f"expected an integer >= 0 or 'all', found {value!r}" in err  # both spellings it takes are named


def test_quiet_prints_only_the_verdicts_and_the_totals(capsys, good, many):
    code, out, err = run(capsys, "check", many, good, "--schema", "text", "-q")
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        f"invalid: {many}: 50 violations in 50 of 50 samples of schema 'text' at depth values",
        f"valid: {good}: all 2 samples follow schema 'text' at depth values",
        "checked 2 files: 1 valid, 1 invalid, 0 unusable",
    ]


def test_the_group_summary_is_left_out_when_it_would_repeat_the_list(capsys, tmp_path):
    sample = sample_of()
    sample["loss_mask"] = torch.tensor([0, 2, 1])
    del sample["uid"]
    path = tmp_path / "one.pt"
    torch.save([sample], path)
    code, out, _ = run(capsys, "check", path, "--schema", "text")
    assert code == 1 and "count" not in out and len(out.splitlines()) == 1 + 2 + 1


def test_group_samples_show_the_first_runs(capsys, tmp_path):
    good, broken = sample_of(), sample_of()
    broken["loss_mask"] = torch.tensor([0, 2, 1])
    order = [broken, broken, good, broken, good, good, broken, broken, broken, good, broken, good, broken]
    path = tmp_path / "mixed.pt"
    torch.save(order, path)
    _code, out, _ = run(capsys, "check", path, "--schema", "text", "--max-violations", "0")
    assert "loss_mask\tvalue\t8\t0-1, 3, 6-8, 10, ..." in out.splitlines()


# -- --json -----------------------------------------------------------------------------------


def _human_rows(out: str) -> list[list[str]]:
    return [line.split("\t") for line in out.splitlines() if re.match(r"^\d+\t", line)]


def test_json_agrees_with_the_human_report(capsys, tmp_path, many):
    mixed = tmp_path / "mixed.pt"
    broken = sample_of()
    broken["position_ids"] = broken["position_ids"].float()
    del broken["uid"]
    torch.save([sample_of(), broken, broken], mixed)
    missing = tmp_path / "missing.pt"
    argv = ["check", many, mixed, missing, "--schema", "text", "--max-violations", "5"]
    code, human, _ = run(capsys, *argv)
    json_code, out, err = run(capsys, *argv, "--json")
    report = json.loads(out)
    assert code == json_code == 2 and report["valid"] is False
    assert (report["version"], report["command"], report["depth"]) == (1, "check", "values")
    assert report["totals"] == {
        "files": 3,
        "valid": 0,
        "invalid": 2,
        "unusable": 1,
        "samples": 53,
        "violations": 54,
    }
    assert [f["status"] for f in report["files"]] == ["invalid", "invalid", "unusable"]
    assert report["files"][2] == {"file": str(missing), "status": "unusable", "error": f"{missing}: no such file"}
    assert err == f"trajschema check: error: {missing}: no such file\n"
    rows = [
        [str(v["sample"]), v["field"], v["code"], v["message"]] for f in report["files"][:2] for v in f["violations"]
    ]
    assert rows == _human_rows(human)
    assert [f["violations_omitted"] for f in report["files"][:2]] == [45, 0]
    (group,) = report["files"][0]["summary"]
    assert group == {
        "field": "loss_mask",
        "code": "dtype",
        "count": 50,
        "sample_count": 50,
        "first_samples": list(range(10)),
    }
    assert "loss_mask\tdtype\t50\t0-49" in human.splitlines()
    assert [(g["field"], g["code"], g["count"]) for g in report["files"][1]["summary"]] == [
        ("position_ids", "dtype", 2),
        ("uid", "missing", 2),
    ]
    assert "position_ids\tdtype\t2\t1-2" in human.splitlines()
    for f in report["files"][:2]:
        verdict = next(line for line in human.splitlines() if line.startswith(f"invalid: {f['file']}: "))
        count = sum(g["count"] for g in f["summary"])
        assert verdict.startswith(
            f"invalid: {f['file']}: {count} violations in {f['invalid_samples']} of {f['samples']}"
        )


def test_json_of_a_valid_file_and_max_violations_all(capsys, good, many):
    code, out, _ = run(capsys, "check", good, "--schema", "text", "--json")
    report = json.loads(out)
    assert code == 0 and report["valid"] is True and report["files"][0]["violations"] == []
    code, out, _ = run(capsys, "check", many, "--schema", "text", "--json", "--max-violations", "all")
    (f,) = json.loads(out)["files"]
    assert len(f["violations"]) == 50 and f["violations_omitted"] == 0


# -- terminal: colour and 80 columns ----------------------------------------------------------


def test_on_a_terminal_verdicts_and_counts_are_coloured(monkeypatch, capsys, good, bad):
    code, out, _ = in_terminal(monkeypatch, capsys, "check", good, bad, "--schema", "text", color=True)
    assert code == 1
    assert re.search(r"\x1b\[[0-9;]*32m[^\x1b]*valid\x1b\[0m: ", out)  # green
    assert re.search(r"\x1b\[[0-9;]*31m[^\x1b]*invalid\x1b\[0m: ", out)  # red
    assert re.search(r"\x1b\[[0-9;]*31m[^\x1b]*1 invalid\x1b\[0m", out)
    code, out, _ = in_terminal(monkeypatch, capsys, "check", good, bad, "--schema", "text")  # NO_COLOR
    assert not ANSI.search(out)


def test_off_a_terminal_there_is_no_colour(capsys, good, bad, monkeypatch):
    _code, out, _ = run(capsys, "check", good, bad, "--schema", "text")
    assert not ANSI.search(out)


@pytest.mark.parametrize("name", ts.schema_names())
def test_at_80_columns_no_field_name_or_code_is_cut(monkeypatch, capsys, tmp_path, name):
    sample = sample_of(name)
    fields = [f for f, v in sample.items() if isinstance(v, torch.Tensor)]
    broken = {k: v.double() if isinstance(v, torch.Tensor) else v for k, v in sample.items()}  # a dtype violation each
    del broken["uid"]
    path = tmp_path / "b.pt"
    torch.save([broken, broken], path)
    code, out, err = in_terminal(monkeypatch, capsys, "check", path, "--schema", name, "--max-violations", "all")
    assert code == 1 and err == ""
    found = ts.load_schema(name).batch_violations([broken, broken])
    tokens = {v.field for v in found} | {v.code for v in found}
    assert set(fields) <= tokens
    assert layout_problems(out, sorted(tokens)) == []


def test_at_80_columns_a_long_message_wraps(monkeypatch, capsys, tmp_path):
    strict = tmp_path / "strict.yaml"
    strict.write_text("name: strict\nextends: [text]\nextra: forbid\n")
    sample = sample_of()
    sample["an_unexpected_field_with_a_rather_long_name"] = torch.zeros(2)
    path = tmp_path / "x.pt"
    torch.save([sample, sample], path)
    code, out, _ = in_terminal(monkeypatch, capsys, "check", path, "--schema", strict)
    assert code == 1 and layout_problems(out, ["an_unexpected_field_with_a_rather_long_name", "extra"]) == []


# -- help -------------------------------------------------------------------------------------


def test_help_says_what_check_reads_and_how_it_reports(capsys):
    code, out, _ = run(capsys, "check", "--help")
    text = " ".join(out.split())
    assert code == 0
    for phrase in (
        "JSON Lines",
        "A FILE of - is standard input",
        "verl's rollout dump (trainer.rollout_data_dir)",
        "--max-violations N",
        "'all' for all",
        "--quiet",
        "'totals'",
        "2 a file unusable",
        "A file named twice is checked once",
    ):
        assert phrase in text, phrase
