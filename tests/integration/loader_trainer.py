"""A trainer-like loop for subprocess tests: consume, "train", checkpoint every step (or
every ``--checkpoint-every`` steps).

The checkpoint (one JSON file, replaced atomically) holds the loader state and the
"model": tokens seen per document value. Killed at any point and restarted, it resumes
from its last checkpoint. With --ddp it joins a gloo process group (RANK / WORLD_SIZE /
MASTER_ADDR / MASTER_PORT from the environment) and writes its result per rank.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--checkpoint", type=Path, required=True)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--shuffle", type=int, default=0)
    ap.add_argument("--step-sleep", type=float, default=0.0)
    ap.add_argument("--checkpoint-every", type=int, default=1)
    ap.add_argument("--ddp", action="store_true")
    args = ap.parse_args()

    import torch.distributed as dist

    import kafeed

    if args.ddp:
        dist.init_process_group("gloo")
    ds = kafeed.KafkaTokenDataset(args.topic, seq_len=15, eos_id=0, bootstrap=args.bootstrap,
                                  shuffle_buffer=args.shuffle, seed=1)
    loader = kafeed.StreamLoader(ds, batch_size=4, num_workers=args.workers)
    seen = np.zeros(args.size, dtype=np.int64)
    steps = 0
    if args.checkpoint.exists():
        ckpt = json.loads(args.checkpoint.read_text())
        loader.load_state_dict(ckpt["loader"])
        seen = np.asarray(ckpt["seen"], dtype=np.int64)
        steps = ckpt["steps"]
    batches = 0
    for batch in loader:
        tokens = batch["tokens"].numpy().ravel()
        seen += np.bincount(tokens, minlength=args.size)[: args.size]
        steps += 1
        batches += 1
        if not args.ddp and steps % args.checkpoint_every == 0:
            # Whether a prefetch thread builds the batches, or this loop (kafeed.loader.workers.prefetch).
            threads = sum(t.name == "kafeed-prefetch" for t in threading.enumerate())
            tmp = args.checkpoint.with_suffix(".tmp")
            tmp.write_text(json.dumps({"loader": loader.state_dict(), "seen": seen.tolist(), "steps": steps,
                                       "prefetch_threads": threads}))
            os.replace(tmp, args.checkpoint)
        if args.step_sleep:
            time.sleep(args.step_sleep)
    if args.ddp:
        rank = dist.get_rank()
        states: list[object] = [None] * dist.get_world_size()
        dist.all_gather_object(states, loader.state_dict())
        out = args.checkpoint.with_name(f"{args.checkpoint.name}.rank{rank}")
        out.write_text(json.dumps({"batches": batches, "seen": seen.tolist(),
                                   "merged": kafeed.merge_states(states)}))  # type: ignore[arg-type]
        dist.destroy_process_group()
    else:
        # The batches after the last checkpoint count too.
        args.checkpoint.write_text(json.dumps({"loader": loader.state_dict(), "seen": seen.tolist(),
                                               "steps": steps, "done": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
