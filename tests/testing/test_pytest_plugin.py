"""The pytest plugin: loading it imports nothing heavy, helper frames are hidden, and the trajschema_tq fixture."""

from __future__ import annotations

import importlib.metadata

import pytest

pytest_plugins = ["pytester"]

HEAVY = ("torch", "trajschema", "tensordict", "ray", "transfer_queue")


# Importing the plugin imports neither torch nor trajschema:
# one of the import claims of tests/test_public_api.py, which one interpreter checks together.


def test_the_plugin_is_registered_as_a_pytest11_entry_point():
    points = {e.name: e.value for e in importlib.metadata.entry_points(group="pytest11")}
    assert points.get("trajschema") == "trajschema_pytest"


@pytest.mark.slow
def test_a_plain_pytest_run_loads_the_plugin_imports_neither_and_skips_trajschema_tq_without_ray(pytester):
    pytester.makepyfile(
        test_a=f"""
        import sys

        def test_nothing_heavy(request):
            assert request.config.pluginmanager.get_plugin("trajschema") is not None
            assert "trajschema_pytest" in sys.modules
            assert [m for m in {HEAVY!r} if sys.modules.get(m) is not None] == []
        """,
        test_b="""
        import sys

        sys.modules["ray"] = None  # `import ray` now raises ImportError, as when ray is not installed

        def test_needs_tq(trajschema_tq):
            raise AssertionError("must not run")
        """,
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*trajschema_tq needs the tq extra (ray and transfer_queue)*trajschema[[]tq[]]*"])


def test_the_plugin_offers_its_fixtures(pytester):
    result = pytester.runpytest("-p", "no:cacheprovider", "--fixtures")  # in-process: nothing is imported
    result.stdout.fnmatch_lines(["*fixtures defined from trajschema_pytest*"])
    result.stdout.fnmatch_lines_random(["trajschema_tq -- *", "trajschema_tq_session *", "trajschema_bundle -- *"])


@pytest.mark.slow
def test_failing_helpers_show_the_report_without_the_helpers_frames(pytester):
    pytester.makepyfile(
        """
        import torch
        from trajschema.testing import assert_padding_invariant, assert_valid, verl_sample

        def test_bad_sample():
            sample = verl_sample("text", 4, 3)
            sample["loss_mask"] = torch.full((3,), 5)
            sample["input_ids"] = sample["input_ids"][:-1]
            assert_valid(sample, "text")

        def test_the_helpers_module_was_assertion_rewritten():
            import trajschema.testing.assertions as helpers

            assert type(helpers.__loader__).__name__ == "AssertionRewritingHook"

        def test_row_count_metric():
            batch = [verl_sample("text", 3, 2, uid=f"q{i}") for i in range(3)]
            assert_padding_invariant(lambda b, tags: len(b), batch, None, "text", eos_token_id=2, multiple=4)
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--tb=long")
    result.assert_outcomes(failed=2, passed=1)
    result.stdout.fnmatch_lines(
        [
            "*2 violations of schema 'text':",
            "*loss_mask*value*",
            "*input_ids*",
            "*fn is not invariant under schema padding*",
            "*the result: 3 unpadded, 4 padded*",
        ]
    )
    out = result.stdout.str()
    assert "testing/assertions.py" not in out and "def _fail_validation" not in out
    assert 'assert_valid(sample, "text")' in out  # the test's own line is shown


# -- the fixture itself, on a real local TransferQueue (run under flock /tmp/trajschema-ray.lock) --

_seen: dict[str, str] = {}


@pytest.mark.tq
def test_trajschema_tq_gives_a_working_transferqueue_and_a_partition_of_the_tests_own(trajschema_tq, request):
    pytest.importorskip("transfer_queue")
    from trajschema import TransferQueueWriter, load_schema
    from trajschema.testing import assert_valid, verl_sample

    schema = load_schema("text")
    tq, pid = trajschema_tq.client, trajschema_tq.partition_id
    assert pid.startswith("test_trajschema_tq_gives_a_working")
    samples = [verl_sample(schema, 3, r, uid="q0", seed=r) for r in (2, 5)]
    writer = TransferQueueWriter(schema, partition_id=pid, eos_token_id=2, client=tq)
    writer.put(["k0", "k1"], samples)
    assert sorted(tq.kv_list(pid)[pid]) == ["k0", "k1"]
    got = tq.kv_batch_get(["k0", "k1"], pid)
    assert_valid(got, schema)
    assert got["responses"].offsets().tolist() == [0, 2, 7]
    _seen["partition"] = pid
    _seen["session"] = id(request.getfixturevalue("trajschema_tq_session"))


@pytest.mark.tq
def test_trajschema_tq_cleared_the_last_tests_partition_and_gives_a_new_one(trajschema_tq, request):
    if "partition" not in _seen:
        pytest.skip("runs after test_trajschema_tq_gives_a_working_transferqueue_...")
    tq, before = trajschema_tq.client, _seen["partition"]
    assert trajschema_tq.partition_id != before
    assert list(tq.kv_list(before).get(before, {})) == []
    assert id(request.getfixturevalue("trajschema_tq_session")) == _seen["session"]  # one TransferQueue a session
