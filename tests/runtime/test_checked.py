"""``@checked``: the argument is validated before the body runs, as often as the check mode says."""

from __future__ import annotations

import asyncio
import copy
import dis
import functools
import inspect
import keyword
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time
import traceback
import types
import unittest.mock
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tensordict import NonTensorStack, TensorDict

import trajschema as ts
from trajschema.runtime import decorator as _checked
from trajschema.runtime.decorator import MODES, check_mode, checked, checks, set_check_mode
from trajschema.testing import tq_batch, verl_sample

TEXT = ts.load_schema("text")
is_tensor = torch.is_tensor


def good(p: int = 3, r: int = 4, seed: int = 0) -> dict[str, Any]:
    return verl_sample(TEXT, p, r, seed=seed)


def bad(p: int = 3, r: int = 4) -> dict[str, Any]:
    """Three violations at once: a missing field, a wrong dtype, and S != P + R."""
    s = good(p, r)
    del s["uid"]
    s["loss_mask"] = s["loss_mask"].to(torch.float32)
    s["input_ids"] = s["input_ids"][:-1]
    return s


@checked(TEXT, arg="sample")
def module_level(sample):
    """A module-level decorated function (pickled by reference)."""
    return "ran"


@pytest.fixture(autouse=True)
def _clean_mode(monkeypatch):
    monkeypatch.delenv(_checked.ENV_VAR, raising=False)
    set_check_mode(None)
    yield
    monkeypatch.delenv(_checked.ENV_VAR, raising=False)
    set_check_mode(None)


@pytest.fixture(params=["trajschema.runtime.decorator", "trajschema"])
def api(request):
    """The API from its module, and as the package exports it (skipped until it does)."""
    if request.param == "trajschema":
        missing = [n for n in ("checked", "set_check_mode", "checks", "check_mode") if not hasattr(ts, n)]
        if missing:
            pytest.skip(f"trajschema does not export {missing} yet")
        return ts
    return _checked


class Counting:
    """A copy of the text schema that counts (and can slow down) its checks."""

    def __init__(self, delay: float = 0.0) -> None:
        self.schema = copy.copy(TEXT)
        self.calls = 0
        self.delay = delay
        self._lock = threading.Lock()
        for name in ("validate", "validate_batch"):
            setattr(self.schema, name, self._counted(getattr(self.schema, name)))

    def _counted(self, method):
        @functools.wraps(method)
        def counted(*args, **kwargs):
            with self._lock:
                self.calls += 1
            if self.delay:
                time.sleep(self.delay)
            return method(*args, **kwargs)

        return counted


# -- what a check does -------------------------------------------------------------------


def test_a_bad_sample_raises_every_violation_and_the_body_never_runs(api):
    ran = []

    @api.checked(TEXT, arg="sample")
    def step(sample):
        ran.append(1)

    with pytest.raises(ts.SchemaError) as info:
        step(bad())
    assert ran == []
    expected = TEXT.violations(bad(), depth="shapes")
    assert len(expected) >= 3
    assert info.value.violations == expected
    step(good())
    assert ran == [1]


def test_a_bad_batch_raises_every_violation_of_every_sample():
    ran = []

    @checked(TEXT)
    def step(batch):
        ran.append(1)

    samples = [good(seed=0), bad(), good(seed=1), bad(5, 2)]
    expected = TEXT.batch_violations(samples, depth="shapes")
    assert {v.sample for v in expected} == {1, 3}
    with pytest.raises(ts.SchemaError) as info:
        step(samples)
    assert info.value.violations == expected and ran == []
    if sys.version_info >= (3, 11):
        assert any("step" in n and "'batch'" in n for n in info.value.__notes__)


@pytest.mark.parametrize("layout", ["jagged", "dense", "row", "meta"])
def test_tensordicts_are_checked_as_batches_and_rows_as_samples(layout):
    @checked(TEXT)
    def step(batch):
        return "ran"

    samples = [good(3, 4, seed=i) for i in range(4)]
    if layout == "jagged":
        td, broken = tq_batch(samples), tq_batch([*samples[:2], {**samples[2], "uid": 5}, samples[3]])
    elif layout == "dense":
        td = TensorDict({k: torch.stack([s[k] for s in samples]) for k, v in samples[0].items() if is_tensor(v)}, [4])
        for k, v in samples[0].items():
            if not is_tensor(v):
                td.set(k, NonTensorStack.from_list([s[k] for s in samples]))
        broken = td.clone()
        broken.set("input_ids", td["input_ids"][:, :-1])  # S != P + R in every row
    elif layout == "row":
        td = tq_batch(samples)[1]
        broken = tq_batch([{**s, "uid": 5} for s in samples])[1]
        assert td.batch_size == torch.Size([])
    else:
        td = tq_batch([{k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in s.items()} for s in samples])
        broken = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in bad().items()}
    assert step(td) == "ran"
    with pytest.raises(ts.SchemaError):
        step(broken)


def test_empty_batches_pass_and_depth_values_reads_values():
    calls = []

    @checked(TEXT, arg="sample", depth="values")
    def deep(sample):
        calls.append("deep")

    @checked(TEXT, arg="sample")
    def shallow(sample):
        calls.append("shallow")

    @checked(TEXT)
    def step(batch):
        calls.append("batch")

    s = good()
    s["response_mask"] = torch.full_like(s["response_mask"], 7)  # masks are 0/1: a value violation
    assert TEXT.violations(s, depth="shapes") == [] and TEXT.violations(s, depth="values") != []
    shallow(s)
    with pytest.raises(ts.SchemaError) as info:
        deep(s)
    assert {v.code for v in info.value.violations} == {"value"}
    step([])
    assert calls == ["shallow", "batch"]


