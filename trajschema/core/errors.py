"""The error families: a bad schema, bad data (with every violation), and a bundle that cannot be read."""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from trajschema.core.types import ViolationCode

__all__ = [
    "BundleError",
    "BundleIntegrityError",
    "BundleVersionError",
    "LayoutDefinitionError",
    "SchemaDefinitionError",
    "SchemaError",
    "SchemaMatchError",
    "SchemaNotFoundError",
    "SchemaProblem",
    "Violation",
    "closest",
    "did_you_mean",
]

# Long reports are capped so that a batch with thousands of bad samples still prints
# a readable error; `.violations` always keeps all of them.
_MAX_ROWS = 40


@dataclasses.dataclass(frozen=True)
class Violation:
    """One way a sample (or its tag dict) breaks a schema.

    Holds only strings and ints, never tensors, so it pickles cheaply across Ray and
    process boundaries.

    Attributes:
        sample: index of the sample in a batch; ``None`` for a single sample.
        field: the field (or tag) at fault.
        code: stable machine-readable reason: ``missing``, ``kind``, ``dtype``, ``rank``,
            ``shape``, ``dim_mismatch``, ``dim_range``, ``value``, ``repeated`` (a value
            repeated along the last axis of a field that declares ``distinct``), ``tag``,
            ``extra``, ``batch`` (the batch as a whole, e.g. tag dicts of the wrong length),
            ``key`` (a TransferQueue key that repeats or already exists),
            ``padding`` (a break of the is_padding contract) or ``transport`` (a
            field or tag value TransferQueue cannot send and read back, e.g. a
            ``meta`` tensor or an object pickle refuses); in a dense padded batch,
            ``mask`` (a size mask of the wrong dtype, with values other than 0/1, not one
            contiguous run, padded on the wrong side, disagreeing with another mask, or a
            0/1 field with ones outside its region), ``padded`` (a value other than the
            layout's pad value in a padded region) or ``length`` (a padded length other
            than the layout's, e.g. not the batch maximum); in a packed batch, ``offsets``
            (``cu_seqlens`` missing a sample, decreasing, not ending at the run, an empty
            segment, padded and real offsets confused), ``alignment`` (a padded segment not a
            multiple of the layout's alignment), ``positions`` (positions not restarting at
            a sequence) or ``boundary`` (a response-level value on a prompt token, rolled
            across a sequence boundary), and ``padded`` for its alignment padding.
        expected: what the schema asks for, as text.
        actual: what was found, as text (shapes and dtypes, never tensor contents).
        message: one line naming where, what was expected and what was found.
    """

    sample: int | None
    field: str
    code: ViolationCode
    expected: str
    actual: str
    message: str

    def __post_init__(self) -> None:
        # A report must render whatever a sample held: a field named by an int, say.
        for name in ("field", "expected", "actual", "message"):
            value = getattr(self, name)
            if not isinstance(value, str):
                object.__setattr__(self, name, repr(value))

    def __str__(self) -> str:
        where = f"sample {self.sample}, " if self.sample is not None else ""
        return f"{where}{self.field}: {self.message}"


@dataclasses.dataclass(frozen=True)
class SchemaProblem:
    """One thing wrong in a schema (or layout) file, and where it is.

    Holds only strings and ints, so it pickles cheaply.

    Attributes:
        source: the file (or ``<mapping>``) the problem is in.
        path: dotted key path inside it (``""`` for the whole file).
        problem: what is wrong.
        line: 1-based line of the key or value the problem is about, as editors count
            (``None`` where the file gives none: a mapping, a problem of the whole file).
        column: 1-based column on that line (``None`` with ``line``).
    """

    source: str
    path: str
    problem: str
    line: int | None = None
    column: int | None = None

    def where(self) -> str:
        """``file:line:col: key.path``, leaving out what is unknown."""
        at = f"{self.source}:{self.line}:{self.column}" if self.line is not None else self.source
        return f"{at}: {self.path}" if self.path else at

    def __str__(self) -> str:
        return f"{self.where()}: {self.problem}"


