"""Runtime checks in training code: ``@checked(schema)`` validates an argument on every call.

The check mode says how often a decorated function checks: ``"always"`` (every call, the
default), ``"once"`` (each decorated function checks until one check made in ``"once"``
mode has passed) or ``"never"``.
It is read at call time, from (first match wins):

1. the innermost ``with checks(mode):`` block of the current context (a
   `contextvars.ContextVar`, so it is thread- and asyncio-task-local);
2. the process-wide default set by [`set_check_mode`][trajschema.set_check_mode];
3. the environment variable ``TRAJSCHEMA_CHECKS`` (case and surrounding blanks ignored;
   unset or empty means ``"always"``), read once when this module is imported (by
   ``import trajschema``) and again by ``set_check_mode(None)``; never per call, which
   would cost more than the whole budget of a ``"never"`` call.

For a plain Python function the wrapper is generated with the function's own parameter
list (Python binds the call; no ``*args``/``**kwargs`` repacking), so a ``"never"`` call
costs one context-variable read, one attribute read, a comparison and the call itself
(about 0.1 µs: benchmarks/ part 6).
The generated source never spells the function's ``__name__`` (which may be any string,
a keyword or empty), and its own names take a prefix that no parameter name starts with,
so any parameter names work; the wrapper then takes the function's name, qualified name,
code name, docstring and ``__wrapped__`` like ``functools.wraps``.
Other callables (callable objects, partials, functions carrying ``__wrapped__``) get a
``*args, **kwargs`` wrapper that finds the argument at its precomputed position; so do
functions whose code spells a parameter name in a form Python's parser would rewrite
(not NFKC-normalised).

A bad ``TRAJSCHEMA_CHECKS`` value does not break ``import trajschema``: it is a
``ValueError`` (naming the variable, the value and the valid modes) at the first call of
a decorated function that falls back to it, and from [`check_mode`][trajschema.check_mode].
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
import sys
import threading
import types
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, NoReturn, TypeVar

from trajschema.check import is_tensordict
from trajschema.core import DEPTHS, Depth, SchemaError, describe_value
from trajschema.load import resolve_schema
from trajschema.schema import Schema

__all__ = ["ENV_VAR", "MODES", "CheckMode", "check_mode", "checked", "checks", "set_check_mode"]

CheckMode = Literal["always", "once", "never"]
"""How often a ``@checked`` function checks its argument."""
MODES: tuple[CheckMode, ...] = ("always", "once", "never")
#: The environment variable holding the default check mode.
ENV_VAR = "TRAJSCHEMA_CHECKS"

_F = TypeVar("_F", bound=Callable[..., Any])

# The mode of the innermost ``checks(...)`` block; None outside any.
_CONTEXT_MODE: contextvars.ContextVar[str | None] = contextvars.ContextVar("trajschema_check_mode", default=None)


class _Default:
    """The process-wide default: a valid mode, or ``_BAD_ENV`` when ``TRAJSCHEMA_CHECKS`` is malformed."""

    __slots__ = ("env_value", "mode")

    def __init__(self) -> None:
        self.mode = "always"
        self.env_value = ""


_BAD_ENV = "<bad TRAJSCHEMA_CHECKS>"
_DEFAULT = _Default()


def _valid_mode(mode: object, what: str) -> CheckMode:
    if not isinstance(mode, str) or mode not in MODES:
        raise ValueError(f"{what}: expected one of {', '.join(map(repr, MODES))}, found {mode!r}")
    return mode


def _read_env() -> None:
    """Set the process-wide default from ``TRAJSCHEMA_CHECKS`` (unset or empty: ``"always"``)."""
    raw = os.environ.get(ENV_VAR, "")
    value = raw.strip().lower()
    _DEFAULT.env_value = raw
    _DEFAULT.mode = "always" if not value else value if value in MODES else _BAD_ENV


def _bad_env_error() -> ValueError:
    return ValueError(
        f"the environment variable {ENV_VAR} must be one of {', '.join(map(repr, MODES))} "
        f"(or unset or empty for 'always'), found {_DEFAULT.env_value!r}"
    )


def check_mode() -> CheckMode:
    """The check mode in force here and now: the innermost ``checks`` block, else the process default.

    Examples:
        >>> with ts.checks("never"):
        ...     ts.check_mode()
        'never'

    Raises:
        ValueError: no block or [`set_check_mode`][trajschema.set_check_mode] overrides a
            malformed ``TRAJSCHEMA_CHECKS``.
    """
    mode = _CONTEXT_MODE.get() or _DEFAULT.mode
    if mode == _BAD_ENV:
        raise _bad_env_error()
    return mode  # type: ignore[return-value]


def set_check_mode(mode: CheckMode | None) -> None:
    """Set the process-wide default check mode; ``None`` re-reads ``TRAJSCHEMA_CHECKS``.

    ``with checks(...)`` blocks still override it where they are in force.

    Examples:
        >>> ts.set_check_mode("once")
        >>> ts.check_mode()
        'once'
        >>> ts.set_check_mode(None)  # back to TRAJSCHEMA_CHECKS (unset: "always")

    Raises:
        ValueError: ``mode`` is not ``"always"``, ``"once"``, ``"never"`` or ``None``.
    """
    if mode is None:
        _read_env()
    else:
        _DEFAULT.mode = _valid_mode(mode, "set_check_mode(mode)")


class checks:  # lower case: used like a function, ``with ts.checks("never"):``
    """A context manager setting the check mode for the code it runs, in this context only.

    Backed by a `contextvars.ContextVar`: other threads and other asyncio tasks
    keep their own mode, nested blocks restore the outer mode on exit, and a task created
    inside the block (``asyncio.create_task`` copies the context) keeps the block's mode.
    A thread started inside the block does not inherit it (before Python 3.14).

    Examples:
        >>> with ts.checks("never"):
        ...     with ts.checks("always"):
        ...         inner = ts.check_mode()
        ...     outer = ts.check_mode()
        >>> inner, outer
        ('always', 'never')

    Raises:
        ValueError: ``mode`` is not ``"always"``, ``"once"`` or ``"never"`` (at construction).
    """

    def __init__(self, mode: CheckMode) -> None:
        self.mode = _valid_mode(mode, "checks(mode)")
        self._tokens: list[contextvars.Token[str | None]] = []

    def __enter__(self) -> checks:
        self._tokens.append(_CONTEXT_MODE.set(self.mode))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        _CONTEXT_MODE.reset(self._tokens.pop())

    def __repr__(self) -> str:
        return f"checks({self.mode!r})"


# ---------------------------------------------------------------------------------------
# The decorator

_MISSING: Any = object()


class _Slot:
    """Where a parameter's value sits in ``(args, kwargs)``, precomputed from the signature."""

    __slots__ = ("default", "index", "keyword", "name")

    def __init__(self, sig: inspect.Signature, name: str, what: str, where: str) -> None:
        param = sig.parameters.get(name)
        if param is None:
            known = ", ".join(sig.parameters) or "none"
            raise TypeError(f"{where}: {what}={name!r} names no parameter of the function (its parameters: {known})")
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"{where}: {what}={name!r} names *{name} or **{name}; it must name one parameter")
        positional = (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD)
        self.name = name
        self.index = list(sig.parameters).index(name) if param.kind in positional else None
        self.keyword = param.kind is not param.POSITIONAL_ONLY
        self.default = _MISSING if param.default is param.empty else param.default

    def pick(self, sig: inspect.Signature, args: tuple[Any, ...], kwargs: Mapping[str, Any], where: str) -> Any:
        i = self.index
        if i is not None and len(args) > i:
            if kwargs and self.keyword and self.name in kwargs:
                _bind_error(sig, args, kwargs, where)  # multiple values for the argument
            return args[i]
        if self.keyword and self.name in kwargs:
            return kwargs[self.name]
        if self.default is _MISSING:
            _bind_error(sig, args, kwargs, where)  # a missing argument
        return self.default


