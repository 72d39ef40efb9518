"""`evalsuite show RUN_ID`: what a run did and what it takes to reproduce it, from its results JSON."""

import hashlib
import json
import shlex
from pathlib import Path

from evalsuite.config import DEFAULT_OUT
from evalsuite.reporting.views.summary import summary_lines
from evalsuite.results.leaderboard import device_hours

SPLIT_ORDER = ["train", "val", "test"]


def add_parser(commands, common) -> None:
    show = commands.add_parser("show", parents=[common], help="print a run's provenance and scores")
    show.add_argument("run_id", metavar="RUN_ID", help="a run id from leaderboard.csv (a unique prefix is enough)")
    show.add_argument("--out", default=DEFAULT_OUT, help=f"output folder holding runs/ (default ./{DEFAULT_OUT})")
    show.add_argument("--json", action="store_true", help="print the results JSON as stored")
    show.set_defaults(handler=main)


def main(args) -> None:
    from evalsuite.results.run_json import find_run_json, read_run_json

    path = find_run_json(Path(args.out), args.run_id)
    record = read_run_json(path)
    if args.json:
        print(json.dumps(record, indent=2, sort_keys=True))
        return
    print("\n".join(describe(record, path)))


def describe(record: dict, path: Path) -> list[str]:
    # A hand-edited or foreign JSON may hold null where a section belongs: shown as missing, not a traceback.
    task, model = _section(record, "task"), _section(record, "model")
    lines = [
        f"run       {record['run_id']}  finished {record.get('timestamp_utc', '?')}",
        f"command   {_command(record.get('command', []))}" + (f"   (in {record['cwd']})" if record.get("cwd") else ""),
        f"config    {json.dumps(record.get('config', {}), sort_keys=True)}",
        f"task      {task.get('name')}  card {task.get('path')}  sha256 {task.get('sha256')}  ({_card_state(task)})",
        f"          selection metric {task.get('selection_metric')}; {_classes(task)}",
        f"model     {model.get('name')}  (architecture {model.get('architecture_name')}, embed dim {model.get('embed_dim')})",
        f"weights   {model.get('weights_id')}",
        f"input     {json.dumps(model.get('data_config'), sort_keys=True)}",
        f"seeds     {record.get('seeds', record.get('seed'))}   device {record.get('device')}",
    ]
    probes = record.get("probes")
    if not isinstance(probes, list) or not probes:
        lines.append(f"probe     none recorded (probes is {json.dumps(probes)})")
    for probe in probes if isinstance(probes, list) else []:
        lines += _probe_lines(probe if isinstance(probe, dict) else {})
    summary = summary_lines(record)  # the seeds together, with the test intervals the per-seed lines leave out
    if summary:
        lines += [f"summary   {summary[0]}"] + [f"          {line}" for line in summary[1].splitlines()] \
            + [f"          {line}" for line in summary[2:]]  # the interval notes
    if record.get("intervals_note"):
        lines.append(f"note      {record['intervals_note']}")
    lines.append(f"extracted {json.dumps(record.get('samples_extracted'), sort_keys=True)} samples (0: from the cache)")
    lines.append(_throughput_line(record.get("throughput") or {}))
    lines.append(_cost_line(_section(record, "cost")))
    lines.append(f"versions  {', '.join(f'{k} {v}' for k, v in sorted(_section(record, 'versions').items()))}")
    lines.append(f"results   {path}")
    return lines


def _section(record: dict, name: str) -> dict:
    value = record.get(name)
    return value if isinstance(value, dict) else {}


def _classes(task: dict) -> str:
    classes = task.get("classes") or []
    return f"classes {', '.join(classes)}" if classes else "no classes (a survival, regression or consistency task)"


def _score(value) -> str:
    """4 decimals; null (a NaN written by another JSON tool, or an edit) as null."""
    return f"{value:.4f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else json.dumps(value)


def _throughput_line(throughput: dict) -> str:
    if throughput.get("throughput_img_s") is None:
        return "speed     not recorded (caches made before evalsuite recorded throughput)"
    forward, load = throughput.get("forward_img_s"), throughput.get("host_load_1m")
    # A rate is what the host allowed at the time: its load says whether other work shared it.
    under = f" (host load {load:g} on {throughput.get('host_cpus')} CPUs)" if load is not None else ""
    return (f"speed     extraction {throughput['throughput_img_s']:.1f} img/s, forward alone "
            f"{forward:.1f} img/s on {throughput.get('device_name')}{under}; the task's extraction "
            f"{device_hours(throughput):.4f} device-hours")


def _cost_line(cost: dict) -> str:
    if cost.get("gflops_per_image") is None:
        return "cost      not counted (runs made before evalsuite counted FLOPs)"
    height, width = cost.get("input_size_px") or ("?", "?")
    return (f"cost      {cost['gflops_per_image']:.4g} GFLOPs per image (backbone forward at {height}x{width} px), "
            f"{cost.get('params', 0):,} parameters")


def _command(argv: list[str]) -> str:
    """sys.argv as typed: `python -m evalsuite` records its __main__.py path as argv[0]."""
    if not argv:
        return "?"
    program = "python -m evalsuite" if argv[0].endswith("__main__.py") else Path(argv[0]).name
    return " ".join([program, shlex.join(argv[1:])]).strip()


def _card_state(task: dict) -> str:
    """Whether the card file still has the content the run used (a changed card is a different task)."""
    card = Path(task.get("path") or "")
    if not card.is_file():
        return "card file no longer there"
    same = hashlib.sha256(card.read_bytes()).hexdigest() == task.get("sha256")
    return "card unchanged since the run" if same else "CARD CHANGED since the run"


def _probe_lines(probe: dict) -> list[str]:
    lines = [f"probe     {probe.get('probe')}  recipe {json.dumps(probe.get('recipe'), sort_keys=True)}",
             f"          selected {json.dumps(probe.get('selected_params'), sort_keys=True)}"]
    metrics_by_split = _section(probe, "metrics")
    # The stored JSON sorts keys; show splits in the order of the protocol instead.
    for split in sorted(metrics_by_split, key=lambda s: (SPLIT_ORDER.index(s) if s in SPLIT_ORDER else 99, s)):
        metrics = _section(metrics_by_split, split)
        scores = "  ".join(f"{name} {_score(value)}" for name, value in metrics.items())
        lines.append(f"          {split:<5} {scores}")
    return lines
