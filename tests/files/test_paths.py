"""The search path of schema files (`trajschema.files.paths`): ``TRAJSCHEMA_PATH`` before the
packaged schemas, the first file of a name winning even when it cannot be read, entries that
are missing, unlistable or no directory told (never skipped or hung on), long names shown cut.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trajschema as ts
from tests.loading_support import load_error as _load_error
from tests.loading_support import needs_posix
from tests.loading_support import within as _within
from tests.loading_support import write_schema as _write
from trajschema.files import shown_name

PACKAGED = ts.schema_names()
PACKAGED_DIR = ts.schema_search_path()[-1]


# ---------------------------------------------------------------------------
# TRAJSCHEMA_PATH comes first: the first file of a name wins


def test_trajschema_path_overrides_a_packaged_schema(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    override = _write(tmp_path, "text", (PACKAGED_DIR / "text.yaml").read_text(encoding="utf-8"))
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    assert ts.schema_names().count("text") == 1
    assert Path(ts.load_schema("text").source) == override


# ---------------------------------------------------------------------------
# Long names are shown cut, with their length


def test_an_unknown_long_name_is_shown_cut_with_its_length() -> None:
    with pytest.raises(ts.SchemaNotFoundError) as info:
        ts.load_schema("x" * 5000)
    message = str(info.value)
    assert f"no schema {'x' * 60!r}…(5000 chars) known: " in message
    assert "x" * 61 not in message and len(message) < 400


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=300).filter(lambda t: os.sep not in t and not t.endswith((".yaml", ".yml"))))
def test_a_not_found_message_never_grows_with_the_name(name: str) -> None:
    if name in PACKAGED:
        return
    with pytest.raises(ts.SchemaNotFoundError) as info:
        ts.load_schema(name)
    shown = repr(name) if len(name) <= 60 else f"{name[:60]!r}…({len(name)} chars)"
    assert f"no schema {shown}" in str(info.value)
    assert shown_name(name) == shown


# ---------------------------------------------------------------------------
# A missing entry is told once


def _warnings_of(call) -> list[str]:
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_a_missing_search_path_entry_is_warned_about_once_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import warnings

    first, second = tmp_path / "gone", tmp_path / "never"
    note = "does not exist; schemas are looked up without it (check TRAJSCHEMA_PATH)"
    monkeypatch.setenv("TRAJSCHEMA_PATH", os.pathsep.join([str(first), str(tmp_path)]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert ts.load_schema("text").name == "text"  # the lookup goes on without it
    (w,) = caught
    assert w.category is UserWarning and w.filename == __file__  # it points at the caller's line
    assert str(w.message) == f"search path entry {first} {note}"
    # Once per entry per process: later lookups of any kind say nothing more about it ...
    assert (
        _warnings_of(
            lambda: (
                ts.schema_names(),
                ts.load_schema("text"),
                ts.schema_for_architecture("Qwen2VLForConditionalGeneration"),
            )
        )
        == []
    )
    # ... and another missing entry is told in its turn, by any lookup (here a parent's).
    monkeypatch.setenv("TRAJSCHEMA_PATH", os.pathsep.join([str(second), str(first)]))
    child = _write(tmp_path, "kid", "name: kid\nextends: [text]\n")
    assert _warnings_of(lambda: ts.load_schema(child)) == [f"search path entry {second} {note}"]
    assert _warnings_of(lambda: ts.load_schema("text")) == []


# ---------------------------------------------------------------------------
# A directory named like a schema file is no schema


def test_a_directory_named_like_a_schema_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "x.yaml").mkdir()
    err = _load_error(tmp_path / "x.yaml")
    assert (err.source, err.path, err.problem) == (str(tmp_path / "x.yaml"), "", "is a directory, not a schema file")
    # On the search path a directory is not a schema: not listed, not found by name or by extends.
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    assert "x" not in ts.schema_names()
    with pytest.raises(ts.SchemaNotFoundError):
        ts.load_schema("x")
    child = _write(tmp_path, "child", "name: child\nextends: [x]\n")
    assert _load_error(child).problem == "unknown parent schema 'x'"


# ---------------------------------------------------------------------------
# A file or directory that cannot be read is named, never skipped or hung on


def _unreadable_entries(directory: Path) -> dict[str, str]:
    """Entries named like schema files that cannot be read as one, with the problem each is reported with."""
    (directory / "dangling.yaml").symlink_to(directory / "nowhere.yaml")
    (directory / "loop.yaml").symlink_to(directory / "loop.yaml")
    (directory / "devnull.yaml").symlink_to(os.devnull)
    problems = {
        "dangling": f"is a symbolic link to {directory / 'nowhere.yaml'}, which does not exist",
        "loop": "is a symbolic link that never reaches a file (too many levels of symbolic links)",
        "devnull": "is not a regular file (a character device)",
    }
    if hasattr(os, "mkfifo"):
        os.mkfifo(directory / "pipe.yaml")
        problems["pipe"] = "is not a regular file (a FIFO)"
    return problems


@needs_posix
def test_a_file_on_the_path_that_cannot_be_read_is_named_when_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    problems = _unreadable_entries(tmp_path)
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    with _within(10):
        assert set(problems) <= set(ts.schema_names())  # listed, as `trajschema list` shows them
        for name, problem in problems.items():
            with pytest.raises(ts.SchemaDefinitionError) as info:
                ts.load_schema(name)
            assert (info.value.source, info.value.path, info.value.problem) == (
                str(tmp_path / f"{name}.yaml"),
                "",
                problem,
            )
            # Given by path, the same.
            assert _load_error(tmp_path / f"{name}.yaml").problem == problem
        # Unrelated loads are untouched: by name, and through extends.
        assert ts.load_schema("vlm_mrope_moe").name == "vlm_mrope_moe"
        child = _write(tmp_path, "child", "name: child\nextends: [moe_routed]\n")
        assert ts.load_schema(child).lineage == ("child", "moe_routed", "text")


@needs_posix
def test_a_parent_that_cannot_be_read_is_named_not_skipped(tmp_path: Path) -> None:
    problems = _unreadable_entries(tmp_path)
    with _within(10):
        for name, problem in problems.items():
            child = _write(tmp_path, f"child_of_{name}", f"name: child_of_{name}\nextends: [{name}]\n")
            err = _load_error(child)
            assert (err.source, err.path, err.problem) == (str(tmp_path / f"{name}.yaml"), "", problem)


@needs_posix
def test_an_unreadable_file_shadows_the_packaged_schema_of_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken override is an error, not a silent fall back to the packaged schema it meant to replace."""
    (tmp_path / "text.yaml").symlink_to(tmp_path / "moved" / "text.yaml")
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.load_schema("text")
    assert info.value.source == str(tmp_path / "text.yaml") and "which does not exist" in info.value.problem
    assert ts.load_schema("vlm_mrope").lineage[-1] == "text"  # packaged children find text beside them