def _bind_error(sig: inspect.Signature, args: tuple[Any, ...], kwargs: Mapping[str, Any], where: str) -> NoReturn:
    """Raise the TypeError of a call that does not fit ``sig`` (the body never runs)."""
    try:
        sig.bind(*args, **kwargs)
    except TypeError as exc:
        raise TypeError(f"{where}: {exc}") from None
    raise TypeError(f"{where}: the call does not fit the signature {sig}")  # pragma: no cover


class _Checker:
    """The check one decorated function runs, and its ``"once"`` state."""

    def __init__(self, schema: Schema, depth: Depth, where: str, arg: str, tags_arg: str | None) -> None:
        self.schema, self.depth, self.where, self.arg, self.tags_arg = schema, depth, where, arg, tags_arg
        self.passed = False  # "once": a check has passed
        self.lock = threading.RLock()

    def check(self, mode: str, value: Any, tags: Any) -> None:
        if mode == "always":
            self.run(value, tags)
        elif mode == "once":
            if self.passed:
                return
            with self.lock:  # concurrent first calls wait; exactly one check passes
                if not self.passed:
                    self.run(value, tags)
                    self.passed = True
        elif mode == _BAD_ENV:
            raise _bad_env_error()
        else:  # pragma: no cover - modes are validated where they are set
            raise ValueError(f"unknown check mode {mode!r}")

    def run(self, value: Any, tags: Any) -> None:
        schema, depth = self.schema, self.depth
        if type(value) is dict or (
            isinstance(value, Mapping) and not (is_tensordict(value) and getattr(value, "batch_dims", 0) > 0)
        ):
            if tags is not None and not isinstance(tags, Mapping):
                raise TypeError(
                    f"{self.where}: {self.tags_arg!r} must be the sample's tag dict, found {type(tags).__name__}"
                )
            try:
                schema.validate(value, tag=tags, depth=depth)
            except SchemaError as exc:
                raise _noted(exc, f"{self.where}: argument {self.arg!r} (a sample)") from None
        elif is_tensordict(value) or (isinstance(value, Sequence) and not isinstance(value, (str, bytes))):
            try:
                schema.validate_batch(value, tags=tags, depth=depth)
            except SchemaError as exc:
                raise _noted(exc, f"{self.where}: argument {self.arg!r} (a batch)") from None
        else:
            raise TypeError(
                f"{self.where}: argument {self.arg!r} must be a sample (a mapping) or a batch (a list of "
                f"samples or a TensorDict), found {type(value).__name__}"
            )