@pytest.mark.parametrize("value", [3, "abc", b"x", None, 1.5, object()])
def test_an_argument_that_is_neither_sample_nor_batch_is_a_type_error(value):
    @checked(TEXT)
    def step(batch):
        raise AssertionError("body ran")

    with pytest.raises(
        TypeError, match=r"step\(\): argument 'batch' must be a sample .* found " + type(value).__name__
    ):
        step(value)


def test_tags_arg_checks_a_sample_tag_and_a_batch_tag_list():
    ran = []

    @checked(TEXT, arg="sample", tags_arg="tag")
    def one(sample, tag=None):
        ran.append("one")

    @checked(TEXT, tags_arg="tags")
    def many(batch, tags):
        ran.append("many")

    s = good(3, 4)
    one(s)
    one(s, {"prompt_len": 3, "is_padding": False})
    with pytest.raises(ts.SchemaError) as info:
        one(s, tag={"prompt_len": 2})
    assert info.value.violations == TEXT.violations(s, tag={"prompt_len": 2}, depth="shapes")
    assert {v.code for v in info.value.violations} == {"tag"}
    with pytest.raises(TypeError, match="'tag' must be the sample's tag dict, found list"):
        one(s, [{}])
    many([s, s], [{}, {"seq_len": 7}])
    with pytest.raises(ts.SchemaError) as info:
        many([s, s], [{}, {"seq_len": 8}])
    assert [v.sample for v in info.value.violations] == [1]
    with pytest.raises(ts.SchemaError):  # one tag dict for two samples: a batch violation
        many([s, s], [{}])
    assert ran == ["one", "one", "many"]


# -- how the argument is found ---------------------------------------------------------------


def test_the_argument_is_found_however_it_is_passed():
    seen = []

    @checked(TEXT, arg="sample")
    def pos_or_kw(a, sample, b=0):
        seen.append(b)

    @checked(TEXT, arg="sample")
    def kw_only(a, *rest, sample, **extra):
        seen.append(len(rest))

    @checked(TEXT, arg="sample")
    def pos_only(sample, /, b=0):
        seen.append(b)

    default = good()

    @checked(TEXT, arg="sample")
    def with_default(sample=default):
        seen.append("default")

    @checked(TEXT, arg="sample")
    def with_bad_default(sample=bad()):  # noqa: B008 - the default itself is what is checked
        raise AssertionError("body ran")

    g, b = good(), bad()
    for call in (
        lambda s: pos_or_kw(1, s),
        lambda s: pos_or_kw(1, sample=s),
        lambda s: pos_or_kw(a=1, sample=s, b=2),
        lambda s: kw_only(1, 2, 3, sample=s, z=4),
        lambda s: pos_only(s, b=5),
    ):
        call(g)
        with pytest.raises(ts.SchemaError):
            call(b)
    with_default()
    with pytest.raises(ts.SchemaError):
        with_bad_default()
    assert seen == [0, 0, 2, 2, 5, "default"]


def test_a_call_that_does_not_fit_is_pythons_type_error_and_the_body_does_not_run():
    @checked(TEXT, arg="sample")
    def step(sample, other):
        raise AssertionError("body ran")

    with pytest.raises(TypeError, match=r"step\(\) missing 2 required positional arguments: 'sample' and 'other'"):
        step()
    with pytest.raises(TypeError, match=r"step\(\) got multiple values for argument 'sample'"):
        step(good(), 1, sample=good())
    with pytest.raises(TypeError, match=r"step\(\) missing 1 required positional argument: 'other'"):
        step(good())


class CallableStep:
    """A callable object: decorated through the generic ``*args, **kwargs`` wrapper."""

    def __call__(self, sample, other=0):
        return other


def _inner(sample, other=0):
    return other


@functools.wraps(_inner)
def _wrapped(*args, **kwargs):
    return _inner(*args, **kwargs)


@pytest.mark.parametrize("fn", [CallableStep(), functools.partial(_inner, other=3), _wrapped])
def test_other_callables_take_the_generic_wrapper(fn):
    step = checked(TEXT, arg="sample")(fn)
    assert step(good()) == fn(good()) and step(sample=good()) == fn(sample=good())
    with pytest.raises(ts.SchemaError):
        step(bad())
    with pytest.raises(TypeError, match=r"@checked on .*: missing a required argument: 'sample'"):
        step()
    if not isinstance(fn, functools.partial):
        with pytest.raises(TypeError, match=r"@checked on .*: multiple values for argument 'sample'"):
            step(good(), 1, sample=good())


def _sig_a(sample, b=1, *args, c, d=2, **kw):
    return locals()


def _sig_b(x, /, sample, *, t=None):
    return locals()


def _sig_c(sample=None, /):
    return locals()


def _sig_d(a, b=[], /, c=(), *rest, sample):  # noqa: B006 - the very default object must be forwarded
    return locals()


def _sig_e(*args, sample, **kwargs):
    return locals()


CALLS = [
    ((), {}),
    (("S",), {}),
    (("S", 5), {}),
    ((1, 2, 3, 4), {"sample": "S"}),
    (("S",), {"c": 3}),
    ((), {"sample": "S", "c": 1}),
    ((1,), {"sample": "S", "t": 2}),
    ((1, 2), {"sample": "S", "zz": 9}),
    (("S",), {"sample": "S"}),
    ((1,), {"x": 2, "sample": "S"}),
    (("M", "S", "G", "C", "F", "D"), {}),
]


def _sig_f(mode, sample, get=None, check=None, fn=None, default=None):  # the wrapper's own words
    return locals()


