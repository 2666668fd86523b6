"""``trajschema check`` on real rollouts: several files, stdin, JSON Lines, wrong kinds, bounded grouped output."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import trajschema as ts
from tests.cli.terminal_support import ANSI, in_terminal, layout_problems, plain_environment
from tests.cli.terminal_support import piped as run
from tests.verl_support import verl_module
from trajschema.cli.check import DEFAULT_MAX_VIOLATIONS
from trajschema.testing import verl_sample

FREE_DIMS = {"layers": 3, "topk": 2, "experts": 8, "teacher_topk": 2}


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch):
    plain_environment(monkeypatch)


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


def _line_with(key: str, value: Any, **more: Any) -> str:
    sample = as_json(sample_of())
    sample[key] = value
    sample.update(more)
    return json.dumps(sample)


def _column_of_value(line: str, key: str) -> int:
    """Where ``key``'s value starts on ``line`` (from 1), found the plain way, to check the reader's column."""
    head = f'"{key}": '
    return line.index(head) + len(head) + 1


#: A value of a tensor field that does not convert: (key, value, code, the message after "key 'K': ").
_UNCONVERTIBLE = {
    "float in int": (
        "input_ids",
        [1, 2.5, 3],
        "dtype",
        "expected integers for int64[seq], found a list holding the number 2.5",
    ),
    "nan in int": (
        "input_ids",
        [1, float("nan")],
        "dtype",
        "expected integers for int64[seq], found a list holding the number nan",
    ),
    "bools in int": (
        "input_ids",
        [True, False],
        "dtype",
        "expected integers for int64[seq], found a list holding true",
    ),
    "string": ("input_ids", "hello", "kind", "expected integers for int64[seq], found the string 'hello'"),
    "null in a list": ("input_ids", [1, None], "kind", "expected integers for int64[seq], found a list holding null"),
    "object": ("input_ids", {"a": 1}, "kind", "expected integers for int64[seq], found an object"),
    "ragged": ("input_ids", [[1, 2], [3]], "shape", "ragged: lists of 1 and 2 items at depth 2"),
    "ragged mixed": ("input_ids", [[1, 2], 3], "shape", "ragged: lists and single values mixed at depth 2"),
    "int64 overflow": ("input_ids", [2**63], "value", "9223372036854775808 does not fit int64[seq]"),
    "float32 overflow": ("rm_scores", [1e300], "value", "1e+300 does not fit float32[response]"),
}


@pytest.mark.parametrize(("key", "value", "code", "reason"), list(_UNCONVERTIBLE.values()), ids=list(_UNCONVERTIBLE))
def test_a_value_that_does_not_convert_is_a_violation_of_its_sample_and_the_rest_is_checked(
    capsys, tmp_path, key, value, code, reason
):
    bad_line = _line_with(key, value, loss_mask=[7, 7, 7])  # and another violation in the same sample
    broken = sample_of(uid="q2")
    del broken["uid"]  # a violation in a later line
    path = tmp_path / "x.jsonl"
    path.write_text("\n".join([json.dumps(as_json(sample_of())), bad_line, json.dumps(as_json(broken))]) + "\n")
    code_, out, err = run(capsys, "check", path, "--schema", "text", "--json")
    report = json.loads(out)["files"][0]
    assert (code_, err, report["status"], report["samples"]) == (1, "", "invalid", 3)
    found = [(v["line"], v["field"], v["code"]) for v in report["violations"]]
    assert found == [(2, key, code), (2, "loss_mask", "value"), (3, "uid", "missing")]  # key is not also "missing"
    message = report["violations"][0]["message"]
    assert message == f"{path}:2:{_column_of_value(bad_line, key)}: key {key!r}: {reason}"
    assert bad_line[_column_of_value(bad_line, key) - 1 :].startswith(json.dumps(value)[:2])
    human_code, human, _ = run(capsys, "check", path, "--schema", "text")
    assert human_code == 1 and f"2\t{key}\t{code}\t{message}" in human.splitlines()


def test_null_is_no_value_and_the_schema_judges_it(capsys, tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text(_line_with("rm_scores", None) + "\n" + _line_with("input_ids", None) + "\n")
    code, out, _ = run(capsys, "check", path, "--schema", "text", "--json")
    found = [(v["line"], v["field"], v["code"]) for v in json.loads(out)["files"][0]["violations"]]
    assert code == 1 and found == [(2, "input_ids", "missing")]  # rm_scores is optional; input_ids is not


_NOT_A_SAMPLE = {
    "not json": (b'{"input_ids": [1, 2', ":2:20: not JSON (Expecting ',' delimiter)"),
    "a list": (b"[1, 2, 3]", ":2: a list, not a sample (a JSON object of field name to value)"),
    "a string": (b'"text"', ":2: the string 'text', not a sample"),
    "duplicate key": (b'{"uid": "a", "uid": "b"}', ":2: key 'uid' appears twice in one object"),
    "not utf-8": (b'{"uid": "\xff"}', ":2: not UTF-8 text (byte 10)"),
    "nested too deeply": (b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", ":2: nested too deeply to read"),
}


@pytest.mark.parametrize(("line", "message"), list(_NOT_A_SAMPLE.values()), ids=list(_NOT_A_SAMPLE))
def test_a_line_that_holds_no_sample_is_a_violation_of_its_line_and_the_others_are_checked(
    capsys, tmp_path, line, message
):
    broken = sample_of(uid="q2")
    broken["loss_mask"] = torch.full((3,), 7)
    path = tmp_path / "x.jsonl"
    path.write_bytes(
        b"\n".join([json.dumps(as_json(sample_of())).encode(), line, json.dumps(as_json(broken)).encode()])
    )
    code, out, err = run(capsys, "check", path, "--schema", "text", "--json")
    report = json.loads(out)["files"][0]
    assert (code, err, report["samples"], report["invalid_samples"]) == (1, "", 3, 2)
    first, second = report["violations"]
    assert (first["line"], first["field"], first["code"]) == (2, "<line>", "kind")
    assert first["message"].startswith(f"{path}{message}"), first["message"]
    assert (second["line"], second["field"], second["code"]) == (3, "loss_mask", "value")


def test_a_file_with_one_bad_value_and_other_violations_reports_all_of_them(capsys, tmp_path):
    """The brief's case: nothing is hidden behind the value that does not convert."""
    lines = [
        _line_with("input_ids", [1, 1.5, 3, 4, 5, 6, 7, 8]),
        _line_with("position_ids", list(range(8)), uid=None),
        "[]",
        _line_with("loss_mask", [0, 1, 2]),
    ]
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(lines) + "\n")
    code, out, _ = run(capsys, "check", path, "--schema", "text", "--max-violations", "all")
    rows = [line.split("\t")[:3] for line in out.splitlines()[1:-1]]
    assert code == 1
    assert rows == [
        ["1", "input_ids", "dtype"],
        ["2", "uid", "missing"],
        ["3", "<line>", "kind"],
        ["4", "loss_mask", "value"],
    ]
    assert out.splitlines()[-1] == f"invalid: {path}: 4 violations in 4 of 4 samples of schema 'text' at depth values"