def _noted(exc: SchemaError, note: str) -> SchemaError:
    """``exc`` with a note naming the decorated function and argument (Python 3.11+ prints notes)."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    return exc


def _resolve_schema(schema: Any) -> Schema:
    try:
        return resolve_schema(schema)
    except TypeError:
        # The load room's refusal, in the words of checked's other argument errors, with the usual slip named.
        hint = "; write @checked(schema), not @checked" if callable(schema) else ""
        found = describe_value(schema)
        raise TypeError(f"checked(schema): expected a Schema or a schema name, found {found}{hint}") from None


def checked(
    schema: Schema | str, arg: str = "batch", depth: Depth = "shapes", tags_arg: str | None = None
) -> Callable[[_F], _F]:
    """Decorate a function so that it validates one of its arguments before its body runs.

    The argument named ``arg`` is a sample (a mapping, e.g. a dict or a TensorDict row),
    checked with ``schema.validate``, or a batch (a list of samples or a TensorDict),
    checked with ``schema.validate_batch``. A failed check raises [`SchemaError`][trajschema.SchemaError]
    with every violation, and the body does not run. How often it checks is the check
    mode at call time (see [`checks`][trajschema.checks], [`set_check_mode`][trajschema.set_check_mode]): ``"always"``,
    ``"once"`` or ``"never"``. In ``"once"`` mode each decorated function checks until
    one check made in ``"once"`` mode has passed, and never again: a failed check raises
    and the next call checks again; concurrent first calls wait for each other, so
    exactly one check passes; a method shares one state among all its instances.

    Works on functions, methods, static and class methods (``self``/``cls`` are bound
    like any parameter; put ``@checked`` below or above ``@staticmethod``/``@classmethod``)
    and ``async def`` functions, whose check runs when the coroutine starts (when it is
    awaited or its task first runs), in that context's mode. The wrapper keeps the
    function's name, qualified name, docstring and signature (whatever they are: a
    ``__name__`` that is a keyword or not an identifier, parameters named like anything),
    and a module-level decorated function pickles by reference. A generator function is
    checked when it is called.

    Examples:
        >>> @ts.checked("text", arg="sample")
        ... def tokens(sample):
        ...     return sample["input_ids"].numel()
        >>> try:
        ...     tokens({"uid": "q0"})  # the body never runs
        ... except ts.SchemaError as e:
        ...     print(len(e.violations), e.violations[0])
        7 prompts: required field is missing (expected int64[prompt])
        >>> with ts.checks("never"):
        ...     tokens({"input_ids": torch.arange(3)})
        3

    Args:
        schema: a [`Schema`][trajschema.Schema], or a schema name or path, loaded once, at decoration
            (so a wrong name fails at import, whatever the mode).
        arg: the parameter holding the sample or batch.
        depth: ``"shapes"`` (the default: reads no tensor values) or ``"values"``.
        tags_arg: the parameter holding the tag dict of a sample or the list of tag
            dicts of a batch (``None`` there means no tags), or ``None``.

    Raises:
        TypeError: at decoration: ``schema`` is not a Schema or str, ``arg`` or
            ``tags_arg`` names no single parameter, or the decorated object is not
            callable. At call time: the argument is neither a sample nor a batch.
        ValueError: at decoration: ``depth`` is not ``"shapes"`` or ``"values"``, or
            ``arg == tags_arg``.
        trajschema.SchemaNotFoundError: at decoration: no schema of that name.
    """
    resolved = _resolve_schema(schema)
    if depth not in DEPTHS:
        raise ValueError(f"checked(depth=...): expected one of {', '.join(map(repr, DEPTHS))}, found {depth!r}")
    for what, name in (("arg", arg), ("tags_arg", tags_arg)):
        if not (isinstance(name, str) or (what == "tags_arg" and name is None)):
            raise TypeError(f"checked({what}=...): expected a parameter name (str), found {type(name).__name__}")
    # Plain str copies: a str subclass could compare, hash or format (into generated source) as other text.
    arg = str.__str__(arg)
    tags_arg = None if tags_arg is None else str.__str__(tags_arg)
    if tags_arg == arg:
        raise ValueError(f"checked(arg=..., tags_arg=...): both name {arg!r}; the tags need a parameter of their own")

    def decorate(fn: _F) -> _F:
        if isinstance(fn, (staticmethod, classmethod)):
            return type(fn)(_wrap(fn.__func__, resolved, arg, depth, tags_arg))
        return _wrap(fn, resolved, arg, depth, tags_arg)

    return decorate


def _wrap(fn: Any, schema: Schema, arg: str, depth: Depth, tags_arg: str | None) -> Any:
    if not callable(fn):
        raise TypeError(f"@checked(...) decorates a function, found {type(fn).__name__}")
    where = f"@checked on {_label(fn)}()"
    try:
        sig = inspect.signature(fn)
        is_async = inspect.iscoroutinefunction(fn)
    except Exception as exc:  # inspect runs the object's own code: __signature__, __wrapped__, ...
        raise TypeError(f"{where}: cannot read the function's signature ({type(exc).__name__}: {exc})") from None
    if _signature_is_code(fn):
        _same_parameters_as_code(fn, sig, where)
    slot = _Slot(sig, arg, "arg", where)
    tags = None if tags_arg is None else _Slot(sig, tags_arg, "tags_arg", where)
    check = _Checker(schema, depth, where, arg, tags_arg)
    wrapper = _exact_wrapper(fn, sig, check, arg, tags_arg, is_async)
    if wrapper is None:
        wrapper = _generic_wrapper(fn, sig, check, slot, tags, is_async)
    return _mirror(wrapper, fn)


def _label(fn: Any) -> str:
    """``fn``'s qualified name (else its type's name) for messages and file names, control characters escaped."""
    try:
        name = getattr(fn, "__qualname__", None)
    except Exception:  # a property of a callable object's own: the label must not fail
        name = None
    if not isinstance(name, str) or not name:
        name = type(fn).__name__
    # A NUL would make compile() refuse the file name; a newline would forge message lines.
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in name)


def _signature_is_code(fn: Any) -> bool:
    """Whether ``inspect.signature(fn)`` is read from ``fn``'s code (a plain function, nothing overriding it)."""
    return isinstance(fn, types.FunctionType) and not hasattr(fn, "__wrapped__") and not hasattr(fn, "__signature__")