@pytest.mark.parametrize("fn", [_sig_a, _sig_b, _sig_c, _sig_d, _sig_e, _sig_f], ids=lambda f: f.__name__)
def test_the_generated_wrapper_binds_every_call_as_the_function_does(fn, monkeypatch):
    seen = []

    class Recorder:
        def __call__(self, mode, value, tags):
            seen.append(value)

    step = checked(TEXT, arg="sample")(fn)
    assert step.__code__ is not fn.__code__ and "*args, **kwargs" not in str(
        inspect.signature(step, follow_wrapped=False)
    )
    # Swap the check for a recorder: what the wrapper hands it is the argument Python bound.
    assert "_trajschema_check" in step.__code__.co_names
    monkeypatch.setitem(step.__globals__, "_trajschema_check", Recorder())
    for args, kwargs in CALLS:
        try:
            expected = fn(*args, **kwargs)
        except TypeError as e:
            message = str(e)
        else:
            message = None
        if message is not None:
            with pytest.raises(TypeError) as info:
                step(*args, **kwargs)
            assert str(info.value) == message  # Python's own message, naming the function
            continue
        seen.clear()
        assert step(*args, **kwargs) == expected
        assert seen == [expected["sample"]]
        if "b" in expected and fn is _sig_d and len(args) < 2:
            assert expected["b"] is step(*args, **kwargs)["b"]  # the very default object


def test_lambdas_and_prefixed_parameter_names():
    step = checked(TEXT, arg="sample")(lambda sample: "ran")
    assert step.__name__ == "<lambda>" and step(good()) == "ran"
    with pytest.raises(ts.SchemaError):
        step(bad())
    with pytest.raises(TypeError, match=r"<lambda>\(\) missing 1 required positional argument"):
        step()

    def odd(_trajschema_check, sample, *, _trajschema_fn=None):  # the generated wrapper's own prefix
        return _trajschema_check, _trajschema_fn

    odd_step = checked(TEXT, arg="sample")(odd)
    assert odd_step("mine", good()) == ("mine", None)
    assert odd_step(_trajschema_check="mine", sample=good(), _trajschema_fn=2) == ("mine", 2)
    # Still the fast path, its own names behind another prefix.
    assert odd_step.__code__.co_varnames[:3] == ("_trajschema_check", "sample", "_trajschema_fn")
    assert "_trajschema1_check" in odd_step.__code__.co_names
    with pytest.raises(ts.SchemaError):
        odd_step("mine", bad())


# -- names the wrapper trusts no more than any other input ------------------------------------


def _internal_names() -> set[str]:
    """Every name a generated wrapper uses, at the first three prefixes it can choose.

    Read from the wrappers themselves (not a list kept by hand): the globals it was
    defined in, the globals its code reads and its locals; each level's function takes
    all the names found so far as parameters, forcing the next prefix.
    """
    found: set[str] = set()
    params = ["sample"]
    for _ in range(3):
        namespace: dict[str, Any] = {}
        exec(f"def f({', '.join(params)}):\n    return 0", namespace)
        w = checked(TEXT, arg="sample")(namespace["f"])
        code = w.__code__
        read = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
        level = set(w.__globals__) | read | set(code.co_varnames[code.co_argcount :])
        level -= {"__builtins__", *params}
        assert level and not level & found  # a new prefix each time
        found |= level
        params = [*sorted(found), "sample"]
    return found


INTERNAL = sorted(_internal_names())
ODD_NAMES = [
    *keyword.kwlist,
    *INTERNAL,
    *("", "my-fn", "a b", "<lambda>", "1x", "ᵃ", "é", "a\x00b", "\udc80", "x\ny", "f()", "match", "_", "print"),
]


@pytest.mark.parametrize("name", ODD_NAMES, ids=ascii)
def test_any_name_and_qualname_decorate_and_are_mirrored(name):
    def step(sample):
        if sample is None:
            raise RuntimeError("body")
        return "ran"

    step.__name__ = step.__qualname__ = name
    wrapped = checked(TEXT, arg="sample")(step)
    assert (wrapped.__name__, wrapped.__qualname__, wrapped.__wrapped__) == (name, name, step)
    assert wrapped.__code__.co_name == "step" and "*args" not in str(inspect.signature(wrapped, follow_wrapped=False))
    assert wrapped(good()) == "ran"
    with pytest.raises(ts.SchemaError) as info:
        wrapped(bad())
    if sys.version_info >= (3, 11):  # the note names the function, control characters escaped
        (note,) = info.value.__notes__
        assert note.startswith(f"@checked on {_checked._label(step)}()") and "\n" not in note and "\x00" not in note
    with pytest.raises(TypeError) as mine, checks("never"):
        wrapped()
    with pytest.raises(TypeError) as theirs:
        step()
    assert str(mine.value) == str(theirs.value)  # Python's own message, naming the function
    with pytest.raises(RuntimeError) as body, checks("never"):
        wrapped(None)
    frames = [f.name for f in traceback.extract_tb(body.value.__traceback__)]
    assert frames[-2:] == ["step", "step"]  # the wrapper's frame shows the function's code name


def test_labels_escape_what_would_break_a_file_name_or_a_message():
    def f(sample):
        return 0

    for qualname, label in [("a\x00b", r"a\x00b"), ("x\ny", r"x\ny"), ("\udc80", r"\udc80"), ("é.f", "é.f")]:
        f.__qualname__ = qualname
        assert _checked._label(f) == label
    f.__qualname__ = ""
    assert _checked._label(f) == "function"  # nothing to show: its type's name


