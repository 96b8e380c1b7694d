"""What `slotwarden bench pool` and `slotwarden bench scheduler` share: the device, its sync,
the machine's metadata, the JSON file and the CLI entry point."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch


def device_of(device) -> torch.device:
    """The device to measure on (default: cuda if available, else cpu)."""
    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def sync_for(device: torch.device) -> Callable[[], None]:
    """What waits for the device's queued work (nothing on the CPU): timed loops call it at both
    ends, so device work is counted."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def host_clock(device: torch.device) -> Callable[[], float]:
    """The clock for host-side work: on a CPU device, the CPU seconds of the calling thread
    (`time.thread_time`: the time slices that other processes take on a shared machine are
    not counted, nor a preempted loop's wait); on a GPU, wall seconds, so that the device's
    work, synchronised at both ends of a timed loop, counts too."""
    return time.thread_time if device.type == "cpu" else time.perf_counter


def loadavg() -> float | None:
    """The 1-minute load average (other processes' share of the CPUs), or None."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine(device: torch.device) -> dict:
    """Where a measurement ran: device, CPUs, versions, date."""
    return {
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name(),
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cuda_synchronized": device.type == "cuda",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def loaded_note(load: list, cpus: int | None) -> str | None:
    """A line saying the machine was busy, when the load average says so."""
    load = [x for x in load if x is not None]
    if load and cpus and max(load) > cpus / 2:
        return (
            f"note: 1-min load average {' -> '.join(f'{x:.2f}' for x in load)} on {cpus} CPUs: other processes were "
            "running; ratios measured in the same run are more reliable than absolute times"
        )
    return None


def write_json(result: dict, path) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=2) + "\n")


def run(args, params: dict, defaults: dict, quick: dict, measure, report, **fixed) -> int:
    """A bench's CLI entry point: `measure(device, log=..., **settings)`, print `report(result)`,
    write --json. `params` override the settings (the tests use tiny sizes). Returns 0 when the
    measurement ran: the targets are information, not a verdict."""
    settings = dict(quick if getattr(args, "quick", False) else defaults)
    settings.update(params)
    settings.update(fixed)
    result = measure(getattr(args, "device", None), log=_log, **settings)
    print(report(result))
    if getattr(args, "json", None):
        write_json(result, args.json)
        print(f"wrote {args.json}")
    return 0


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
