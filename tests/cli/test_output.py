"""What the commands print: the terminal layout at 80 and 120 columns, piped records, colour and every ``--json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

import trajschema as ts
from tests.cli.terminal_support import in_terminal, layout_problems, piped, plain, plain_environment
from trajschema.cli.output import PIPED, Table, cells, color_wanted
from trajschema.export import extends, field_rows
from trajschema.testing import verl_sample

PACKAGED = sorted(p.stem for p in (Path(ts.__file__).parent.parent / "schemas").glob("*.yaml")) or ts.schema_names()
FREE_DIMS = {"layers": 3, "topk": 2, "experts": 8, "teacher_topk": 2}
PLAN = ["plan", "--dp-size", "2", "--batch-size", "353", "--rollout-n", "8", "--actor-mini-batch-size", "15"]


@pytest.fixture(autouse=True)
def _plain_environment(monkeypatch):
    plain_environment(monkeypatch)


def as_json(capsys, command: str, *argv: str, status: int = 0) -> dict[str, Any]:
    code, out, err = piped(capsys, *argv, "--json")
    assert code == status, err
    report = json.loads(out)
    assert (report["version"], report["command"]) == (1, command)
    return report


def samples_of(name: str, sizes=((5, 3), (8, 2))) -> list[dict[str, Any]]:
    schema = ts.load_schema(name)
    free = {k: v for k, v in FREE_DIMS.items() if k in schema.dims}
    return [verl_sample(schema, p, r, uid=f"q{p}", **free) for p, r in sizes]


def edited(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


OLD = """name: old_ids
dims: {seq: {}}
fields:
  ids: {shape: [seq], dtype: int64, min: 0, max: 100, pad: 0}