def _recorder() -> tuple[list[tuple[Any, Any]], Any]:
    """A stand-in for ``_Checker.run`` (a plain function, so it binds as a method) and what it saw."""
    seen: list[tuple[Any, Any]] = []

    def run(checker: Any, value: Any, tags: Any) -> None:
        seen.append((value, tags))

    return seen, run


PARAM_NAMES = st.sampled_from(
    [*INTERNAL, "fn", "check", "wrapped", "wrapper", "__check", "args", "kwargs", "mode", "passed", "sample", "tags"]
) | st.from_regex(r"\A[a-z_][a-z0-9_]{0,3}\Z").filter(lambda n: not keyword.iskeyword(n))


@st.composite
def _functions(draw):
    """(kind of each parameter name, in order; positional defaults; keyword-only defaulted; arg; tags_arg)."""
    names = draw(st.lists(PARAM_NAMES, min_size=1, max_size=8, unique=True))
    var = names.pop() if len(names) > 1 and draw(st.booleans()) else None
    varkw = names.pop() if len(names) > 1 and draw(st.booleans()) else None
    kinds = draw(st.lists(st.sampled_from(["posonly", "pos", "kwonly"]), min_size=len(names), max_size=len(names)))
    order = ["posonly", "pos", "kwonly"]
    plain = sorted(zip(kinds, names), key=lambda kn: order.index(kn[0]))
    params = [kn for kn in plain if kn[0] != "kwonly"]
    params += [("var", var)] if var else []
    params += [kn for kn in plain if kn[0] == "kwonly"] + ([("varkw", varkw)] if varkw else [])
    arg = draw(st.sampled_from(names))
    tags_arg = draw(st.sampled_from([None, *[n for n in names if n != arg]]))
    n_positional = sum(kind != "kwonly" for kind, _ in plain)
    n_defaults = draw(st.integers(0, n_positional))
    kw_defaulted = [n for kind, n in plain if kind == "kwonly" and draw(st.booleans())]
    return params, n_defaults, kw_defaulted, arg, tags_arg


def _define(params, n_defaults, kw_defaulted, is_async):
    """The function of ``_functions()``: it returns its parameters' values, the very objects."""
    text: list[str] = []
    kinds = [kind for kind, _ in params]
    for i, (kind, name) in enumerate(params):
        if kind == "kwonly" and "var" not in kinds and "kwonly" not in kinds[:i]:
            text.append("*")
        text.append({"var": "*", "varkw": "**"}.get(kind, "") + name)
        if kind == "posonly" and kinds[i + 1 : i + 2] != ["posonly"]:
            text.append("/")
    body = "".join(f"{name}, " for _, name in params)  # reads only its parameters: any may shadow a builtin
    namespace: dict[str, Any] = {}
    exec(f"{'async ' if is_async else ''}def f({', '.join(text)}):\n    return ({body})", namespace)
    fn = namespace["f"]
    fn.__defaults__ = tuple(object() for _ in range(n_defaults)) or None
    fn.__kwdefaults__ = {n: object() for n in kw_defaulted} or None
    return fn


def _outcome(fn, args, kwargs, is_async):
    try:
        result = fn(*args, **kwargs)
        if is_async:
            result = asyncio.run(result)
    except TypeError as exc:
        return "raised", type(exc), str(exc)
    return "returned", result


CALL_KEYS = PARAM_NAMES | st.sampled_from(["zz", "sample"])


def _calls(names: list[str]) -> st.SearchStrategy[list[tuple[int, list[str]]]]:
    """Calls as (how many positional arguments, which keywords): mostly the function's own names."""
    keys = st.lists(st.sampled_from(names) | CALL_KEYS, max_size=5, unique=True)
    return st.lists(st.tuples(st.integers(0, 8), keys), min_size=1, max_size=8)


@settings(deadline=None)
@given(_functions(), st.sampled_from(ODD_NAMES) | st.text(max_size=8), st.booleans(), st.data())
def test_generated_wrappers_pass_every_call_through_whatever_the_names(function, name, is_async, data):
    params, n_defaults, kw_defaulted, arg, tags_arg = function
    fn = _define(params, n_defaults, kw_defaulted, is_async)
    names = [n for _, n in params]
    calls = data.draw(_calls(names))
    fn.__name__ = fn.__qualname__ = name
    step = checked(TEXT, arg=arg, tags_arg=tags_arg)(fn)
    code = step.__code__
    assert code is not fn.__code__ and code.co_varnames[: len(names)] == fn.__code__.co_varnames[: len(names)]
    assert (step.__name__, step.__qualname__, step.__wrapped__) == (name, name, fn)
    assert inspect.signature(step) == inspect.signature(fn) and inspect.iscoroutinefunction(step) == is_async
    seen, run = _recorder()
    with unittest.mock.patch.object(_checked._Checker, "run", run):
        for n_args, keys in calls:
            args = tuple(object() for _ in range(n_args))
            kwargs = {k: object() for k in keys}
            expected = _outcome(fn, args, kwargs, is_async)
            for mode in ("never", "always"):
                seen.clear()
                with checks(mode):
                    got = _outcome(step, args, kwargs, is_async)
                assert got == expected  # the very objects returned, the very TypeError message
                if mode == "always" and expected[0] == "returned":
                    # fn returns its parameters' values: what Python bound (Signature.bind can differ).
                    values = dict(zip(names, expected[1]))
                    want = (values[arg], None if tags_arg is None else values[tags_arg])
                    assert len(seen) == 1 and all(a is b for a, b in zip(seen[0], want))
                else:
                    assert seen == []  # never checks; a call that does not fit checks nothing


