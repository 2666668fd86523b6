"""The package's front door: ``__all__``, public module paths, and cheap imports."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import trajschema

PUBLIC_CLASSES = [n for n in trajschema.__all__ if isinstance(getattr(trajschema, n), type)]

# `import trajschema` must not pull these in (they are optional extras or dev tools).
HEAVY = ("ray", "transfer_queue", "hypothesis", "rich")
# What the rooms import, and the bare `import trajschema` does not.
ROOM_DEPENDENCIES = ("torch", "tensordict", "numpy", "pydantic", "yaml", "jaxtyping", "beartype")


def test_all_is_sorted_and_unique() -> None:
    assert trajschema.__all__ == sorted(trajschema.__all__)
    assert len(set(trajschema.__all__)) == len(trajschema.__all__)


@pytest.mark.parametrize("name", trajschema.__all__)
def test_every_name_in_all_is_importable(name: str) -> None:
    namespace: dict = {}
    exec(f"from trajschema import {name}", namespace)  # the import statement is the point
    assert namespace[name] is getattr(trajschema, name)


def _defined_in_trajschema(obj: object) -> bool:
    if not (inspect.isclass(obj) or inspect.isfunction(obj)):
        return False
    module = getattr(obj, "__module__", "") or ""
    return module == "trajschema" or module.startswith("trajschema.")


def test_every_public_class_and_function_is_in_all() -> None:
    public = {
        name for name, obj in vars(trajschema).items() if not name.startswith("_") and _defined_in_trajschema(obj)
    }
    assert public - set(trajschema.__all__) == set()
    # ... and __all__ holds nothing else (no re-exported modules or stray values) but the
    # type aliases of the public signatures.
    assert set(trajschema.__all__) - public == TYPE_ALIASES


TYPE_ALIASES = {"Batch", "Depth", "ViolationCode"}


def test_the_type_aliases_are_the_ones_the_signatures_use() -> None:
    import typing

    hints = typing.get_type_hints(trajschema.Schema.validate_batch)
    assert hints["batch"] == trajschema.Batch and hints["depth"] == trajschema.Depth
    assert typing.get_type_hints(trajschema.Violation)["code"] == trajschema.ViolationCode


def test_the_public_api_is_not_empty() -> None:
    assert {"load_schema", "Schema", "SchemaError", "SchemaDefinitionError"} <= set(trajschema.__all__)
    assert PUBLIC_CLASSES


@pytest.mark.parametrize("name", PUBLIC_CLASSES)
def test_public_classes_report_the_package_module(name: str) -> None:
    assert getattr(trajschema, name).__module__ == "trajschema"


def test_the_padding_errors_are_caught_from_the_front_door() -> None:
    """What `Schema.padding` documents raising is importable from `trajschema`, and pickles by that path."""
    import pickle

    schema = trajschema.load_schema("moe_routed")
    with pytest.raises(trajschema.PaddingSizeError) as size:
        schema.padding(2, eos_token_id=2)  # layers and topk have no padding size
    assert size.value.dim in schema.dims and isinstance(size.value, ValueError)
    with pytest.raises(trajschema.PaddingMemoryError) as memory:
        trajschema.load_schema("text").padding(10**6, eos_token_id=2, dims={"prompt": 10**6, "response": 10**6})
    assert memory.value.count == 10**6
    for exc in (size.value, memory.value):
        again = pickle.loads(pickle.dumps(exc))
        assert type(again) is type(exc) and str(again) == str(exc)
        assert type(exc).__module__ == "trajschema"


def test_the_lazy_front_lists_and_refuses_names_as_a_module_does() -> None:
    assert set(trajschema.__all__) <= set(dir(trajschema))
    namespace: dict = {}
    exec("from trajschema import *", namespace)
    assert sorted(k for k in namespace if not k.startswith("__")) == trajschema.__all__
    with pytest.raises(AttributeError, match=r"^module 'trajschema' has no attribute 'load_schemas'$"):
        trajschema.load_schemas  # noqa: B018  # the attribute read is the point
    with pytest.raises(ImportError, match="cannot import name 'Schemas' from 'trajschema'"):
        exec("from trajschema import Schemas", {})


def test_version() -> None:
    assert isinstance(trajschema.__version__, str)
    assert trajschema.__version__.count(".") >= 1


# ---------------------------------------------------------------------------
# Cheap imports: every "importing X does not import Y" claim, checked in ONE fresh interpreter
#
# The claims run in order in that interpreter, and each is checked against everything
# imported so far: if Y is not loaded after X and all the claims before it, X does not load
# Y. So a claim about Y must come before any claim that legitimately loads Y (the
# strategies load hypothesis, last). A claim that something IS loaded is checked against
# what its own step loaded, so an earlier step cannot make it true. Claims that need a
# poisoned sys.modules (a module set to None, as when it is not installed) keep their own
# interpreter: the module they import must be imported fresh under the poison, and here
# it is already imported without it (tests/tq/test_memory_tq.py,
# tests/verl/test_verl_oracle.py).


@dataclasses.dataclass(frozen=True)
class ImportClaim:
    """Running ``code`` leaves the ``absent`` modules unloaded and loads the ``loaded`` ones itself."""

    id: str
    code: str
    absent: tuple[str, ...] = ()
    loaded: tuple[str, ...] = ()


# The keys trajschema.verl's required_batch_multiple reads from a verl trainer config.
_VERL_CONFIG = {
    "actor_rollout_ref": {"rollout": {"n": 8}, "actor": {"ppo_mini_batch_size": 16}},
    "critic": {"enable": True, "ppo_mini_batch_size": 4},
    "algorithm": {"adv_estimator": "gae"},
    "trainer": {"critic_warmup": 0},
}

IMPORT_CLAIMS = [
    # The pytest plugin is loaded by every pytest run where trajschema is installed.
    ImportClaim(
        "trajschema_pytest",
        "import trajschema_pytest",
        absent=("torch", "trajschema", "tensordict", "ray", "transfer_queue"),
    ),
    # The front is lazy: importing it imports no room (the command line's --help and --version
    # answer without torch) ...
    ImportClaim("trajschema", "import trajschema", absent=(*HEAVY, *ROOM_DEPENDENCIES)),
    # ... a layout name resolves below the front door, without the schema-file room: reading
    # a layout imports yaml and torch (its dtypes), and neither trajschema.load nor the
    # front's Schema. Seeing torch and yaml loaded here is what shows the check would see Ray or rich ...
    ImportClaim(
        "as_layout by name",
        "from trajschema.files import as_layout\nassert as_layout('skyrl').name == 'skyrl'",
        absent=(*HEAVY, "trajschema.load", "trajschema.schema"),
        loaded=("torch", "yaml"),
    ),
    # ... and reading a name imports what it needs, still without the extras.
    ImportClaim("trajschema.load_schema", "import trajschema as ts\nts.load_schema('text')", absent=HEAVY),
    # A model config read from a mapping or a file never imports transformers (only a
    # PretrainedConfig the caller passes, already imported, is read, through its to_dict()).
    ImportClaim(
        "trajschema.schema_for_config",
        "import trajschema as ts\n"
        "ts.schema_for_config({'architectures': ['Qwen2VLForConditionalGeneration']})\n"
        "ts.schema_for_config({'architectures': ['Qwen3MoeForCausalLM'], 'num_experts': 8, "
        "'num_experts_per_tok': 2, 'num_hidden_layers': 4})",
        absent=("transformers",),
    ),
    ImportClaim("trajschema.cli.demo", "import trajschema.cli.demo", absent=("rich", "ray", "transfer_queue")),
    ImportClaim(
        "trajschema.verl",
        "import trajschema.verl as tv\n"
        f"tv.required_batch_multiple({_VERL_CONFIG!r}, 3, global_steps=2)\n"
        "tv.padding_dims(tp_size=8, cp_size=16)",
        absent=("verl",),
    ),
    ImportClaim("trajschema.testing", "import trajschema.testing", absent=("hypothesis",)),
    ImportClaim("trajschema.testing.samples", "import trajschema.testing as t\nt.samples", loaded=("hypothesis",)),
]

# Run after the claims in the same interpreter (stdlib modules no claim watches): each must
# fail the check, except the last three, which show that a passing check is possible at all.
CONTROLS = [
    ImportClaim("control-direct", "import colorsys", absent=("colorsys",)),
    ImportClaim("control-submodule", "import xml.dom.minidom", absent=("xml",)),
    ImportClaim("control-nothing-loaded", "pass", loaded=("wave",)),
    ImportClaim("control-loaded-earlier", "import colorsys", loaded=("colorsys",)),  # by control-direct, not here
    ImportClaim("control-raises", "raise ValueError('broken step')", absent=("wave",)),
    ImportClaim("control-passes-absent", "pass", absent=("wave",)),
    ImportClaim("control-passes-loaded", "import wave", loaded=("wave",)),
    ImportClaim(  # an entry set to None (as a test makes a module "not installed") is no load
        "control-passes-poisoned", "import sys\nsys.modules['no_such_module'] = None", absent=("no_such_module",)
    ),
]

# Prints one JSON dict: claim id -> the watched modules loaded so far and those its step
# loaded, or the error the step raised. It imports nothing before the last claim has run.
_PROBE = """
import sys
def _loaded(names):
    modules = [m for m, v in list(sys.modules.items()) if v is not None]
    return sorted(n for n in names if any(m == n or m.startswith(n + ".") for m in modules))