def _unlistable(monkeypatch: pytest.MonkeyPatch, directory: Path) -> None:
    """``directory`` cannot be listed, as without read permission (root reads anything, so chmod proves nothing)."""
    real = os.scandir

    def scandir(path: Any = ".") -> Any:
        if os.fspath(path) == str(directory):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


def test_a_directory_that_cannot_be_listed_is_looked_into_for_the_name_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    override = _write(tmp_path, "text", (ts.schema_search_path()[-1] / "text.yaml").read_text(encoding="utf-8"))
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path))
    _unlistable(monkeypatch, tmp_path)
    assert ts.load_schema("text").source == str(override)  # found by name, without listing
    assert "text" in ts.schema_names()  # the packaged one
    with pytest.raises(ts.SchemaNotFoundError) as info:
        ts.load_schema("nope")
    assert f"; {tmp_path} cannot be listed: Permission denied;" in str(info.value)
    with pytest.raises(ts.SchemaDefinitionError) as arch:  # it may hold a schema claiming the architecture
        ts.schema_for_architecture("LlamaForCausalLM")
    assert (arch.value.source, arch.value.path) == (str(tmp_path), "")
    assert arch.value.problem.startswith("cannot be listed: Permission denied; schema_for_architecture reads")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads directories whatever their mode")
def test_a_directory_without_permission_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    _write(locked, "mine", "name: mine\nextends: [text]\n")
    locked.chmod(0)
    try:
        monkeypatch.setenv("TRAJSCHEMA_PATH", str(locked))
        assert ts.load_schema("text").lineage == ("text",)
        with pytest.raises(ts.SchemaDefinitionError, match="Permission denied"):
            ts.schema_for_architecture("LlamaForCausalLM")
    finally:
        locked.chmod(0o755)


@needs_posix
@pytest.mark.parametrize("entry", ["file", "dangling", "loop"])
def test_a_search_path_entry_that_is_no_directory_is_reported_not_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    path = tmp_path / "entry"
    if entry == "file":
        path.write_text("name: mine\n")
        problem = "is not a directory (TRAJSCHEMA_PATH lists directories of schema files)"
    elif entry == "dangling":
        path.symlink_to(tmp_path / "gone")
        problem = f"is a symbolic link to {tmp_path / 'gone'}, which does not exist"
    else:
        path.symlink_to(path)
        problem = "is a symbolic link that never reaches a file (too many levels of symbolic links)"
    monkeypatch.setenv("TRAJSCHEMA_PATH", f"{tmp_path / 'missing'}{os.pathsep}{path}")
    with pytest.warns(UserWarning, match="does not exist"):
        assert ts.load_schema("text").name == "text"  # unrelated: a name lookup does not fail on it
    with pytest.raises(ts.SchemaNotFoundError, match=re.escape(f"; {path} {problem};")):
        ts.load_schema("nope")
    with pytest.raises(ts.SchemaDefinitionError) as info:
        ts.schema_for_architecture("LlamaForCausalLM")
    assert info.value.source == str(path)
    assert info.value.problem == f"{problem}; schema_for_architecture reads every schema file on the search path"


def test_a_missing_search_directory_is_skipped_with_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing is there to be read, so lookups go on without it; the warning says so (a typo in TRAJSCHEMA_PATH)."""
    monkeypatch.setenv("TRAJSCHEMA_PATH", str(tmp_path / "missing"))
    with pytest.warns(UserWarning, match="does not exist"):
        assert ts.schema_for_architecture("LlamaForCausalLM").name == "text"
    assert ts.schema_names() == PACKAGED
