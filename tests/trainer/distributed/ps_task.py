"""A PS task for the tests: serve until every worker is done (or ``--max-seconds``), then exit 0."""

from __future__ import annotations

import argparse
import sys

import trainer as T


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--max-seconds", type=float, default=120.0)
    args = p.parse_args()
    resolver = T.train.TFConfigClusterResolver()
    server = T.train.Server(resolver.cluster_spec(), resolver.task_type, resolver.task_id, timeout=args.timeout)
    print(f"serving {server.target}", flush=True)
    if not server.join(timeout=args.max_seconds):
        print("job did not end in time", flush=True)
        server.stop()
        return 3
    print("job done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