def test_a_file_where_no_line_holds_a_sample_is_unusable(capsys, tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": \n[1]\n\n"x"\n')
    code, out, err = run(capsys, "check", path, "--schema", "text")
    assert (code, out) == (2, "")
    assert error_lines(err) == [
        f"trajschema check: error: {path}:1:7: not JSON (Expecting value) (and 2 more lines like it); "
        "no line holds a sample"
    ]


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
    assert code == 2 and f"{path}:1:" in err and "not JSON" in err and len(err) < 300


def test_a_huge_ragged_list_is_one_short_violation(capsys, tmp_path):
    sample = as_json(sample_of())
    sample["input_ids"] = [[1] * 1_000_000, [2] * 999_999]
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(sample))
    code, out, err = run(capsys, "check", path, "--schema", "text")
    (row,) = [line for line in out.splitlines() if "\tinput_ids\t" in line]
    assert (code, err) == (1, "") and len(row) < 300
    assert row.endswith("key 'input_ids': ragged: lists of 999999 and 1000000 items at depth 2")


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
    """The violation rows of piped output of several files: file, sample, field, code, message."""
    return [line.split("\t") for line in out.splitlines() if re.match(r"^[^\t]+\t\d+\t", line)]


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
        [v["file"], str(v["sample"]), v["field"], v["code"], v["message"]]
        for f in report["files"][:2]
        for v in f["violations"]
    ]
    assert rows == _human_rows(human) and {r[0] for r in rows} == {str(many), str(mixed)}
    assert [f["violations_omitted"] for f in report["files"][:2]] == [45, 0]
    (group,) = report["files"][0]["summary"]
    assert group == {
        "field": "loss_mask",
        "code": "dtype",
        "count": 50,
        "sample_count": 50,
        "first_samples": list(range(10)),
    }
    assert f"{many}\tloss_mask\tdtype\t50\t0-49" in human.splitlines()
    assert [(g["field"], g["code"], g["count"]) for g in report["files"][1]["summary"]] == [
        ("position_ids", "dtype", 2),
        ("uid", "missing", 2),
    ]
    assert f"{mixed}\tposition_ids\tdtype\t2\t1-2" in human.splitlines()
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


