"""A script that leaves a dataset iterator alive at interpreter exit (for test_loader_exit).

It takes one window from a ``KafkaTokenDataset`` (or one batch from a ``StreamLoader`` with
``--loader``), prints ``TOOK``, and falls off the end of the script with the iterator still
referenced from a module global.
"""

from __future__ import annotations

import argparse

import kafeed

ap = argparse.ArgumentParser()
ap.add_argument("--bootstrap", required=True)
ap.add_argument("--topic", required=True)
ap.add_argument("--loader", action="store_true")
args = ap.parse_args()

ds = kafeed.KafkaTokenDataset(args.topic, seq_len=15, eos_id=0, bootstrap=args.bootstrap, end=None)
it = iter(kafeed.StreamLoader(ds, batch_size=2) if args.loader else ds)
next(it)
print("TOOK", flush=True)
