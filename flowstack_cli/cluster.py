"""``flowstack cluster``: run a distributed training script's tasks as local processes, or in a pod.

    flowstack cluster launch --ps 1 --workers 2 -- python examples/distributed_digits.py
    flowstack cluster pod-exec -- python examples/distributed_digits.py   (in a Kubernetes pod)

Each task gets ``TF_CONFIG`` (cluster on 127.0.0.1, its own type and index), its log lines are
prefixed with its name, and the command exits with the job's status.
"""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    p = subparsers.add_parser("cluster", help="run distributed training jobs")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    launch = actions.add_parser("launch", help="start PS and worker tasks as local processes with TF_CONFIG set",
                                description=__doc__.splitlines()[0])
    launch.add_argument("--ps", type=int, default=1, help="number of parameter-server tasks (default 1)")
    launch.add_argument("--workers", type=int, default=1, help="number of worker tasks (default 1)")
    launch.add_argument("--chief", action="store_true", help="add a chief task (job 'chief', index 0)")
    launch.add_argument("--timeout", type=float, default=None, help="kill the job after this many seconds (exit 124)")
    launch.add_argument("--grace", type=float, default=15.0,
                        help="seconds a PS may keep running after every worker finished before it counts as a "
                             "failure and is killed (default 15)")
    launch.add_argument("--max-restarts", type=int, default=None, metavar="K",
                        help="restart a task that fails with a retryable status (killed, or 128-255) up to K times, as "
                             "Kubeflow's restartPolicy ExitCode would; a permanent status (1-127) ends the job at once "
                             "(default 3)")
    launch.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command every task runs")
    launch.set_defaults(handler=run)
    pod_exec = actions.add_parser("pod-exec", help="run a command with TF_CONFIG built from a Kubernetes pod's "
                                                   "environment (the plain manifests of deploy/kubernetes)",
                                  description="Set TF_CONFIG as the Kubeflow training operator would (kept where it "
                                              "is set already) and run the command in this process's place.")
    pod_exec.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    pod_exec.set_defaults(handler=run_pod_exec)


def _command(args: argparse.Namespace) -> list[str]:
    command = list(args.command)
    return command[1:] if command and command[0] == "--" else command


def run(args: argparse.Namespace) -> int:
    from trainer.distributed.launcher import DEFAULT_MAX_RESTARTS, LocalJob

    max_restarts = DEFAULT_MAX_RESTARTS if args.max_restarts is None else args.max_restarts
    job = LocalJob(args.ps, args.workers, args.chief, timeout=args.timeout, grace=args.grace, max_restarts=max_restarts)
    return job.run(_command(args))


def run_pod_exec(args: argparse.Namespace) -> int:
    from trainer.distributed.pod_config import exec_with_tf_config

    return exec_with_tf_config(_command(args))
