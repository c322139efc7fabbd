"""Federated averaging beside Flower: the same model, non-IID split, rounds and local steps.

Three sites hold a label-skewed (Dirichlet, alpha 0.5) share of one synthetic 10-class problem
(Gaussian clusters in 32 dimensions, overlapping enough that accuracy stays well below 100 %). A
two-layer MLP starts from the same seed on both sides; each round every site runs
``--local-steps`` SGD steps on batches drawn from its own data (the draws seeded by site and
round, so both sides train on the same batches), and the round's global model is the mean of the
sites' models weighted by their sample counts. The final global model is scored on a held-out,
class-balanced test set.

- **Flower** (``flwr`` 1.42): its ``FedAvg`` strategy over the legacy ``start_server`` /
  ``start_client`` gRPC transport on localhost, the three clients as threads of one process. Its
  simulation engine needs ray, which this machine does not have; the legacy transport is the
  lightest way to run Flower's real server loop without it. flwr pins protobuf below 7 and kafeed
  needs 7, so Flower runs in its own virtual environment (``make flower-venv``, or
  ``--flower-python``) as a child process of this script; the child imports nothing of kafeed.
- **kafeed**: the same local training in threads, each site's delta (local minus global weights)
  securely aggregated with ``kafeed.federate.secagg`` (X25519 pairwise masks, fixed point mod
  2**64: each site masks ``[w, w * delta]``, only the sum is opened) and the next global model
  ``global + mean delta``; ``kafeed.federate.aggregate.fedavg`` computes the plain weighted mean
  beside it as a check (the difference is the fixed point's rounding). The rounds run in process:
  the federated core (coordinator, site trainers, rounds over a broker) is not part of this
  benchmark yet, so the time per round is local training plus secure aggregation, without Kafka.

Time per round: from the global model sent to the next one computed (Flower: from
``configure_fit`` to the end of ``aggregate_fit``), torch on one thread per site on both sides.

    PYTHONPATH=src python benchmarks/bench_federated.py --rounds 20 --local-steps 25
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

SITES = 3
CLASSES = 10
FEATURES = 32
#: How far apart the classes lie (1 = the noise's standard deviation): small enough that they overlap.
CENTER_SCALE = 0.3
#: Where ``make flower-venv`` puts Flower's environment.
FLOWER_VENV = Path.home() / ".cache" / "kafeed" / "flower-venv"


@dataclass(frozen=True)
class Setup:
    """Everything both sides must agree on; the Flower child gets it as JSON."""

    rounds: int = 20
    local_steps: int = 25
    batch: int = 32
    lr: float = 0.05
    train_samples: int = 9_000
    test_samples: int = 3_000
    alpha: float = 0.5
    hidden: int = 64
    seed: int = 0


# --- the shared problem: data, split, model, local training, scoring (no kafeed, no flwr) ---

def make_data(setup: Setup) -> tuple[list[tuple[np.ndarray, np.ndarray]], tuple[np.ndarray, np.ndarray]]:
    """The three sites' (x, y) and the test set, the same for the same setup."""
    rng = np.random.default_rng(setup.seed)
    centers = rng.normal(size=(CLASSES, FEATURES)) * CENTER_SCALE

    def draw(labels: np.ndarray) -> np.ndarray:
        return (centers[labels] + rng.normal(size=(labels.shape[0], FEATURES))).astype(np.float32)

    y = rng.integers(0, CLASSES, size=setup.train_samples)
    x = draw(y)
    test_y = np.arange(setup.test_samples) % CLASSES
    test_x = draw(test_y)
    # Label skew: each class's samples go to the sites in Dirichlet(alpha) proportions.
    owner = np.empty(setup.train_samples, dtype=np.int64)
    for c in range(CLASSES):
        idx = np.flatnonzero(y == c)
        shares = rng.dirichlet([setup.alpha] * SITES)
        owner[idx] = rng.choice(SITES, size=idx.shape[0], p=shares)
    sites = [(x[owner == s], y[owner == s].astype(np.int64)) for s in range(SITES)]
    return sites, (test_x, test_y.astype(np.int64))


