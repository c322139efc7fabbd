"""The :class:`Mixture` dataset: several token sources (topics or local files) interleaved at set
token proportions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError, invalid_settings
from kafeed.loader.dataset import KafkaTokenDataset, loader_settings
from kafeed.loader.file_dataset import STATE_FILES, FileSet, file_options
from kafeed.loader.nodes.mixing import OnDry, check_entry, check_weights, mixture_fingerprint
from kafeed.loader.nodes.mixture_stream import AHEAD, MixtureStream
from kafeed.loader.nodes.stream import BatchStream
from kafeed.loader.opening import Topology
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.state.checkpoint import check_state, empty_state
from kafeed.loader.state.rank_states import loadable_state
from kafeed.loader.workers.parent import ParentWatch


def _own(spec: Any, topics: Sequence[str]) -> Any:
    """An explicit offset mapping cut to one source's topics ("topic:partition" keys)."""
    if not isinstance(spec, Mapping):
        return spec
    return {k: v for k, v in spec.items() if isinstance(k, int) or k.rpartition(":")[0] in ("", *topics)}


def _file_source(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The settings fields of mixture source ``name`` given as ``{"files": ..., "column": ...}``."""
    unknown = sorted(set(spec) - {"files", "column"})
    if "files" not in spec or unknown:
        raise ConfigError(f"sources= gives {name!r} as {dict(spec)!r}; a source of local files is "
                          "{'files': paths or globs} with an optional 'column'.")
    options = file_options(spec["files"], name, {"column": spec.get("column")})
    # Files are read whole, whatever the topics' start and end.
    return {"files": options["files"], "column": options["column"], "start": "earliest", "end": "latest",
            "archive": None}


class Mixture(KafkaTokenDataset):
    """Windows from several token sources at set token proportions, resumable exactly.

    ``Mixture({"web": 0.6, "code": 0.3, "books": 0.1}, seq_len=2048, eos_id=50256,
    bootstrap=...)``: each key names a source, by default the topic of that name
    (``sources={"web": ["web-en", "web-de"]}`` makes a source of several topics;
    ``sources={"books": {"files": "corpus/"}}`` one of local Parquet/Arrow files, as
    :class:`kafeed.FileTokenDataset` reads them, with ``column`` as its option); every
    other keyword is a :class:`LoaderSettings` field, as for :class:`KafkaTokenDataset`,
    and applies to every source (a file source always reads its files whole, so a live
    topic mixes with a static corpus: ``end=None``, ``on_dry="drop"``). Each reader (rank
    x DataLoader worker) reads its share of every source's partitions (or files) and
    interleaves whole windows by a deterministic, seeded schedule (kafeed.loader.nodes.mixing),
    so the tokens each source delivers follow the weights within a window or two.
    ``on_dry``: when a bounded source runs out, ``"end"`` ends the mixture, ``"drop"``
    goes on with the others (weights renormalised). A state saved from a mixture resumes
    under new weights: the positions are kept and the new proportions hold from there.
    Tokens delivered per source are in the state (``mix.tokens``, see
    :func:`kafeed.loader.nodes.mixing.tokens_delivered`) and the
    ``kafeed_loader_source_tokens_total`` metric. ``prefetch_batches`` defaults to 8 here,
    not 2: the block of batches each source cuts ahead at once.
    """

    def __init__(self, weights: Mapping[str, float], *,
                 sources: Mapping[str, str | Sequence[str] | Mapping[str, Any]] | None = None,
                 on_dry: OnDry = "end",
                 settings: LoaderSettings | None = None, bootstrap: str | None = None,
                 connection: ConnectionSettings | None = None, **options: Any) -> None:
        self.weights = check_weights(weights)
        if on_dry not in get_args(OnDry):
            raise ConfigError(f"on_dry is {on_dry!r}; pass 'end' (a dry source ends the mixture) or "
                              "'drop' (it is dropped and the other weights renormalised).")
        named = dict(sources or {})
        unknown = sorted(set(named) - set(self.weights))
        if unknown:
            raise ConfigError(f"sources= names {unknown[0]!r}, which has no weight in the mixture.")
        self.sources: dict[str, tuple[str, ...]] = {}
        self.file_sources: dict[str, dict[str, Any]] = {}
        for name in sorted(self.weights):
            given = named.get(name, name)
            if isinstance(given, Mapping):  # local files: the source's name stands for its topic
                self.file_sources[name] = _file_source(name, given)
                given = name
            self.sources[name] = (given,) if isinstance(given, str) else tuple(given)
        owners: dict[str, str] = {}
        for name, topics in self.sources.items():
            for topic in topics:
                if topic in owners:
                    raise ConfigError(f"Topic {topic!r} is in mixture sources {owners[topic]!r} and "
                                      f"{name!r}; give each topic to one source.")
                owners[topic] = name
        self.on_dry: OnDry = on_dry
        if "prefetch_batches" not in options and (settings is None or
                                                  "prefetch_batches" not in settings.model_fields_set):
            # Each source cuts its windows a block of AHEAD batches at a time, so the batch that
            # starts a block costs several: a prefetch queue as deep as the block evens that out
            # (benchmarks/bench_mixture.py: 47-52M tokens/s at depth 2, 52-54M at 8).
            options = {**options, "prefetch_batches": AHEAD}
        base = loader_settings("tokens", sorted(owners), settings, bootstrap, connection, options)
        if base.mode == "group":
            raise ConfigError("A Mixture reads with mode 'static' or 'replicated', not 'group': each source "
                              "needs its own share of partitions per reader.")
        if base.max_wait_s is not None:
            # A source handing out fewer windows than asked counts as dry (MixtureStream).
            raise ConfigError("A Mixture does not take max_wait_s: a source that hands out a short "
                              "batch would count as run dry.",
                              hint="Leave max_wait_s unset, or read the topics with one KafkaTokenDataset.")
        fields = {name: getattr(base, name) for name in LoaderSettings.model_fields}
        try:
            self.source_settings = {
                name: LoaderSettings.model_validate(
                    {**fields, "topics": topics, "start": _own(base.start, topics),
                     "end": _own(base.end, topics), **self.file_sources.get(name, {})})
                for name, topics in self.sources.items()
            }
        except ValueError as exc:
            raise invalid_settings(exc, what="mixture settings") from None
        # A file source's positions name their files, as FileTokenDataset's do.
        self.file_sets: dict[str, FileSet] = {}
        for name in self.file_sources:
            self._use_files(name, FileSet.scan(self.source_settings[name].files))
        super().__init__(settings=base)

    def _use_files(self, name: str, files: FileSet) -> None:
        self.file_sets[name] = files
        self.source_settings[name] = self.source_settings[name].model_copy(
            update={"files": tuple(str(p) for p, _, _ in files.files)})

    def fingerprint(self, files: Any = None) -> dict[str, Any]:
        out = mixture_fingerprint(self.settings, self.sources)
        if self.file_sets:
            out[STATE_FILES] = files if files is not None else {
                name: fs.manifest() for name, fs in sorted(self.file_sets.items())}
        return out

    def empty_state(self) -> dict[str, Any]:
        return empty_state(self.settings, self.fingerprint())

    def _resumed_files(self, state: Any) -> tuple[Any, dict[str, FileSet]]:
        """The saved file lists (None: a state from before they were kept) and each file
        source's files numbered as they were saved."""
        saved = state.get("fingerprint") if isinstance(state, dict) else None
        files = saved.get(STATE_FILES) if isinstance(saved, dict) else None
        if files is None or not self.file_sets:
            return None, {}
        if not isinstance(files, dict) or set(files) != set(self.file_sets):
            return files, {}  # check_state refuses the fingerprint
        return files, {name: self.file_sets[name].resumed(files[name]) for name in self.file_sets}

    def check_state(self, state: Any) -> dict[str, Any]:
        def reader_check(reader: Any, path: str, _settings: LoaderSettings) -> None:
            check_entry(reader, path, self.source_settings)

        state = loadable_state(state)
        files, _ = self._resumed_files(state)
        expected = self.fingerprint(files)
        if files is None:
            expected.pop(STATE_FILES, None)
        return check_state(state, self.settings, expected=expected, reader_check=reader_check)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        for name, files in self._resumed_files(loadable_state(state))[1].items():
            self._use_files(name, files)

    def _make_stream(self, topo: Topology, saved: dict[str, Any] | None, *, client_stats: bool,
                     parent: ParentWatch | None) -> BatchStream:
        return MixtureStream(self.source_settings, self.weights, on_dry=self.on_dry, topo=topo, saved=saved,
                             client_stats=client_stats, parent=parent)
