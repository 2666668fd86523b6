"""``trajschema demo`` for real: a subprocess that starts its own local Ray + TransferQueue, as a user would.

The session's TransferQueue (``trajschema_tq_session``) is running in this process while
the subprocess starts a second local Ray on the same machine; both must work, and the
subprocess must leave nothing running and print nothing but its report (with ``--json``, one
JSON object saying what the report says).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

import trajschema as ts
from tests.demo_support import expected_metrics
from trajschema.cli.rollout import build_rollout

pytestmark = [pytest.mark.tq, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
# Small sizes keep the run short: nearly all of it is starting and stopping Ray.
ARGS = {"schema": "vlm_mrope_moe", "prompts": 12, "rollout_n": 4, "dp_size": 4, "mini_batch_size": 5, "seed": 3}
RUN_TIMEOUT_S = 180
EXIT_WAIT_S = 15  # for Ray's processes to exit after the subprocess did


def _command(*extra: str) -> list[str]:
    options = [f"--{k.replace('_', '-')}={v}" for k, v in ARGS.items()]
    return [sys.executable, "-m", "trajschema", "demo", *options, *extra]


def _processes_using(marker: str) -> list[str]:
    """Live processes whose command line or open files mention ``marker`` (a Ray temp dir of the test's own)."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if p.pid == os.getpid() or p.status() == psutil.STATUS_ZOMBIE:
                continue
            if marker in cmd or any(marker in f.path for f in p.open_files()):
                found.append(f"{p.pid} (parent {p.ppid()}) {cmd[:100]}")
        except psutil.Error:
            continue
    return found


def _left_behind(marker: str) -> list[str]:
    deadline = time.monotonic() + EXIT_WAIT_S
    while True:
        left = _processes_using(marker)
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.5)


def _field(out: str, label: str, pattern: str) -> tuple[str, ...]:
    match = re.search(rf"^{re.escape(label)}\s+{pattern}", out, flags=re.MULTILINE)
    assert match, f"no {label!r} line matching {pattern!r} in:\n{out}"
    return match.groups()


@dataclasses.dataclass
class DemoRun:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    seen_running: int  # most processes of its Ray seen at once while it ran: the finder sees them
    sessions: int  # Ray session dirs under its temp dir: its Ray used that dir
    left: list[str]  # processes of its Ray still running after it exited


def _run(ray_tmp: str, *extra: str) -> DemoRun:
    env = {**os.environ, "RAY_TMPDIR": ray_tmp}
    out, err = Path(ray_tmp, "stdout"), Path(ray_tmp, "stderr")
    started = time.perf_counter()
    seen = 0
    with out.open("w") as out_f, err.open("w") as err_f:
        proc = subprocess.Popen(_command(*extra), cwd=REPO, env=env, stdout=out_f, stderr=err_f, text=True)
        try:
            while proc.poll() is None and time.perf_counter() - started < RUN_TIMEOUT_S:
                seen = max(seen, len(_processes_using(os.path.join(ray_tmp, "ray"))))
                time.sleep(1.0)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
    seconds = time.perf_counter() - started
    left = _left_behind(os.path.join(ray_tmp, "ray"))
    sessions = len([d for d in Path(ray_tmp).glob("ray/session_*") if not d.is_symlink()])  # not session_latest
    return DemoRun(proc.returncode, out.read_text(), err.read_text(), seconds, seen, sessions, left)


