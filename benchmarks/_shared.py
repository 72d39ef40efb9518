"""What the benchmark scripts share: the machine line every result starts with, the host tag beside each figure,
and their text tables.

Imported as `_shared` (the scripts run as `python benchmarks/NAME.py`, so this folder is on sys.path).
"""


def machine_line(device=None) -> str:
    """`machine: <CPU or GPU>, <threads>, torch <version>`: measurements are only comparable on one machine."""
    import torch

    from evalsuite.runtime.cpus import cpu_description

    if device is not None and device.type == "cuda":
        return f"machine: {torch.cuda.get_device_name(device)}, torch {torch.__version__}"
    return f"machine: {cpu_description()}, {torch.get_num_threads()} threads, torch {torch.__version__}"


def host_tag() -> str:
    """What a speed figure depends on, taken when the figure is: CPU capability, usable cores, load average."""
    import os

    import torch

    from evalsuite.runtime.cpus import usable_cpus

    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    return f"host: {torch.backends.cpu.get_cpu_capability()}, {usable_cpus()} cores, load {load}"


def format_table(header: list, rows: list, left: int = 0) -> str:
    """Columns left-aligned up to index `left`, right-aligned after; a dashed rule under the header."""
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]

    def line(row):
        return "  ".join(str(c).ljust(w) if i < left else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


STATUS_FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem")


def read_status(pid="self", wanted=STATUS_FIELDS) -> dict:
    """Memory fields of /proc/<pid>/status in MiB (empty when the process has gone)."""
    values = {}
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                name, _, rest = line.partition(":")
                if name in wanted:
                    values[name] = int(rest.split()[0]) / 1024  # kB -> MiB
    except OSError:
        pass
    return values


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS; False when the kernel refuses (then the peak includes the setup)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def checkout(repo, revision: str, folder):
    """The revision's source tree (its `evalsuite` package and shipped data) extracted into `folder`, to run a
    baseline side by side with this checkout."""
    import io
    import subprocess
    import tarfile

    archive = subprocess.run(["git", "-C", str(repo), "archive", revision], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")
    return folder