def make_model(setup: Setup) -> torch.nn.Module:
    torch.manual_seed(setup.seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, setup.hidden), torch.nn.ReLU(),
                               torch.nn.Linear(setup.hidden, CLASSES))


def get_weights(model: torch.nn.Module) -> list[np.ndarray]:
    return [v.detach().numpy().copy() for v in model.state_dict().values()]


def set_weights(model: torch.nn.Module, weights: list[np.ndarray]) -> None:
    keys = list(model.state_dict())
    model.load_state_dict({k: torch.from_numpy(np.array(w)) for k, w in zip(keys, weights, strict=True)})


def train_local(setup: Setup, model: torch.nn.Module, data: tuple[np.ndarray, np.ndarray], site: int,
                round_index: int) -> list[np.ndarray]:
    """``local_steps`` SGD steps from the model's current weights; the batches depend only on
    (seed, site, round), so both sides draw the same ones."""
    x, y = torch.from_numpy(data[0]), torch.from_numpy(data[1])
    rng = np.random.default_rng([setup.seed, site, round_index])
    params = list(model.parameters())
    model.train()
    for _ in range(setup.local_steps):
        idx = torch.from_numpy(rng.integers(0, x.shape[0], size=setup.batch))
        grads = torch.autograd.grad(torch.nn.functional.cross_entropy(model(x[idx]), y[idx]), params)
        with torch.no_grad():  # plain SGD; torch.optim's first use imports torch._dynamo (seconds)
            for p, g in zip(params, grads, strict=True):
                p.add_(g, alpha=-setup.lr)
    return get_weights(model)


def score(model: torch.nn.Module, test: tuple[np.ndarray, np.ndarray]) -> dict[str, float]:
    model.eval()
    with torch.no_grad():
        logits = model(torch.from_numpy(test[0]))
        y = torch.from_numpy(test[1])
        loss = torch.nn.functional.cross_entropy(logits, y).item()
        accuracy = (logits.argmax(1) == y).float().mean().item()
    return {"loss": loss, "accuracy": accuracy}


# --- kafeed's side ---

def run_kafeed(setup: Setup) -> dict[str, Any]:
    """The rounds with kafeed's secure aggregation and FedAvg, in this process."""
    from kafeed.federate import secagg
    from kafeed.federate.aggregate import fedavg

    torch.set_num_threads(1)
    sites, test = make_data(setup)
    global_model = make_model(setup)
    shapes = [w.shape for w in get_weights(global_model)]
    flat = np.concatenate([w.ravel() for w in get_weights(global_model)])
    fixed = secagg.FixedPoint()
    models = [make_model(setup) for _ in range(SITES)]
    names = [f"site-{s}" for s in range(SITES)]
    round_seconds, secagg_seconds, rounding = [], [], 0.0

    def site_round(s: int, r: int, roster: dict[str, bytes], keys: secagg.SiteKeys,
                   tag: str) -> tuple[np.ndarray, bytes]:
        set_weights(models[s], unflat(flat, shapes))
        local = np.concatenate([w.ravel() for w in train_local(setup, models[s], sites[s], s, r)])
        delta = local - flat
        masked = secagg.mask(keys, site=names[s], roster=roster, round_tag=tag, vector=delta,
                             weight=len(sites[s][1]), fixed=fixed)
        return delta, masked.to_bytes()

    with ThreadPoolExecutor(SITES) as pool:
        for r in range(setup.rounds):
            start = time.perf_counter()
            tag = secagg.round_tag("bench", r, 0)
            keys = [secagg.SiteKeys.generate() for _ in range(SITES)]
            roster = {names[s]: keys[s].public_bytes() for s in range(SITES)}
            results = list(pool.map(site_round, range(SITES), [r] * SITES, [roster] * SITES, keys,
                                    [tag] * SITES))
            t_sum = time.perf_counter()
            updates = [secagg.MaskedUpdate.from_bytes(data) for _, data in results]
            total = secagg.sum_masked(updates, roster=roster, round_tag=tag, length=flat.shape[0])
            seeds = {names[s]: secagg.reveal_seed(keys[s], site=names[s], roster=roster, round_tag=tag,
                                                  received=names) for s in range(SITES)}
            _, mean_delta = secagg.unmask_mean(total, seeds=seeds, round_tag=tag, fixed=fixed)
            secagg_seconds.append(time.perf_counter() - t_sum)
            flat = (flat + mean_delta).astype(np.float32)
            round_seconds.append(time.perf_counter() - start)
            plain = fedavg([d for d, _ in results], [len(site[1]) for site in sites])
            rounding = max(rounding, float(np.max(np.abs(plain - mean_delta))))
    set_weights(global_model, unflat(flat, shapes))
    return {**score(global_model, test), "round_seconds": round_seconds,
            "secagg_seconds": secagg_seconds, "max_secagg_vs_fedavg": rounding,
            "params": int(flat.shape[0]), "site_samples": [len(site[1]) for site in sites]}


