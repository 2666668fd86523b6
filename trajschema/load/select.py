"""Choosing the schema a sample follows, from the sample itself."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any, NamedTuple

import torch

from trajschema.check import as_mapping
from trajschema.core import SchemaDefinitionError, SchemaMatchError, Violation
from trajschema.load.search import load_found, load_schema, schema_search_path, search_path_files
from trajschema.schema import Schema

__all__ = ["SchemaChoice", "choose_schema", "schema_for_sample"]

_MAX_LISTED = 10
_NONE = object()


def schema_for_sample(
    sample: Any, tag: Mapping[str, Any] | None = None, *, candidates: str | list[str] | None = None
) -> Schema:
    """The schema on the search path that fits ``sample`` (and its ``tag``) best.

    A schema fits when the sample (with ``tag``) passes it at ``depth="shapes"`` and it
    declares every tensor field of the sample: a schema that leaves a tensor undeclared
    would pad it by copying the real sample's tensor at the real sample's length. Of the
    schemas that fit, the one declaring the most of the sample's fields wins (so
    ``vlm_mrope_moe`` beats ``vlm_mrope`` for a sample with ``routed_experts``); a tie
    goes to the most derived schema (the longer ``extends`` lineage). Schemas still
    tied are an error: say which one you mean with ``candidates=``.

    Examples:
        >>> from trajschema.testing import verl_sample
        >>> moe = verl_sample(ts.load_schema("vlm_mrope_moe"), 5, 3, layers=2, topk=2)
        >>> ts.schema_for_sample(moe).name
        'vlm_mrope_moe'

    Args:
        sample: one sample (a mapping, or a TensorDict row).
        tag: the sample's tag dict, checked against each schema's tags too.
        candidates: schema names or paths to choose from (one, or a list, tuple or set of
            them; default: every name on the search path).

    Raises:
        SchemaMatchError: (a `SchemaError` and a `SchemaNotFoundError`) no candidate fits,
            with the closest candidate's violations; or the best candidates tie, naming them.
        SchemaNotFoundError: a name in ``candidates`` is not known.
        SchemaDefinitionError: a candidate's file cannot be read or does not load (or, found
            by name, declares another name), naming the file. Without ``candidates=`` every
            file on the search path is a candidate, so one broken file there, or a search
            path entry that cannot be listed, fails the choice: the schema it would have
            declared might be the one that fits, and choosing without it could pad
            differently.
        TypeError: ``sample`` is not a mapping, or ``candidates`` is neither a name nor a
            list of names.
    """
    return choose_schema(sample, tag, candidates=candidates).schema


class SchemaChoice(NamedTuple):
    """The schema `choose_schema` chose, and what it left out."""

    schema: Schema
    #: Why each search path file (or entry) left out did not load (``skip_unloadable=True`` only).
    skipped: list[SchemaDefinitionError]


def choose_schema(
    sample: Any,
    tag: Mapping[str, Any] | None = None,
    *,
    candidates: str | list[str] | None = None,
    skip_unloadable: bool = False,
) -> SchemaChoice:
    """`schema_for_sample`, which may leave out the search path files that do not load.

    With ``skip_unloadable=True`` and no ``candidates=``, a file on the search path that
    cannot be read or does not load (and an entry that cannot be listed) is left out of
    the choice instead of failing it; the choice says which, so the caller can tell the
    user (``trajschema check --schema auto`` does, on stderr). When nothing fits, the
    error names them too, as one of them might have. When every candidate was left out
    the first one's error is raised: there is nothing to choose from. Named
    ``candidates`` are never left out.
    """
    mapping = as_mapping(sample)
    present = {k for k, v in mapping.items() if v is not None}
    tensors = {k for k in present if isinstance(mapping[k], torch.Tensor)}
    schemas, skipped = _candidates(candidates, skip_unloadable)
    fits: list[tuple[int, int, Schema]] = []
    misfits: list[tuple[list[Violation], Schema]] = []
    for schema in schemas:
        found = schema.violations(mapping, tag=tag, depth="shapes")
        found += _undeclared_tensors(schema, tensors)
        if found:
            misfits.append((found, schema))
        else:
            fits.append((len(present & set(schema.fields)), len(schema.lineage), schema))
    if not fits:
        raise _no_fit(misfits, skipped)
    best = max(f[:2] for f in fits)
    tied = sorted(f[2].name for f in fits if f[:2] == best)
    if len(tied) > 1:
        raise SchemaMatchError(
            f"schemas {tied} fit the sample equally well (each declares {best[0]} of its fields and has an "
            f"extends lineage of {best[1]}); pass candidates= to choose one",
            tied=tied,
        )
    return SchemaChoice(next(f[2] for f in fits if f[:2] == best), skipped)


#: What a broken search path file adds to its error when it fails a choice among every schema there.
_EVERY = "; schema_for_sample tries every schema on the search path: fix the {}, or pass candidates="


def _candidates(candidates: Any, skip: bool) -> tuple[list[Schema], list[SchemaDefinitionError]]:
    """The candidate schemas, each once (a name and its file's path are one schema), and those left out."""
    if candidates is None:
        return _search_path_candidates(skip)
    if isinstance(candidates, (str, os.PathLike)):
        names: list[Any] = [candidates]
    elif isinstance(candidates, (list, tuple, set, frozenset)):  # the choice does not depend on their order
        names = list(candidates)
        bad = next((n for n in names if not isinstance(n, (str, os.PathLike))), _NONE)
        if bad is not _NONE:
            raise TypeError(f"candidates must be schema names or paths, found a {type(bad).__name__} among them")
    else:
        raise TypeError(f"candidates must be a schema name or a list of them, found {type(candidates).__name__}")
    schemas: dict[str, Schema] = {}
    for name in names:
        schema = load_schema(name)
        schemas.setdefault(schema.source, schema)
    return list(schemas.values()), []


def _search_path_candidates(skip: bool) -> tuple[list[Schema], list[SchemaDefinitionError]]:
    """Every schema on the search path; one that does not load fails the choice, or is left out with ``skip``."""
    search = search_path_files(schema_search_path())
    skipped = [SchemaDefinitionError(str(d), "", why) for d, why in search.unlisted]
    if skipped and not skip:
        raise _noted(skipped[0], "entry")
    schemas: dict[str, Schema] = {}
    for name, hit in sorted(search.files.items()):
        try:
            schema = load_found(name, hit)
        except SchemaDefinitionError as exc:
            if not skip:  # choosing without it could pick a schema that pads differently from the one meant
                raise _noted(exc, "file") from None
            skipped.append(exc)
            continue
        schemas.setdefault(schema.source, schema)
    if not schemas and skipped:  # nothing loads: there is no choice to make
        raise _noted_first(skipped[0], "; no schema on the search path loads")
    return list(schemas.values()), skipped


def _noted(exc: SchemaDefinitionError, what: str) -> SchemaDefinitionError:
    return _noted_first(exc, _EVERY.format(what))


def _noted_first(exc: SchemaDefinitionError, note: str) -> SchemaDefinitionError:
    """``exc`` with ``note`` added to its first problem (its place and the others kept)."""
    first, *more = exc.errors
    return SchemaDefinitionError.of([dataclasses.replace(first, problem=first.problem + note), *more])


def _undeclared_tensors(schema: Schema, tensors: set[str]) -> list[Violation]:
    return [
        Violation(
            None,
            name,
            "extra",
            "a field the schema declares",
            "an undeclared tensor field",
            f"tensor field {name!r} is not declared by schema {schema.name!r} (its padding would copy it stale)",
        )
        for name in sorted(tensors - set(schema.fields))
    ]


def _no_fit(misfits: list[tuple[list[Violation], Schema]], skipped: list[SchemaDefinitionError]) -> SchemaMatchError:
    if not misfits:
        return SchemaMatchError("no schema to choose from: the candidate list is empty")
    found, closest = min(misfits, key=lambda m: (len(m[0]), m[1].name))
    others = ", ".join(f"{s.name} ({len(v)})" for v, s in sorted(misfits, key=lambda m: m[1].name) if s is not closest)
    lines = [str(v) for v in found[:_MAX_LISTED]]
    more = f"; ... {len(found) - _MAX_LISTED} more" if len(found) > _MAX_LISTED else ""
    left_out = f" (left out, as they do not load: {', '.join(e.source for e in skipped)})" if skipped else ""
    return SchemaMatchError(
        f"no schema fits the sample; the closest is {closest.name!r} with {len(found)} violation"
        f"{'s' if len(found) != 1 else ''}: "
        + "; ".join(lines)
        + more
        + (f" (others: {others})" if others else "")
        + left_out,
        found,
        schema_name=closest.name,
    )