def _run_apart(*extra: str) -> DemoRun:
    """Run the demo once, in a subprocess with a Ray temp dir of its own."""
    # Every process of the subprocess's Ray (workers too) holds a file under its temp dir:
    # a dir of our own tells its processes from the session's Ray and any other on the machine.
    ray_tmp = tempfile.mkdtemp(prefix="tsdemo-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    try:
        return _run(ray_tmp, *extra)
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def demo_runs(trajschema_tq_session) -> tuple[DemoRun, DemoRun]:
    """The demo and ``demo --json``, side by side (most of each is waiting on its Ray to start and
    stop), each with a Ray of its own, while this process's Ray + TransferQueue is up."""
    assert trajschema_tq_session.client is not None
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        text, as_json = pool.submit(_run_apart), pool.submit(_run_apart, "--json")
        return text.result(), as_json.result()


@pytest.fixture(scope="module")
def demo_run(demo_runs) -> DemoRun:
    return demo_runs[0]


@pytest.fixture(scope="module")
def demo_json_run(demo_runs) -> DemoRun:
    return demo_runs[1]


def test_demo_exits_0_and_prints_only_its_report(demo_run):
    done = demo_run
    assert done.returncode == 0, f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.stderr == "", done.stderr
    for noise in ("Warning", "WARNING", "Traceback", "Started a local Ray instance", " - INFO - ", "prototype"):
        assert noise not in done.stdout, f"{noise!r} in:\n{done.stdout}"
    # torch's own log format, e.g. "W1201 14:24:58.507000 29325 torch/fx/_symbolic_trace.py:56] ..."
    assert not re.search(r"^[IWEF]\d{4} \d\d:\d\d", done.stdout, flags=re.MULTILINE), done.stdout
    assert done.stdout.lstrip().startswith(f"trajschema demo: {ARGS['schema']}")
    assert done.seconds < RUN_TIMEOUT_S


def test_demo_reports_the_right_sizes(demo_run):
    out = demo_run.stdout
    real = len(build_rollout(ts.load_schema(ARGS["schema"]), ARGS["prompts"], ARGS["rollout_n"], ARGS["seed"]).keys)
    multiple = ts.required_multiple(ARGS["dp_size"], actor_mini_batch_size=ARGS["mini_batch_size"], rollout_n=4)
    assert multiple == math.lcm(4, 5 * 4)
    assert _field(out, "rollout", r"(\d+) samples from (\d+) prompts") == (str(real), str(ARGS["prompts"]))
    assert _field(out, "required multiple", r"(\d+) = ") == (str(multiple),)
    added, total = map(int, _field(out, "padding added", r"(\d+) -> (\d+) samples"))
    assert added == ts.padding_needed(real, multiple)
    assert total == real + added and total % multiple == 0
    assert _field(out, "valid", r"(\d+) of (\d+) samples") == (str(total), str(total))
    assert re.search(r"^ok: ", out, flags=re.MULTILINE), out


def test_demo_metrics_are_those_of_the_real_samples(demo_run):
    out = demo_run.stdout
    schema = ts.load_schema(ARGS["schema"])
    rollout = build_rollout(schema, ARGS["prompts"], ARGS["rollout_n"], ARGS["seed"])
    multiple = ts.required_multiple(ARGS["dp_size"], actor_mini_batch_size=ARGS["mini_batch_size"], rollout_n=4)
    pad = schema.padding(ts.padding_needed(len(rollout.samples), multiple), eos_token_id=2, like=rollout.samples[-1])
    real_only = expected_metrics(rollout.samples)
    everything = expected_metrics([*rollout.samples, *pad.samples])
    for name in real_only:
        filtered, unfiltered = map(float, _field(out, name, r"([-\d.]+)\s+([-\d.]+)"))
        assert filtered == pytest.approx(real_only[name], abs=6e-5), name
        assert unfiltered == pytest.approx(everything[name], abs=6e-5), name
    assert real_only["prompt_length/mean"] != pytest.approx(everything["prompt_length/mean"])


def test_demo_leaves_no_ray_process_and_the_session_ray_still_works(demo_run, tq_client, partition):
    assert demo_run.sessions == 1 and demo_run.seen_running >= 4  # its Ray ran there, and was seen
    assert demo_run.left == [], f"Ray processes left running by the demo (this is {os.getpid()}):\n" + "\n".join(
        demo_run.left
    )
    from trajschema.testing import verl_sample

    writer = ts.TransferQueueWriter(ts.load_schema("text"), partition_id=partition, eos_token_id=2, client=tq_client)
    meta = writer.put(["k0"], [verl_sample("text", 5, 3)])
    assert tq_client.kv_batch_get(list(meta.keys), partition)["responses"].shape[0] == 1


def test_demo_json_is_one_object_saying_what_the_report_says(demo_run, demo_json_run):
    done = demo_json_run
    assert (done.returncode, done.stderr) == (0, ""), f"exit {done.returncode}\nstderr:\n{done.stderr}"
    report = json.loads(done.stdout)  # one JSON object and nothing else: no progress, no report, no log line
    assert (report["version"], report["command"], report["ok"]) == (1, "demo", True)
    assert {k: report[k] for k in ("schema", "prompts", "rollout_n", "dp_size", "seed")} == {
        k: ARGS[k] for k in ("schema", "prompts", "rollout_n", "dp_size", "seed")
    }
    assert report["actor_mini_batch_size"] == ARGS["mini_batch_size"]
    text = demo_run.stdout  # the same arguments, so the same rollout, padding and metrics
    assert _field(text, "rollout", r"(\d+) samples") == (str(report["real_samples"]),)
    assert _field(text, "required multiple", r"(\d+) = ") == (str(report["required_multiple"]),)
    assert _field(text, "padding added", r"(\d+) -> (\d+) samples") == (
        str(report["padding_samples"]),
        str(report["total_samples"]),
    )
    assert report["invalid_samples"] == 0 and report["problems"] == [] and report["processes_left"] == 0
    for name, values in report["metrics"].items():
        shown = tuple(map(float, _field(text, name, r"([-\d.]+)\s+([-\d.]+)")))
        assert shown == pytest.approx((values["real"], values["all"]), abs=6e-5), name
    assert all(seconds > 0 for seconds in report["seconds"].values()), report["seconds"]
    assert done.left == [], done.left


def test_the_leftover_finder_can_fail(tmp_path):
    """The leftover check finds a process, named like a Ray worker, that holds a file under the marker dir."""
    log = tmp_path / "worker.out"
    child = subprocess.Popen(
        ["bash", "-c", f"(exec -a ray::FakeWorker sleep 30 </dev/null >{log} 2>&1) & echo $!"],
        stdout=subprocess.PIPE,
        text=True,
    )
    pid = int(child.communicate(timeout=10)[0].strip())
    try:
        found = _processes_using(str(tmp_path))
        assert any(line.startswith(f"{pid} ") and "ray::FakeWorker" in line for line in found), found
    finally:
        psutil.Process(pid).kill()
    assert _left_behind(str(tmp_path)) == []
