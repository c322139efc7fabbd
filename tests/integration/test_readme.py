"""The README's training-loop example runs, and resumes, against the real broker."""

from __future__ import annotations

import json
import re
import runpy
import shutil
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

    from kafeed.train.lineage import lineage_of

    # documents fully handed to the optimizer (taken, minus those still in flight)
    assert lineage_of(second, {})["documents"] > lineage_of(first, {})["documents"] > 0


@pytest.mark.parametrize("name", ["docs/ingest.md", "docs/prepare.md", "docs/loader.md",
                                  "docs/monitor.md", "docs/train.md", "docs/integrations.md"])
def test_linked_docs_exist(name: str) -> None:
    assert (README.parent / name).exists(), name


def readme_block(name: str) -> str:
    match = re.search(rf"<!-- readme-{name}:start -->\s*```python\n(.*?)```\s*<!-- readme-{name}:end -->",
                      README.read_text(), re.S)
    assert match, f"README.md lost its marked {name} example"
    return match.group(1)


def run_block(name: str, kafka: ConnectionSettings, admin: TopicAdmin, shakespeare: Path, tmp_path: Path,
              monkeypatch: pytest.MonkeyPatch) -> Path:
    """Write the README's block ``name`` to a script in ``tmp_path`` (the working directory
    from now on), against this session's topic "tokens"; returns the script to run."""
    if not admin.exists("tokens"):
        admin.create(plan_topic("tokens", brokers=1, partitions=2))
        produce_documents(kafka, "tokens", paragraphs(shakespeare, 400), partitions=2)
    script = tmp_path / f"{name}.py"
    script.write_text(readme_block(name))
    monkeypatch.setenv("KAFEED_BOOTSTRAP", kafka.bootstrap)
    monkeypatch.chdir(tmp_path)
    return script


def test_readme_hf_trainer_resumes_its_loader(kafka: ConnectionSettings, admin: TopicAdmin,
                                              shakespeare: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    script = run_block("hf", kafka, admin, shakespeare, tmp_path, monkeypatch)
    runpy.run_path(str(script), run_name="__main__")
    end = tmp_path / "hf-run" / "checkpoint-10"
    whole = json.loads((end / "kafeed_loader.json").read_text())
    assert whole["step"] == 10 and whole["loader"]["world_size"] == 1
    assert whole["loader"]["ranks"][0]["readers"]  # the one rank's state
    shutil.rmtree(end)  # as if the job had died after its checkpoint at step 5
    runpy.run_path(str(script), run_name="__main__")
    assert json.loads((end / "kafeed_loader.json").read_text()) == whole


# Lightning's own remarks: its pytree helper uses a LeafSpec this torch deprecates, and a
# resumed run writes into the folder that holds its checkpoints.
@pytest.mark.filterwarnings(r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning")
@pytest.mark.filterwarnings("ignore:Checkpoint directory .* exists and is not empty:UserWarning")
def test_readme_lightning_datamodule_resumes_its_loader(kafka: ConnectionSettings, admin: TopicAdmin,
                                                        shakespeare: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    script = run_block("lightning", kafka, admin, shakespeare, tmp_path, monkeypatch)
    code = script.read_text()
    assert code.count("max_steps=20") == 1

    def loader_state(path: Path) -> object:
        return torch.load(path, weights_only=False)["loops"]["fit_loop"]["state_dict"]["combined_loader"]

    stopped = tmp_path / "stopped.py"  # the same job, as if it had died after step 10
    stopped.write_text(code.replace("max_steps=20", "max_steps=10"))
    runpy.run_path(str(stopped), run_name="__main__")
    runpy.run_path(str(script), run_name="__main__")  # resumes from pl-run/last.ckpt
    resumed = loader_state(tmp_path / "pl-run" / "last.ckpt")
    (tmp_path / "whole").mkdir()
    monkeypatch.chdir(tmp_path / "whole")
    runpy.run_path(str(script), run_name="__main__")  # uninterrupted
    whole = loader_state(tmp_path / "whole" / "pl-run" / "last.ckpt")
    assert isinstance(whole, list) and whole[0]["ranks"][0]["readers"]
    assert resumed == whole
