"""A batch recorded in a real run, as a regression test: load its bundle, assert it (still) checks.

A bundle ``install(record=...)`` wrote when a step broke (or `trajschema.record_batch`
wrote by hand) goes into the test suite's folder; `recorded_batch` reads it back (payloads
verified) and `assert_bundle_valid` fails with every violation, against the schema it was
recorded with, or the one the code uses now (``schema=``), so a schema change that would
reject a batch seen in production shows in CI. The pytest fixture ``trajschema_bundle``
(``trajschema_pytest``) reads one relative to the test's own file.
"""

from __future__ import annotations

import os
from typing import Any

from trajschema.bundle import Bundle, load_bundle
from trajschema.schema import Schema

__all__ = ["assert_bundle_valid", "recorded_batch"]


def recorded_batch(path: str | os.PathLike[str]) -> Bundle:
    """The bundle at ``path``, every payload verified (`trajschema.load_bundle`).

    Raises:
        BundleError, BundleIntegrityError, BundleVersionError: as `trajschema.load_bundle`.
    """
    return load_bundle(path)


def assert_bundle_valid(
    bundle: Bundle | str | os.PathLike[str], *, schema: Schema | str | None = None, depth: str = "values"
) -> None:
    """Fail, with every violation, unless the recorded batch follows its schema (or ``schema``) in its layout.

    Examples:
        >>> from trajschema.testing import assert_bundle_valid
        >>> assert_bundle_valid("tests/fixtures/bundles/step-00000012")  # doctest: +SKIP

    Raises:
        AssertionError: with [`SchemaError`][trajschema.SchemaError]'s report; ``.violations`` holds them all.
        BundleError and its kinds: ``bundle`` is a path that holds no readable bundle.
    """
    __tracebackhide__ = True
    from trajschema.core import SchemaError

    read: Any = bundle if isinstance(bundle, Bundle) else load_bundle(bundle)
    try:
        read.validate(schema=schema, depth=depth)
    except SchemaError as exc:
        error = AssertionError(f"the batch recorded at {read.path} breaks its schema:\n{exc}")
        error.violations = exc.violations  # type: ignore[attr-defined]
        raise error from None