@settings(deadline=None)
@given(_functions(), st.data())
def test_generic_wrappers_pass_every_fitting_call_through_whatever_the_names(function, data):
    params, n_defaults, kw_defaulted, arg, tags_arg = function
    fn = _define(params, n_defaults, kw_defaulted, False)
    names = [n for _, n in params]
    calls = data.draw(_calls(names))

    @functools.wraps(fn)
    def outer(*args, **kwargs):  # carries __wrapped__: the generic *args, **kwargs wrapper
        return fn(*args, **kwargs)

    step = checked(TEXT, arg=arg, tags_arg=tags_arg)(outer)
    assert step.__code__.co_varnames[:2] == ("args", "kwargs") and step.__wrapped__ is outer
    seen, run = _recorder()
    with unittest.mock.patch.object(_checked._Checker, "run", run):
        for n_args, keys in calls:
            args = tuple(object() for _ in range(n_args))
            kwargs = {k: object() for k in keys}
            expected = _outcome(fn, args, kwargs, False)
            seen.clear()
            got = _outcome(step, args, kwargs, False)
            if expected[0] == "raised":  # the generic wrapper words its own message for some
                assert got[:2] == expected[:2]
                continue
            assert got == expected
            values = dict(zip(names, expected[1]))
            want = (values[arg], None if tags_arg is None else values[tags_arg])
            assert len(seen) == 1 and all(a is b for a, b in zip(seen[0], want))


def test_an_arg_that_is_a_str_subclass_is_read_as_its_text_only():
    class Sly(str):
        def __format__(self, spec):  # would be pasted into the generated source
            return "print('injected') or other"

    ran = []

    def step(sample, other=None):
        ran.append(sample)

    wrapped = checked(TEXT, arg=Sly("sample"))(step)
    with pytest.raises(ts.SchemaError):
        wrapped(bad(), good())  # the check reads `sample`, not `other`
    wrapped(good(), bad())
    assert len(ran) == 1 and "injected" not in wrapped.__code__.co_names


def _renamed(fn: Any, *names: str) -> Any:
    """``fn`` with its code's parameter names replaced (what no source can spell)."""
    return types.FunctionType(fn.__code__.replace(co_varnames=names), fn.__globals__, fn.__name__, fn.__defaults__)


def test_code_spelling_parameters_the_parser_would_rewrite_takes_the_generic_wrapper():
    def two(a, sample):
        return a

    fn = _renamed(two, "ᵃ", "sample")  # NFKC: the parser reads "ᵃ" as "a"
    # So the keyword is passed in a dict below: written ᵃ=1 in a call, it would be a=1.
    odd = {"ᵃ": 1, "sample": good()}
    wrapped = checked(TEXT, arg="sample")(fn)
    assert wrapped.__code__.co_varnames[:2] == ("args", "kwargs")
    assert wrapped(**odd) == fn(**odd) == 1
    with pytest.raises(TypeError, match="unexpected keyword argument 'a'"):
        wrapped(a=1, sample=good())
    with pytest.raises(ts.SchemaError):
        wrapped(1, bad())
    on_the_odd_one = checked(TEXT, arg="ᵃ")(fn)
    with pytest.raises(ts.SchemaError):
        on_the_odd_one(**{**odd, "ᵃ": bad()})
    # ".0" (a comprehension's hidden argument) is shown as positional-only `implicit0`: still the fast path.
    implicit = checked(TEXT, arg="sample")(_renamed(two, ".0", "sample"))
    assert implicit("x", good()) == implicit("x", sample=good()) == "x"
    assert implicit.__code__.co_varnames[:2] == ("implicit0", "sample")


def test_code_with_two_parameters_of_one_name_is_refused_at_decoration():
    def two(a, b):
        return a

    with pytest.raises(TypeError, match=r"code has 2 parameters \(sample, sample\) but its signature only 1"):
        checked(TEXT, arg="sample")(_renamed(two, "sample", "sample"))


class _HostileSignature:
    def __call__(self, sample):
        return "called"

    @property
    def __signature__(self):
        raise RuntimeError("no signature for you")


def _deep_method(depth: int) -> Any:
    obj: Any = lambda sample: sample  # noqa: E731
    for i in range(depth):
        obj = types.MethodType(obj, i)
    return obj


@pytest.mark.parametrize(
    ("fn", "found"),
    [(_HostileSignature(), "RuntimeError: no signature for you"), (_deep_method(5000), "RecursionError")],
    ids=["raising __signature__", "5000 nested methods"],
)
def test_a_signature_that_cannot_be_read_is_a_type_error_at_decoration(fn, found):
    with pytest.raises(TypeError, match=rf"@checked on .*: cannot read the function's signature \({found}"):
        checked(TEXT, arg="sample")(fn)


class _OddAttributes:
    """A callable object whose function-like attributes are of types a function cannot hold."""

    __name__ = 5
    __annotations__ = "not a dict"
    __dict__ = ["not", "a", "mapping"]

    def __call__(self, sample, other=0):
        return other

    @property
    def __doc__(self):  # type: ignore[override]
        raise RuntimeError("reading the docstring fails")


def test_callables_with_unmirrorable_attributes_decorate_and_keep_the_wrappers_own():
    obj = _OddAttributes()
    wrapped = checked(TEXT, arg="sample")(obj)
    assert wrapped(good(), 4) == 4 and wrapped.__wrapped__ is obj
    assert wrapped.__name__ == "wrapper" and set(wrapped.__annotations__) == {"args", "kwargs", "return"}
    with pytest.raises(ts.SchemaError):
        wrapped(bad())
    part = functools.partial(_inner, other=2)
    part.__name__ = 7  # a partial holds any attribute
    part.__qualname__ = None
    part.extra = "kept"
    wrapped = checked(TEXT, arg="sample")(part)
    assert wrapped(good()) == 2 and wrapped.__name__ == "wrapper" and wrapped.extra == "kept"