def _same_parameters_as_code(fn: Any, sig: inspect.Signature, where: str) -> None:
    """Refuse a function whose signature lost parameters of its code (two spelled alike: ``a, a``).

    Source cannot define one, but ``code.replace(co_varnames=...)`` can; the signature then
    shows one parameter for two, and no argument could be found by name.
    """
    code = fn.__code__
    count = code.co_argcount + code.co_kwonlyargcount
    count += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    if len(sig.parameters) != count:
        names = ", ".join(code.co_varnames[:count])
        raise TypeError(
            f"{where}: the function's code has {count} parameters ({names}) but its signature only "
            f"{len(sig.parameters)}: two names that the signature cannot tell apart"
        )


def _mirror(wrapper: Any, fn: Any) -> Any:
    """``functools.wraps(fn)(wrapper)`` that copies what a function can hold and skips the rest.

    A callable object's ``__name__`` may be any object (a function's must be a str), its
    ``__dict__`` need not be a dict, and reading either may raise: none of that may break
    decoration, so what cannot be mirrored keeps the wrapper's own value.
    """
    for attr in functools.WRAPPER_ASSIGNMENTS:
        try:
            value = getattr(fn, attr)
        except Exception:  # missing, or a property that raises
            continue
        try:
            setattr(wrapper, attr, value)
        except TypeError:  # e.g. a non-str __name__, a non-dict __annotations__
            continue
    try:
        extra = getattr(fn, "__dict__", None)
    except Exception:
        extra = None
    if isinstance(extra, (dict, types.MappingProxyType)):
        wrapper.__dict__.update(extra)
    wrapper.__wrapped__ = fn
    return wrapper