results = {}
for cid, code, watched in CLAIMS:
    before = _loaded(watched)
    try:
        exec(code, {})
    except BaseException as exc:
        results[cid] = {"error": type(exc).__name__ + ": " + str(exc)}
        continue
    after = _loaded(watched)
    results[cid] = {"so_far": after, "step": [n for n in after if n not in before]}
import json
print(json.dumps(results))
"""


def _claim_failures(claim: ImportClaim, seen: dict[str, Any]) -> list[str]:
    """What breaks the claim in what the probe saw, as sentences (none: it holds)."""
    if "error" in seen:
        return [f"{claim.code!r} raised {seen['error']}"]
    failures = [f"{m} is loaded after {claim.code!r}" for m in claim.absent if m in seen["so_far"]]
    return failures + [f"{claim.code!r} did not load {m}" for m in claim.loaded if m not in seen["step"]]


@pytest.fixture(scope="module")
def import_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """What one fresh interpreter saw for every claim and control, in order (one subprocess for the module)."""
    claims = [(c.id, c.code, (*c.absent, *c.loaded)) for c in (*IMPORT_CLAIMS, *CONTROLS)]
    done = subprocess.run(
        [sys.executable, "-c", f"CLAIMS = {claims!r}\n{_PROBE}"],
        cwd=tmp_path_factory.mktemp("cwd"),  # not the checkout: only the installed packages are imported
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("claim", IMPORT_CLAIMS, ids=[c.id for c in IMPORT_CLAIMS])
def test_import_claim(claim: ImportClaim, import_results: dict[str, dict[str, Any]]) -> None:
    assert _claim_failures(claim, import_results[claim.id]) == []


@pytest.mark.slow
def test_the_import_check_can_fail(import_results: dict[str, dict[str, Any]]) -> None:
    failures = {c.id: _claim_failures(c, import_results[c.id]) for c in CONTROLS}
    assert failures == {
        "control-direct": ["colorsys is loaded after 'import colorsys'"],
        "control-submodule": ["xml is loaded after 'import xml.dom.minidom'"],
        "control-nothing-loaded": ["'pass' did not load wave"],
        "control-loaded-earlier": ["'import colorsys' did not load colorsys"],
        "control-raises": ["\"raise ValueError('broken step')\" raised ValueError: broken step"],
        "control-passes-absent": [],
        "control-passes-loaded": [],
        "control-passes-poisoned": [],
    }
    assert set(import_results) == {c.id for c in (*IMPORT_CLAIMS, *CONTROLS)}  # every step ran, in one interpreter


LAZY_FRONTS = ["trajschema", "trajschema.core", "trajschema.padding", "trajschema.verl"]


def _type_checking_imports(source: str) -> dict[str, str]:
    """name -> module of the ``from module import name`` statements under ``if TYPE_CHECKING:``."""
    out: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    out.update({(a.asname or a.name): stmt.module or "" for a in stmt.names})
    return out


@pytest.mark.parametrize("front", LAZY_FRONTS)
def test_a_lazy_fronts_three_lists_of_names_agree(front: str) -> None:
    """Each lazy front names its public names three times (the imports type checkers read, ``__all__``
    and the name -> module table it imports from at run time): all three must say the same."""
    module = importlib.import_module(front)
    typed = _type_checking_imports(Path(module.__file__ or "").read_text())
    table = {name: where for where, names in vars(module)["_ROOMS"].items() for name in names}
    eager = {n for n in module.__all__ if n in vars(module) and n not in table}  # imported at once (VERSION)
    assert set(table) | eager == set(module.__all__), front
    assert {n: typed[n] for n in table if n in typed} == table, front  # the same module for each name
    assert set(typed) - eager == set(table), front