def test_methods_with_odd_names_and_parameters_named_like_the_wrapper():
    def method(self, _trajschema_fn, sample, *, _trajschema1_check=0):
        return self, _trajschema_fn, _trajschema1_check

    method.__name__ = "class"

    def static(fn, sample, *args, **kwargs):
        return fn, args, kwargs

    static.__name__ = ""

    class Trainer:
        step = checked(TEXT, arg="sample")(method)
        also = checked(TEXT, arg="sample")(classmethod(method))
        plain = checked(TEXT, arg="sample")(staticmethod(static))

    t = Trainer()
    assert t.step(1, good(), _trajschema1_check=2) == (t, 1, 2) and Trainer.also(1, sample=good()) == (Trainer, 1, 0)
    assert t.plain("f", good(), 3, args=4) == ("f", (3,), {"args": 4})
    assert (Trainer.step.__name__, Trainer.plain.__name__) == ("class", "")
    bound = checked(TEXT, arg="sample")(t.step)  # a bound method: the generic wrapper, self already bound
    assert bound(5, good()) == (t, 5, 0) and bound.__name__ == "class"
    for call in (
        lambda: t.step(1, bad()),
        lambda: Trainer.also(1, bad()),
        lambda: t.plain(1, bad()),
        lambda: bound(1, bad()),
    ):
        with pytest.raises(ts.SchemaError):
            call()


def test_an_async_partial_takes_the_generic_wrapper_and_stays_a_coroutine_function():
    async def step(sample, other):
        return other

    wrapped = checked(TEXT, arg="sample")(functools.partial(step, other=7))
    assert inspect.iscoroutinefunction(wrapped)
    assert asyncio.run(wrapped(good())) == 7
    with pytest.raises(ts.SchemaError):
        asyncio.run(wrapped(bad()))


def test_methods_static_and_class_methods():
    class Trainer:
        def __init__(self):
            self.ran = []

        @checked(TEXT)
        def step(self, batch):
            self.ran.append("step")
            return self

        @staticmethod
        @checked(TEXT, arg="sample")
        def static_below(sample):
            return "static_below"

        @checked(TEXT, arg="sample")
        @staticmethod
        def static_above(sample):
            return "static_above"

        @classmethod
        @checked(TEXT, arg="sample")
        def class_below(cls, sample):
            return cls

        @checked(TEXT, arg="sample")
        @classmethod
        def class_above(cls, sample):
            return cls

    t = Trainer()
    assert t.step([good()]) is t and Trainer.step(t, batch=[good()]) is t
    assert Trainer.static_below(good()) == t.static_below(good()) == "static_below"
    assert Trainer.static_above(good()) == t.static_above(good()) == "static_above"
    assert Trainer.class_below(good()) is Trainer and t.class_above(good()) is Trainer
    assert isinstance(Trainer.__dict__["static_above"], staticmethod)
    assert isinstance(Trainer.__dict__["class_above"], classmethod)
    for call in (t.step, Trainer.static_below, Trainer.static_above, Trainer.class_below, t.class_above):
        with pytest.raises(ts.SchemaError):
            call([bad()] if call == t.step else bad())
    assert t.ran == ["step", "step"]


def test_async_functions_stay_coroutine_functions_and_check_when_the_coroutine_starts(api):
    ran = []

    @api.checked(TEXT, arg="sample")
    async def step(sample):
        ran.append(1)
        await asyncio.sleep(0)
        return "done"

    assert inspect.iscoroutinefunction(step)
    assert asyncio.run(step(good())) == "done"
    coro = step(bad())  # creating the coroutine checks nothing yet
    with pytest.raises(ts.SchemaError):
        asyncio.run(coro)
    assert ran == [1]
    # The mode is read when the coroutine starts, in the context it runs in.
    with api.checks("never"):
        made_in_never = step(bad())
    with pytest.raises(ts.SchemaError):
        asyncio.run(made_in_never)

    async def awaited_in_never():
        with api.checks("never"):
            return await step(bad())

    assert asyncio.run(awaited_in_never()) == "done"


def test_generator_functions_are_checked_when_called():
    @checked(TEXT, arg="sample")
    def rows(sample):
        yield from sample

    with pytest.raises(ts.SchemaError):
        rows(bad())
    assert sorted(rows(good())) == sorted(good())


def test_the_wrapper_keeps_name_doc_signature_and_pickles_by_reference():
    def f(batch: list, *, tags: list | None = None, depth: int = 3) -> int:
        """Doc."""
        return 1

    g = checked(TEXT, tags_arg="tags")(f)
    assert inspect.signature(g) == inspect.signature(f)
    assert (g.__name__, g.__doc__, g.__wrapped__, g.__annotations__) == ("f", "Doc.", f, f.__annotations__)
    with pytest.raises(ts.SchemaError):
        module_level(bad())
    assert module_level(good()) == "ran"
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps(module_level, protocol=protocol))
        assert again is module_level
    assert inspect.signature(module_level) == inspect.signature(module_level.__wrapped__)


# -- decoration-time errors -------------------------------------------------------------------


