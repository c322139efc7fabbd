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
  ``--flower-python``) as a child process of this script; the child imports nothing of kafeed but
  its TinyGPT (``kafeed.train.models``, pure torch) for the run over a broker.
- **kafeed**, in process (the default): the same local training in threads, each site's delta
  (local minus global weights) securely aggregated with ``kafeed.federate.secagg`` (X25519 pairwise
  masks, fixed point mod 2**64: each site masks ``[w, w * delta]``, only the sum is opened) and
  the next global model ``global + mean delta``; ``kafeed.federate.aggregate.fedavg`` computes
  the plain weighted mean beside it as a check (the difference is the fixed point's rounding).
  The time per round is local training plus secure aggregation, without Kafka.
- **kafeed over a broker** (``--over-broker``): ``kafeed federate``'s own coordinator and three
  site runners (threads) on one cluster (a local one, or ``--bootstrap``): each site trains
  kafeed's TinyGPT on byte documents from a 128-value range of its own (the non-IID split), read
  with kafeed's loader from its own topic, and the rounds go through the cluster as the core runs
  them (updates and global versions as chunked records, each round one transaction), FedAvg on
  the sample counts, securely aggregated (the job's ``secure = true``; ``--plain`` turns it off).
  Flower then trains the same TinyGPT from the same seed on the same windows (read back with the
  same loader) and is scored on the same held-out windows.

Time per round: from the global model sent to the next one computed (Flower: from
``configure_fit`` to the end of ``aggregate_fit``; over a broker: the coordinator's round time,
from a round opened to version N+1 committed). The table gives the median after round 1, which
also pays for first imports and connections.

    PYTHONPATH=src python benchmarks/bench_federated.py                 # 20 rounds x 25 steps
    PYTHONPATH=src python benchmarks/bench_federated.py --over-broker   # 10 rounds x 10 steps
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

def timed_fedavg(round_seconds: list[float]) -> Any:
    """Flower's FedAvg, each round's seconds (from handing out the model to the aggregate)
    appended to ``round_seconds``; a round with a failed client is an error."""
    from flwr.server.strategy import FedAvg

    starts: dict[int, float] = {}

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

    return TimedFedAvg


def run_flower(setup: Setup) -> dict[str, Any]:
    """Flower's FedAvg over its legacy gRPC server and three clients in threads."""
    import logging

    from flwr.client import NumPyClient
    from flwr.common import ndarrays_to_parameters
    from flwr.compat.client.app import start_client
    from flwr.server import ServerConfig, start_server

    logging.getLogger("flwr").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    sites, test = make_data(setup)
    global_model = make_model(setup)
    final: dict[str, float] = {}
    round_seconds: list[float] = []

    class Site(NumPyClient):
        def __init__(self, s: int) -> None:
            self.s, self.model = s, make_model(setup)

        def fit(self, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[Any, int, dict]:
            set_weights(self.model, parameters)
            weights = train_local(setup, self.model, sites[self.s], self.s, int(config["round"]) - 1)
            return weights, len(sites[self.s][1]), {}

    TimedFedAvg = timed_fedavg(round_seconds)

    def evaluate(server_round: int, weights: list[np.ndarray], _: dict[str, Any]) -> tuple[float, dict]:
        if server_round == setup.rounds:
            set_weights(global_model, weights)
            final.update(score(global_model, test))
        return final.get("loss", 0.0), {}

    strategy = TimedFedAvg(fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=SITES,
                           min_available_clients=SITES, evaluate_fn=evaluate,
                           on_fit_config_fn=lambda r: {"round": r},
                           initial_parameters=ndarrays_to_parameters(get_weights(global_model)))
    serve(strategy, setup.rounds, [Site(s) for s in range(SITES)], start_server, start_client, ServerConfig)
    if len(round_seconds) != setup.rounds or not final:
        raise RuntimeError(f"Flower ran {len(round_seconds)} of {setup.rounds} rounds")
    return {**final, "round_seconds": round_seconds}


def serve(strategy: Any, rounds: int, sites: list[Any], start_server: Any, start_client: Any,
          server_config: Any) -> None:
    """Flower's server in this (main) thread, which it needs for its signal handlers; the
    clients in threads, started once it listens (the legacy client does not retry)."""
    port = free_port()
    address = f"127.0.0.1:{port}"

    def start_clients() -> None:
        wait_listening(port, timeout=60.0)
        for site in sites:
            threading.Thread(target=start_client, daemon=True, kwargs={
                "server_address": address, "client": site.to_client(), "insecure": True}).start()

    threading.Thread(target=start_clients, daemon=True).start()
    start_server(server_address=address, config=server_config(num_rounds=rounds), strategy=strategy)


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


# --- over a broker: the federated core's rounds beside Flower on the same TinyGPT and windows ---

#: The job's [model] table: kafeed's TinyGPT over bytes (vocabulary 257, end of document 256).
GPT = {"vocab_size": 257, "seq_len": 16, "d_model": 16, "n_layers": 1, "n_heads": 2}
EOS = 256


@dataclass(frozen=True)
class BrokerSetup:
    """The broker run's sizes; the Flower child gets them as JSON, with the windows' file."""

    rounds: int = 10
    local_steps: int = 10
    batch: int = 8
    lr: float = 0.5
    docs_per_site: int = 500
    eval_batches: int = 20
    secure: bool = True
    seed: int = 0


def produce_docs(bootstrap: str, topic: str, count: int, *, lows: list[int], seed: int) -> None:
    """``count`` documents of random bytes, each from one of ``lows``' 128-wide byte ranges."""
    from confluent_kafka import Producer

    from kafeed.schema import make_document

    rng = np.random.default_rng(seed)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(count):
        low = lows[i % len(lows)]
        tokens = rng.integers(low, low + 128, size=int(rng.integers(20, 80)))
        doc = make_document(tokens, id=f"{topic}-{i}", vocab_size=GPT["vocab_size"], tokenizer="bytes")
        producer.produce(topic, value=doc.SerializeToString())
    if producer.flush(60) != 0:
        raise RuntimeError(f"documents for {topic} were not delivered")


def read_windows(bootstrap: str, topic: str, batches: int, batch: int) -> np.ndarray:
    """The first ``batches`` batches kafeed's loader gives from ``topic``, as a site's rounds read
    them (each round's loader resumes exactly where the last one stopped)."""
    from kafeed.config import ConnectionSettings
    from kafeed.loader import KafkaTokenDataset, StreamLoader

    dataset = KafkaTokenDataset([topic], seq_len=GPT["seq_len"], eos_id=EOS,
                                connection=ConnectionSettings(bootstrap=bootstrap))
    loader = StreamLoader(dataset, batch_size=batch)
    out = []
    try:
        for tokens in loader:
            out.append(np.asarray(tokens["tokens"]))
            if len(out) == batches:
                break
    finally:
        loader.close()
    if len(out) < batches:
        raise RuntimeError(f"{topic} held {len(out)} batches, {batches} needed")
    return np.stack(out)


def gpt_loss(model: torch.nn.Module, windows: np.ndarray) -> float:
    from kafeed.train.models import next_token_loss

    model.eval()
    with torch.no_grad():
        return float(np.mean([next_token_loss(model, torch.from_numpy(w)).item() for w in windows]))


def new_gpt(seed: int) -> torch.nn.Module:
    """Version 0 of the global model, as ``kafeed.federate.weights.build_model`` makes it."""
    from kafeed.train.models import GPTConfig, TinyGPT

    torch.manual_seed(seed)
    return TinyGPT(GPTConfig(**GPT))


def run_core(bootstrap: str, setup: BrokerSetup, workdir: Path) -> dict[str, Any]:
    """``kafeed federate``'s coordinator and three site runners (threads) over the broker."""
    from kafeed.config import ConnectionSettings
    from kafeed.federate.blobs import blobs_of
    from kafeed.federate.config import load_federation
    from kafeed.federate.coordinator import Coordinator
    from kafeed.federate.setup import create_topics
    from kafeed.federate.site import SiteRunner
    from kafeed.federate.weights import load_arrays
    from kafeed.kafka import KafkaClients
    from kafeed.topics import TopicAdmin, plan_topic

    job = f"bench-{os.getpid()}-{time.monotonic_ns() % 10**6}"
    lines = [f'job = "{job}"', f'state_dir = "{workdir / "state"}"', f"rounds = {setup.rounds}",
             f"local_steps = {setup.local_steps}", f"batch_size = {setup.batch}", f"lr = {setup.lr}",
             f"seed = {setup.seed}", f"quorum = {SITES}", "deadline_s = 60.0",
             f"secure = {str(setup.secure).lower()}",
             "[training]", f'bootstrap = "{bootstrap}"',
             "[model]", *(f"{k} = {v}" for k, v in GPT.items()), f"eos_id = {EOS}"]
    for s in range(SITES):
        lines += ["[[sites]]", f'name = "site-{s}"', f'bootstrap = "{bootstrap}"',
                  f'topics = ["{job}.data-{s}"]']
    path = workdir / "job.toml"
    path.write_text("\n".join(lines) + "\n")
    settings = load_federation(path)
    create_topics(settings)
    admin = TopicAdmin(ConnectionSettings(bootstrap=bootstrap))
    for topic in [*(f"{job}.data-{s}" for s in range(SITES)), f"{job}.eval"]:
        admin.create(plan_topic(topic, brokers=1, partitions=1))
    for s in range(SITES):  # non-IID: each site's bytes from a range of its own
        produce_docs(bootstrap, f"{job}.data-{s}", setup.docs_per_site, lows=[SITE_LOWS[s]], seed=s + 1)
    windows = [read_windows(bootstrap, f"{job}.data-{s}", setup.rounds * setup.local_steps, setup.batch)
               for s in range(SITES)]
    produce_docs(bootstrap, f"{job}.eval", 40 * setup.eval_batches, lows=SITE_LOWS, seed=99)
    held_out = read_windows(bootstrap, f"{job}.eval", setup.eval_batches, setup.batch)

    stop = threading.Event()
    runners = [SiteRunner(settings, f"site-{s}", stop=stop) for s in range(SITES)]
    threads = [threading.Thread(target=r.run, daemon=True) for r in runners]
    for thread in threads:
        thread.start()
    try:
        summary = Coordinator(settings).run()
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    versions = blobs_of(KafkaClients(settings.training_connection()).read_to_end(settings.global_topic),
                        what="global")
    arrays, meta = versions[-1].arrays()
    if int(meta["version"]) != setup.rounds:
        raise RuntimeError(f"the job ended at version {meta['version']} of {setup.rounds}")
    model = new_gpt(setup.seed)
    load_arrays(model, arrays)
    return {"loss": gpt_loss(model, held_out), "initial_loss": gpt_loss(new_gpt(setup.seed), held_out),
            "round_seconds": [r["round_seconds"] for r in summary.rounds],
            "update_bytes": [c["bytes"] for r in summary.rounds for c in r["contributors"]][:1],
            "params": int(sum(a.size for a in arrays.values())), "windows": windows, "held_out": held_out}


#: Each site's bytes come from [low, low + 128): label skew's counterpart for a language model.
SITE_LOWS = [37, 74, 111]


def run_flower_gpt(setup: BrokerSetup, data: Path) -> dict[str, Any]:
    """Flower's FedAvg over its legacy gRPC transport, training TinyGPT as a kafeed site does
    (``kafeed.federate.site.train_update``) on the windows the sites trained on."""
    import logging

    from flwr.client import NumPyClient
    from flwr.common import ndarrays_to_parameters
    from flwr.compat.client.app import start_client
    from flwr.server import ServerConfig, start_server

    from kafeed.train.models import next_token_loss

    logging.getLogger("flwr").setLevel(logging.ERROR)
    with np.load(data) as npz:
        windows = [npz[f"site{s}"] for s in range(SITES)]
        held_out = npz["held_out"]
    global_model = new_gpt(setup.seed)
    names = [n for n, _ in global_model.named_parameters()]
    final: dict[str, float] = {}
    round_seconds: list[float] = []

    def load(model: torch.nn.Module, arrays: list[np.ndarray]) -> None:
        with torch.no_grad():
            for p, a in zip(model.parameters(), arrays, strict=True):
                p.copy_(torch.from_numpy(np.asarray(a, dtype=np.float32)))

    class Site(NumPyClient):
        def __init__(self, s: int) -> None:
            self.s = s

        def fit(self, parameters: list[np.ndarray], config: dict[str, Any]) -> tuple[Any, int, dict]:
            round_ = int(config["round"])
            model = new_gpt(setup.seed)
            load(model, parameters)
            opt = torch.optim.SGD(model.parameters(), lr=setup.lr)
            torch.manual_seed(setup.seed * 1_000_003 + round_)
            model.train()
            batches = windows[self.s][(round_ - 1) * setup.local_steps:round_ * setup.local_steps]
            for w in batches:
                loss = next_token_loss(model, torch.from_numpy(w))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            return ([p.detach().numpy().copy() for p in model.parameters()],
                    int(sum(b.shape[0] for b in batches)), {})

    TimedFedAvg = timed_fedavg(round_seconds)

    def evaluate(server_round: int, arrays: list[np.ndarray], _: dict[str, Any]) -> tuple[float, dict]:
        if server_round == setup.rounds:
            load(global_model, arrays)
            final["loss"] = gpt_loss(global_model, held_out)
        return final.get("loss", 0.0), {}

    assert len(names) == len(list(global_model.parameters()))
    strategy = TimedFedAvg(fraction_fit=1.0, fraction_evaluate=0.0, min_fit_clients=SITES,
                           min_available_clients=SITES, evaluate_fn=evaluate,
                           on_fit_config_fn=lambda r: {"round": r},
                           initial_parameters=ndarrays_to_parameters(
                               [p.detach().numpy().copy() for p in global_model.parameters()]))
    serve(strategy, setup.rounds, [Site(s) for s in range(SITES)], start_server, start_client, ServerConfig)
    if len(round_seconds) != setup.rounds or not final:
        raise RuntimeError(f"Flower ran {len(round_seconds)} of {setup.rounds} rounds")
    return {**final, "round_seconds": round_seconds}


def compare_over_broker(bootstrap: str, setup: BrokerSetup, python: Path | None,
                        workdir: Path) -> dict[str, Any]:
    """The core's rounds first (they decide the windows), then Flower on the same windows."""
    core = run_core(bootstrap, setup, workdir)
    windows, held_out = core.pop("windows"), core.pop("held_out")
    flower = None
    if python is not None:
        data = workdir / "windows.npz"
        np.savez(data, held_out=held_out, **{f"site{s}": w for s, w in enumerate(windows)})
        flower = flower_in_child(asdict(setup) | {"data": str(data)}, python, mode="gpt")
    out: dict[str, Any] = {"setup": asdict(setup), "kafeed": core, "flower": flower}
    if flower:
        out["loss_gap"] = abs(core["loss"] - flower["loss"]) / flower["loss"]
    return out


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def flower_in_child(config: dict[str, Any], python: Path, *, mode: str = "mlp",
                    timeout: float = 600.0) -> dict[str, Any]:
    """Run :func:`run_flower` (``mode`` "mlp") or :func:`run_flower_gpt` ("gpt") with Flower's
    interpreter; the last line it prints is the JSON result. Only the "gpt" mode imports a
    module of kafeed (its TinyGPT, pure torch) from this checkout's src/."""
    src = Path(__file__).resolve().parents[1] / "src"
    proc = subprocess.run([str(python), __file__, "--flower-child", mode, json.dumps(config)],
                          capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(src)})
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
    flower = flower_in_child(asdict(setup), python) if python else None
    kafeed = kafeed_side(setup)
    out: dict[str, Any] = {"setup": asdict(setup), "kafeed": kafeed, "flower": flower}
    if flower:
        out["loss_gap"] = abs(kafeed["loss"] - flower["loss"]) / flower["loss"]
        out["accuracy_gap"] = abs(kafeed["accuracy"] - flower["accuracy"]) / flower["accuracy"]
    return out


def side_rows(result: dict[str, Any], accuracy: bool) -> None:
    """One line per side (Flower, kafeed): final loss, accuracy if asked, the median round's
    seconds after the first, and the first round's."""
    for name in ("flower", "kafeed"):
        side = result[name]
        if side is None:
            print(f"{name:10}  not run: no Flower environment (make flower-venv)")
            continue
        rounds = side["round_seconds"]
        steady = float(np.median(rounds[1:] if len(rounds) > 1 else rounds))
        acc = f"{side['accuracy']:>10.2%}" if accuracy else ""
        print(f"{name:10}{side['loss']:>12.4f}{acc}{steady:>10.4f}{rounds[0]:>9.3f}")


def show(result: dict[str, Any]) -> None:
    s = result["setup"]
    print(f"{s['rounds']} rounds x {s['local_steps']} local steps (batch {s['batch']}, lr {s['lr']}), "
          f"3 sites {result['kafeed']['site_samples']} samples, {result['kafeed']['params']:,} params")
    print(f"{'':10}{'final loss':>12}{'accuracy':>10}{'s/round':>10}{'round 1':>9}")
    side_rows(result, accuracy=True)
    k = result["kafeed"]
    print(f"kafeed secure aggregation {1e3 * float(np.median(k['secagg_seconds'])):.2f} ms/round; "
          f"its mean differs from plain FedAvg by at most {k['max_secagg_vs_fedavg']:.1e}")
    if result["flower"]:
        print(f"gap: loss {result['loss_gap']:.2%}, accuracy {result['accuracy_gap']:.2%} (target < 2 %)")


def show_broker(result: dict[str, Any]) -> None:
    s, k = result["setup"], result["kafeed"]
    how = "securely aggregated" if s["secure"] else "plain"
    print(f"over a broker, {how}: {s['rounds']} rounds x {s['local_steps']} local steps (batch {s['batch']}, "
          f"lr {s['lr']}), 3 sites, TinyGPT {k['params']:,} params, an update {k['update_bytes'][0]:,} bytes")
    print(f"{'':10}{'final loss':>12}{'s/round':>10}{'round 1':>9}")
    side_rows(result, accuracy=False)
    print(f"(version 0's loss: {k['initial_loss']:.4f}; ln 257 = {np.log(257):.4f})")
    if result["flower"]:
        print(f"gap: loss {result['loss_gap']:.2%} (target < 2 %)")


def over_broker(args: argparse.Namespace, python: Path | None) -> dict[str, Any]:
    import tempfile

    setup = BrokerSetup(rounds=args.rounds, local_steps=args.local_steps, secure=not args.plain)
    with tempfile.TemporaryDirectory(prefix="bench-federated-") as tmp:
        if args.bootstrap:
            return compare_over_broker(args.bootstrap, setup, python, Path(tmp))
        from kafeed.broker import LocalCluster, free_port_block

        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2))
        cluster.start()
        try:
            return compare_over_broker(cluster.bootstrap, setup, python, Path(tmp))
        finally:
            cluster.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, help=f"default {Setup.rounds} ({BrokerSetup.rounds} over a broker)")
    ap.add_argument("--local-steps", type=int,
                    help=f"default {Setup.local_steps} ({BrokerSetup.local_steps} over a broker)")
    ap.add_argument("--hidden", type=int, default=Setup.hidden, help="the MLP's hidden width")
    ap.add_argument("--flower-python", help=f"Flower's interpreter (default {FLOWER_VENV}/bin/python)")
    ap.add_argument("--no-flower", action="store_true", help="run kafeed's side only")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON document")
    ap.add_argument("--over-broker", action="store_true",
                    help="kafeed federate's rounds over a broker (TinyGPT on byte documents)")
    ap.add_argument("--bootstrap", help="with --over-broker: a running cluster instead of a local one")
    ap.add_argument("--plain", action="store_true", help="with --over-broker: without secure aggregation")
    ap.add_argument("--flower-child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    base = BrokerSetup if args.over_broker else Setup
    args.rounds = args.rounds or base.rounds
    args.local_steps = args.local_steps or base.local_steps
    if args.flower_child:
        mode, config = args.flower_child[0], json.loads(args.flower_child[1])
        if mode == "gpt":
            data = Path(config.pop("data"))
            print(json.dumps(run_flower_gpt(BrokerSetup(**config), data)))
        else:
            print(json.dumps(run_flower(Setup(**config))))
        return 0
    python = None if args.no_flower else flower_python(args.flower_python)
    if python is None and not args.no_flower:
        print("no Flower environment: run `make flower-venv` (or pass --flower-python); kafeed's side only",
              file=sys.stderr)
    if args.over_broker:
        result = over_broker(args, python)
    else:
        result = compare(Setup(rounds=args.rounds, local_steps=args.local_steps, hidden=args.hidden), python)
    if args.json:
        print(json.dumps(result))
    else:
        (show_broker if args.over_broker else show)(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
