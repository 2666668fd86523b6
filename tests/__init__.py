"""The test suite, a package so that no test folder is importable under its own name.

pytest's default ``prepend`` import mode puts on ``sys.path`` the first folder above a
test file that is not a package. Were ``tests/`` not one, ``tests/verl/`` would import as
``verl`` and hide whether the real trainer is installed; as a package, pytest puts the
repository root there and imports ``tests.verl.test_...`` (``tests/test_trainer_skips.py``
pins it).
"""
