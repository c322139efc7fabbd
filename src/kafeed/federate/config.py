"""The federated job's settings: the training cluster, the sites, the rounds, from one TOML file.

::

    job = "fl-demo"               # names the topics: fl-demo.global, fl-demo.rounds, fl-demo.updates.<site>
    rounds = 3
    local_steps = 20
    batch_size = 8
    lr = 1e-3
    quorum = 2                    # updates a round needs before it may close
    deadline_s = 30.0             # a round closes at quorum once this long has passed (or when all sent)
    late_policy = "drop"          # an update for a closed round: "drop" it or fold it into the "next"
    strategy = "fedavg"           # "fedavg" | "fedprox" | "fedadam"
    secure = false                # pairwise-masked updates (kafeed.federate.secagg)
    state_dir = "~/.cache/kafeed/federate"

    [training]                    # the training cluster: global model, updates, round log
    bootstrap = "127.0.0.1:9092"
    # client_file = ".../secure/clients/admin.toml"   # the coordinator's role

    [model]                       # a TinyGPT (kafeed.train.models), small by default
    vocab_size = 257
    seq_len = 32

    [fedprox]
    mu = 0.01
    [fedadam]
    lr = 0.01

    [[sites]]
    name = "site-a"
    bootstrap = "10.0.0.5:9092"   # the site's own cluster, where its data stays
    topics = ["tokens"]
    # client_file = ...           # the site's own cluster's security
    # training_client_file = ...  # the site's role on the training cluster

Every mistake is one :class:`~kafeed.errors.ConfigError` sentence, found before anything is
written: an unknown site, a quorum above the number of sites, a model that does not fit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kafeed.config import ConnectionSettings, directory_problem, load_connection, read_settings_file
from kafeed.errors import ConfigError, invalid_settings
from kafeed.home import kafeed_home

Strategy = Literal["fedavg", "fedprox", "fedadam"]
LatePolicy = Literal["drop", "next"]

# A site name is part of topic names, transactional ids and ACL principals.
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
#: The largest model a job accepts: every round moves it to each site and back through the
#: training cluster; past this a round is a bulk transfer, not a training step.
MAX_MODEL_BYTES = 2 << 30


class ClusterSettings(BaseModel):
    """How to reach one cluster: a bootstrap, a kafeed client file (``[connection]`` table, what
    ``broker start --secure`` writes per role), or both (the bootstrap wins)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bootstrap: str | None = None
    client_file: Path | None = None

    @model_validator(mode="after")
    def _reachable_somehow(self) -> ClusterSettings:
        if self.bootstrap is None and self.client_file is None:
            raise ValueError("needs a bootstrap or a client_file")
        return self

    def connection(self, client_id: str) -> ConnectionSettings:
        return load_connection(bootstrap=self.bootstrap, config_file=self.client_file, env={},
                               client_id=client_id)


class SiteSettings(BaseModel):
    """A site: its own cluster and topics (the data never leaves them), and its role on the
    training cluster (``training_client_file``: write its update topic, read the global model)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=_NAME)
    bootstrap: str | None = None
    client_file: Path | None = None
    topics: tuple[str, ...] = ("tokens",)
    training_client_file: Path | None = None

    @model_validator(mode="after")
    def _reachable_somehow(self) -> SiteSettings:
        if self.bootstrap is None and self.client_file is None:
            raise ValueError(f"site {self.name!r} needs a bootstrap or a client_file")
        if not self.topics:
            raise ValueError(f"site {self.name!r} needs at least one topic")
        return self

    def connection(self) -> ConnectionSettings:
        """The site's own cluster."""
        return ClusterSettings(bootstrap=self.bootstrap, client_file=self.client_file).connection(
            f"kafeed-federate-{self.name}")


class ModelSettings(BaseModel):
    """The shape of the TinyGPT every site trains (kafeed.train.models.GPTConfig's fields)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    vocab_size: int = Field(default=257, ge=2)
    seq_len: int = Field(default=32, ge=2)
    d_model: int = Field(default=32, ge=8)
    n_layers: int = Field(default=1, ge=1)
    n_heads: int = Field(default=2, ge=1)
    eos_id: int = Field(default=256, ge=0)

    @model_validator(mode="after")
    def _fits(self) -> ModelSettings:
        if self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of n_heads {self.n_heads}")
        if self.eos_id >= self.vocab_size:
            raise ValueError(f"eos_id {self.eos_id} is outside the vocabulary of {self.vocab_size}")
        if self.parameter_bytes() > MAX_MODEL_BYTES:
            raise ValueError(f"the model has {self.parameter_bytes() / 2**30:.1f} GiB of float32 "
                             f"weights, more than the {MAX_MODEL_BYTES >> 30} GiB a round may move")
        return self

    def parameter_count(self) -> int:
        """TinyGPT's parameters, from its shape (tied embeddings), without building it."""
        d, v = self.d_model, self.vocab_size
        block = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
        return v * d + self.seq_len * d + self.n_layers * block + 2 * d

    def parameter_bytes(self) -> int:
        return 4 * self.parameter_count()


class FedProxSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    mu: float = Field(default=0.01, ge=0)


class FedAdamSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    lr: float = Field(default=0.01, gt=0)
    beta1: float = Field(default=0.9, ge=0, lt=1)
    beta2: float = Field(default=0.99, ge=0, lt=1)
    tau: float = Field(default=1e-3, gt=0)


class FederationSettings(BaseModel):
    """One federated job (see the module docstring for the file)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job: str = Field(pattern=_NAME)
    training: ClusterSettings
    sites: tuple[SiteSettings, ...] = Field(min_length=1)
    rounds: int = Field(default=3, ge=1)
    local_steps: int = Field(default=20, ge=1)
    batch_size: int = Field(default=8, ge=1)
    lr: float = Field(default=1e-3, gt=0)
    seed: int = 0
    model: ModelSettings = ModelSettings()
    quorum: int = Field(default=1, ge=1)
    deadline_s: float = Field(default=30.0, ge=0)
    late_policy: LatePolicy = "drop"
    strategy: Strategy = "fedavg"
    fedprox: FedProxSettings = FedProxSettings()
    fedadam: FedAdamSettings = FedAdamSettings()
    secure: bool = False
    state_dir: Path = Field(default_factory=lambda: kafeed_home() / "federate")

    @field_validator("state_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser()

    @model_validator(mode="after")
    def _check(self) -> FederationSettings:
        names = [site.name for site in self.sites]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"site name {repeated[0]!r} is used more than once")
        if self.quorum > len(self.sites):
            count = len(self.sites)
            raise ValueError(f"quorum {self.quorum} is more than the {count} site{'s' * (count != 1)} "
                             "configured")
        if self.secure and self.quorum < 2:
            raise ValueError("secure aggregation needs a quorum of at least 2: the sum of one "
                             "update is that update")
        problem = directory_problem(self.state_dir)
        if problem is not None:
            raise ValueError(f"state_dir: {problem}")
        return self

    # -- names -------------------------------------------------------------------------------
    @property
    def global_topic(self) -> str:
        """The global model, version after version (chunked blobs)."""
        return f"{self.job}.global"

    @property
    def rounds_topic(self) -> str:
        """The round log: one record per closed round (what it accepted, dropped, counted)."""
        return f"{self.job}.rounds"

    def update_topic(self, site: str) -> str:
        """Where ``site`` writes its updates; its role may write here and nowhere else."""
        return f"{self.job}.updates.{site}"

    @property
    def coordinator_group(self) -> str:
        return f"{self.job}.coordinator"

    def site(self, name: str) -> SiteSettings:
        for site in self.sites:
            if site.name == name:
                return site
        known = ", ".join(s.name for s in self.sites)
        raise ConfigError(f"Site {name!r} is not in the job's config (its sites: {known}).",
                          hint="Pass one of those, or add a [[sites]] table for it.")

    def training_connection(self, client_id: str = "kafeed-federate-coordinator",
                            client_file: Path | None = None) -> ConnectionSettings:
        """The training cluster, as the coordinator (or, with ``client_file``, as a site's role)."""
        cluster = self.training if client_file is None else ClusterSettings(
            bootstrap=self.training.bootstrap, client_file=client_file)
        return cluster.connection(client_id)

    def site_training_connection(self, name: str) -> ConnectionSettings:
        site = self.site(name)
        return self.training_connection(f"kafeed-federate-{name}", site.training_client_file)

    def site_dir(self, name: str) -> Path:
        """The site's own state (ledger, loader state); kept at the site, never sent."""
        return self.state_dir / self.job / "sites" / name


def load_federation(path: Path, **overrides: Any) -> FederationSettings:
    """Read and validate the job's TOML file; every mistake is one :class:`ConfigError`."""
    data = read_settings_file(path, env={})
    data |= {k: v for k, v in overrides.items() if v is not None}
    try:
        return FederationSettings.model_validate(data)
    except ValidationError as exc:
        hint = "See docs/federated.md for the file's tables."
        errors = exc.errors(include_url=False)
        if all(e["type"] == "value_error" for e in errors):
            # The rules of this file say their own sentence; the table they judged is not echoed.
            said = []
            for e in errors:
                where = ".".join(str(p) for p in e.get("loc", ()))
                msg = str(e["msg"]).removeprefix("Value error, ")
                said.append(f"{where}: {msg}" if where else msg)
            raise ConfigError(f"Invalid federated job in {path}: {'; '.join(said)}.", hint=hint) from None
        raise invalid_settings(exc, what=f"federated job in {path}", hint=hint) from None