def unflat(flat: np.ndarray, shapes: list[tuple[int, ...]]) -> list[np.ndarray]:
    out, offset = [], 0
    for shape in shapes:
        size = int(np.prod(shape))
        out.append(flat[offset:offset + size].reshape(shape))
        offset += size
    return out


# --- Flower's side (runs in the Flower environment: imports flwr, never kafeed) ---

def run_flower(setup: Setup) -> dict[str, Any]:
    """Flower's FedAvg over its legacy gRPC server and three clients in threads."""
    import logging

    from flwr.client import NumPyClient
    from flwr.common import ndarrays_to_parameters
    from flwr.compat.client.app import start_client
    from flwr.server import ServerConfig, start_server
    from flwr.server.strategy import FedAvg

    logging.getLogger("flwr").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    sites, test = make_data(setup)
    global_model = make_model(setup)
    final: dict[str, float] = {}
    starts: dict[int, float] = {}
    round_seconds: list[float] = []

    class Site(NumPyClient):
        def __init__(self, s: int) -> None:
            self.s, self.model = s, make_model(setup)

        def fit(self, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[Any, int, dict]:
            set_weights(self.model, parameters)
            weights = train_local(setup, self.model, sites[self.s], self.s, int(config["round"]) - 1)
            return weights, len(sites[self.s][1]), {}

    class TimedFedAvg(FedAvg):
        def configure_fit(self, server_round: int, parameters: Any, client_manager: Any) -> Any:
            starts[server_round] = time.perf_counter()
            return super().configure_fit(server_round, parameters, client_manager)

        def aggregate_fit(self, server_round: int, results: Any, failures: Any) -> Any:
            if failures:
                raise RuntimeError(f"Flower round {server_round}: {len(failures)} clients failed")
            out = super().aggregate_fit(server_round, results, failures)
            round_seconds.append(time.perf_counter() - starts[server_round])
            return out

    def evaluate(server_round: int, weights: list[np.ndarray], _: dict[str, Any]) -> tuple[float, dict]:
        if server_round == setup.rounds:
            set_weights(global_model, weights)
            final.update(score(global_model, test))
        return final.get("loss", 0.0), {}

    strategy = TimedFedAvg(fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=SITES,
                           min_available_clients=SITES, evaluate_fn=evaluate,
                           on_fit_config_fn=lambda r: {"round": r},
                           initial_parameters=ndarrays_to_parameters(get_weights(global_model)))
    port = free_port()
    address = f"127.0.0.1:{port}"

    def start_clients() -> None:
        wait_listening(port, timeout=60.0)  # the legacy client does not retry a refused connection
        for s in range(SITES):
            threading.Thread(target=start_client, daemon=True, kwargs={
                "server_address": address, "client": Site(s).to_client(), "insecure": True}).start()

    # The server runs in the main thread (it installs signal handlers); the clients join it.
    threading.Thread(target=start_clients, daemon=True).start()
    start_server(server_address=address, config=ServerConfig(num_rounds=setup.rounds), strategy=strategy)
    if len(round_seconds) != setup.rounds or not final:
        raise RuntimeError(f"Flower ran {len(round_seconds)} of {setup.rounds} rounds")
    return {**final, "round_seconds": round_seconds}


def wait_listening(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def flower_in_child(setup: Setup, python: Path, timeout: float = 600.0) -> dict[str, Any]:
    """Run :func:`run_flower` with Flower's interpreter; its last stdout line is the JSON result."""
    proc = subprocess.run([str(python), __file__, "--flower-child", json.dumps(asdict(setup))],
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    if proc.returncode != 0:
        raise RuntimeError(f"the Flower side failed ({proc.returncode}): {proc.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def flower_python(explicit: str | None = None) -> Path | None:
    """Flower's interpreter, or None when there is none (``make flower-venv`` makes it)."""
    path = Path(explicit) if explicit else FLOWER_VENV / "bin" / "python"
    return path if path.exists() else None


def compare(setup: Setup, python: Path | None,
            kafeed_side: Callable[[Setup], dict[str, Any]] = run_kafeed) -> dict[str, Any]:
    """Both sides in one run (Flower first, in its child process); Flower None when absent."""
    flower = flower_in_child(setup, python) if python else None
    kafeed = kafeed_side(setup)
    out: dict[str, Any] = {"setup": asdict(setup), "kafeed": kafeed, "flower": flower}
    if flower:
        out["loss_gap"] = abs(kafeed["loss"] - flower["loss"]) / flower["loss"]
        out["accuracy_gap"] = abs(kafeed["accuracy"] - flower["accuracy"]) / flower["accuracy"]
    return out


def show(result: dict[str, Any]) -> None:
    s = result["setup"]
    print(f"{s['rounds']} rounds x {s['local_steps']} local steps (batch {s['batch']}, lr {s['lr']}), "
          f"3 sites {result['kafeed']['site_samples']} samples, {result['kafeed']['params']:,} params")
    print(f"{'':10}{'final loss':>12}{'accuracy':>10}{'s/round':>10}{'round 1':>9}")
    for name in ("flower", "kafeed"):
        side = result[name]
        if side is None:
            print(f"{name:10}  not run: no Flower environment (make flower-venv)")
            continue
        rounds = side["round_seconds"]
        steady = float(np.median(rounds[1:] if len(rounds) > 1 else rounds))
        print(f"{name:10}{side['loss']:>12.4f}{side['accuracy']:>10.2%}{steady:>10.4f}{rounds[0]:>9.3f}")
    k = result["kafeed"]
    print(f"kafeed secure aggregation {1e3 * float(np.median(k['secagg_seconds'])):.2f} ms/round; "
          f"its mean differs from plain FedAvg by at most {k['max_secagg_vs_fedavg']:.1e}")
    if result["flower"]:
        print(f"gap: loss {result['loss_gap']:.2%}, accuracy {result['accuracy_gap']:.2%} (target < 2 %)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=Setup.rounds)
    ap.add_argument("--local-steps", type=int, default=Setup.local_steps)
    ap.add_argument("--hidden", type=int, default=Setup.hidden, help="the MLP's hidden width")
    ap.add_argument("--flower-python", help=f"Flower's interpreter (default {FLOWER_VENV}/bin/python)")
    ap.add_argument("--no-flower", action="store_true", help="run kafeed's side only")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON document")
    ap.add_argument("--flower-child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.flower_child:
        print(json.dumps(run_flower(Setup(**json.loads(args.flower_child)))))
        return 0
    python = None if args.no_flower else flower_python(args.flower_python)
    if python is None and not args.no_flower:
        print("no Flower environment: run `make flower-venv` (or pass --flower-python); kafeed's side only",
              file=sys.stderr)
    result = compare(Setup(rounds=args.rounds, local_steps=args.local_steps, hidden=args.hidden), python)
    if args.json:
        print(json.dumps(result))
    else:
        show(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
