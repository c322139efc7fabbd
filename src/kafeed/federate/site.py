"""A site's side of the rounds: follow the global model, train on the site's own topics with
kafeed's loader, record the update in the site's ledger, send it to the training cluster.

Per round ``r`` (trained from global version ``r - 1``):

1. load the global weights; open a :class:`~kafeed.loader.KafkaTokenDataset` on the site's
   topics of its own cluster, resumed from the loader state of the ledger's last entry;
2. take ``local_steps`` batches (fewer when the topics end first); the sample count is the
   number of windows trained;
3. write the ledger entry (delta, samples, loader state before and after: the data offsets);
4. send the update (chunked, one transaction under the site's own transactional id, to its own
   update topic) and mark the entry sent.

A site killed anywhere in that resumes exactly: killed before 3, it trains the round again
from the same loader state (same data, same seed, the same update); killed between 3 and 4, it
sends the recorded update again, and the coordinator, which dedupes by (round, site), counts it
once. A site that comes back after its round closed trains for the round that is open then.
Nothing read from the site's cluster is written anywhere but the ledger, at the site.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kafeed.errors import KafeedError
from kafeed.federate.blobs import encode_arrays, produce_blob
from kafeed.federate.config import FederationSettings, SiteSettings
from kafeed.federate.global_model import GlobalFollower, GlobalVersion
from kafeed.federate.ledger import Ledger, LedgerEntry
from kafeed.federate.setup import site_group_prefix, site_transactional_id
from kafeed.federate.weights import Arrays, arrays_of, build_model, load_arrays
from kafeed.kafka import KafkaClients
from kafeed.telemetry import metrics as m

log = logging.getLogger("kafeed")
Progress = Callable[[str, dict[str, Any]], None]


@dataclass
class SiteSummary:
    site: str
    rounds_trained: list[int] = field(default_factory=list)
    updates_sent: list[int] = field(default_factory=list)
    resent: list[int] = field(default_factory=list)
    samples: int = 0
    final_version: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"site": self.site, "rounds_trained": self.rounds_trained,
                "updates_sent": self.updates_sent, "resent": self.resent, "samples": self.samples,
                "final_version": self.final_version}


def train_update(settings: FederationSettings, site: SiteSettings, base: GlobalVersion, round_: int,
                 loader_state: dict[str, Any] | None) -> tuple[Arrays, int, dict[str, Any], float | None]:
    """Train ``local_steps`` batches from ``base`` on the site's topics; the weights delta, the
    number of windows trained, the loader state after them and the mean loss (None: no data)."""
    from kafeed.loader import KafkaTokenDataset, StreamLoader
    from kafeed.train.models import next_token_loss

    model = build_model(settings.model, settings.seed)
    load_arrays(model, base.arrays)
    anchor = [p.detach().clone() for p in model.parameters()]
    dataset = KafkaTokenDataset(list(site.topics), seq_len=settings.model.seq_len,
                                eos_id=settings.model.eos_id, connection=site.connection())
    if loader_state:
        dataset.load_state_dict(loader_state)
    loader = StreamLoader(dataset, batch_size=settings.batch_size)
    optimizer = torch.optim.SGD(model.parameters(), lr=settings.lr)
    # The same round on the same data gives the same update: a site trained again after a
    # crash sends what its first attempt would have sent.
    torch.manual_seed(settings.seed * 1_000_003 + round_)
    mu = settings.fedprox.mu if settings.strategy == "fedprox" else 0.0
    samples = steps = 0
    total_loss = 0.0
    model.train()
    try:
        for batch in loader:
            window = batch["tokens"]
            loss = next_token_loss(model, window)
            if mu > 0:
                loss = loss + proximal_term(model, anchor, mu)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]
            optimizer.step()
            total_loss += float(loss.detach())
            samples += int(window.shape[0])
            steps += 1
            if steps >= settings.local_steps:
                break
        after = loader.state_dict()
    finally:
        loader.close()
    trained = arrays_of(model)
    delta = {name: trained[name] - base.arrays[name] for name in trained}
    return delta, samples, after, (total_loss / steps if steps else None)


def proximal_term(model: torch.nn.Module, anchor: list[torch.Tensor], mu: float) -> torch.Tensor:
    """FedProx's ``mu / 2 * ||w - w_global||^2``, added to each local step's loss."""
    from kafeed.federate.aggregate import proximal_term as term

    return term(list(model.parameters()), anchor, mu)


class SiteRunner:
    """One site's rounds until the job's last global version (or ``stop``)."""

    def __init__(self, settings: FederationSettings, name: str, *, progress: Progress | None = None,
                 stop: threading.Event | None = None) -> None:
        self.settings = settings
        self.site = settings.site(name)
        self.ledger = Ledger(settings.site_dir(name))
        self.progress = progress or (lambda event, info: None)
        self.stop = stop or threading.Event()
        self.summary = SiteSummary(name)
        self._training = KafkaClients(settings.site_training_connection(name))
        self._producer: Any = None
        #: secure aggregation: (round tag, this attempt's keys, masked update sent)
        self._keys: tuple[str, Any, bool] | None = None

    def _produce(self, blob_id: str, data: bytes, round_: int) -> None:
        """``data`` as one blob on the site's update topic, in one transaction (retried)."""
        if self._producer is None:
            self._producer = self._training.transactional_producer(
                transactional_id=site_transactional_id(self.settings, self.site.name),
                stage="federate-site")
            self._producer.init()
        producer = self._producer
        while True:
            try:
                producer.begin()
                produce_blob(producer, self.settings.update_topic(self.site.name), blob_id, data)
                producer.commit()
                return
            except KafeedError as exc:
                if self.stop.is_set():
                    raise
                producer.recover(exc)
                log.warning("site %s: sending for round %d failed (%s); sending it again",
                            self.site.name, round_, exc)

    def _send(self, entry: LedgerEntry) -> int:
        """The entry's update (delta and sample count) in one transaction; its size in bytes."""
        meta = {"site": self.site.name, "round": entry.round, "samples": entry.samples,
                "base_version": entry.base_version}
        data = encode_arrays(entry.delta(), meta)
        self._produce(f"r{entry.round}.{self.site.name}", data, entry.round)
        self.ledger.mark_sent(entry.round)
        m.FED_UPDATE_BYTES.labels(job=self.settings.job, site=self.site.name).observe(len(data))
        return len(data)

    def _control(self, kind: str, entry: LedgerEntry, attempt: int, meta: dict[str, Any],
                 arrays: Arrays | None = None) -> int:
        body = {**meta, "kind": kind, "site": self.site.name, "round": entry.round, "attempt": attempt,
                "base_version": entry.base_version}
        data = encode_arrays(arrays or {}, body)
        self._produce(f"r{entry.round}.a{attempt}.{self.site.name}.{kind}", data, entry.round)
        return len(data)

    def _secure_step(self, entry: LedgerEntry, controls: list[dict[str, Any]]) -> None:
        """One step of secure aggregation for the open round, from the coordinator's control
        messages: send keys, then the masked update once the roster is out, then the seed once
        every roster site's masked update arrived. Keys live in this process only: a site that
        restarts takes part again from the round's next attempt."""
        from kafeed.federate.aggregate import flatten
        from kafeed.federate.secagg import FixedPoint, SiteKeys, mask, reveal_seed, round_tag

        r, name = entry.round, self.site.name
        if entry.samples <= 0 or self.ledger.revealed(r):
            return
        mine = [c for c in controls if int(c.get("round", -1)) == r]
        attempt = max((int(c["attempt"]) for c in mine if c["kind"] == "attempt"), default=0)
        of_attempt = {c["kind"]: c for c in mine if int(c["attempt"]) == attempt}
        tag = round_tag(self.settings.job, r, attempt)
        if self._keys is None or self._keys[0] != tag:
            if "roster" in of_attempt:
                return  # the roster is out without this process's keys: wait for the next attempt
            keys = SiteKeys.generate()
            self._keys = (tag, keys, False)
            self._control("key", entry, attempt, {"public": keys.public_bytes().hex()})
            self.progress("keys", {"site": name, "round": r, "attempt": attempt})
            return
        _, keys, masked_sent = self._keys
        roster_meta = of_attempt.get("roster")
        if roster_meta is None:
            return
        roster = {site: bytes.fromhex(public) for site, public in roster_meta["roster"].items()}
        if name not in roster:
            return
        if not masked_sent:
            masked = mask(keys, site=name, roster=roster, round_tag=tag, vector=flatten(entry.delta()),
                          weight=entry.samples, fixed=FixedPoint())
            size = self._control("masked", entry, attempt, {}, {"values": masked.values})
            self._keys = (tag, keys, True)
            self.ledger.mark_sent(r)
            self.summary.updates_sent.append(r)
            m.FED_UPDATE_BYTES.labels(job=self.settings.job, site=name).observe(size)
            self.progress("masked", {"site": name, "round": r, "attempt": attempt, "bytes": size})
            return
        received = of_attempt.get("received")
        if received is None:
            return
        seed = reveal_seed(keys, site=name, roster=roster, round_tag=tag, received=received["sites"])
        self.ledger.mark_revealed(r)  # before the seed leaves: never a second reveal in this round
        self._control("seed", entry, attempt, {"seed": seed.hex()})
        self.progress("seed", {"site": name, "round": r, "attempt": attempt})

    def run(self) -> SiteSummary:
        """Rounds until the last global version. Both clusters are probed first: a site that
        cannot reach its own data or the training cluster says so at once and writes nothing."""
        from kafeed.connect import check_reachable

        settings, name = self.settings, self.site.name
        check_reachable(self.site.connection())
        check_reachable(settings.site_training_connection(name))
        follower = GlobalFollower(self._training, settings.global_topic,
                                  group_prefix=site_group_prefix(settings, name))
        try:
            for entry in self.ledger.entries():
                # recorded, then killed before its transaction committed (secure: a new attempt's keys)
                if not entry.sent and not settings.secure:
                    size = self._send(entry)
                    self.summary.resent.append(entry.round)
                    self.progress("resent", {"site": name, "round": entry.round, "bytes": size})
            while not self.stop.is_set():
                current = follower.poll(0.5)
                if current is None:
                    continue
                if current.final:
                    self.summary.final_version = current.version
                    self.progress("final", {"site": name, "version": current.version})
                    break
                round_ = current.version + 1
                recorded = self.ledger.entry(round_)
                if recorded is not None:
                    if settings.secure:
                        self._secure_step(recorded, follower.controls)
                    continue  # this round's update is sent; wait for the next version
                last = self.ledger.last()
                before = last.loader_after if last is not None else {}
                started = time.monotonic()
                self.progress("train", {"site": name, "round": round_, "from_version": current.version})
                delta, samples, after, loss = train_update(settings, self.site, current, round_, before)
                entry = self.ledger.record(round_=round_, base_version=current.version, samples=samples,
                                           delta=delta, loader_before=before, loader_after=after)
                self.summary.rounds_trained.append(round_)
                self.summary.samples += samples
                if settings.secure:
                    self.progress("trained", {"site": name, "round": round_, "samples": samples,
                                              "loss": None if loss is None else round(loss, 4)})
                    self._secure_step(entry, follower.controls)
                    continue
                size = self._send(entry)
                self.summary.updates_sent.append(round_)
                self.progress("sent", {"site": name, "round": round_, "samples": samples,
                                       "loss": None if loss is None else round(loss, 4), "bytes": size,
                                       "seconds": round(time.monotonic() - started, 3)})
        finally:
            follower.close()
        return self.summary

