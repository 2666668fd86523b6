"""OpenRLHF 0.11.2's rollout split, with and without trajschema's padding (issue 30).

Runs alone: ``python benchmarks/bench_openrlhf.py [--quick]`` (needs
``pip install --no-deps -r .ci/openrlhf-requirements.txt``; OpenRLHF's experience maker is
loaded with the stand-ins of ``tests/openrlhf_support.py``).

The rollout: ``n`` one-sample ``Experience``s made by OpenRLHF's own
``SamplesGenerator._process_response_into_experience`` (P uniform in 8..512, R in 1..1024),
on 4 actors with ``rollout.micro_batch_size`` 2, so ``n = 4k + 1`` needs 7 padding samples.
Candidates, on the same samples:

* OpenRLHF's own ``RemoteExperienceMaker.split_rollout_samples`` (its batch building:
  ``concat_experiences`` per micro-batch);
* the same under ``trajschema.openrlhf.install()``: the padding experiences made from the
  schema, then OpenRLHF's own split.

Time: ``harness.measure``, interleaved. Memory: the peak of Python-level allocations
(``tracemalloc``) and the bytes of tensor storage the padding experiences add.
"""

from __future__ import annotations

import argparse
import random
import sys
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import trajschema.openrlhf as to  # noqa: E402
from tests.openrlhf_support import args_for, load, rollout  # noqa: E402

import harness  # noqa: E402


def _samples(mods: SimpleNamespace, n: int) -> list:
    rng = random.Random(0)
    lengths = [(rng.randint(8, 512), rng.randint(1, 1024)) for _ in range(n)]
    return rollout(mods, lengths, [float(i % 2) for i in range(n)])


def _maker(mods: SimpleNamespace) -> object:
    args = args_for(actors=4, rollout_mbs=2)
    tok = SimpleNamespace(pad_token_id=0, eos_token_id=2)
    return mods.experience_maker.RemoteExperienceMaker(None, None, None, None, None, SimpleNamespace(args=args), tok)


def _tensors(experiences: list) -> list:
    out = [t for e in experiences for t in vars(e).values() if hasattr(t, "untyped_storage")]
    return out + [t for e in experiences for t in e.info.values() if hasattr(t, "untyped_storage")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    mods = load()
    maker = _maker(mods)
    print("\n".join(harness.machine_info()))
    for n in (65,) if quick else (65, 1025):
        own_samples, ours_samples = _samples(mods, n), _samples(mods, n)
        to.uninstall()
        own_split = mods.experience_maker.RemoteExperienceMaker.split_rollout_samples
        to.install()
        ours_split = mods.experience_maker.RemoteExperienceMaker.split_rollout_samples
        fns = {
            "openrlhf": lambda f=own_split, s=own_samples: f(maker, s),
            "trajschema": lambda f=ours_split, s=ours_samples: f(maker, s),
        }
        times = harness.measure(fns, min_block_s=0.05, repeats=3 if quick else 7, warmup_s=0.05)
        for name, fn in fns.items():
            tracemalloc.start()
            fn()
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            took = f"{harness.fmt_ns(times[name].median_ns)} ({times[name].spread()})"
            print(f"n={n} {name}: {took}, peak {peak / 1024:.0f} KiB")
        pads = to.padding_experiences(ours_samples[0], (-n) % to.pad_multiple(maker.args))
        storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in _tensors(pads)}
        added = sum(storages.values())
        ratio = times["trajschema"].median_ns / times["openrlhf"].median_ns
        print(f"n={n}: {len(pads)} padding samples add {added} bytes of tensors; trajschema/openrlhf time {ratio:.2f}x")
    to.uninstall()


if __name__ == "__main__":
    main()