# -- several files: every row names its file ----------------------------------------------------


def test_with_several_files_every_violation_row_names_its_file_piped(capsys, tmp_path, good, bad, many):
    lines_file = tmp_path / "x.jsonl"
    lines_file.write_text('{"input_ids": [1.5]}\n')
    code, out, _ = run(capsys, "check", good, bad, many, lines_file, "--schema", "text", "--max-violations", "2")
    assert code == 1
    lines = out.splitlines()
    tables = [i for i, line in enumerate(lines) if line.startswith("file\t")]
    assert [lines[i] for i in tables] == [
        "file\tsample\tfield\tcode\tmessage",  # bad.pt: its 3 violations, cut at 2
        "file\tfield\tcode\tcount\tsamples",
        "file\tsample\tfield\tcode\tmessage",  # many: 50, cut at 2
        "file\tfield\tcode\tcount\tsamples",
        "file\tline\tfield\tcode\tmessage",  # x.jsonl: one line, 6 violations
        "file\tfield\tcode\tcount\tlines",
    ]
    rows = [line for line in lines if "\t" in line and not line.startswith("file\t")]
    files = [row.split("\t")[0] for row in rows]
    assert files == [str(bad)] * 3 + [str(many)] * 3 + [str(lines_file)] * (2 + len(files) - 8)
    assert f"... and 1 more violation of {bad} (--max-violations all lists them)" in lines
    assert f"... and 48 more violations of {many} (--max-violations all lists them)" in lines


def test_with_one_file_rows_have_no_file_column(capsys, bad):
    _, out, _ = run(capsys, "check", bad, "--schema", "text", "--max-violations", "1")
    assert out.splitlines()[0] == "sample\tfield\tcode\tmessage"
    assert "... and 2 more violations (--max-violations all lists them)" in out.splitlines()


def test_with_several_files_every_violation_row_names_its_file_on_a_terminal(monkeypatch, capsys, tmp_path, bad):
    monkeypatch.chdir(tmp_path)
    other = sample_of()
    other["position_ids"] = other["position_ids"].float()
    torch.save([other], tmp_path / "other.pt")
    code, out, _ = in_terminal(monkeypatch, capsys, "check", "bad.pt", "other.pt", "--schema", "text")
    assert code == 1 and layout_problems(out, ["bad.pt", "other.pt", "loss_mask", "position_ids", "value"]) == []
    rows = [line for line in out.splitlines() if re.match(r"^\S+\s+\d+\s+\w+\s+\w+", line)]
    assert [row.split()[:3] for row in rows] == [
        ["bad.pt", "0", "loss_mask"],
        ["bad.pt", "1", "loss_mask"],
        ["bad.pt", "2", "loss_mask"],
        ["other.pt", "0", "position_ids"],
    ]


