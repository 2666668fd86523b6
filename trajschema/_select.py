"""Choosing the schema a sample follows, from the sample itself."""

from __future__ import annotations

from typing import Any

from ._columns import as_mapping
from ._errors import SchemaNotFoundError
from ._loading import load_schema, schema_names
from ._schema import Schema

__all__ = ["schema_for_sample"]


def schema_for_sample(sample: Any, *, candidates: str | list[str] | None = None) -> Schema:
    """The schema on the search path that fits ``sample`` best.

    A schema fits when the sample passes it at ``depth="shapes"``. Of those, the one that
    declares the most of the sample's fields wins (so ``vlm_mrope_moe`` beats ``vlm_mrope``
    for a sample with ``routed_experts``, and its padding never copies an undeclared
    ``routed_experts`` at a stale length); a tie goes to the most derived schema (the
    longer ``extends`` lineage), then to the name.

    Examples:
        >>> from trajschema.testing import verl_sample
        >>> moe = verl_sample(ts.load_schema("vlm_mrope_moe"), 5, 3, layers=2, topk=2)
        >>> ts.schema_for_sample(moe).name
        'vlm_mrope_moe'

    Args:
        sample: one sample (a mapping, or a TensorDict row).
        candidates: schema names (or one name) to choose from (default: every name on the search path).

    Raises:
        SchemaNotFoundError: no candidate fits; the message gives each one's first problem.
        TypeError: ``sample`` is not a mapping.
    """
    mapping = as_mapping(sample)
    present = {k for k, v in mapping.items() if v is not None}
    fits: list[tuple[int, int, str, Schema]] = []
    misfits: list[str] = []
    names = schema_names() if candidates is None else [candidates] if isinstance(candidates, str) else candidates
    for name in names:
        schema = load_schema(name)
        found = schema.violations(mapping, depth="shapes")
        if found:
            misfits.append(f"{name}: {found[0]}")
            continue
        declared = len(present & set(schema.fields))
        fits.append((-declared, -len(schema.lineage), name, schema))
    if not fits:
        raise SchemaNotFoundError(
            "no schema fits the sample; " + "; ".join(misfits) if misfits else "no schema to choose from"
        )
    return min(fits, key=lambda f: f[:3])[3]