class SchemaDefinitionError(ValueError):
    """A schema file (or schema mapping) is malformed: every problem found, each with where it is.

    The message names the file, the line and column, the key path inside it and what is
    wrong, e.g. ``schemas/mine.yaml:8:55: fields.loss_mask.pad: unknown pad rule 'eso';
    did you mean 'eos'?``. A file with several problems lists them all, one a line, under
    a header with the count:

        3 problems in schemas/mine.yaml:
          schemas/mine.yaml:3:13: dims.prompt: unknown key 'mn'; did you mean 'min'?
          schemas/mine.yaml:8:33: fields.input_ids.dtype: unknown dtype 'int46'; ...
          schemas/mine.yaml:9:30: fields.uid.pad: unknown pad rule 'uuid'; ...

    Attributes:
        errors: every problem, a tuple of `SchemaProblem` records (file, key path,
            problem, line, column),
            in the order they were found (one, when loaded with ``errors="first"``).
        source: the file (or ``<mapping>``) of the first problem.
        path: its dotted key path (``""`` for the whole file).
        problem: what is wrong there.
        line, column: where the first problem is in the file (1-based; ``None`` if unknown).
    """

    __module__ = "trajschema"

    def __init__(
        self,
        source: str,
        path: str,
        problem: str,
        *,
        line: int | None = None,
        column: int | None = None,
        more: Sequence[SchemaProblem] = (),
    ) -> None:
        self.errors: tuple[SchemaProblem, ...] = (SchemaProblem(source, path, problem, line, column), *more)
        self.source = source
        self.path = path
        self.problem = problem
        self.line = line
        self.column = column
        super().__init__(_render_problems(self.errors))

    @classmethod
    def of(cls, errors: Sequence[SchemaProblem]) -> SchemaDefinitionError:
        """The error reporting ``errors`` (at least one), the first of them as its own attributes."""
        first, *more = errors
        return cls(first.source, first.path, first.problem, line=first.line, column=first.column, more=more)

    def __reduce__(self):  # keep it picklable despite the custom __init__
        return (_rebuild_definition_error, (type(self), self.errors))


def _rebuild_definition_error(cls: type[SchemaDefinitionError], errors: tuple[SchemaProblem, ...]):
    return cls.of(errors)


def _render_problems(errors: Sequence[SchemaProblem]) -> str:
    if len(errors) == 1:
        return str(errors[0])
    sources = list(dict.fromkeys(e.source for e in errors))
    where = sources[0] if len(sources) == 1 else f"{len(sources)} files"
    lines = [f"{len(errors)} problems in {where}:", *(f"  {e}" for e in errors[:_MAX_ROWS])]
    if len(errors) > _MAX_ROWS:
        lines.append(f"  ... and {len(errors) - _MAX_ROWS} more (see .errors)")
    return "\n".join(lines)


class LayoutDefinitionError(SchemaDefinitionError):
    """A layout file (or layout mapping) is malformed, or cannot hold a schema it is used with.

    A `SchemaDefinitionError`: the message names the file, the key path and the problem.
    """

    __module__ = "trajschema"


class SchemaNotFoundError(LookupError):
    """No schema with that name, path or architecture is known.

    The message lists the names that are known and a close match when there is one.
    """

    __module__ = "trajschema"


class SchemaError(ValueError):
    """Data breaks a schema; carries every violation, not only the first.

    Attributes:
        violations: all violations found, in sample then declaration order.
        bindings: for each sample index (``None`` for a single sample) the dim sizes the
            sample bound, e.g. ``{3: {"prompt": 5, "response": 4, "seq": 9}}``.
        schema_name: the schema checked against.
    """

    __module__ = "trajschema"

    def __init__(
        self,
        violations: Sequence[Violation],
        *,
        schema_name: str = "",
        bindings: Mapping[int | None, Mapping[str, int]] | None = None,
    ) -> None:
        self.violations = list(violations)
        self.schema_name = schema_name
        self.bindings = {k: dict(v) for k, v in (bindings or {}).items()}
        super().__init__(self._render())

    def __reduce__(self):
        return (
            _rebuild_schema_error,
            (self.violations, self.schema_name, self.bindings),
        )

    def _render(self) -> str:
        vs = self.violations
        samples = {v.sample for v in vs}
        where = f"schema {self.schema_name!r}" if self.schema_name else "schema"
        n_samples = sum(1 for s in samples if s is not None)
        in_what = f" in {n_samples} sample{'s' if n_samples != 1 else ''}" if n_samples else ""
        head = f"{len(vs)} violation{'s' if len(vs) != 1 else ''} of {where}{in_what}:"
        rows = [("sample", "field", "code", "expected", "actual")]
        for v in vs[:_MAX_ROWS]:
            rows.append(("-" if v.sample is None else str(v.sample), v.field, v.code, v.expected, v.actual))
        widths = [min(max(len(r[i]) for r in rows), 48) for i in range(4)]
        lines = [head]
        for r in rows:
            cells = [_clip(c, w).ljust(w) for c, w in zip(r[:4], widths, strict=True)]
            lines.append("  " + "  ".join(cells) + "  " + _clip(r[4], 64))
        if len(vs) > _MAX_ROWS:
            lines.append(f"  ... and {len(vs) - _MAX_ROWS} more (see .violations)")
        shown = list(dict.fromkeys(v.sample for v in vs[:_MAX_ROWS]))
        bound = [(s, self.bindings[s]) for s in shown if self.bindings.get(s)]
        if bound:
            lines.append("dims bound:")
            for s, b in bound[:8]:
                label = "sample" if s is None else f"sample {s}"
                lines.append(f"  {label}: " + ", ".join(f"{k}={n}" for k, n in b.items()))
            if len(bound) > 8:
                lines.append(f"  ... and {len(bound) - 8} more samples")
        lines.append("first problem: " + str(vs[0]) if vs else "")
        return "\n".join(lines).rstrip()


