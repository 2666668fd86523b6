"""What every trainer drop-in stands on: the version gate, the signature pins, and install / uninstall.

A drop-in (``trajschema.verl``, ``trajschema.skyrl``) replaces functions of a trainer it
was written against. Its `DropIn` names the trainer, the versions it supports, and each
replaced attribute with the parameters it was written against; `DropIn.install` checks
the version, every pin and every by-name binding before it replaces anything, so a
trainer that changed is refused whole and nothing is patched.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trajschema.dropin.patches import Patches

__all__ = ["DropIn", "Target", "parameters"]


def parameters(fn: Any) -> str:
    """``fn``'s signature without annotations, e.g. ``(self, data)`` (a classmethod's with ``cls``).

    Examples:
        >>> def step(self, data: int, key: str = "x") -> None: ...
        >>> parameters(step)
        "(self, data, key='x')"
    """
    fn = fn.__func__ if isinstance(fn, (classmethod, staticmethod)) else fn
    sig = inspect.signature(fn)
    plain = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=plain, return_annotation=inspect.Signature.empty))


def _distribution_version(package: str) -> str:
    """The installed distribution's version, for a package without ``__version__`` (OpenRLHF 0.11.2)."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class Target:
    """One attribute a drop-in replaces: ``owner.name``, found as ``original``, labelled ``module:Qual.name``."""

    label: str
    owner: Any
    name: str
    original: Any


class DropIn:
    """A trainer drop-in's pins and bookkeeping.

    Args:
        room: the drop-in's module (``"trajschema.verl"``), as its messages name it.
        trainer: the trainer's name as its users write it (``"verl"``, ``"SkyRL"``).
        package: the importable package whose ``__version__`` is gated.
        versions: the versions supported.
        signatures: ``label -> parameters`` of each attribute replaced; a label is
            ``module:Qual.name``, or ``Qual.name`` inside ``module``.
        module: the module of labels without one.
        bindings: ``label -> modules`` that bind that function by name (``from m import f``):
            each must still hold the very function, and is replaced too.
    """

    def __init__(
        self,
        room: str,
        trainer: str,
        package: str,
        versions: tuple[str, ...],
        signatures: Mapping[str, str],
        *,
        module: str = "",
        bindings: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self.room, self.trainer, self.package, self.versions = room, trainer, package, versions
        self.signatures, self.module = signatures, module
        self.bindings = {label: tuple(modules) for label, modules in (bindings or {}).items()}
        self.patches = Patches()

    def version(self) -> str:
        """The installed trainer's version.

        Raises:
            ImportError: the trainer is not installed.
            RuntimeError: its version is not a supported one.
        """
        supported = ", ".join(self.versions)
        try:
            package = importlib.import_module(self.package)
        except ImportError as exc:
            raise ImportError(
                f"{self.room}.install() needs {self.trainer} {supported} installed "
                f"(pip install {self.package}=={self.versions[-1]})"
            ) from exc
        found = getattr(package, "__version__", None) or _distribution_version(self.package)
        if found not in self.versions:
            raise RuntimeError(
                f"{self.room}.install() supports {self.trainer} {supported}; this is {self.trainer} "
                f"{found}, so nothing was patched"
            )
        return str(found)

    def resolve(self, label: str) -> tuple[Any, str]:
        """``(owner, attribute name)`` of ``label``, importing its module."""
        module, _, qual = label.rpartition(":")
        owner: Any = importlib.import_module(module or self.module)
        *path, name = qual.split(".")
        for part in path:
            owner = getattr(owner, part)
        return owner, name

    def full(self, label: str) -> str:
        """``label`` as a dotted path from its module (``verl.trainer...trainer_base.PPOTrainer._balance_batch``)."""
        module, _, qual = label.rpartition(":")
        return f"{module or self.module}.{qual}"

    def targets(self) -> list[Target]:
        """Every attribute to replace, pins checked, then every binding checked.

        Raises:
            RuntimeError: a pinned attribute has other parameters, or a binding holds
                something other than the function it binds.
        """
        found = []
        for label, want in self.signatures.items():
            owner, name = self.resolve(label)
            original = vars(owner)[name]
            got = parameters(original)
            if got != want:
                raise RuntimeError(
                    f"{self.trainer}'s {label} has the signature {got}, not the {want} {self.room} was written "
                    "against; nothing was patched"
                )
            found.append(Target(label, owner, name, original))
        for label, modules in self.bindings.items():
            owner, name = self.resolve(label)
            for module in modules:
                found.append(self._binding(label, vars(owner)[name], module, name))
        return found

    def _binding(self, label: str, function: Any, module: str, name: str) -> Target:
        mod = importlib.import_module(module)
        if vars(mod).get(name) is not function:
            raise RuntimeError(
                f"{module}.{name} is not {self.trainer}'s {self.full(label)} (something else "
                "replaced it); nothing was patched"
            )
        return Target(f"{module}:{name}", mod, name, function)

    def install(
        self, replacement: Callable[[Target], Any], *, then: Callable[[], None] | None = None, recorder: Any = None
    ) -> None:
        """Replace every target by ``replacement(target)``, after putting back an earlier install.

        The version is checked first (a refusal leaves an earlier install as it is); then,
        an earlier install put back, the pins and the bindings are checked and every
        replacement made before anything is replaced, so that a failure leaves nothing
        patched. ``then`` runs under the same lock once the replacements are in.
        ``recorder`` (an ``install(record=...)``'s `trajschema.bundle.Recorder`) is given the
        version checked, for its bundles' manifests.
        """
        version = self.version()
        with self.patches.lock:
            self.patches.restore()  # re-installing: start from the trainer's own functions
            targets = self.targets()
            replaced = [replacement(t) for t in targets]
            self.patches.replace([(t.owner, t.name, t.original) for t in targets], replaced)
            if recorder is not None:
                recorder.trainer_version = version
            if then is not None:
                then()

    def uninstall(self, *, then: Callable[[], None] | None = None) -> bool:
        """Put back every replaced attribute (the very same objects); ``False`` if none was replaced."""
        with self.patches.lock:
            if then is not None:
                then()
            return self.patches.restore()

    def installed(self) -> bool:
        """Whether an install is in effect."""
        return self.patches.active