def test_decoration_time_errors():
    def f(batch, *args, **kwargs):
        pass

    with pytest.raises(TypeError, match=r"arg='sample' names no parameter.*its parameters: batch, args, kwargs"):
        checked(TEXT, arg="sample")(f)
    with pytest.raises(TypeError, match=r"names \*args or \*\*args"):
        checked(TEXT, arg="args")(f)
    with pytest.raises(TypeError, match="tags_arg='tags' names no parameter"):
        checked(TEXT, tags_arg="tags")(f)
    with pytest.raises(ValueError, match=r"expected one of 'shapes', 'values', found 'deep'"):
        checked(TEXT, depth="deep")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="both name 'batch'"):
        checked(TEXT, tags_arg="batch")
    with pytest.raises(TypeError, match="expected a Schema or a schema name, found int"):
        checked(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"found function; write @checked\(schema\)"):
        checked(f)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected a parameter name"):
        checked(TEXT, arg=1)  # type: ignore[arg-type]
    with pytest.raises(ts.SchemaNotFoundError):
        checked("no_such_schema")
    with pytest.raises(TypeError, match="decorates a function, found int"):
        checked(TEXT)(3)  # type: ignore[type-var]


def test_a_schema_name_is_loaded_once_at_decoration(monkeypatch):
    import trajschema.load.search as search  # the one place a name becomes a Schema (resolve_schema)

    loads = []
    real = search.load_schema
    monkeypatch.setattr(search, "load_schema", lambda name: loads.append(name) or real(name))

    @checked("text", arg="sample")
    def step(sample):
        return "ran"

    assert loads == ["text"]
    for _ in range(3):
        step(good())
    with pytest.raises(ts.SchemaError):
        step(bad())
    assert loads == ["text"]


# -- the check mode -------------------------------------------------------------------------------


def test_modes_and_setter(api):
    ran = []

    @api.checked(TEXT, arg="sample")
    def step(sample):
        ran.append(1)

    assert api.check_mode() == "always"
    api.set_check_mode("never")
    assert api.check_mode() == "never"
    step(bad())
    api.set_check_mode("always")
    with pytest.raises(ts.SchemaError):
        step(bad())
    api.set_check_mode(None)
    assert api.check_mode() == "always"
    assert ran == [1]


@pytest.mark.parametrize("mode", ["Always", "off", "", None, 0, "never "])
def test_invalid_modes_are_value_errors_naming_the_valid_ones(mode):
    with pytest.raises(ValueError, match=r"expected one of 'always', 'once', 'never', found"):
        checks(mode)  # type: ignore[arg-type]
    if mode is not None:
        with pytest.raises(ValueError, match=r"expected one of 'always', 'once', 'never', found"):
            set_check_mode(mode)  # type: ignore[arg-type]
    assert check_mode() == "always"


def test_context_beats_the_process_default_and_nested_blocks_restore():
    set_check_mode("never")
    with checks("always"):
        assert check_mode() == "always"
        with checks("once"):
            assert check_mode() == "once"
            with pytest.raises(RuntimeError), checks("never"):
                raise RuntimeError
            assert check_mode() == "once"
        set_check_mode("once")  # the default changes underneath; the block still wins
        assert check_mode() == "always"
    assert check_mode() == "once"
    block = checks("never")
    with block, block:  # one object entered twice still unwinds in order
        assert check_mode() == "never"
    assert check_mode() == "once" and repr(block) == "checks('never')"


def test_the_environment_default_is_reread_by_set_check_mode_none(monkeypatch):
    monkeypatch.setenv(_checked.ENV_VAR, " Never ")
    assert check_mode() == "always"  # not read per call
    set_check_mode(None)
    assert check_mode() == "never"
    for value, mode in (("ALWAYS", "always"), ("", "always"), ("once", "once")):
        monkeypatch.setenv(_checked.ENV_VAR, value)
        set_check_mode(None)
        assert check_mode() == mode
    set_check_mode("once")
    assert check_mode() == "once"
    monkeypatch.setenv(_checked.ENV_VAR, "sometimes")
    set_check_mode(None)
    with pytest.raises(ValueError, match=r"TRAJSCHEMA_CHECKS must be one of .* found 'sometimes'"):
        check_mode()
    with checks("never"):
        assert check_mode() == "never"


ENV_SCRIPT = textwrap.dedent(
    """
    import json, sys, trajschema as ts
    from trajschema.runtime.decorator import checked, check_mode, checks, set_check_mode
    out = {}
    @checked("text", arg="sample")
    def step(sample):
        return "ran"
    def attempt(f):
        try:
            return f()
        except Exception as e:
            return type(e).__name__ + ": " + str(e)
    out["mode"] = attempt(check_mode)
    out["call"] = attempt(lambda: step({"uid": 1}))
    with checks("never"):
        out["in_block"] = attempt(lambda: step({"uid": 1}))
    set_check_mode("always")
    out["after_set"] = attempt(lambda: step({"uid": 1}))[:11]
    print(json.dumps(out))
    """
)


#: TRAJSCHEMA_CHECKS value -> (check_mode() in a fresh process, a bad call there), run in parallel; the
#: other values are read in this process by set_check_mode(None), by the same code.
ENV_CASES = {
    "never": ("never", "ran"),
    "bogus": ("ValueError: the environment variable TRAJSCHEMA_CHECKS", "ValueError: the environment variable"),
}


