"""The README's training-loop example runs, and resumes, against the real broker."""

from __future__ import annotations

import json
import re
import runpy
from pathlib import Path

import pytest
import torch

from kafeed.config import ConnectionSettings
from kafeed.topics import TopicAdmin, plan_topic
from tests.integration.train_data import paragraphs, produce_documents

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_example() -> str:
    text = README.read_text()
    match = re.search(r"<!-- readme-example:start -->\s*```python\n(.*?)```\s*<!-- readme-example:end -->",
                      text, re.S)
    assert match, "README.md lost its marked example"
    return match.group(1)


def test_readme_example_trains_and_resumes(kafka: ConnectionSettings, admin: TopicAdmin,
                                           shakespeare: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    # The example reads the topic "tokens": this session's cluster gets its own.
    if not admin.exists("tokens"):
        admin.create(plan_topic("tokens", brokers=1, partitions=2))
        produce_documents(kafka, "tokens", paragraphs(shakespeare, 400), partitions=2)
    script = tmp_path / "example.py"
    script.write_text(readme_example())
    monkeypatch.setenv("KAFEED_BOOTSTRAP", kafka.bootstrap)
    monkeypatch.chdir(tmp_path)

    def run() -> dict[str, object]:
        # In this process (torch is loaded already), as a script of its own: a fresh namespace.
        runpy.run_path(str(script), run_name="__main__")
        loader_state: dict[str, object] = torch.load(tmp_path / "ckpt.pt", weights_only=False)["loader"]
        return loader_state

    first = run()
    second = run()  # resumes from ckpt.pt and goes 30 batches further
    json.dumps(second)  # plain JSON data, as promised

    from kafeed.train.wiring import lineage_of

    # documents fully handed to the optimizer (taken, minus those still in flight)
    assert lineage_of(second, {})["documents"] > lineage_of(first, {})["documents"] > 0


@pytest.mark.parametrize("name", ["docs/ingest.md", "docs/prepare.md", "docs/loader.md",
                                  "docs/monitor.md", "docs/train.md"])
def test_linked_docs_exist(name: str) -> None:
    assert (README.parent / name).exists(), name
