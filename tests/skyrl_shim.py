"""Importing SkyRL 0.3.0 on Python 3.11, for the oracle tests and the benchmarks (no pytest here).

The 3.11 shim. SkyRL declares ``python >= 3.11``, but ``import skyrl.backends...`` fails
on 3.11: ``skyrl/backends/__init__.py`` imports the Tinker API types
(``skyrl/tinker/types.py``), whose pydantic model holds a ``typing.TypedDict``
(``MultiModalKwargs``), and pydantic refuses ``typing.TypedDict`` below Python 3.12. So
SkyRL's real users are on 3.12+; only a 3.11 CPU torch is at hand here. `import_skyrl`
therefore, on Python < 3.12 only:

1. imports everything ``skyrl/tinker/types.py`` imports (``pydantic``, ``skyrl.tinker``),
   unpatched;
2. sets ``typing.TypedDict`` to ``typing_extensions.TypedDict`` (the class pydantic asks
   for) for the duration of importing that one module, ``skyrl.tinker.types``; no other
   module is executed meanwhile (`shimmed_modules` records which ones were, and a test
   pins it to exactly that one);
3. restores ``typing.TypedDict`` (in a ``finally``), then imports the requested module
   normally.

Nothing else is touched: SkyRL's batch code (``TrainingInputBatch``, ``TensorList``),
its padding (``convert_prompts_responses_to_batch_tensors``,
``pad_training_input_batch``) and its advantage code run unmodified. On 3.12+ the shim
does nothing.

The flash-attn stub. ``skyrl.backends.skyrl_train.workers.model_wrapper`` (SkyRL's
``HFModelWrapper`` and critic model) imports ``pad_input`` and ``unpad_input`` from
``flash_attn.bert_padding`` at the top, a CUDA-only package, and calls them only with
``remove_microbatch_padding=True`` (which asserts flash attention 2). Without flash-attn,
`import_skyrl_module` imports everything else that module imports first, unpatched
(transformers and peft ask ``find_spec("flash_attn")``, which a stub would break), then
imports the module itself with a ``flash_attn.bert_padding`` stub whose two functions
raise ``NotImplementedError``; the stub leaves ``sys.modules`` right after.

Before any of it, ``skyrl`` must be an installed SkyRL, not a namespace package or a
folder of ``tests/`` (``tests/trainer_import.py``); otherwise `import_skyrl_module` raises
ImportError saying where ``skyrl`` resolved.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import typing
import warnings
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from tests.trainer_import import import_installed

__all__ = ["MODEL_WRAPPER", "SHIMMED", "import_skyrl_module", "shimmed_modules"]

SHIMMED = "skyrl.tinker.types"
#: The SkyRL module that imports flash-attn at the top (imported with the stub where flash-attn is missing).
MODEL_WRAPPER = "skyrl.backends.skyrl_train.workers.model_wrapper"

#: The modules first executed while ``typing.TypedDict`` was patched (filled by `import_skyrl_module`).
shimmed_modules: list[str] = []


def _shim_tinker_types() -> None:
    if sys.version_info >= (3, 12) or SHIMMED in sys.modules:
        return
    import typing_extensions

    importlib.import_module("pydantic")
    importlib.import_module("skyrl.tinker")
    before = set(sys.modules)
    original = typing.TypedDict
    typing.TypedDict = typing_extensions.TypedDict  # type: ignore[misc]
    try:
        importlib.import_module(SHIMMED)
    finally:
        typing.TypedDict = original  # type: ignore[misc]
    shimmed_modules[:] = sorted(set(sys.modules) - before)


def import_skyrl_module(name: str) -> ModuleType:
    """``importlib.import_module(name)`` of a SkyRL module, through the 3.11 shim.

    Raises:
        ImportError: SkyRL is not installed (or not importable), or ``skyrl`` resolves to
            something else (a namespace package, a folder of ``tests/``).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "skyrl" or name.startswith("skyrl."):  # any of them may import skyrl.backends
            import_installed("skyrl")  # skyrl/__init__.py itself imports none of SkyRL's modules
            _shim_tinker_types()
        if name == MODEL_WRAPPER:
            with _without_flash_attn():
                return importlib.import_module(name)
        return importlib.import_module(name)


@contextlib.contextmanager
def _without_flash_attn() -> Iterator[None]:
    if importlib.util.find_spec("flash_attn") is not None or MODEL_WRAPPER in sys.modules:
        yield
        return
    for name in ("transformers.modeling_utils", "peft", "peft.tuners.lora"):
        importlib.import_module(name)

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("flash-attn is not installed: remove_microbatch_padding needs it")

    package, padding = ModuleType("flash_attn"), ModuleType("flash_attn.bert_padding")
    padding.pad_input = padding.unpad_input = unavailable  # type: ignore[attr-defined]
    package.bert_padding = padding  # type: ignore[attr-defined]
    stubs = {"flash_attn": package, "flash_attn.bert_padding": padding}
    sys.modules.update(stubs)
    try:
        yield
    finally:
        for name in stubs:
            del sys.modules[name]
