"""What a training run does before torch is imported: checks, tokenizer, and the first fetch.

``kafeed train`` calls :func:`start` first thing after its options are valid. It checks
that checkpoints can be written and the topic exists, reads the tokenizer, builds the
loader settings and, in a single process without DataLoader workers, opens the loader's
stream: its consumer is assigned and librdkafka's threads fetch the first records while
the program goes on to import torch and build the model (seconds). The dataset adopts the
stream only if it resumes from exactly the state the stream was opened from
(:meth:`kafeed.loader.dataset.KafkaDatasetBase.adopt`); otherwise it opens its own.
Nothing here imports torch.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError
from kafeed.loader.opening import MAIN_PROCESS, Stream, open_stream
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.state.checkpoint import check_state, plain_copy
from kafeed.loader.state.rank_states import loadable_state
from kafeed.train.options import TrainOptions

log = logging.getLogger("kafeed")


@dataclass(frozen=True)
class TokenizerInfo:
    vocab_size: int
    eos_id: int
    fingerprint: str


def tokenizer_info(spec: str) -> TokenizerInfo:
    """Vocabulary, end-of-document id and fingerprint of prepare's tokenizer ``spec``."""
    from kafeed.prepare.settings import TokenizerSettings
    from kafeed.prepare.tokenize import load_tokenizer

    tok = load_tokenizer(TokenizerSettings(name=spec))
    if tok.eos_id is None:
        raise KafeedError(f"Tokenizer {spec!r} has no end-of-document token.")
    return TokenizerInfo(vocab_size=tok.vocab_size, eos_id=tok.eos_id, fingerprint=tok.fingerprint)


def check_topic(connection: ConnectionSettings, topic: str, *, timeout: float = 10.0) -> None:
    """Fail fast, in one sentence, when the cluster is unreachable or the topic is missing."""
    from kafeed.errors import TopicError
    from kafeed.topics.admin import TopicAdmin

    admin = TopicAdmin(connection, timeout=timeout)
    if not admin.exists(topic):
        raise TopicError(f"Topic {topic!r} does not exist on {connection.bootstrap}.",
                         hint="Check --topic, or run `kafeed prepare` to fill it.")


def preflight(connection: ConnectionSettings, options: TrainOptions) -> None:
    """What must hold before any training work: checkpoints can be written (rank 0 writes
    them) and the topic exists. Raises ConfigError or TopicError, in one sentence."""
    import os

    from kafeed.train.checkpoint import check_writable

    if os.environ.get("RANK", "0") == "0":
        check_writable(options.checkpoint_dir)
    for topic in options.topics:
        check_topic(connection, topic)


@dataclass
class Startup:
    """What :func:`start` prepared: the loader settings, the tokenizer (gpt) and, when it
    could be opened ahead, the main process's stream with the state it was opened from."""

    settings: LoaderSettings
    tokenizer: TokenizerInfo | None
    stream: Stream | None = None
    opened_from: dict[str, Any] | None = None

    def adopt_into(self, dataset: Any) -> None:
        """Hand the stream opened ahead to ``dataset`` (a kafeed dataset), once."""
        if self.stream is not None:
            dataset.adopt(self.stream, self.opened_from)
            self.stream = None


def loader_settings(options: TrainOptions, connection: ConnectionSettings,
                    tokenizer: TokenizerInfo | None) -> LoaderSettings:
    """The loader settings of a run (one rank's; the trainer adds rank and world under DDP)."""
    fields: dict[str, Any] = {
        "topics": options.topics, "connection": connection,
        "end": None if options.stream else "latest",
        "shuffle_buffer": options.shuffle_buffer, "seed": options.seed,
    }
    if tokenizer is not None:
        fields |= {"kind": "tokens", "seq_len": options.seq_len, "eos_id": tokenizer.eos_id,
                   "tokenizer": tokenizer.fingerprint}
    else:
        fields["kind"] = "samples"
        if options.formats is not None:
            fields["formats"] = options.formats
    return LoaderSettings.model_validate(fields)


def _resume_state(options: TrainOptions, settings: LoaderSettings) -> dict[str, Any] | None:
    """The loader state the run will resume from (from the newest valid checkpoint's
    manifest), None for a fresh start."""
    if not options.resume:
        return None
    from kafeed.train.checkpoint import CheckpointManager

    manifest = CheckpointManager(options.checkpoint_dir).latest_manifest()
    if manifest is None or "loader" not in manifest:
        return None
    return check_state(loadable_state(plain_copy(manifest["loader"])), settings)


def start(options: TrainOptions, connection: ConnectionSettings) -> Startup:
    """Check, read the tokenizer, and open the loader's stream ahead when this process is
    the only reader (one rank, no workers). Raises ConfigError or TopicError in one sentence."""
    preflight(connection, options)
    tokenizer = tokenizer_info(options.tokenizer) if options.model == "gpt" else None
    startup = Startup(loader_settings(options, connection, tokenizer), tokenizer)
    # A mixture opens one stream per source when iteration starts (not ahead).
    if options.num_workers == 0 and int(os.environ.get("WORLD_SIZE", "1")) <= 1 and not options.mix:
        saved = _resume_state(options, startup.settings)
        startup.stream = open_stream(startup.settings, MAIN_PROCESS, saved, client_stats=True)
        startup.opened_from = saved
    return startup
