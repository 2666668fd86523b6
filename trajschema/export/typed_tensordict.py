"""A schema as a tensordict ``TypedTensorDict`` subclass: ``trajschema export NAME --format typed-tensordict``.

``TypedTensorDict`` (tensordict 0.12 and newer) is a ``TensorDictBase`` whose fields are
declared as class annotations, as a ``TypedDict``'s are: type checkers read them
(``batch.input_ids`` is a ``torch.Tensor``), and ``from_tensordict(td)`` wraps an
existing TensorDict without copying it, raising a ``TypeError`` that names every
required field it misses. That is all it checks at run time: not a dtype, shape, dim or
value (use the pandera export, or trajschema, for those).

The class declares the keys of a TensorDict of samples, or of a dense batch in a layout
(see `trajschema.export.columns`): a tensor field, and a number kind's ``(B,)`` column,
as ``torch.Tensor`` (its dtype and shape in a comment of the source), a ``str`` /
``mapping`` / ``any`` field as ``Any`` (a ``NonTensorStack``), an optional field as
``NotRequired[...]``. A key that is not a Python name (``a-b``, ``_x``, a keyword) cannot
be a field and is left out (the header says so); a field named like a ``TensorDictBase``
attribute (``names``, ``device``) is declared on ``TypedTensorDict["shadow"]``.
"""

from __future__ import annotations

import keyword
from typing import TYPE_CHECKING, Any

from trajschema.export.columns import TensorDictColumns, header_gaps, needs, python_name, tensordict_columns, wrapped
from trajschema.export.measured import measured_lines

if TYPE_CHECKING:
    from trajschema.check import Plan

__all__ = ["typed_tensordict_class", "typed_tensordict_source"]

#: The first tensordict with ``TypedTensorDict``.
TYPED_VERSION = (0, 12)
_WHAT = "the TypedTensorDict export (trajschema export --format typed-tensordict, Schema.to_typed_tensordict)"


def typed_tensordict_class(plan: Plan, bound: Any = None) -> type:
    """``schema`` as a ``TypedTensorDict`` subclass (what `typed_tensordict_source` writes, built).

    ``bound``: a dense layout fitted to the schema (`trajschema.dense.bind_layout`), or
    ``None`` for a TensorDict of samples.

    Examples:
        >>> TextBatch = ts.load_schema("text").to_typed_tensordict()  # doctest: +SKIP
        >>> sorted(TextBatch.__optional_keys__)  # doctest: +SKIP
        ['attention_mask', 'multi_modal_inputs', 'rm_scores', 'rollout_log_probs', 'session_id']

    Raises:
        ImportError: the installed tensordict has no ``TypedTensorDict`` (it came in 0.12).
    """
    needs("tensordict", TYPED_VERSION, _WHAT)
    import torch
    from tensordict import TypedTensorDict
    from typing_extensions import NotRequired

    fields = _Fields(tensordict_columns(plan, bound))
    annotations: dict[str, Any] = {}
    for attr, (tensor, required, _) in fields.declared.items():
        kind = torch.Tensor if tensor else Any
        annotations[attr] = kind if required else NotRequired[kind]
    base: Any = TypedTensorDict["shadow"] if fields.shadows else TypedTensorDict
    namespace = {"__annotations__": annotations, "__module__": __name__, "__doc__": fields.doc}
    return type(base)(fields.name, (base,), namespace)  # its metaclass collects the fields


def typed_tensordict_source(plan: Plan, bound: Any = None) -> str:
    """Python source of `typed_tensordict_class`'s class, headed by what it leaves to trajschema.

    Examples:
        >>> source = typed_tensordict_source(ts.load_schema("text").plan)
        >>> [line for line in source.splitlines() if line.startswith("    prompts")]
        ['    prompts: torch.Tensor  # int64 (B, prompt)']

    Raises:
        ImportError: the installed tensordict has no ``TypedTensorDict`` (it came in 0.12).
    """
    needs("tensordict", TYPED_VERSION, _WHAT)
    fields = _Fields(tensordict_columns(plan, bound))
    base = 'TypedTensorDict["shadow"]' if fields.shadows else "TypedTensorDict"
    lines = [*fields.header(), "from typing import Any", "", "import torch", "from tensordict import TypedTensorDict"]
    lines += ["from typing_extensions import NotRequired", "", "", f"class {fields.name}({base}):"]
    lines += [f'    """{fields.doc}"""', ""]
    for attr, (tensor, required, note) in fields.declared.items():
        kind = "torch.Tensor" if tensor else "Any"
        lines.append(f"    {attr}: {kind if required else f'NotRequired[{kind}]'}  # {note}")
    return "\n".join(lines) + "\n"


class _Fields:
    """The class's name, fields (attribute -> tensor?, required?, note) and what it leaves out."""

    def __init__(self, cols: TensorDictColumns) -> None:
        from tensordict import TensorDictBase, TypedTensorDict

        self.cols = cols
        words = python_name(cols.schema).split("_")
        self.name = "".join(w[:1].upper() + w[1:] for w in words) + "Batch"
        where = f"the {cols.layout} layout's dense batch" if cols.layout else "a TensorDict of samples"
        self.doc = (
            f"Schema {cols.schema!r} as {where}: from_tensordict(td) checks that every required field is present."
        )
        self.declared: dict[str, tuple[bool, bool, str]] = {}
        self.unnamed: list[str] = []
        for c in cols.columns:
            own = c.key in dir(TypedTensorDict) and c.key not in dir(TensorDictBase)  # from_tensordict, ...
            if not c.key.isidentifier() or keyword.iskeyword(c.key) or c.key.startswith("_") or own:
                self.unnamed.append(c.key)
                continue
            note = f"{c.dtype or 'any dtype'} ({', '.join(c.axes)})" if c.is_tensor else f"{c.kind}: a NonTensorStack"
            self.declared[c.key] = (c.is_tensor, c.required, note)
        self.shadows = sorted(set(self.declared) & set(dir(TensorDictBase)))

    def header(self) -> list[str]:
        cols = self.cols
        command = f"trajschema export {cols.schema} --format typed-tensordict" + (
            f" --layout {cols.layout}" if cols.layout else ""
        )
        where = f"the dense batch of layout {cols.layout!r}" if cols.layout else "a TensorDict of samples"
        lines = [
            *wrapped(
                f"# {self.name}: trajschema schema {cols.schema!r} as a tensordict TypedTensorDict, for {where}.", "# "
            ),
            f"# Generated by `{command}`;",
            "# regenerate it when the schema changes.",
            f"# {self.name}.from_tensordict(td) wraps td (no copy) and checks that every required field",
            "# is present; the annotations tell type checkers each field's name. Only trajschema",
            "# (schema.validate, schema.validate_batch) checks each field's dtype, shape, dims and values",
            "# (the pandera export checks some of them), and:",
            *header_gaps(cols, kinds=("tags", "extra", "layout")),
        ]
        if self.unnamed:
            why = "not Python names, or TypedTensorDict's own"
            lines.append(f"#   keys: {', '.join(map(repr, self.unnamed))} ({why}: no field can hold them)")
        if self.shadows:
            lines.append(f"# Fields named like TensorDictBase attributes, which they hide: {', '.join(self.shadows)}.")
        return lines + measured_lines("typed-tensordict", cols) + [""]