def test_the_environment_variable_is_read_at_import_in_a_fresh_process():
    import json

    procs = {
        value: subprocess.Popen(
            [sys.executable, "-c", ENV_SCRIPT],
            env={**os.environ, _checked.ENV_VAR: value},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for value in ENV_CASES
    }
    for value, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr  # a bad value never breaks the import
        out = json.loads(stdout.strip().splitlines()[-1])
        mode, call = ENV_CASES[value]
        assert out["mode"].startswith(mode) and out["call"].startswith(call), (value, out)
        assert out["in_block"] == "ran" and out["after_set"] == "SchemaError", (value, out)
    assert "'bogus'" in out["mode"] and "'always', 'once', 'never'" in out["mode"]


def test_threads_keep_their_own_context():
    @checked(TEXT, arg="sample")
    def step(sample):
        return "ran"

    barrier = threading.Barrier(6)
    results: dict[int, list[str]] = {}

    def worker(i: int, mode: str) -> None:
        got = results.setdefault(i, [])
        with checks(mode):  # type: ignore[arg-type]
            barrier.wait()  # every thread is inside its block at once
            for _ in range(50):
                try:
                    got.append(step(bad()))
                except ts.SchemaError:
                    got.append("raised")
                time.sleep(0)
            barrier.wait()
        assert check_mode() == "always"

    modes = ["never", "always"] * 3
    threads = [threading.Thread(target=worker, args=(i, m)) for i, m in enumerate(modes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, m in enumerate(modes):
        assert results[i] == (["ran"] * 50 if m == "never" else ["raised"] * 50), (i, m)


def test_asyncio_tasks_keep_their_own_context():
    @checked(TEXT, arg="sample")
    async def step(sample):
        await asyncio.sleep(0)
        return "ran"

    async def task(mode: str) -> list[str]:
        got = []
        with checks(mode):  # type: ignore[arg-type]
            for _ in range(20):
                try:
                    got.append(await step(bad()))
                except ts.SchemaError:
                    got.append("raised")
                await asyncio.sleep(0)  # interleave with the other tasks
        return got

    async def main():
        with checks("never"):
            inherited = asyncio.create_task(step(bad()))  # the task copies the block's context
        results = await asyncio.gather(*(task(m) for m in ["never", "always", "never", "always"]))
        return await inherited, results

    inherited, results = asyncio.run(main())
    assert inherited == "ran"
    assert results == [["ran"] * 20, ["raised"] * 20] * 2


# -- "once" -----------------------------------------------------------------------------------------


def test_once_checks_until_one_check_passes_per_decorated_function():
    counting = Counting()
    ran = []

    @checked(counting.schema, arg="sample")
    def a(sample):
        ran.append("a")

    @checked(counting.schema, arg="sample")
    def b(sample):
        ran.append("b")

    with checks("once"):
        for _ in range(2):  # a failing first check raises, and the next call checks again
            with pytest.raises(ts.SchemaError):
                a(bad())
        assert counting.calls == 2
        a(good())
        assert counting.calls == 3
        a(bad())  # passed once: no more checks
        a(bad())
        assert counting.calls == 3
        b(good())  # each decorated function has its own state
        assert counting.calls == 4
    with pytest.raises(ts.SchemaError):  # "always" still checks every call
        a(bad())
    assert counting.calls == 5
    with checks("once"):
        a(bad())
    assert ran == ["a", "a", "a", "b", "a"]


def test_once_is_shared_by_all_instances_of_a_method():
    counting = Counting()

    class Trainer:
        @checked(counting.schema)
        def step(self, batch):
            return self

    with checks("once"):
        for _ in range(3):
            Trainer().step([good()])
    assert counting.calls == 1


def test_once_concurrent_first_calls_check_exactly_once():
    counting = Counting(delay=0.05)

    @checked(counting.schema, arg="sample")
    def step(sample):
        return "ran"

    set_check_mode("once")  # threads do not inherit a checks() block; the default reaches them
    barrier = threading.Barrier(8)
    out: list[str] = []

    def worker() -> None:
        barrier.wait()
        out.append(step(good()))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == ["ran"] * 8 and counting.calls == 1


def test_once_concurrent_failing_first_calls_each_check():
    counting = Counting(delay=0.02)

    @checked(counting.schema, arg="sample")
    def step(sample):
        return "ran"

    set_check_mode("once")
    barrier = threading.Barrier(4)
    out: list[str] = []

    def worker(sample) -> None:
        barrier.wait()
        try:
            out.append(step(sample))
        except ts.SchemaError:
            out.append("raised")

    threads = [threading.Thread(target=worker, args=(bad(),)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == ["raised"] * 4 and counting.calls == 4
    assert step(good()) == "ran" and step(bad()) == "ran" and counting.calls == 5


# -- a model of the modes, against the decorator ------------------------------------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(["call", "set", "reset"]),
        st.sampled_from(MODES),
        st.sampled_from([None, *MODES]),  # the checks() block around a call, if any
        st.booleans(),  # the sample is good
    ),
    max_size=25,
)


@settings(deadline=None)
@given(OPS)
def test_the_decorator_follows_a_simple_model_of_the_modes(ops):
    counting = Counting()

    @checked(counting.schema, arg="sample")
    def step(sample):
        return "ran"

    samples = {True: good(), False: bad()}
    default, passed, checks_expected = "always", False, 0
    set_check_mode(None)
    try:
        for op, mode, block, ok in ops:
            if op == "set":
                set_check_mode(mode)
                default = mode
                continue
            if op == "reset":
                set_check_mode(None)
                default = "always"
                continue
            effective = block or default
            should_check = effective == "always" or (effective == "once" and not passed)
            checks_expected += should_check
            expected = "raised" if should_check and not ok else "ran"
            passed = passed or (should_check and ok and effective == "once")
            ctx = checks(block) if block else _nullcontext()
            with ctx:
                try:
                    got = step(samples[ok])
                except ts.SchemaError:
                    got = "raised"
            assert got == expected
            assert counting.calls == checks_expected
    finally:
        set_check_mode(None)


class _nullcontext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None