def test_json_names_the_file_of_every_violation(capsys, bad, many):
    _, out, _ = run(capsys, "check", bad, many, "--schema", "text", "--json", "--max-violations", "all")
    files = json.loads(out)["files"]
    assert [{v["file"] for v in f["violations"]} for f in files] == [{str(bad)}, {str(many)}]
    _, out, _ = run(capsys, "check", bad, "--schema", "text", "--json")  # one file: the same shape
    assert {v["file"] for v in json.loads(out)["files"][0]["violations"]} == {str(bad)}


def test_piped_tables_start_with_their_header_as_the_help_says(capsys, bad, many):
    """check's tables have no title, as list's have none: piped, a table is its header and its rows."""
    _, out, _ = run(capsys, "check", bad, "--schema", "text", "--max-violations", "1")
    assert next(line for line in out.splitlines() if "\t" not in line).startswith("...")
    assert out.splitlines()[0] == "sample\tfield\tcode\tmessage"
    _, help_text, _ = run(capsys, "check", "--help")
    assert "each table is a header line (after its title line, for a table with a title" in " ".join(help_text.split())


# -- dense batches: --layout ----------------------------------------------------------------------

#: (prompt, response) lengths of the rows of the dense batches below.
ROWS = [(5, 3), (2, 6), (4, 4)]


def dense_rows(name: str = "text") -> list[dict[str, Any]]:
    return [sample_of(name, p, r, uid=f"q{i}", seed=i) for i, (p, r) in enumerate(ROWS)]


def _skyrl_faults(batch: Any) -> None:
    batch["loss_mask"][0, 0] = 1.0  # a loss mask on a padded position (row 0's response is left-padded by 3)
    batch["rewards"] = batch["rewards"].double()  # a wrong dtype


def _verl_faults(batch: Any) -> None:
    batch["response_mask"][0, 5] = 1  # a one after row 0's response (right-padded)
    batch["input_ids"][1, 0] = 7  # row 1's prompt padding is not the pad id
    batch["position_ids"] = batch["position_ids"].float()


def _as_container(batch: Any, container: str) -> tuple[Any, Any]:
    """(what torch.save writes, what the library is handed) for ``batch`` held as ``container``."""
    from types import SimpleNamespace

    from tensordict import TensorDict

    tensors = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}
    others = {k: v for k, v in batch.items() if not isinstance(v, torch.Tensor)}
    if container == "DenseBatch":
        return batch, batch
    if container == "dict":
        return dict(batch), dict(batch)
    if container == "TensorDict":
        td = TensorDict(tensors, batch_size=[len(ROWS)])
        return td, td
    td = TensorDict(tensors, batch_size=[len(ROWS)])  # verl's DataProto, as its three parts
    parts = {"batch": td, "non_tensor_batch": others, "meta_info": {"eos_token_id": 2}}
    return parts, SimpleNamespace(**parts)


_DENSE_CASES = {
    "skyrl DenseBatch, faults": ("skyrl", "DenseBatch", _skyrl_faults),
    "skyrl DenseBatch, clean": ("skyrl", "DenseBatch", None),
    "skyrl dict (no metadata)": ("skyrl", "dict", _skyrl_faults),
    "skyrl TensorDict": ("skyrl", "TensorDict", _skyrl_faults),
    "verl DenseBatch, faults": ("verl_dataproto", "DenseBatch", _verl_faults),
    "verl DenseBatch, clean": ("verl_dataproto", "DenseBatch", None),
    "verl DataProto parts": ("verl_dataproto", "DataProto parts", _verl_faults),
}


