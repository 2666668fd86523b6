"""The Sphinx role rewriter (``docs_hooks.sphinx_roles``): roles in docstrings become mkdocstrings syntax.

Each role becomes a cross-reference when its target is an object the API page renders,
else a plain code span; code spans, code blocks and doctests keep whatever they show.
The site test (``tests/test_docs_site.py``) builds the site from a rewritten copy of the
package; these tests hold the rewriter to tricky strings and files without building.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import trajschema as ts
from docs_hooks import api_page, sphinx_roles
from docs_hooks.sphinx_roles import Context, Resolver, rewrite_source, rewrite_text

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = Context(ts.Schema.__module__, "Schema")


@pytest.fixture(scope="module")
def resolver() -> Resolver:
    return Resolver.from_api_page()


def _rewrite(resolver: Resolver, text: str, context: Context | None = None) -> str:
    return rewrite_text(text, lambda t: resolver.resolve(t, context or Context()))[0]


# -- what the documented objects are ------------------------------------------------------------


def test_documented_objects_are_the_public_names_and_their_own_documented_members() -> None:
    documented = sphinx_roles.documented_objects()
    assert set(api_page.public_names()) <= set(documented)
    assert "trajschema.Schema.violations" in documented and "trajschema.Schema._key" not in documented
    # Only members defined in the class's own body, with a docstring of their own, render an entry.
    members = [p for p in documented if p not in api_page.public_names()]
    assert members
    for path in members:
        owner, _, name = path.rpartition(".")
        value = vars(documented[owner])[name]
        assert not name.startswith("_") and getattr(value, "__func__", value).__doc__, path


def test_a_block_for_a_name_that_is_not_public_documents_nothing() -> None:
    documented = sphinx_roles.documented_objects("::: trajschema.load_schema\n\n::: trajschema.core.dims\n")
    assert list(documented) == ["trajschema.load_schema"]


# -- single roles -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "context", "expected"),
    [
        pytest.param(":func:`trajschema.load_schema`", Context(), "[`load_schema`][trajschema.load_schema]", id="full"),
        pytest.param(
            ":py:func:`trajschema.real_mask`", Context(), "[`real_mask`][trajschema.real_mask]", id="py-domain"
        ),
        pytest.param(
            ":meth:`~trajschema.Schema.validate`", Context(), "[`validate`][trajschema.Schema.validate]", id="tilde"
        ),
        pytest.param(
            ":meth:`trajschema.Schema.padding`", Context(), "[`Schema.padding`][trajschema.Schema.padding]", id="member"
        ),
        pytest.param(
            ":meth:`Schema.to_yaml`", Context(), "[`Schema.to_yaml`][trajschema.Schema.to_yaml]", id="class-dot"
        ),
        pytest.param(":meth:`violations`", SCHEMA, "[`violations`][trajschema.Schema.violations]", id="own-class"),
        pytest.param(":meth:`violations`", Context(ts.Schema.__module__), "`violations`", id="no-class-no-guess"),
        pytest.param(":meth:`.padding`", Context(), "[`padding`][trajschema.Schema.padding]", id="dot-unique"),
        pytest.param(":meth:`.describe`", Context(), "`describe`", id="dot-ambiguous"),
        pytest.param(
            ":meth:`.describe`",
            Context(ts.Field.__module__, "Field"),
            "[`describe`][trajschema.Field.describe]",
            id="dot-own-class",
        ),
        pytest.param(
            ":func:`install`", Context("trajschema.verl"), "[`install`][trajschema.verl.install]", id="module-name"
        ),
        pytest.param(
            ":func:`verl_sample`", Context(), "[`verl_sample`][trajschema.testing.verl_sample]", id="public-module"
        ),
        pytest.param(
            ":data:`trajschema.testing.LAYOUTS`", Context(), "[`LAYOUTS`][trajschema.testing.LAYOUTS]", id="data"
        ),
        pytest.param(
            ":data:`trajschema.testing.BATCH_FORMS`",
            Context(),
            "[`BATCH_FORMS`][trajschema.testing.BATCH_FORMS]",
            id="data-under-its-second-name",  # LAYOUTS and BATCH_FORMS are one object
        ),
        pytest.param(":exc:`SchemaError`", Context(), "[`SchemaError`][trajschema.SchemaError]", id="exc"),
        pytest.param(":attr:`Schema.nope`", Context(), "`Schema.nope`", id="undocumented-member"),
        pytest.param(":mod:`trajschema.core`", Context(), "`trajschema.core`", id="module-not-documented"),
        pytest.param(":func:`~trajschema.core.no_such_name`", Context(), "`no_such_name`", id="unknown-tilde"),
        pytest.param(":class:`contextvars.ContextVar`", Context(), "`contextvars.ContextVar`", id="stdlib"),
        pytest.param(":class:`TimeoutError`", Context(), "`TimeoutError`", id="builtin"),
        pytest.param(":func:`!trajschema.load_schema`", Context(), "`trajschema.load_schema`", id="bang-no-link"),
        pytest.param(
            ":func:`the loader <trajschema.load_schema>`",
            Context(),
            "[`the loader`][trajschema.load_schema]",
            id="title",
        ),
        pytest.param(
            ":func:`the\n    loader <trajschema.load_schema>`",
            Context(),
            "[`the loader`][trajschema.load_schema]",
            id="title-two-lines",
        ),
        pytest.param(":func:`some helper <_private>`", Context(), "`some helper`", id="title-unresolved"),
        pytest.param(":func:`a b`", Context(), "`a b`", id="not-a-name"),
        pytest.param(":meth:`.`", Context(), "`.`", id="only-a-dot"),
        pytest.param(":func:`~`", Context(), "`~`", id="only-a-tilde"),
    ],
)
def test_one_role(resolver: Resolver, text: str, context: Context, expected: str) -> None:
    assert _rewrite(resolver, text, context) == expected


def test_an_internal_path_links_to_the_public_name_of_the_same_object(resolver: Resolver) -> None:
    defining = ts.is_padding.__module__
    assert defining != "trajschema"
    for path in (f"{defining}.is_padding", "trajschema.contract.is_padding"):
        assert _rewrite(resolver, f":func:`{path}`") == "[`is_padding`][trajschema.is_padding]"


def test_a_class_member_is_found_under_the_class_s_public_path(resolver: Resolver) -> None:
    from trajschema.testing import MemoryTransferQueue

    context = Context(MemoryTransferQueue.__module__, "MemoryTransferQueue")
    assert _rewrite(resolver, ":meth:`kv_list`", context) == (
        "[`kv_list`][trajschema.testing.MemoryTransferQueue.kv_list]"
    )
    # The same name in the writer's docstrings is TransferQueue's own method: no link.
    writer = Context(ts.TransferQueueWriter.__module__, "TransferQueueWriter")
    assert _rewrite(resolver, ":meth:`kv_list`", writer) == "`kv_list`"
    assert _rewrite(resolver, ":meth:`put`", writer) == "[`put`][trajschema.TransferQueueWriter.put]"


# -- contexts made here: names that shadow, constants that coincide, modules never imported ---------


@pytest.fixture
def fake_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("trajschema_fake_module_for_roles")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def test_a_local_name_wins_over_a_public_one_elsewhere(resolver: Resolver, fake_module: types.ModuleType) -> None:
    fake_module.tags = lambda: None  # type: ignore[attr-defined]
    assert _rewrite(resolver, ":func:`tags`") == "[`tags`][trajschema.testing.tags]"
    assert _rewrite(resolver, ":func:`tags`", Context(fake_module.__name__)) == "`tags`"


def test_constants_that_are_one_object_are_not_one_name(fake_module: types.ModuleType) -> None:
    value = 12345
    fake_module.B = value  # type: ignore[attr-defined]
    own = Resolver({"trajschema.A": value, "trajschema.Thing": int})
    assert own.resolve("B", Context(fake_module.__name__)) is None
    fake_module.Alias = int  # type: ignore[attr-defined]  # a class is one thing under any name
    assert own.resolve("Alias", Context(fake_module.__name__)) == "trajschema.Thing"


def test_a_name_two_public_modules_have_is_not_guessed() -> None:
    own = Resolver({"trajschema.x": object(), "trajschema.testing.x": object(), "trajschema.verl.y": object()})
    assert own.resolve("x") is None
    assert own.resolve("y") == "trajschema.verl.y"


def test_naming_a_module_does_not_import_it(resolver: Resolver) -> None:
    assert "antigravity" not in sys.modules  # importing it opens a web browser
    for text in (":mod:`antigravity`", ":func:`antigravity.geohash`", ":mod:`.antigravity`"):
        assert _rewrite(resolver, text, Context("antigravity")).startswith("`")
    assert "antigravity" not in sys.modules
    # A package's __main__ runs its command line when imported: never imported to look a name up.
    assert sphinx_roles._module("trajschema.__main__") is sys.modules.get("trajschema.__main__")


# -- what is left alone ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("``:func:`trajschema.load_schema` ``", id="double-backtick-span"),
        pytest.param("```:func:`x` `` ```", id="triple-backtick-span"),
        pytest.param("``a :func:`x` b``", id="role-inside-a-span"),
        pytest.param("``a\n:func:`x`\nb``", id="span-over-lines"),
        pytest.param("word:func:`x`", id="glued-to-a-word"),
        pytest.param(":func:`unclosed", id="unclosed"),
        pytest.param(":func:``x``", id="not-a-role-but-a-span"),
        pytest.param(":ref:`label`", id="other-role"),
        pytest.param("```python\n:func:`x`\n```", id="fenced"),
        pytest.param("~~~~\n:func:`x`\n```\nstill code\n~~~~", id="tilde-fence-with-inner-backticks"),
        pytest.param(">>> f(':func:`x`')\n':func:`x`'", id="doctest-and-output"),
        pytest.param("", id="empty"),
    ],
)
def test_left_alone(resolver: Resolver, text: str) -> None:
    assert rewrite_text(text, lambda t: resolver.resolve(t))[1] == []
    assert _rewrite(resolver, text) == text


def test_after_a_code_block_roles_are_read_again(resolver: Resolver) -> None:
    text = "Run:\n\n    >>> f()\n\nthen :func:`trajschema.load_schema`.\n```\n:func:`x`\n```\nand :func:`y`"
    new, found = rewrite_text(text, lambda t: resolver.resolve(t))
    assert new == text.replace(":func:`trajschema.load_schema`", "[`load_schema`][trajschema.load_schema]").replace(
        "and :func:`y`", "and `y`"
    )
    assert [(r.line, r.target) for r in found] == [(5, "trajschema.load_schema"), (9, None)]


# -- a property: any mix of prose, code spans and roles, against a reference built from the pieces ---

_TARGETS = {"a.b": "a.b", "c": None, "~a.b": "a.b", "!a.b": None, "d.e": "x.d.e"}
# No `>>>` or `~~~` can form: the reference does not model code blocks.
_WORDS = st.text(alphabet="abc :.!<\n_*[]", max_size=12)


def _expected_role(body: str) -> str:
    """What the reference expects for a role whose targets the fake resolver below knows."""
    name = body.lstrip("!~")
    shown = name.rpartition(".")[2] if body.lstrip("!").startswith("~") else name
    target = _TARGETS[body]
    return f"[`{shown}`][{target}]" if target else f"`{shown}`"


_PIECE = st.one_of(
    _WORDS.map(lambda w: (w, w, 0)),
    st.sampled_from(sorted(_TARGETS)).flatmap(
        lambda b: st.sampled_from(["func", "meth", "py:class", "data"]).map(
            lambda r: (f":{r}:`{b}`", _expected_role(b), 1)
        )
    ),
    st.sampled_from(["``:func:`c` ``", "`x`", "``a`b``"]).map(lambda s: (s, s, 0)),
)


@given(st.lists(_PIECE, max_size=12))
def test_any_mix_against_a_reference(pieces: list[tuple[str, str, int]]) -> None:
    # Spaces between the pieces: a role glued to a word, or backticks running into each other, read differently.
    text = " ".join(p[0] for p in pieces)
    fake = {t.lstrip("!~"): v for t, v in _TARGETS.items() if v}
    new, found = rewrite_text(text, fake.get)
    assert new == " ".join(p[1] for p in pieces)
    assert len(found) == sum(p[2] for p in pieces)
    starts = [i for i, p in enumerate(pieces) if p[2]]
    lines = [1 + " ".join(p[0] for p in pieces[:i]).count("\n") for i in starts]
    assert [r.line for r in found] == lines
    assert rewrite_text(new, fake.get) == (new, [])  # nothing is left to rewrite


# -- Python source --------------------------------------------------------------------------------------

_SOURCE = '''\
"""Module × docstring: see :func:`trajschema.load_schema`."""

#: A doc comment naming :class:`Schema`.
LIMIT = 3
"""An attribute docstring, :data:`LIMIT`."""

TEXT = ":func:`not_a_docstring`"  # a plain comment, :func:`left`


class Schema:
    """Naïve → :meth:`violations` of this class (not the public one)."""

    def violations(self) -> None:
        f":func:`in_an_fstring`"
        """Not the docstring: the f-string came first; still a string statement, :meth:`violations`."""


def helper() -> None:
    class Local:
        """:meth:`violations` here means nothing."""
'''


def test_source_rewrites_docstrings_and_doc_comments_only(resolver: Resolver) -> None:
    new, found = rewrite_source(_SOURCE, "trajschema_roles_example", resolver)
    assert [(r.line, r.replacement) for r in found] == [
        (1, "[`load_schema`][trajschema.load_schema]"),
        (3, "[`Schema`][trajschema.Schema]"),
        (5, "`LIMIT`"),
        (11, "`violations`"),  # the module is not trajschema's: its Schema is not the documented one
        (15, "`violations`"),
        (20, "`violations`"),
    ]
    for kept in (":func:`not_a_docstring`", ":func:`left`", 'f":func:`in_an_fstring`"'):
        assert kept in new
    assert "Module × docstring: see [`load_schema`][trajschema.load_schema]." in new
    assert "Naïve → `violations` of this class" in new  # columns after non-ASCII text stay right


def test_source_columns_count_characters_not_bytes(resolver: Resolver) -> None:
    # ast gives UTF-8 byte columns: read as characters they would reach into the comment.
    source = 'x = "é"; """:func:`trajschema.load_schema`"""\n"""' + "é" * 20 + '"""  # :func:`kept`\n'
    new, found = rewrite_source(source, None, resolver)
    assert new == source.replace(":func:`trajschema.load_schema`", "[`load_schema`][trajschema.load_schema]")
    assert len(found) == 1


def test_source_keeps_crlf_and_everything_else(resolver: Resolver) -> None:
    crlf = _SOURCE.replace("\n", "\r\n")
    new, found = rewrite_source(crlf, None, resolver)
    assert new == rewrite_source(_SOURCE, None, resolver)[0].replace("\n", "\r\n")
    assert len(found) == 6


def test_source_class_context_inside_the_package(resolver: Resolver) -> None:
    source = 'class Schema:\n    def f(self):\n        """See :meth:`violations`."""\n'
    assert "[`violations`][trajschema.Schema.violations]" in rewrite_source(source, ts.Schema.__module__, resolver)[0]


def test_module_names(tmp_path: Path) -> None:
    assert sphinx_roles.module_name(ROOT / "trajschema" / "verl" / "__init__.py") == "trajschema.verl"
    assert sphinx_roles.module_name(ROOT / "docs_hooks" / "api_page.py") == "docs_hooks.api_page"
    (tmp_path / "loose.py").write_text("")
    assert sphinx_roles.module_name(tmp_path / "loose.py") == "loose"


# -- the command line ------------------------------------------------------------------------------------


def _tree(tmp_path: Path) -> dict[Path, bytes]:
    files = {
        tmp_path / "pkg" / "a.py": b'"""See :func:`trajschema.load_schema`."""\n',
        tmp_path / "pkg" / "sub" / "b.py": '\ufeff"""A BOM, then :class:`SchemaError`."""\r\n'.encode(),
        tmp_path / "pkg" / "clean.py": b'"""Nothing here."""\n',
    }
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return files


def test_check_lists_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _tree(tmp_path)
    assert sphinx_roles.main([str(tmp_path / "pkg")]) == 1
    out = capsys.readouterr().out
    assert (
        f"{tmp_path / 'pkg' / 'a.py'}:1: :func:`trajschema.load_schema` -> [`load_schema`][trajschema.load_schema]"
        in out
    )
    assert "found 2 roles in 2 of 3 files (2 as links, 0 as code spans)" in out
    assert {p: p.read_bytes() for p in files} == files


def test_fix_rewrites_in_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _tree(tmp_path)
    assert sphinx_roles.main(["--fix", str(tmp_path / "pkg")]) == 0
    assert (tmp_path / "pkg" / "a.py").read_text() == '"""See [`load_schema`][trajschema.load_schema]."""\n'
    assert (tmp_path / "pkg" / "sub" / "b.py").read_bytes() == (
        '\ufeff"""A BOM, then [`SchemaError`][trajschema.SchemaError]."""\r\n'.encode()
    )
    assert (tmp_path / "pkg" / "clean.py").read_bytes() == files[tmp_path / "pkg" / "clean.py"]
    assert sphinx_roles.main([str(tmp_path / "pkg")]) == 0  # nothing left
    assert "found 0 roles" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        pytest.param("broken.py", b'"""x"""\ndef f(:\n', "not Python that parses", id="syntax"),
        pytest.param("latin.py", '"""caf\xe9 :func:`x`"""\n'.encode("latin-1"), "not UTF-8", id="encoding"),
        pytest.param("tabs.py", b"if 1:\n\tx = 1\n        y = 2\n", "not Python that parses", id="indentation"),
    ],
)
def test_a_file_that_fails_leaves_every_file_unwritten(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, data: bytes, message: str
) -> None:
    files = _tree(tmp_path)
    (tmp_path / "pkg" / name).write_bytes(data)
    assert sphinx_roles.main(["--fix", str(tmp_path / "pkg")]) == 2
    err = capsys.readouterr().err
    assert name in err and message in err
    assert {p: p.read_bytes() for p in files} == files


def test_a_missing_path_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _tree(tmp_path)
    assert sphinx_roles.main(["--fix", str(tmp_path / "pkg"), str(tmp_path / "nope")]) == 2
    assert "nope: no such file or folder" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in files} == files


def test_the_hooks_themselves_hold_no_role(capsys: pytest.CaptureFixture[str]) -> None:
    assert sphinx_roles.main([str(ROOT / "docs_hooks")]) == 0, capsys.readouterr().out


def test_the_package_holds_no_role(capsys: pytest.CaptureFixture[str]) -> None:
    # Its docstrings feed the API page, where mkdocstrings would show a role as literal text.
    assert sphinx_roles.main([str(ROOT / "trajschema")]) == 0, capsys.readouterr().out


def test_what_cannot_be_imported_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _tree(tmp_path)

    def missing() -> Resolver:
        raise ModuleNotFoundError("No module named 'hypothesis'", name="hypothesis")

    monkeypatch.setattr(Resolver, "from_api_page", staticmethod(missing))
    assert sphinx_roles.main(["--fix", str(tmp_path / "pkg")]) == 2
    assert "cannot import what the API page documents: No module named 'hypothesis'" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in files} == files
