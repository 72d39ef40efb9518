"""Wall time of the README's demo command as a user runs it, per precision and CPU setting, in one run.

What is measured
----------------
``python -m evalsuite run --task demo`` (plus ``--model`` and the variant's arguments) is started
as a fresh process, twice per variant, each variant in its own empty ``--out`` folder: the first
run extracts every tile (a cold cache), the second finds the cache and only trains and scores
the probes. Wall time is the whole process, start-up and imports included: what a user waits.
With ``--rounds N`` this is repeated N times, the variants interleaved within each round (so a
change in machine load hits every variant alike), in fresh folders each round.

Variants (``--variants``, comma-separated names):
- ``default``: no precision or thread flag, what ``--precision auto`` picks on this machine;
- ``fp32``, ``bf16``, ``fp16``: ``--precision X``;
- ``fp32-1thread``: ``--precision fp32 --threads 1``; ``fp32-0workers``: ``--num-workers 0``.

Then, to show what the forward pass alone costs, the backbone's forward over ``--forward-tiles``
random tiles in float32 with and without channels-last tensors (extraction uses channels-last for
convolutional backbones), and in bf16 autocast where asked.

How to read it
--------------
- ``first / fp32`` and ``cached / fp32``: each variant's wall time over the ``fp32`` variant's of the
  same round (median over rounds; seconds are medians too). On a CPU without native bf16
  (``native bf16: no``) ``default`` must be float32 and its ratio ~1.0; ``bf16`` shows what
  emulated bf16 costs there. ``range`` is the smallest and largest per-round ratio.
- ``forward``: ms per tile; ``NCHW / channels-last`` above 1 is what channels-last saves.
- Timings move with machine load (the load average before and after is printed): run it on an
  idle machine, and compare ratios, not seconds.

Run: ``python benchmarks/demo_wall_time.py`` (about 2-4 minutes on 2 idle cores; ``--variants
default,fp32,bf16`` adds several minutes on a CPU without native bf16).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _shared import machine_line

VARIANT_ARGS = {
    "default": [],
    "fp32": ["--precision", "fp32"],
    "bf16": ["--precision", "bf16"],
    "fp16": ["--precision", "fp16"],
    "fp32-1thread": ["--precision", "fp32", "--threads", "1"],
    "fp32-0workers": ["--precision", "fp32", "--num-workers", "0"],
}


def time_run(args: list[str], out: Path) -> tuple[float, str]:
    """(wall seconds, the precision the run reports) of one `evalsuite run` process."""
    env = {**os.environ, "TQDM_DISABLE": "1"}
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "evalsuite", "run", "--out", str(out), *args], env=env,
                            capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"demo_wall_time: run {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    header = result.stdout.splitlines()[0].split()
    return seconds, header[header.index("precision") + 1]


def time_rounds(common: list[str], variants: list[str], rounds: int) -> list[dict]:
    """[{variant: (precision, first s, cached s)}] per round, variants interleaved, each in a fresh --out folder."""
    results = []
    with tempfile.TemporaryDirectory(prefix="demo_wall_time.") as tmp:
        for number in range(rounds):
            results.append({})
            for name in variants:
                out = Path(tmp) / f"round{number}" / name
                first, precision = time_run(common + VARIANT_ARGS[name], out)
                cached, _ = time_run(common + VARIANT_ARGS[name], out)
                results[-1][name] = (precision, first, cached)
                print(f"  round {number + 1}, {name}: first {first:.1f} s, cached {cached:.1f} s ({precision})",
                      file=sys.stderr, flush=True)
    return results


def format_rows(rounds: list[dict], variants: list[str]) -> str:
    """The table: median seconds, median per-round ratio to fp32 and its range, per variant."""
    lines = [f"{'variant':<15}{'precision':<11}{'first s':>9}{'cached s':>10}{'first / fp32':>14}{'range':>13}"
             f"{'cached / fp32':>15}{'range':>13}"]
    for name in variants:
        cells = ""
        for column in (1, 2):  # 1: first run, 2: cached run
            cells += f"{statistics.median(r[name][column] for r in rounds):>{9 if column == 1 else 10}.1f}"
        for column in (1, 2):
            ratios = [r[name][column] / r["fp32"][column] for r in rounds]
            cells += (f"{statistics.median(ratios):>{14 if column == 1 else 15}.2f}"
                      f"{f'{min(ratios):.2f}-{max(ratios):.2f}':>13}")
        lines.append(f"{name:<15}{rounds[0][name][0]:<11}{cells}")
    return "\n".join(lines)


def time_forward(model_name: str, random_init: bool, tiles: int, with_bf16: bool) -> list[tuple[str, float]]:
    """[(setting, ms per tile)] of the backbone's forward alone on random tiles."""
    import torch

    from evalsuite.models.backbones import build_backbone
    from evalsuite.runtime.cpus import use_threads
    from evalsuite.runtime.precision import autocast_context

    use_threads()
    backbone = build_backbone(model_name, random_init=random_init)
    size = backbone.data_config["input_size"][1:]
    images = torch.randn(tiles, 3, *size)
    settings = [("fp32 NCHW", torch.contiguous_format, "fp32"), ("fp32 channels-last", torch.channels_last, "fp32")]
    if with_bf16:
        settings.append(("bf16 channels-last", torch.channels_last, "bf16"))
    timings = []
    for label, memory_format, precision in settings:
        model = backbone.model.to(memory_format=memory_format)
        batch = images.contiguous(memory_format=memory_format)
        with torch.inference_mode(), autocast_context(torch.device("cpu"), precision):
            model(batch[:2])  # warm-up: kernels, allocator
            started = time.perf_counter()
            model(batch)
            timings.append((label, (time.perf_counter() - started) / tiles * 1e3))
    return timings


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="efficientnet_lite0_imagenet", help="--model of the runs (default: %(default)s)")
    parser.add_argument("--random-init", action="store_true", help="pass --random-init to the runs")
    parser.add_argument("--variants", default="default,fp32,fp32-1thread,fp32-0workers",
                        help=f"comma-separated, from {', '.join(VARIANT_ARGS)} (default: %(default)s)")
    parser.add_argument("--probes", default="linear,knn", help="--probes of the runs (default: %(default)s)")
    parser.add_argument("--forward-tiles", type=int, default=64, help="tiles of the forward-only timing (0: skip)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="repeat every variant this many times, interleaved; medians are shown (default: 1)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.forward_tiles < 0:
        parser.error("--rounds must be >= 1 and --forward-tiles >= 0")
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANT_ARGS]
    if unknown or "fp32" not in variants:
        parser.error(f"--variants must include fp32 and take names from {', '.join(VARIANT_ARGS)}; got {unknown}")
    print(machine_line(), flush=True)
    common = ["--task", "demo", "--model", args.model, "--probes", args.probes] + (["--random-init"] if args.random_init else [])
    load_before = os.getloadavg()
    rounds = time_rounds(common, variants, args.rounds)
    load_after = os.getloadavg()
    print(f"demo ({args.model}{', random init' if args.random_init else ''}; probes {args.probes}; "
          f"{args.rounds} round(s)); load average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after:")
    print(format_rows(rounds, variants))
    if args.forward_tiles:
        timings = time_forward(args.model, args.random_init, args.forward_tiles, "bf16" in variants)
        print(f"forward only, {args.forward_tiles} random tiles in one batch, ms per tile:")
        for label, ms in timings:
            print(f"  {label:<20}{ms:>8.1f}")
        print(f"  NCHW / channels-last: {timings[0][1] / timings[1][1]:.2f}")


if __name__ == "__main__":
    main()