@pytest.mark.parametrize(("layout", "container", "faults"), list(_DENSE_CASES.values()), ids=list(_DENSE_CASES))
def test_a_dense_batch_file_has_exactly_the_librarys_violations(capsys, tmp_path, layout, container, faults):
    schema = ts.load_schema("text")
    batch = schema.to_dense(dense_rows(), layout=layout, pad_token_id=0)
    if faults is not None:
        faults(batch)
    saved, handed = _as_container(batch, container)
    path = tmp_path / "batch.pt"
    torch.save(saved, path)
    expected = [dataclasses.asdict(v) for v in schema.batch_violations(handed, layout=layout)]
    assert bool(expected) == (faults is not None or container != "DenseBatch")  # the faults are found
    code, out, err = run(
        capsys, "check", path, "--schema", "text", "--layout", layout, "--json", "--max-violations", "all"
    )
    report = json.loads(out)
    (f,) = report["files"]
    assert (code, err) == (1 if expected else 0, "")
    assert [{k: v for k, v in found.items() if k != "file"} for found in f["violations"]] == expected
    assert (report["layout"], f["layout"], f["samples"], f["suggested_layout"]) == (layout, layout, len(ROWS), None)
    code, out, _ = run(capsys, "check", path, "--schema", "text", "--layout", layout)
    assert (
        out.splitlines()[-1].startswith(f"{'invalid' if expected else 'valid'}: {path}: ")
        and f"schema 'text' in layout {layout!r} at depth values" in out.splitlines()[-1]
    )


def test_a_skyrl_training_input_batch_is_read_with_trust(capsys, tmp_path):
    from tests.skyrl_support import skyrl_batch, tokens

    batch = skyrl_batch([tokens(3), tokens(2)], [tokens(4), tokens(2)], uids=["a", "b"])
    batch["loss_mask"][1, 0] = 1.0  # row 1's response is 2 long in a width of 4: position 0 is padding
    path = tmp_path / "skyrl.pt"
    torch.save(batch, path)
    code, _, err = run(capsys, "check", path, "--schema", "text", "--layout", "skyrl")
    assert code == 2 and "rerun with --trust" in err
    code, out, _ = run(capsys, "check", path, "--schema", "text", "--layout", "skyrl", "--trust", "--json")
    expected = [dataclasses.asdict(v) for v in ts.load_schema("text").batch_violations(batch, layout="skyrl")]
    assert code == 1 and [(v["sample"], v["field"], v["code"]) for v in expected] == [(1, "loss_mask", "mask")]
    assert [{k: v for k, v in f.items() if k != "file"} for f in json.loads(out)["files"][0]["violations"]] == expected


def test_a_verl_dataproto_is_read_with_trust(capsys, tmp_path):
    np = pytest.importorskip("numpy")
    DataProto = verl_module("verl").DataProto  # an installed verl, or a skip saying why
    schema = ts.load_schema("text")
    batch = schema.to_dense(dense_rows(), layout="verl_dataproto", pad_token_id=0)
    _verl_faults(batch)
    tensors = {k: v for k, v in batch.items() if isinstance(v, torch.Tensor)}
    others = {k: np.array(v, dtype=object) for k, v in batch.items() if not isinstance(v, torch.Tensor)}
    proto = DataProto.from_dict(tensors=tensors, non_tensors=others)
    path = tmp_path / "proto.pt"
    torch.save(proto, path)
    code, out, _ = run(capsys, "check", path, "--schema", "text", "--layout", "verl_dataproto", "--trust", "--json")
    expected = [dataclasses.asdict(v) for v in schema.batch_violations(proto, layout="verl_dataproto")]
    assert code == 1 and len(expected) >= 3
    assert [{k: v for k, v in f.items() if k != "file"} for f in json.loads(out)["files"][0]["violations"]] == expected


