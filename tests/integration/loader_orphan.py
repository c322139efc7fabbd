"""A trainer-like process for the orphan test: an unbounded StreamLoader with 2 workers.

With ``--startup`` it prints ``STARTING`` just before the workers start and then takes
batches quietly: the test kills it while its workers are being started. Otherwise it prints
``READY <worker pid> <worker pid>`` once the first batch arrived, then either keeps
iterating, printing ``CAUGHT-UP`` after ``--batches`` batches (all the topic holds: the
workers then wait on Kafka for records that never come), or, with ``--stall``, stops taking
batches (the workers fill the queue to this process and block).
The test SIGKILLs this process and expects the workers to be gone soon after.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import threading


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--stall", action="store_true")
    ap.add_argument("--batches", type=int, default=0)
    ap.add_argument("--context", default=None, choices=["fork", "forkserver"],
                    help="the workers' start method (default: the loader's choice)")
    ap.add_argument("--startup", action="store_true",
                    help="print STARTING just before the workers start, then take batches quietly")
    args = ap.parse_args()

    import kafeed
    from kafeed.signals import stop_request

    # As `kafeed train` does: SIGTERM handlers exist before the workers are forked, so a
    # worker inherits them (and must not rely on SIGTERM to end).
    stop_request().install()
    ds = kafeed.KafkaTokenDataset(args.topic, seq_len=15, eos_id=0, bootstrap=args.bootstrap, end=None)
    loader = kafeed.StreamLoader(ds, batch_size=2, num_workers=2, prefetch_factor=4,
                                 multiprocessing_context=args.context)
    if args.startup:
        print("STARTING", flush=True)
        for _ in loader:
            pass
        return 0
    batches = iter(loader)
    next(batches)
    pids = sorted(p.pid for p in multiprocessing.active_children() if p.pid is not None)
    print("READY", *pids, flush=True)
    if args.stall:
        threading.Event().wait()
    for count, _ in enumerate(batches, start=2):
        if count == args.batches:
            print("CAUGHT-UP", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
