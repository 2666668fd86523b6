"""Layout files: the search path (``TRAJSCHEMA_LAYOUT_PATH``, then the packaged ``layouts/``),
the strict reader the schema files use, and the checks of each key with its key path."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trajschema.core import (
    ABSENT,
    ANY,
    DTYPE_NAMES,
    EDGE,
    FIXED,
    LEFT,
    MAX,
    PAD_TOKEN,
    RIGHT,
    Axis,
    Block,
    Field,
    FieldEntry,
    Layout,
    LayoutDefinitionError,
    PackedLayout,
    PadRule,
    SchemaDefinitionError,
    SchemaNotFoundError,
    did_you_mean,
    parse_expr,
    torch_dtype,
)
from trajschema.files.filetext import DIM_NAME, shown
from trajschema.files.layoutkeys import dim_list, known_keys, mapping, refuse, section, string
from trajschema.files.packed import packed_from_dict
from trajschema.files.paths import Found, readable, search_path_files, shown_name
from trajschema.files.problems import reporting
from trajschema.files.reader import NOTHING, check_tree, file_problem, read_yaml

__all__ = [
    "LAYOUT_ENV_VAR",
    "AnyLayout",
    "as_any_layout",
    "as_layout",
    "as_packed_layout",
    "layout_from_dict",
    "layout_names",
    "layout_search_path",
    "load_layout",
]

#: Environment variable: extra layout directories (``os.pathsep``-separated), searched first.
LAYOUT_ENV_VAR = "TRAJSCHEMA_LAYOUT_PATH"

#: A dense or a packed layout, as `load_layout` returns one.
AnyLayout = Layout | PackedLayout

_TOP_KEYS = ("name", "kind", "description", "axes", "sizes", "fields", "overrides", "tags", "adds", "shared")
_FIELD_KEYS = ("key", "pad", "dtype", "slice_of", "same_as", "gather", "broadcast")
_ADDED_KEYS = ("shape", "dtype", "values", "min", "max", "finite", "required", "description")
_BLOCK_KEYS = ("pad_side", "length", "holds")


def packaged_layouts() -> Path:
    package = Path(__file__).resolve().parent.parent  # trajschema/, above this room
    inside = package / "layouts"
    return inside if inside.is_dir() else package.parent / "layouts"


def layout_search_path() -> list[Path]:
    """The directories searched for layout names: ``TRAJSCHEMA_LAYOUT_PATH`` entries, then the packaged ones."""
    extra = [Path(p) for p in os.environ.get(LAYOUT_ENV_VAR, "").split(os.pathsep) if p.strip()]
    return [*extra, packaged_layouts()]


def layout_names() -> list[str]:
    """Names of all layouts on the layout search path, sorted.

    Examples:
        >>> ts.layout_names()
        ['skyrl', 'thd', 'trl_grpo', 'verl_dataproto', 'verl_nopad']
    """
    return sorted(search_path_files(layout_search_path(), quiet=True).files)


def load_layout(name_or_path: str | os.PathLike[str]) -> AnyLayout:
    """Load a packaged layout by name (``verl_dataproto``, ``skyrl``), or a layout file by path.

    Raises:
        SchemaNotFoundError: no such name or file.
        LayoutDefinitionError: the file is malformed, naming the file and key path.
        TypeError: ``name_or_path`` is neither a string nor a path.
    """
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"name_or_path must be a layout name or a path, found {type(name_or_path).__name__}")
    text = os.fspath(name_or_path)
    if not isinstance(text, str):
        raise TypeError("name_or_path must be a str path, found bytes")
    if isinstance(name_or_path, os.PathLike) or text.endswith((".yaml", ".yml")) or os.sep in text:
        path = Path(text)
        problem = file_problem(path)
        if problem == NOTHING:
            raise SchemaNotFoundError(f"no layout file at {shown_name(text, 1000)}")
        return _from_file(readable_layout(path, problem))
    hit = search_path_files(layout_search_path(), name=text, quiet=True).files.get(text)
    if hit is None:
        known = layout_names()
        hint = did_you_mean(text, known)
        raise SchemaNotFoundError(
            f"no layout {shown_name(text)}{hint} known: {', '.join(known) or '(none)'} "
            f"(searched {', '.join(map(str, layout_search_path()))}; add directories with {LAYOUT_ENV_VAR})"
        )
    layout = _from_file(readable(hit))
    if layout.name != text:
        refuse(
            str(hit.path),
            "name",
            f"this file is found as {text!r} (its file name) but declares name {shown_name(layout.name)}",
        )
    return layout


def readable_layout(path: Path, problem: str | None) -> Path:
    try:
        return readable(Found(path, problem))
    except SchemaDefinitionError as exc:
        raise LayoutDefinitionError.of(exc.errors) from None


#: path -> ((mtime_ns, size) it was read at, the layout): layouts are immutable, so a hit is
#: shared, and a file edited since is read again.
_LOADED: dict[Path, tuple[tuple[int, int], AnyLayout]] = {}


def _from_file(path: Path) -> AnyLayout:
    try:
        st = path.stat()
        stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = None
    hit = _LOADED.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    layout = _read_layout(path)
    if stamp is not None:
        _LOADED[path] = (stamp, layout)
    return layout


def _read_layout(path: Path) -> AnyLayout:
    with reporting():  # the problems of the file, with their lines and columns
        try:
            data = read_yaml(path)
        except LayoutDefinitionError:
            raise
        except SchemaDefinitionError as exc:  # the reader's own words, as a layout error
            raise LayoutDefinitionError.of(exc.errors) from None
        return layout_from_dict(data, source=str(path))


def layout_from_dict(data: Mapping[str, Any], *, source: str = "<mapping>") -> AnyLayout:
    """A layout from a mapping shaped like a layout file (``kind: packed`` gives a `PackedLayout`).

    Raises:
        LayoutDefinitionError: naming ``source`` and the key path.
    """
    if not isinstance(data, Mapping):
        refuse(source, "", f"expected a mapping at the top level (name:, axes:, sizes:, fields:), found {shown(data)}")
    try:
        check_tree(data, source)
    except LayoutDefinitionError:
        raise
    except SchemaDefinitionError as exc:
        raise LayoutDefinitionError.of(exc.errors) from None
    kind = data.get("kind", "dense")
    if kind == "packed":
        return packed_from_dict(data, source)
    if kind != "dense":
        refuse(
            source,
            "kind",
            f"expected dense (a padded rectangle; the default) or packed (one run of tokens), found {shown(kind)}",
        )
    known_keys(data, _TOP_KEYS, source, "")
    name = string(data.get("name"), source, "name", required=True)
    axes = _axes(section(data, "axes", source, required=True), source)
    sizes = {
        d: string(m, source, f"sizes.{d}", required=True)
        for d, m in section(data, "sizes", source, required=True).items()
    }
    for d in sizes:
        if not any(
            d == a or d in b.holds or d in (x.dim for x in ax.blocks) for a, ax in axes.items() for b in ax.blocks
        ):
            refuse(source, f"sizes.{d}", f"no axis holds dim {d!r} (axes: {', '.join(axes)})")
    fields = {n: _field(v, source, f"fields.{n}") for n, v in section(data, "fields", source).items()}
    overrides = {
        fam: {
            n: _field(v, source, f"overrides.{fam}.{n}")
            for n, v in mapping(section, source, f"overrides.{fam}").items()
        }
        for fam, section in section(data, "overrides", source).items()
    }
    tags = {t: string(k, source, f"tags.{t}", required=True) for t, k in section(data, "tags", source).items()}
    adds = {n: _added(n, v, source, f"adds.{n}") for n, v in section(data, "adds", source).items()}
    return Layout(
        name=name,
        description=string(data.get("description", ""), source, "description"),
        axes=axes,
        sizes=sizes,
        fields=fields,
        overrides=overrides,
        tags=tags,
        source=source,
        adds=adds,
        shared=_shared(data.get("shared", []), source),
    )


def _shared(v: Any, source: str) -> tuple[str, ...]:
    if not isinstance(v, (list, tuple)) or not all(isinstance(k, str) and k for k in v):
        refuse(source, "shared", f"expected a list of batch keys, found {shown(v)}")
    return tuple(v)


def _added(name: str, v: Any, source: str, path: str) -> Field:
    """A field the trainer adds (``adds.<name>``): a tensor over the schema's dims, declared
    with the keys of a schema file's tensor field (its dims are checked when the layout
    meets a schema: `trajschema.dense.bind_layout`)."""
    if not DIM_NAME.fullmatch(name):
        refuse(source, path, f"field name {name!r} is not an identifier", key=True)
    v = mapping(v, source, path)
    known_keys(v, _ADDED_KEYS, source, path)
    shape = v.get("shape")
    if not isinstance(shape, (list, tuple)) or not all(
        (isinstance(d, str) and DIM_NAME.fullmatch(d)) or (isinstance(d, int) and not isinstance(d, bool) and d >= 0)
        for d in shape
    ):
        refuse(
            source,
            f"{path}.shape",
            f"expected a list of dim names or sizes ([] for one value a row), found {shown(shape)}",
        )
    raw = v.get("dtype")
    names = [raw] if isinstance(raw, str) else raw
    if not isinstance(names, (list, tuple)) or not names or not all(n in DTYPE_NAMES for n in names):
        refuse(
            source,
            f"{path}.dtype",
            f"expected a dtype name or a list of them (float32, int64, ...), found {shown(raw)}",
        )
    values = v.get("values")
    if values is not None and (not isinstance(values, list) or not all(_number(x) for x in values)):
        refuse(source, f"{path}.values", f"expected a list of numbers, found {shown(values)}")
    for key in ("min", "max"):
        if key in v and not _number(v[key]):
            refuse(source, f"{path}.{key}", f"expected a number, found {shown(v[key])}")
    for key in ("finite", "required"):
        if key in v and not isinstance(v[key], bool):
            refuse(source, f"{path}.{key}", f"expected true or false, found {shown(v[key])}")
    floating = any(n.startswith(("float", "bfloat")) for n in names)
    return Field(
        name=name,
        kind="tensor",
        shape=tuple(parse_expr(d) for d in shape),
        dtypes=tuple(names),
        required=v.get("required", True),
        pad=PadRule("fill", 0.0 if floating else 0),
        values=tuple(values) if values is not None else None,
        min=v.get("min"),
        max=v.get("max"),
        finite=v.get("finite", False),
        description=string(v.get("description", ""), source, f"{path}.description"),
    )


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _block(dim: str, v: Mapping[str, Any], source: str, path: str) -> Block:
    known_keys(v, _BLOCK_KEYS, source, path)
    side, length = v.get("pad_side"), v.get("length", MAX)
    if side not in (LEFT, RIGHT):
        refuse(source, f"{path}.pad_side", f"expected left or right (where the padding goes), found {shown(side)}")
    if length not in (MAX, FIXED):
        refuse(
            source,
            f"{path}.length",
            f"expected max (the longest sample) or fixed (a configured length), found {shown(length)}",
        )
    holds = dim_list(v["holds"], source, f"{path}.holds") if "holds" in v else ()
    return Block(dim=dim, pad_side=side, length=length, holds=holds)


def _axes(section: Mapping[str, Any], source: str) -> dict[str, Axis]:
    blocks: dict[str, Block] = {}
    concats: dict[str, tuple[str, ...]] = {}
    for dim, v in section.items():
        path = f"axes.{dim}"
        if not DIM_NAME.fullmatch(dim):
            refuse(source, path, f"dim name {dim!r} is not an identifier")
        v = mapping(v, source, path)
        if "concat" in v:
            known_keys(v, ("concat",), source, path)
            concats[dim] = dim_list(v["concat"], source, f"{path}.concat")
        else:
            blocks[dim] = _block(dim, v, source, path)
    axes = {d: Axis(d, (b,)) for d, b in blocks.items()}
    for dim, parts in concats.items():
        for i, p in enumerate(parts):
            if p not in blocks:
                refuse(
                    source,
                    f"axes.{dim}.concat[{i}]",
                    f"{p!r} is not a padded block of this layout (blocks: {', '.join(blocks) or 'none'})",
                )
        axes[dim] = Axis(dim, tuple(blocks[p] for p in parts))
    return axes


def _field(v: Any, source: str, path: str) -> FieldEntry:
    if v == ABSENT:
        return FieldEntry(held="absent")
    v = mapping(v, source, path)
    known_keys(v, _FIELD_KEYS, source, path)
    forms = [k for k in ("slice_of", "same_as", "gather") if k in v]
    if len(forms) > 1 or (forms and "key" in v):
        refuse(
            source,
            path,
            "a field is a column (key), a slice_of, a same_as or a gather, "
            f"not {' and '.join(forms + ['key'] * ('key' in v))}",
        )
    pad = v.get("pad", ANY)
    broadcast = v.get("broadcast", False)
    if not isinstance(broadcast, bool):
        refuse(source, f"{path}.broadcast", f"expected true or false, found {shown(broadcast)}")
    if (
        isinstance(pad, bool)
        or not isinstance(pad, (int, float, str))
        or (isinstance(pad, str) and pad not in (PAD_TOKEN, EDGE, ANY))
    ):
        refuse(source, f"{path}.pad", f"expected a number, pad_token, edge or any, found {shown(pad)}")
    dtype = None
    if "dtype" in v:
        dtype = torch_dtype(v["dtype"]) if v["dtype"] in DTYPE_NAMES else None
        if dtype is None:
            refuse(source, f"{path}.dtype", f"expected a dtype name (float32, int64, ...), found {shown(v['dtype'])}")
    if "gather" in v:
        cols = v["gather"]
        if not isinstance(cols, (list, tuple)) or not cols or not all(isinstance(c, str) and c for c in cols):
            refuse(source, f"{path}.gather", f"expected a list of batch keys, found {shown(cols)}")
        return FieldEntry(held="gather", gather=tuple(cols), pad=pad, dtype=dtype)
    if forms:
        return FieldEntry(
            held="slice" if forms[0] == "slice_of" else "same_as",
            source=string(v[forms[0]], source, f"{path}.{forms[0]}", required=True),
            pad=pad,
            dtype=dtype,
        )
    key = string(v["key"], source, f"{path}.key", required=True) if "key" in v else None
    return FieldEntry(held="column", key=key, pad=pad, dtype=dtype, broadcast=broadcast)


def as_any_layout(layout: Any, *, argument: str = "layout=") -> AnyLayout:
    """A dense `Layout` or a `PackedLayout` as it is, or a layout name or path loaded with
    [`load_layout`][trajschema.load_layout].

    Raises:
        TypeError: ``layout`` is neither a layout, a name nor a path.
        SchemaNotFoundError / LayoutDefinitionError: as ``load_layout`` raises them.
    """
    if isinstance(layout, (Layout, PackedLayout)):
        return layout
    if isinstance(layout, (str, os.PathLike)):
        return load_layout(layout)
    raise TypeError(
        f"{argument} must be a Layout, a PackedLayout or a layout name (verl_dataproto, skyrl, thd, verl_nopad), "
        f"found {type(layout).__name__}"
    )


def as_layout(layout: Any, *, argument: str = "layout=") -> Layout:
    """A dense `Layout` as it is, or a dense layout's name or path loaded with [`load_layout`][trajschema.load_layout].

    Raises:
        TypeError: ``layout`` is neither a Layout, a name nor a path.
        ValueError: it names a packed layout (the dense functions cannot lay a batch out in it).
        SchemaNotFoundError / LayoutDefinitionError: as ``load_layout`` raises them.
    """
    found = as_any_layout(layout, argument=argument)
    if isinstance(found, PackedLayout):
        raise ValueError(
            f"{argument} {found.name!r} is a packed layout (one run of tokens), not a dense padded batch: "
            "use to_packed / from_packed / packed_padding with it"
        )
    return found


def as_packed_layout(layout: Any, *, argument: str = "layout=") -> PackedLayout:
    """A `PackedLayout` as it is, or a packed layout's name or path.

    Raises:
        TypeError: ``layout`` is neither a PackedLayout, a name nor a path.
        ValueError: it names a dense layout.
        SchemaNotFoundError / LayoutDefinitionError: as ``load_layout`` raises them.
    """
    found = as_any_layout(layout, argument=argument)
    if not isinstance(found, PackedLayout):
        raise ValueError(
            f"{argument} {found.name!r} is a dense layout (a padded rectangle), not a packed one: "
            "use to_dense / from_dense / dense_padding with it"
        )
    return found