def test_a_layout_file_is_taken_by_path_as_the_library_takes_it(capsys, tmp_path):
    from trajschema.files import layout_search_path

    packaged = next(d / "skyrl.yaml" for d in layout_search_path() if (d / "skyrl.yaml").is_file())
    mine = tmp_path / "my_trainer.yaml"
    mine.write_text(packaged.read_text().replace("name: skyrl", "name: my_trainer", 1))
    schema = ts.load_schema("text")
    batch = schema.to_dense(dense_rows(), layout="skyrl", pad_token_id=0)
    _skyrl_faults(batch)
    path = tmp_path / "batch.pt"
    torch.save(batch, path)
    code, out, _ = run(capsys, "check", path, "--schema", "text", "--layout", mine, "--json")
    report = json.loads(out)
    expected = schema.batch_violations(batch, layout=ts.load_layout(mine))
    assert code == 1 and report["layout"] == "my_trainer"
    assert [(v["sample"], v["field"], v["code"]) for v in report["files"][0]["violations"]] == [
        (v.sample, v.field, v.code) for v in expected
    ]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("SkyRL", "did you mean 'skyrl'?"),
        ("verl_data", "did you mean 'verl_dataproto'?"),
        ("sky_rl", "did you mean 'skyrl'?"),
        ("zzz", "known: skyrl, thd, trl_grpo, verl_dataproto, verl_nopad"),
        ("no/such/layout.yaml", "no layout file at 'no/such/layout.yaml'"),
    ],
    ids=["case", "prefix", "underscore", "nothing close", "no such file"],
)
def test_an_unknown_layout_stops_before_any_file_with_a_guess(capsys, good, given, message):
    code, out, err = run(capsys, "check", good, "--schema", "text", "--layout", given)
    (line,) = error_lines(err)
    assert (code, out) == (2, "")
    assert line.startswith("trajschema check: error: --layout: no layout ") and message in line, line
    assert line.count("did you mean") <= 1


def test_a_malformed_layout_file_is_named_with_its_line_and_key(capsys, tmp_path, good):
    layout = tmp_path / "mine.yaml"
    layout.write_text("name: mine\naxes:\n  seq: {pad_side: middle}\nsizes: {seq: attention_mask}\n")
    code, out, err = run(capsys, "check", good, "--schema", "text", "--layout", layout)
    assert (code, out) == (2, "")
    assert error_lines(err) == [
        f"trajschema check: error: {layout}:3:19: axes.seq.pad_side: expected left or right "
        "(where the padding goes), found a string 'middle'"
    ]


def _samples_file(tmp_path: Path) -> Path:
    return jsonl(tmp_path / "rows.jsonl", [sample_of()])


_NOT_DENSE = {
    "json lines": (_samples_file, "is JSON Lines; --layout reads one dense batch from a torch.save file"),
    "a list of samples": (
        lambda d: _saved(d, [sample_of(), sample_of()]),
        "holds a list of 2 samples, not a dense batch; check it without --layout",
    ),
    "pad's envelope": (
        lambda d: _saved(d, {"samples": [sample_of()], "tags": [{}]}),
        "holds samples (the envelope pad --out writes), not a dense batch; check it without --layout",
    ),
    "a tensor": (lambda d: _saved(d, torch.zeros(3)), "holds a Tensor; expected a mapping of batch key to (B, ...)"),
    "parts with a dict batch": (
        lambda d: _saved(d, {"batch": {"input_ids": torch.zeros(2, 3)}, "non_tensor_batch": {}}),
        "'batch' of a DataProto's parts must be a TensorDict (as DataProto.batch is), found a dict",
    ),
    "no rows": (lambda d: _saved(d, {"sequences": torch.zeros(0, 4)}), "holds a dense batch of no rows"),
}


def _saved(directory: Path, obj: Any) -> Path:
    path = directory / "thing.pt"
    torch.save(obj, path)
    return path


