"""A model's config (a Hugging Face ``config.json``) and the dims a schema reads from it (``from_config:``).

A config is read once into a `ModelConfig`: from a mapping, from a
``transformers.PretrainedConfig`` (by its ``to_dict()``; transformers is never imported
here), or from a path to a ``config.json`` or to a model directory holding one. Only local
files are read: a hub id is not a path, and nothing is downloaded.

The rules for a free dim's ``from_config:`` alternatives (see ``docs/schema-language.md``):

* they are tried in order; the first whose keys are all present gives the size;
* every alternative that is a plain key and is present must agree with the others (a
  config that says one thing in two keys is an error naming both);
* a key is looked up at the top level and in ``text_config`` (the Hugging Face multimodal
  convention), which must agree where both hold it; ``null`` counts as absent;
* a dim none of whose alternatives is complete is an error naming them: the config was
  passed to pin the schema, and a dim left free would be guessed from data later.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from trajschema.core import MAX_SIZE, Expr, FreeDim, is_int
from trajschema.files import IS_A_DIRECTORY, NOTHING, file_problem, os_problem, shown
from trajschema.schema import Schema

__all__ = ["ModelConfig", "ModelConfigError", "config_sizes", "pin_config_dims", "read_model_config"]

#: The file a model directory keeps its config in.
CONFIG_FILE = "config.json"
#: A real config.json is a few KiB (one with a large label map a few hundred); past this it is not a config.
MAX_CONFIG_BYTES = 16 << 20
#: The sub-config that multimodal Hugging Face configs keep the language model's keys in.
TEXT_CONFIG = "text_config"


class ModelConfigError(ValueError):
    """A model config cannot be read, or does not give what a schema reads from it.

    The message names the config (its file, or ``<mapping>``), the key at fault and the
    problem, e.g. ``model/config.json: num_experts: expected an integer >= 0, found a
    string '128'``.

    Attributes:
        source: the config file, ``<mapping>``, or ``<ConfigClass>`` for a ``PretrainedConfig``.
        key: the key (``text_config.num_experts``), ``""`` for the config as a whole.
        problem: what is wrong.
    """

    __module__ = "trajschema"

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        super().__init__(f"{source}: {key}: {problem}" if key else f"{source}: {problem}")

    def __reduce__(self):  # picklable despite the custom __init__
        return (type(self), (self.source, self.key, self.problem))


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """A model config as read: its top-level keys, its ``text_config`` keys, and where it came from."""

    source: str
    top: Mapping[str, Any]
    text: Mapping[str, Any] | None

    def value(self, key: str) -> tuple[Any, str] | None:
        """``(value, where)`` of ``key`` (``where`` is ``key`` or ``text_config.key``); ``None`` when absent.

        Raises:
            ModelConfigError: the top level and ``text_config`` hold different values.
        """
        top = self.top.get(key)
        sub = self.text.get(key) if self.text is not None else None
        if top is not None and sub is not None and not _same(top, sub):
            raise ModelConfigError(
                self.source,
                key,
                f"{key} is {shown(top)} but {TEXT_CONFIG}.{key} is {shown(sub)}; the config says two things",
            )
        if top is not None:
            return top, key
        return (sub, f"{TEXT_CONFIG}.{key}") if sub is not None else None

    def size(self, key: str) -> tuple[int, str] | None:
        """``key``'s value as a size (an int >= 0), and where it was found; ``None`` when absent."""
        found = self.value(key)
        if found is None:
            return None
        v, where = found
        if not is_int(v) or not 0 <= int(v) <= MAX_SIZE:
            raise ModelConfigError(self.source, where, f"expected an integer >= 0 (a size), found {shown(v)}")
        return int(v), where


def _same(a: Any, b: Any) -> bool:
    # 8 and 8.0 are two things to a reader of sizes; True and 1 too.
    return type(a) is type(b) and a == b


# -- reading ------------------------------------------------------------------------------


def read_model_config(config: Any) -> ModelConfig:
    """``config`` as a `ModelConfig`: a mapping, an object with ``to_dict()``, a path to a file or directory.

    Raises:
        ModelConfigError: the file cannot be read, is not JSON, is not an object; the
            directory holds no ``config.json``; ``to_dict()`` fails or gives no mapping;
            ``text_config`` is neither a mapping nor null.
        TypeError: ``config`` is none of these.
    """
    if isinstance(config, ModelConfig):
        return config
    if isinstance(config, (str, os.PathLike)):
        path = _config_path(config)
        return _split(_parse(_read_bytes(path), str(path)), str(path))
    if isinstance(config, Mapping):
        return _split(_plain(config, "<mapping>"), "<mapping>")
    to_dict = getattr(type(config), "to_dict", None)
    if callable(to_dict):  # transformers.PretrainedConfig, by duck type
        source = f"<{type(config).__name__}>"
        try:
            data = config.to_dict()
        except Exception as exc:  # the object's own method failed: say so, not its traceback's last line
            raise ModelConfigError(source, "", f"to_dict() failed: {type(exc).__name__}: {exc}") from exc
        if not isinstance(data, Mapping):
            raise ModelConfigError(source, "", f"to_dict() must return a mapping, found {shown(data)}")
        return _split(_plain(data, source), source)
    raise TypeError(
        "config must be a mapping, a transformers.PretrainedConfig, or a path to a config.json or a model "
        f"directory, found {type(config).__name__}"
    )


