"""The summary table of one ``scripts/gpu_check.sh`` run, from the logs and JSON it left in OUT.

    python scripts/gpu_summary.py OUT [--elapsed SECONDS]

Prints the table (steps, test counts, conformance on CUDA against the CPU, benchmark figures
with their targets) and writes it, with the full lists, to OUT/summary.txt.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)")
FAILED = re.compile(r"^(?:FAILED|ERROR) \S*::(test_\S+?)(?: - (.*))?$")
# Targets of issue 18: ours/peer latency at batch 32, trainer step ratio, serving GPU/CPU throughput.
EDGE_TARGET, TRAIN_TARGET, SERVING_TARGET = 3.0, 2.0, 10.0
SHOWN_NAMES = 60


def counts(log: Path) -> dict[str, int]:
    """pytest's final tally (``3 failed, 1 passed in 2.1s``) of a log; empty where the log has none."""
    if not log.exists():
        return {}
    tally: dict[str, int] = {}
    for line in reversed(log.read_text(errors="replace").splitlines()):
        found = COUNT.findall(line)
        if found and (" in " in line or line.startswith("=")):
            for number, word in found:
                tally[word.rstrip("s") if word.startswith("error") else word] = int(number)
            break
    return tally


def failures(log: Path) -> dict[str, str]:
    """Failed test name -> its short message, from pytest's ``-rfE`` summary lines."""
    if not log.exists():
        return {}
    out = {}
    for line in log.read_text(errors="replace").splitlines():
        m = FAILED.match(line.strip())
        if m:
            out[m.group(1)] = (m.group(2) or "").strip()
    return out


def conformance_lines(out: Path) -> tuple[list[str], list[str]]:
    """(summary lines, full list lines): CUDA counts, and the cases failing on CUDA that do not fail on the CPU."""
    cuda_log, cpu_log = out / "conformance_cuda.log", out / "conformance_cpu.log"
    cuda, cpu = counts(cuda_log), counts(cpu_log)
    lines = [f"conformance cuda: {fmt(cuda)}", f"conformance cpu:  {fmt(cpu)}"]
    cuda_failed = failures(cuda_log)
    cpu_failed = {name.removesuffix("_cpu") for name in failures(cpu_log)}
    only_cuda = {name: msg for name, msg in cuda_failed.items() if name.removesuffix("_cuda") not in cpu_failed}
    basis = "pass on the CPU" if cpu else "(no CPU run: every CUDA failure)"
    lines.append(f"cases failing on cuda that {basis}: {len(only_cuda)}")
    reasons = Counter(_reason(msg) for msg in only_cuda.values())
    lines += [f"  {n:4d} x {reason}" for reason, n in reasons.most_common(12)]
    names = sorted(only_cuda)
    if names:
        more = f" ... (+{len(names) - SHOWN_NAMES})" if len(names) > SHOWN_NAMES else ""
        lines.append("  " + " ".join(names[:SHOWN_NAMES]) + more)
    full = [f"{name} | {only_cuda[name]}" for name in names]
    return lines, full


def _reason(message: str) -> str:
    """A failure message without its node names and numbers, so alike failures group."""
    message = re.sub(r"subgraph \d+, node \d+ '[^']*' ", "", message)
    return re.sub(r"\d+(\.\d+)?(e-?\d+)?", "N", message)[:110] or "(no message)"


def fmt(tally: dict[str, int]) -> str:
    return ", ".join(f"{n} {word}" for word, n in tally.items()) if tally else "no result"


def benchmark_lines(out: Path) -> list[str]:
    lines = []
    bench = out / "bench_gpu.json"
    if bench.exists():
        data = json.loads(bench.read_text())
        lines.append(f"benchmarks on {data.get('card')} ({data.get('device')}), ms per call, ours/peer:")
        for row in data.get("rows", []):
            target = TRAIN_TARGET if row["case"].startswith("train") else EDGE_TARGET
            judged = row["case"].startswith("train") or row["batch"] >= 32
            verdict = ("ok" if row["ratio"] <= target else "MISSED") + f" (target <= {target:g})" if judged else ""
            extra = f" tf32-peer {row['peer_tf32_ms']:.2f}" if "peer_tf32_ms" in row else ""
            lines.append(f"  {row['case']:10} b{row['batch']:<4} ours {row['ours_ms']:9.2f} peer {row['peer_ms']:9.2f}"
                         f"{extra}  ratio {row['ratio']:6.2f} {verdict}")
    else:
        lines.append("benchmarks: no result (see benchmarks.log)")
    serving = out / "serving_gpu.json"
    if serving.exists():
        for concurrency, cell in json.loads(serving.read_text()).items():
            device = cell["device"]
            ratio = cell["ratio"]
            verdict = ("ok" if ratio >= SERVING_TARGET else "MISSED") + f" (target >= {SERVING_TARGET:g}x)"
            lines.append(f"  serving resnet18 conc {concurrency}: {device} {cell['ours']['rps']:.1f} req/s "
                         f"(p50 {cell['ours']['p50']:.1f} ms), cpu {cell['cpu']['rps']:.1f} req/s, "
                         f"{device}/cpu {ratio:.1f}x {verdict}")
    else:
        lines.append("serving: no result (see benchmarks.log)")
    return lines


def step_lines(out: Path, elapsed: int | None) -> list[str]:
    lines = ["steps (name, exit code, seconds):"]
    tsv = out / "steps.tsv"
    if tsv.exists():
        for row in tsv.read_text().splitlines():
            name, rc, seconds, *_ = row.split("\t") + ["", "", ""]
            note = " TIMED OUT" if rc in ("124", "137") else ""
            lines.append(f"  {name:18} rc {rc:>7} {seconds:>4}s{note}")
    if elapsed is not None:
        lines.append(f"  total {elapsed}s")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--elapsed", type=int)
    args = p.parse_args(argv)
    conformance, full = conformance_lines(args.out)
    table = ["=" * 30 + " gpu_check summary " + "=" * 30, *step_lines(args.out, args.elapsed),
             f"pytest -m gpu: {fmt(counts(args.out / 'pytest_gpu.log'))}",
             *[f"  {name}: {msg[:150]}" for name, msg in failures(args.out / "pytest_gpu.log").items()],
             *conformance, *benchmark_lines(args.out)]
    (args.out / "summary.txt").write_text("\n".join(table + ["", "cuda-only failures:", *full]) + "\n")
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
