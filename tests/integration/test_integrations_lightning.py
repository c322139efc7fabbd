"""The PyTorch Lightning recipe: a LightningDataModule over a token topic, resumed batch for batch.

Lightning is imported inside the tests (tests/integration/lightning_recipe.py): every test
process collects this file, and only the one that runs it should pay for the import.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafeed.config import ConnectionSettings
from kafeed.loader.state.checkpoint import STATE_VERSION
from tests.integration.loader_data import produce_docs
from tests.integration.recipe_support import (
    Crash,
    assert_distinct_batches,
    assert_import_names_the_extra,
    assert_samples_topic_refused,
)
from tests.kafka_fixtures import TopicFactory

# pytorch_lightning's pytree helper builds torch's LeafSpec, which this torch deprecates; the
# warning comes from inside every fit(), whatever the data.
pytestmark = pytest.mark.filterwarnings(
    r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning")


# The resumed run writes its checkpoints to a folder of its own, which Lightning remarks on.
@pytest.mark.filterwarnings("ignore:The dirpath has changed from:UserWarning")
def test_a_resumed_fit_trains_on_exactly_the_batches_of_an_uninterrupted_run(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    import torch

    from tests.integration.lightning_recipe import STEPS, fit

    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 300)
    whole: list[list[list[int]]] = []
    fit(kafka, topic, tmp_path / "whole", whole)
    assert_distinct_batches(whole, STEPS)

    first: list[list[list[int]]] = []
    with pytest.raises(Crash):
        fit(kafka, topic, tmp_path / "cut", first, crash_at=8)
    assert len(first) == 8
    saved = tmp_path / "cut" / "epoch=0-step=8.ckpt"
    loader_state = torch.load(saved, weights_only=False)["loops"]["fit_loop"]["state_dict"]["combined_loader"]
    assert [doc["ranks"][0]["version"] for doc in loader_state] == [STATE_VERSION]  # every rank's: one

    rest: list[list[list[int]]] = []
    fit(kafka, topic, tmp_path / "resumed", rest, ckpt_path=saved)
    assert first + rest == whole


def test_a_topic_of_samples_stops_fit_with_a_schema_error(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    from tests.integration.lightning_recipe import fit

    assert_samples_topic_refused(kafka, make_topic, lambda topic: fit(kafka, topic, tmp_path, []))


def test_without_lightning_the_import_names_the_extra() -> None:
    assert_import_names_the_extra("kafeed.integrations.lightning", "pytorch_lightning", "lightning")