"""
NEW = OLD.replace("old_ids", "new_ids").replace("int64, min: 0, max: 100", "int32, min: 0, max: 50")


# -- colour ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("no_color", "force_color", "tty", "wanted"),
    [
        ("", "", True, True),
        ("", "", False, False),
        ("1", "", True, False),
        ("", "1", False, True),
        ("1", "1", False, False),  # NO_COLOR wins
        ("", "0", False, True),  # force-color.org: any value but empty forces
        ("0", "", True, False),  # no-color.org: any value but empty disables
    ],
)
def test_colour_follows_no_color_then_force_color_then_the_terminal(monkeypatch, no_color, force_color, tty, wanted):
    monkeypatch.setenv("NO_COLOR", no_color)
    monkeypatch.setenv("FORCE_COLOR", force_color)
    assert color_wanted(tty) is wanted


def test_diff_is_coloured_on_a_terminal_and_plain_with_no_color(monkeypatch, capsys, tmp_path):
    old, new = edited(tmp_path, "old_ids", OLD), edited(tmp_path, "new_ids", NEW)
    _, out, _ = in_terminal(monkeypatch, capsys, "diff", old, new, color=True)
    breaking = [line for line in out.splitlines() if "BREAKING" in line]
    assert breaking and all(line.startswith("\x1b[1;31mBREAKING") for line in breaking), out
    _, out, _ = in_terminal(monkeypatch, capsys, "diff", old, old.parent / "old_ids.yaml", color=True)
    assert out == "no changes\n"
    _, out, _ = in_terminal(monkeypatch, capsys, "diff", old, new)  # NO_COLOR=1
    assert "\x1b[" not in out and "BREAKING fields.ids.values" in out


def test_force_color_colours_a_pipe_and_no_color_overrides_it(monkeypatch, capsys, tmp_path):
    old, new = edited(tmp_path, "old_ids", OLD), edited(tmp_path, "new_ids", NEW)
    monkeypatch.setenv("FORCE_COLOR", "1")
    _, out, _ = piped(capsys, "diff", old, new)
    assert "\x1b[1;31mBREAKING" in out
    assert len(plain(out).splitlines()) == 3  # still one record a line: two changes, the summary
    monkeypatch.setenv("NO_COLOR", "1")
    _, out, _ = piped(capsys, "diff", old, new)
    assert "\x1b[" not in out


def test_an_ok_change_is_green_on_a_terminal(monkeypatch, capsys, tmp_path):
    old = edited(tmp_path, "old_ids", OLD)
    wider = edited(tmp_path, "wider", OLD.replace("old_ids", "wider").replace("max: 100", "max: 200"))
    code, out, _ = in_terminal(monkeypatch, capsys, "diff", old, wider, color=True)
    assert code == 0 and out.startswith("\x1b[32mok\x1b[0m"), out


# -- the layout of a table --------------------------------------------------------------------


def test_a_table_keeps_whole_cells_whole_and_wraps_the_others_between_words():
    t = Table("t", ["name", "shape", "notes", "description"], whole=("name", "shape"), notes=("description",))
    t.add_row("routed_experts", "[response, layers, topk]", "min 0; max experts - 1; distinct", "word " * 30)
    lines = t.lines(40)
    assert not layout_problems("\n".join(lines), ["routed_experts", "[response, layers, topk]"], columns=40)
    assert any(line.startswith("    notes: min 0;") for line in lines)  # moved under its row, labelled
    assert [line for line in lines if line.startswith("    word")]  # the description folds under the row
    assert t.lines(200)[3].split()[0:2] == ["routed_experts", "[response,"]  # title, header, rule, row


def test_wide_characters_count_as_two_columns():
    t = Table(None, ["name", "kind"])
    t.add_row("日本", "float")
    t.add_row("abcd", "int")
    header, _, wide, narrow = t.lines(80)
    assert cells(wide) == cells(narrow) + 2 == len(header) + 1  # "float" is 2 longer than "int", "kind" 1 shorter
    assert wide.index("float") == narrow.index("int") - 2  # 日本 is two characters, four columns


def test_a_cell_wider_than_the_terminal_stays_whole():
    t = Table(None, ["name", "from"])
    t.add_row("x" * 100, "packaged")
    assert any("x" * 100 in line for line in t.lines(80))


def test_piped_records_are_tab_separated_one_line_each_with_cells_made_inert():
    t = Table("fields", ["name", "description"])
    t.add_row("a\tb", "two\nlines \x1b[31m")
    assert t.records() == ["fields", "name\tdescription", "a\\tb\ttwo\\nlines \\x1b[31m"]
    with pytest.raises(ValueError, match="table row has 1 cells, the table 2 columns"):
        t.add_row("x")


@pytest.mark.parametrize("title", [None, "fields"], ids=["untitled (list, check)", "titled (show)"])
def test_a_piped_table_has_a_title_line_only_when_it_has_a_title_as_the_help_says(title):
    t = Table(title, ["name", "shape"])
    t.add_row("input_ids", "[seq]")
    assert t.records() == [*([title] if title else []), "name\tshape", "input_ids\t[seq]"]
    assert "a header line (after its title line, for a table with a title" in " ".join(PIPED.split())


# -- 80 and 120 columns -------------------------------------------------------------------------


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("name", PACKAGED)
def test_show_cuts_nothing_a_user_copies(monkeypatch, capsys, name, columns):
    schema = ts.load_schema(name)
    code, out, _ = in_terminal(monkeypatch, capsys, "show", name, columns=columns)
    tokens = [*schema.fields, *schema.dims, *schema.architectures, *extends(schema.plan)]
    for f in field_rows(schema.plan):
        tokens += [f.shape, *f.dtype.split(" | ")] if f.shape else [f.dtype]
    assert code == 0 and not layout_problems(out, [t for t in tokens if t], columns=columns)


@pytest.mark.parametrize("columns", [80, 120])
def test_list_cuts_no_schema_or_architecture_name(monkeypatch, capsys, columns):
    code, out, _ = in_terminal(monkeypatch, capsys, "list", columns=columns)
    tokens = [a for n in PACKAGED for a in (n, *ts.load_schema(n).architectures)]
    assert code == 0 and not layout_problems(out, tokens, columns=columns)


@pytest.mark.parametrize("columns", [80, 120])
def test_plan_breaks_no_word(monkeypatch, capsys, columns):
    _, one_line, _ = piped(capsys, *PLAN, "--critic-mini-batch-size", "4", "--tp-size", "4", "--cp-size", "2")
    code, out, _ = in_terminal(
        monkeypatch, capsys, *PLAN, "--critic-mini-batch-size", "4", "--tp-size", "4", "--cp-size", "2", columns=columns
    )
    assert code == 0 and not layout_problems(out, one_line.split(), columns=columns)
    assert " ".join(out.split()) == " ".join(one_line.split())  # the same words, in the same order


@pytest.mark.parametrize("columns", [80, 120])
def test_diff_breaks_no_word_and_names_each_path_once(monkeypatch, capsys, tmp_path, columns):
    old, new = edited(tmp_path, "old_ids", OLD), edited(tmp_path, "new_ids", NEW)
    _, records, _ = piped(capsys, "diff", old, new, "--mode", "full")
    code, out, _ = in_terminal(monkeypatch, capsys, "diff", old, new, "--mode", "full", columns=columns)
    words = records.replace("  (", "  ").replace(")\n", "\n").split()  # piped, the why is in parentheses
    assert code == 1 and not layout_problems(out, words, columns=columns)
    assert out.split() == words
    assert out.count("fields.ids.dtype") == 1 and "ids:" not in out


# -- piped output ---------------------------------------------------------------------------


def test_show_piped_is_a_header_and_one_tab_separated_record_per_row(capsys):
    schema = ts.load_schema("vlm_mrope_moe")
    _, out, _ = piped(capsys, "show", "vlm_mrope_moe")
    lines = out.splitlines()
    header = lines.index("name\tshape\tdtype\trequired\tpad\tchecks\tdescription")
    assert lines[header - 1] == "fields"
    for i, f in enumerate(field_rows(schema.plan)):
        assert lines[header + 1 + i].split("\t") == [
            f.name,
            f.shape,
            f.dtype,
            f.required,
            f.pad,
            f.checks,
            f.description,
        ]
    assert not [line for line in lines if line.endswith(" ") or "  " in line.strip()]  # no padding


def test_list_piped_is_one_record_per_schema(capsys):
    _, out, _ = piped(capsys, "list")
    lines = out.splitlines()
    assert lines[0] == "name\textends\tarchitectures\tfrom"
    rows = {line.split("\t")[0]: line.split("\t") for line in lines[1:]}
    for name in PACKAGED:
        assert rows[name][2] == (", ".join(ts.load_schema(name).architectures) or "-")
    assert max(len(line) for line in lines) < 400  # not padded out to a fixed width


def test_diff_piped_is_one_line_a_change(capsys, tmp_path):
    old, new = edited(tmp_path, "old_ids", OLD), edited(tmp_path, "new_ids", NEW)
    code, out, _ = piped(capsys, "diff", old, new, "--mode", "full")
    assert code == 1
    assert out.splitlines()[0] == (
        "BREAKING fields.ids.dtype  int64 -> int32  (samples valid under one can fail under the other: "
        "old allows int64, new does not; new allows int32, old does not)"
    )
    assert out.splitlines()[1].startswith("BREAKING fields.ids.values  min 0, max 100 -> min 0, max 50")
    assert "old allows 51 in int64, new does not" in out.splitlines()[1]
    assert out.splitlines()[2] == "incompatible (full): 2 breaking of 2 changes"


# -- --json on every command --------------------------------------------------------------------


def test_list_json_agrees_with_the_table(capsys):
    report = as_json(capsys, "list", "list")
    _, out, _ = piped(capsys, "list")
    rows = [line.split("\t") for line in out.splitlines()[1:]]
    assert [s["name"] for s in report["schemas"]] == [r[0] for r in rows]
    for s, r in zip(report["schemas"], rows, strict=True):
        assert (", ".join(s["extends"]) or "-", ", ".join(s["architectures"]) or "-", s["source"]) == tuple(r[1:])
        assert s["error"] is None
    assert (report["search_path"], report["broken"], report["unlisted"]) == ([], 0, 0)


def test_list_json_counts_a_broken_file_as_the_summary_does(capsys, tmp_path, monkeypatch):
    (tmp_path / "broken.yaml").write_text("name: broken\nfields: [\n")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    report = as_json(capsys, "list", "list", status=1)
    (broken,) = [s for s in report["schemas"] if s["error"]]
    assert broken["name"] == "broken" and broken["source"] == str(tmp_path) and report["broken"] == 1
    _, out, _ = piped(capsys, "list")
    assert f"1 of {len(report['schemas'])} schema files do not load" in out


@pytest.mark.parametrize("name", PACKAGED)
def test_show_json_holds_the_cells_of_the_tables(capsys, name):
    schema = ts.load_schema(name)
    report = as_json(capsys, "show", "show", name)
    assert (report["name"], report["extends"], report["architectures"]) == (
        name,
        extends(schema.plan),
        list(schema.architectures),
    )
    assert [f["name"] for f in report["fields"]] == list(schema.fields)
    assert [d["name"] for d in report["dims"]] == list(schema.dims)
    assert [t["name"] for t in report["tags"]] == list(schema.tags)
    _, out, _ = piped(capsys, "show", name)
    records = set(out.splitlines())
    for f in report["fields"]:
        assert "\t".join(f.values()) in records
    for d in report["dims"]:
        assert "\t".join(d.values()) in records


@pytest.mark.parametrize("fmt", ["yaml", "json-schema", "jaxtyping"])
def test_export_json_holds_what_export_prints(capsys, fmt):
    report = as_json(capsys, "export", "export", "text", "--format", fmt)
    _, out, _ = piped(capsys, "export", "text", "--format", fmt)
    assert (report["name"], report["format"], report["output"]) == ("text", fmt, out)


def test_plan_json_agrees_with_the_lines(capsys):
    report = as_json(capsys, "plan", *PLAN)
    _, out, _ = piped(capsys, *PLAN)
    numbers = {line[:18].strip(): int(line[18:].split()[0]) for line in out.splitlines()}
    assert numbers == {
        "required multiple": report["required_multiple"],
        "batch size": report["batch_size"],
        "padding samples": report["padding_samples"],
        "padding length": report["padding_length"],
    }
    assert (report["required_multiple"], report["padding_samples"]) == (120, 7)
    assert f"{report['padding_share']:.1%} of the padded batch of {report['padded_batch_size']}" in out


def test_pad_json_says_what_it_wrote(capsys, tmp_path):
    out_file = tmp_path / "pad.pt"
    argv = ["pad", "moe_routed", "--count", "3", "--eos-token-id", "2", "--out", out_file]
    argv += ["--dim", "layers=2", "--dim", "topk=2", "--dim", "experts=8"]
    report = as_json(capsys, "pad", *argv)
    written = torch.load(out_file, weights_only=True)
    assert (report["file"], report["schema"], report["count"]) == (str(out_file), "moe_routed", 3)
    assert {t["uid"] if "uid" in t else s["uid"] for s, t in zip(written["samples"], written["tags"])} == {
        report["uid"]
    }
    assert report["dims"]["experts"] == 8 and report["dims"]["layers"] == 2
    assert report["notes"] == ["routed_experts: padding ids spread over experts=8 (from --dim)"]
    _, out, _ = piped(capsys, *argv)
    assert f"wrote 3 padding samples of schema 'moe_routed' to {out_file} (uid " in out
    assert out.splitlines()[1:] == report["notes"]


def test_diff_json_keeps_its_keys_and_adds_the_version(capsys, tmp_path):
    old, new = edited(tmp_path, "old_ids", OLD), edited(tmp_path, "new_ids", NEW)
    report = as_json(capsys, "diff", "diff", old, new, status=1)
    assert set(report) == {"version", "command", "old", "new", "mode", "compatible", "changes"}
    assert (report["old"], report["new"], report["mode"], report["compatible"]) == (
        "old_ids",
        "new_ids",
        "backward",
        False,
    )
    values = report["changes"][1]
    assert values["path"] == "fields.ids.values" and values["breaking"] and values["backward_breaking"]
    assert values["message"] == f"ids: {values['what']}; {values['why']}"
    _, out, _ = piped(capsys, "diff", old, new)
    for c in report["changes"]:
        assert f"BREAKING {c['path']}  {c['what']}  ({c['why']})" in out.splitlines()


# -- infer ----------------------------------------------------------------------------------


def test_infer_json_holds_the_draft_and_the_match(capsys, tmp_path):
    path = tmp_path / "s.pt"
    torch.save(samples_of("text"), path)
    report = as_json(capsys, "infer", "infer", path, "--name", "mine")
    _, out, err = piped(capsys, "infer", path, "--name", "mine")
    assert (report["name"], report["base"], report["samples"], report["matches"]) == ("mine", None, 2, "text")
    assert report["yaml"] == out and report["file"] == str(path)
    assert err == (
        "trajschema infer: note: these samples match packaged schema 'text' exactly; "
        "use it, or extend it with --base text\n"
    )


@pytest.mark.parametrize("name", PACKAGED)
def test_infer_names_the_packaged_schema_the_samples_match(capsys, tmp_path, name):
    path = tmp_path / "s.pt"
    torch.save(samples_of(name), path)
    assert as_json(capsys, "infer", "infer", path, "--name", "mine")["matches"] == name


def test_infer_says_nothing_of_a_match_with_base_or_an_undeclared_field(capsys, tmp_path):
    samples = samples_of("text")
    path = tmp_path / "s.pt"
    torch.save(samples, path)
    assert piped(capsys, "infer", path, "--name", "mine", "--base", "text")[2] == ""
    torch.save([{**s, "extra_scores": torch.zeros(3)} for s in samples], path)
    code, _, err = piped(capsys, "infer", path, "--name", "mine")
    assert (code, err) == (0, "")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--name", "text", "--base", "text"],
            "--name 'text' is the name of --base; choose another name for the draft",
        ),
        (
            ["--name", "text", "--base", "vlm_mrope"],
            "--name 'text' is the name of a schema --base vlm_mrope extends; choose another name for the draft",
        ),
        (
            ["--name", "my text"],
            "--name 'my text': a schema is found by its file name (NAME.yaml) and named unquoted on command "
            "lines; use letters, digits, _, - and . (e.g. --name 'my_text')",
        ),
        (["--name", "sub/dir"], "use letters, digits, _, - and . (e.g. --name 'sub_dir')"),
        (["--name", "mine.yaml"], "(e.g. --name 'mine')"),
        (["--name", ""], "--name '': an empty schema name"),
        (["--name=-x"], "(e.g. --name 'x')"),
    ],
    ids=["base's name", "an ancestor's name", "a blank", "a slash", "a file name", "empty", "a dash first"],
)
def test_infer_refuses_a_draft_name_in_plain_words(capsys, tmp_path, argv, message):
    path = tmp_path / "s.pt"
    torch.save(samples_of("text"), path)
    code, out, err = piped(capsys, "infer", path, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("trajschema infer: error: ") and message in err and err.count("\n") == 1
    assert "<mapping>" not in err