def _plain(data: Mapping[Any, Any], source: str) -> dict[str, Any]:
    """A plain dict of ``data``'s str keys (a mapping whose iteration fails is refused, not half read)."""
    try:
        return {k: v for k, v in data.items() if isinstance(k, str)}
    except Exception as exc:
        raise ModelConfigError(source, "", f"cannot be read as a mapping: {type(exc).__name__}: {exc}") from exc


def _split(top: dict[str, Any], source: str) -> ModelConfig:
    text = top.get(TEXT_CONFIG)
    if text is None:
        return ModelConfig(source, top, None)
    if not isinstance(text, Mapping) and callable(getattr(type(text), "to_dict", None)):
        try:  # a composite PretrainedConfig handed over as a mapping of its attributes
            text = text.to_dict()
        except Exception as exc:
            raise ModelConfigError(source, TEXT_CONFIG, f"to_dict() failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(text, Mapping):
        raise ModelConfigError(
            source, TEXT_CONFIG, f"expected a mapping (the language model's keys), found {shown(text)}"
        )
    return ModelConfig(source, top, _plain(text, source))


def _config_path(config: str | os.PathLike[str]) -> Path:
    """The ``config.json`` that ``config`` names: the file itself, or the one in the directory."""
    try:
        text = os.fspath(config)
    except Exception as exc:  # a PathLike whose __fspath__ fails
        raise TypeError(f"config: its __fspath__ failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(text, str):
        raise TypeError(f"config must be a str path, found a {type(text).__name__} path")
    path = Path(text)
    problem = file_problem(path)
    if problem == IS_A_DIRECTORY:
        inside = path / CONFIG_FILE
        if file_problem(inside) == NOTHING:
            raise ModelConfigError(
                _cut(str(path)), "", f"the directory holds no {CONFIG_FILE} (is it a model directory?)"
            )
        return inside
    if problem == NOTHING:
        raise ModelConfigError(
            _cut(text), "", "nothing is there (only local files are read: download a hub model's config.json first)"
        )
    return path


def _cut(text: str, limit: int = 1000) -> str:
    return text if len(text) <= limit else f"{text[:limit]}…({len(text)} chars)"


def _read_bytes(path: Path) -> bytes:
    """The bytes of ``path``, opened without blocking and checked on the open file (no FIFO, no device)."""
    source = _cut(str(path))
    problem = file_problem(path)
    if problem is not None:
        raise ModelConfigError(source, "", problem.replace("schema file", "config file"))
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:  # replaced since file_problem looked
        raise ModelConfigError(source, "", os_problem(exc, path)) from None
    try:
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # a FIFO put in its place since
                raise ModelConfigError(source, "", "is not a regular file")
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:  # EIO, a file that vanished under a network mount
        raise ModelConfigError(source, "", os_problem(exc, path)) from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ModelConfigError(source, "", f"larger than {MAX_CONFIG_BYTES >> 20} MiB; a config.json is a few KiB")
    return raw


def _parse(raw: bytes, source: str) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ModelConfigError(
            source, "", f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start}"
        ) from None
    try:
        data = json.loads(text, object_pairs_hook=_no_repeats)
    except json.JSONDecodeError as exc:
        raise ModelConfigError(source, f"line {exc.lineno}, column {exc.colno}", f"not JSON: {exc.msg}") from None
    except _Repeated as exc:
        raise ModelConfigError(
            source, exc.key, f"{exc.key!r} is given twice in one object; JSON readers keep the last"
        ) from None
    except RecursionError:
        raise ModelConfigError(source, "", "nested too deeply to be a config") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise ModelConfigError(source, "", f"not JSON a config holds: {exc}") from None
    if not isinstance(data, dict):
        raise ModelConfigError(source, "", f"expected a JSON object of config keys, found {shown(data)}")
    return data


class _Repeated(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _Repeated(k)
        out[k] = v
    return out


# -- the dims a schema reads ------------------------------------------------------------


def config_sizes(schema: Schema, config: ModelConfig) -> dict[str, tuple[int, str]]:
    """``{dim: (size, source)}`` for every free dim of ``schema`` that declares ``from_config:``.

    ``source`` says which alternative gave the size: ``"config: num_experts"``.

    Raises:
        ModelConfigError: a key holds no size, two keys (or a key and its ``text_config``
            twin) disagree, no alternative is complete, or the size is one the dim does not
            allow; the message names the keys, their values and the dim.
    """
    out: dict[str, tuple[int, str]] = {}
    for d in schema.dims.values():
        if isinstance(d, FreeDim) and d.from_config:
            out[d.name] = _dim_size(schema, d, config)
    return out


def _dim_size(schema: Schema, d: FreeDim, config: ModelConfig) -> tuple[int, str]:
    found: list[tuple[Expr, dict[str, tuple[int, str]]]] = []
    for alt in d.from_config:
        sizes = {k: s for k in alt.names() if (s := config.size(k)) is not None}
        found.append((alt, sizes))
    _plain_keys_agree(d, found, config)
    for alt, sizes in found:
        if len(sizes) == len(alt.names()):
            return _evaluated(schema, d, alt, sizes, config), f"config: {alt}"
    raise ModelConfigError(config.source, _alternatives(d.from_config), _lacking(schema, d, found))


def _plain_keys_agree(d: FreeDim, found: Sequence[tuple[Expr, dict[str, tuple[int, str]]]], cfg: ModelConfig) -> None:
    plain = [sizes[alt.args[0]] for alt, sizes in found if alt.is_name and sizes]
    for size, where in plain[1:]:
        if size != plain[0][0]:
            first_size, first = plain[0]
            raise ModelConfigError(
                cfg.source,
                f"{first}, {where}",
                f"{first} is {first_size} but {where} is {size}: the config says two things about dim {d.name} "
                f"(from_config: {_alternatives(d.from_config)})",
            )


def _evaluated(schema: Schema, d: FreeDim, alt: Expr, sizes: Mapping[str, tuple[int, str]], cfg: ModelConfig) -> int:
    value = alt.evaluate({k: s for k, (s, _) in sizes.items()})
    keys = ", ".join(f"{where} = {s}" for s, where in sizes.values())
    given = f"{alt} is {value}" + (f" ({keys})" if not alt.is_name else "")
    if not 0 <= value <= MAX_SIZE:
        raise ModelConfigError(cfg.source, _keys_of(alt, sizes), f"{given} is not a size (for dim {d.name})")
    if not d.allows(value):
        raise ModelConfigError(
            cfg.source,
            _keys_of(alt, sizes),
            f"{given}, but dim {d.name} of schema {schema.name!r} must be {d.describe()}",
        )
    return int(value)


def _keys_of(alt: Expr, sizes: Mapping[str, tuple[int, str]]) -> str:
    return ", ".join(where for _, where in sizes.values()) if sizes else str(alt)


def _alternatives(alts: Sequence[Expr]) -> str:
    return " | ".join(map(str, alts))


def _lacking(schema: Schema, d: FreeDim, found: Sequence[tuple[Expr, dict[str, tuple[int, str]]]]) -> str:
    parts = []
    for alt, sizes in found:
        missing = [k for k in alt.names() if k not in sizes]
        parts.append(str(alt) if alt.is_name else f"{alt} (lacks {', '.join(missing)})")
    return (
        f"the config gives no {' or '.join(parts)} (at its top level or in {TEXT_CONFIG}), which dim {d.name} of "
        f"schema {schema.name!r} is read from; if the model keeps it under another key, pin it yourself: "
        f"schema.with_dims({{{d.name!r}: SIZE}})"
    )


def pin_config_dims(schema: Schema, config: Any) -> Schema:
    """``schema`` with every dim it reads from the model config pinned (see `config_sizes`).

    ``config`` is anything `read_model_config` reads. A schema without ``from_config:`` dims
    comes back as it is.
    """
    cfg = read_model_config(config)
    sizes = config_sizes(schema, cfg)
    return schema.with_dims({n: s for n, (s, _) in sizes.items()}, sources={n: src for n, (_, src) in sizes.items()})


def config_architectures(config: ModelConfig) -> list[str]:
    """The config's ``architectures`` (the model classes it names), checked.

    Raises:
        ModelConfigError: the key is missing, null, empty, not a list, or holds a non-str.
    """
    archs = config.top.get("architectures")
    if archs is None:
        raise ModelConfigError(
            config.source,
            "architectures",
            'missing: it names the model class (["Qwen3MoeForCausalLM"]) that picks the schema; '
            "pass schema= to pin a schema of your choice",
        )
    if not isinstance(archs, list) or not archs:
        raise ModelConfigError(config.source, "architectures", f"expected a list of class names, found {shown(archs)}")
    for i, a in enumerate(archs):
        if not isinstance(a, str) or not a:
            raise ModelConfigError(config.source, f"architectures[{i}]", f"expected a class name, found {shown(a)}")
    return archs