def _generic_wrapper(
    fn: Any, sig: inspect.Signature, check: _Checker, slot: _Slot, tags: _Slot | None, is_async: bool
) -> Any:
    """A ``*args, **kwargs`` wrapper for any callable: finds the argument by its precomputed slot.

    Its own names are closure variables: a keyword argument named ``args``, ``fn`` or
    ``check`` lands in ``kwargs`` like any other.
    """
    get, default, where, run = _CONTEXT_MODE.get, _DEFAULT, check.where, check.check

    def pick(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        return slot.pick(sig, args, kwargs, where), None if tags is None else tags.pick(sig, args, kwargs, where)

    if is_async:

        async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
            mode = get() or default.mode
            if mode != "never" and not (mode == "once" and check.passed):
                run(mode, *pick(args, kwargs))
            return await fn(*args, **kwargs)

        return async_wrapper

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        mode = get() or default.mode
        if mode != "never" and not (mode == "once" and check.passed):
            run(mode, *pick(args, kwargs))
        return fn(*args, **kwargs)

    return wrapper


# Every name the generated source uses is a prefix that no parameter name starts with
# (see _prefix) and a suffix; the function's own __name__ is never spelled.
_TEMPLATE = """
{kw}def {p}wrapper({params}):
    {p}mode = {p}get() or {p}default.mode
    if {p}mode != "never" and not ({p}mode == "once" and {p}state.passed):
        {p}check({p}mode, {arg}, {tags})
    return {aw}{p}fn({forward})
"""


def _prefix(names: Sequence[str]) -> str:
    """``_trajschema_``, else the first ``_trajschemaN_`` (N = 1, 2, ...) that no name in ``names`` starts with.

    A name starts with at most one of these prefixes, so the search ends within
    ``len(names) + 1`` tries.
    """
    prefix, n = "_trajschema_", 0
    while any(name.startswith(prefix) for name in names):
        n += 1
        prefix = f"_trajschema{n}_"
    return prefix


def _exact_wrapper(
    fn: Any, sig: inspect.Signature, check: _Checker, arg: str, tags_arg: str | None, is_async: bool
) -> Any:
    """A wrapper with ``fn``'s own parameters (no ``*args`` packing: the fast path), or None.

    Only for plain Python functions whose signature is their code's (not for callable
    objects, partials, or functions carrying ``__wrapped__``/``__signature__``). Python
    itself binds the call, so a call that does not fit raises Python's own TypeError
    before anything runs.
    """
    if not _signature_is_code(fn):
        return None
    # The parser NFKC-normalises identifiers: a code object renamed to, e.g., "ᵃ" (not by
    # source) would become "a" in ours and refuse the keyword fn itself takes.
    if any(unicodedata.normalize("NFKC", name) != name for name in sig.parameters):
        return None
    p = _prefix(list(sig.parameters))
    params, forward, defaults = _parameter_text(sig, p)
    source = _TEMPLATE.format(
        kw="async " if is_async else "",
        aw="await " if is_async else "",
        params=params,
        forward=forward,
        arg=arg,
        tags=tags_arg or "None",
        p=p,
    )
    namespace: dict[str, Any] = {
        f"{p}get": _CONTEXT_MODE.get,
        f"{p}default": _DEFAULT,
        f"{p}check": check.check,
        f"{p}state": check,
        f"{p}fn": fn,
        f"{p}defaults": defaults,
    }
    exec(compile(source, f"<{check.where}>", "exec"), namespace)  # our own template, names that cannot collide
    wrapper = namespace[f"{p}wrapper"]
    # Python's own TypeErrors (a missing argument, ...) and tracebacks then name the decorated function.
    names = {"co_name": fn.__code__.co_name}
    if sys.version_info >= (3, 11):
        names["co_qualname"] = fn.__code__.co_qualname
    wrapper.__code__ = wrapper.__code__.replace(**names)
    return wrapper


def _parameter_text(sig: inspect.Signature, prefix: str) -> tuple[str, str, list[Any]]:
    """(the parameter list, the forwarding call's arguments, the default values) of ``sig``.

    A default is spelled ``{prefix}defaults[i]``: the very object, whatever its repr.
    """
    params: list[str] = []
    forward: list[str] = []
    defaults: list[Any] = []
    ps = list(sig.parameters.values())
    last_positional_only = max((i for i, p in enumerate(ps) if p.kind is p.POSITIONAL_ONLY), default=-1)
    starred = False
    for i, p in enumerate(ps):
        if p.kind is p.KEYWORD_ONLY and not starred:
            params.append("*")
        starred = starred or p.kind in (p.KEYWORD_ONLY, p.VAR_POSITIONAL)
        default = ""
        if p.default is not p.empty:
            default = f"={prefix}defaults[{len(defaults)}]"
            defaults.append(p.default)
        if p.kind is p.VAR_POSITIONAL:
            params.append(f"*{p.name}")
            forward.append(f"*{p.name}")
        elif p.kind is p.VAR_KEYWORD:
            params.append(f"**{p.name}")
            forward.append(f"**{p.name}")
        else:
            params.append(p.name + default)
            forward.append(f"{p.name}={p.name}" if p.kind is p.KEYWORD_ONLY else p.name)
        if i == last_positional_only:
            params.append("/")
    return ", ".join(params), ", ".join(forward), defaults


_read_env()