@pytest.mark.parametrize(("make", "message"), list(_NOT_DENSE.values()), ids=list(_NOT_DENSE))
def test_with_layout_a_file_that_holds_no_dense_batch_is_unusable(capsys, tmp_path, make, message):
    path = make(tmp_path)
    dense = tmp_path / "dense.pt"
    torch.save(ts.load_schema("text").to_dense(dense_rows(), layout="skyrl", pad_token_id=0), dense)
    code, out, err = run(capsys, "check", path, dense, "--schema", "text", "--layout", "skyrl")
    (line,) = error_lines(err)
    assert code == 2 and line.startswith(f"trajschema check: error: {path}: ") and message in line, line
    assert f"valid: {dense}: all 3 samples follow" in out  # the other file is still checked


def test_layout_with_schema_auto_is_refused(capsys, good):
    code, out, err = run(capsys, "check", good, "--schema", "auto", "--layout", "skyrl")
    assert (code, out) == (2, "")
    assert error_lines(err) == [
        "trajschema check: error: --schema auto picks a schema from a sample, and a dense batch (--layout) has none; "
        "name the schema"
    ]


def test_json_without_layout_says_null(capsys, good):
    report = json.loads(run(capsys, "check", good, "--schema", "text", "--json")[1])
    assert (report["layout"], report["files"][0]["layout"], report["files"][0]["suggested_layout"]) == (
        None,
        None,
        None,
    )


# -- a dense batch checked as samples: the hint ------------------------------------------------


def _dense(layout: str, container: str = "DenseBatch") -> Any:
    batch = ts.load_schema("text").to_dense(dense_rows(), layout=layout, pad_token_id=0)
    return _as_container(batch, container)[0]


def _jagged_with_violations() -> Any:
    from trajschema.testing import tq_batch

    rows = dense_rows()
    for row in rows:
        row["loss_mask"] = torch.full_like(row["loss_mask"], 7)
    return tq_batch(rows)


def _one_bad_sample() -> Any:
    sample = sample_of()
    del sample["uid"]
    return sample


_LOOKALIKES = {
    "skyrl DenseBatch": (lambda: _dense("skyrl"), "skyrl"),
    "skyrl plain dict": (lambda: _dense("skyrl", "dict"), "skyrl"),
    "skyrl TensorDict": (lambda: _dense("skyrl", "TensorDict"), "skyrl"),
    "verl DenseBatch": (lambda: _dense("verl_dataproto"), "verl_dataproto"),
    "verl TensorDict (the schema's own names)": (lambda: _dense("verl_dataproto", "TensorDict"), None),
    "one sample with a violation": (_one_bad_sample, None),
    "samples with violations": (lambda: [_one_bad_sample(), _one_bad_sample()], None),
    "a jagged TensorDict with violations": (_jagged_with_violations, None),
}


@pytest.mark.parametrize(("make", "suggested"), list(_LOOKALIKES.values()), ids=list(_LOOKALIKES))
def test_a_file_that_looks_like_a_dense_batch_gets_a_hint_and_its_violations(capsys, tmp_path, make, suggested):
    path = _saved(tmp_path, make())
    code, out, err = run(capsys, "check", path, "--schema", "text", "--json")
    f = json.loads(out)["files"][0]
    assert err == "" and f["suggested_layout"] == suggested
    hint = f"{path}: this looks like a dense batch in the {suggested} layout; check it with --layout {suggested}"
    assert (hint in f["notes"]) == (suggested is not None)
    code, out, _ = run(capsys, "check", path, "--schema", "text")
    lines = out.splitlines()
    assert (f"note: {hint}" in lines) == (suggested is not None)
    if suggested is None:
        return
    assert code == 1 and f["violations"]  # still checked as asked, and reported
    as_layout = json.loads(run(capsys, "check", path, "--schema", "text", "--layout", suggested, "--json")[1])
    assert as_layout["totals"]["violations"] < f["violations_omitted"] + len(f["violations"])  # the hint is better


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
        "--layout NAME",
        "one dense padded batch in that layout",
        "'layout' (the --layout used, or null)",
        "'suggested_layout'",
        "every violation row names its file",
        "named file:line:column and key",
    ):
        assert phrase in text, phrase