class SchemaMatchError(SchemaError, SchemaNotFoundError):
    """No schema, or more than one equally good schema, fits a sample.

    Raised by [`schema_for_sample`][trajschema.schema_for_sample].

    Both a [`SchemaError`][trajschema.SchemaError] (the data does not pick out one schema) and a
    [`SchemaNotFoundError`][trajschema.SchemaNotFoundError] (the lookup failed).

    Attributes:
        violations: when none fits, every violation of the closest candidate (the one
            with the fewest); empty for a tie.
        schema_name: the closest candidate (``""`` for a tie).
        tied: the names of the equally good schemas (empty when none fits).
    """

    __module__ = "trajschema"

    def __init__(
        self, message: str, violations: Sequence[Violation] = (), *, schema_name: str = "", tied: Sequence[str] = ()
    ) -> None:
        self.violations = list(violations)
        self.schema_name = schema_name
        self.bindings = {}
        self.tied = list(tied)
        self.message = message
        ValueError.__init__(self, message)

    def __reduce__(self):
        return (_rebuild_match_error, (self.message, self.violations, self.schema_name, self.tied))


def _rebuild_match_error(message, violations, schema_name, tied):
    return SchemaMatchError(message, violations, schema_name=schema_name, tied=tied)


def _rebuild_schema_error(violations, schema_name, bindings):
    return SchemaError(violations, schema_name=schema_name, bindings=bindings)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


# -- did you mean ---------------------------------------------------------------------------------


def closest(value: str, choices: Iterable[str]) -> str | None:
    """The choice ``value`` was likely meant to be, or ``None``: the one rule of every "did you mean".

    The same word but for case, ``-`` and ``_``; else the only choice it begins (argparse
    would have taken a prefix); else the only choice it is part of (``side`` for
    ``pad_side``, three letters at least); else the only choice it begins with (``string`` for
    ``str``); else the only choice two swapped neighbouring letters away (``eso`` for
    ``eos``); else the closest spelling (`difflib`'s ratio at least 0.75: ``--strict``
    is not taken for ``--trust``; no guess when two are as close).

    Examples:
        >>> closest("jsonschema", ["yaml", "json-schema"]), closest("plann", ["plan", "pad"])
        ('json-schema', 'plan')
        >>> closest("--dp_size", ["--dp-size"]), closest("zzz", ["plan"])
        ('--dp-size', None)
        >>> closest("string", ["int", "str"]), closest("eso", ["eos", "uid"])
        ('str', 'eos')
    """
    by_key: dict[str, str] = {}
    for choice in choices:
        by_key.setdefault(_spelling(choice), choice)
    key = _spelling(value)
    if key in by_key:
        return by_key[key]
    swaps = {key[:i] + key[i + 1] + key[i] + key[i + 2 :] for i in range(len(key) - 1)}
    part = (lambda k: key in k) if len(key) >= 3 else (lambda k: False)
    for fits in (lambda k: k.startswith(key), part, lambda k: key.startswith(k), swaps.__contains__):
        found = [c for k, c in by_key.items() if key and k and fits(k)]
        if len(found) == 1:
            return found[0]
    close = difflib.get_close_matches(key, list(by_key), n=2, cutoff=0.75)
    if len(close) == 2 and _ratio(key, close[0]) == _ratio(key, close[1]):
        return None  # two equally close: no guess
    return by_key[close[0]] if close else None


def _ratio(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, b, a).ratio()


def _spelling(word: str) -> str:
    # "--dp_size", "JSON-Schema" and "jsonschema" name the same thing; the leading dashes stay.
    dashes = len(word) - len(word.lstrip("-"))
    return word[:dashes] + re.sub(r"[-_\s]", "", word[dashes:].lower())


def did_you_mean(value: object, choices: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` when `closest` finds ``x`` for ``value``, else ``""``: the one wording."""
    guess = closest(str(value), choices)
    return f"; did you mean {guess!r}?" if guess is not None else ""


class BundleError(ValueError):
    """A recorded batch (a bundle) that cannot be written or read: a value no bundle holds
    (a meta tensor, a pickled object), a missing or malformed file, a path taken. The
    message names the path or the payload at fault."""


class BundleIntegrityError(BundleError):
    """A bundle's payload whose bytes are not the ones recorded (corrupted or edited): its
    SHA-256 differs from the manifest's, or it is missing or of another size.

    Attributes:
        payload: the payload's name (``tensors.safetensors``, ``batch.json``, ``schema``,
            ``layout``).
    """

    def __init__(self, message: str, payload: str) -> None:
        super().__init__(message)
        self.payload = payload


class BundleVersionError(BundleError):
    """A bundle written in a format version this trajschema does not read (a newer one).

    Attributes:
        found: the bundle's format version.
        supported: the newest this trajschema reads.
    """

    def __init__(self, message: str, found: Any, supported: int) -> None:
        super().__init__(message)
        self.found, self.supported = found, supported
