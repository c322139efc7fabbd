"""A missing optional dependency is one sentence naming its extra; --version names the stack."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafeed.cli.main import main
from kafeed.extras import EXTRA_OF_MODULE, MissingExtra, missing_extra


def _import_blocked(module: str) -> ImportError:
    saved = sys.modules.get(module)
    sys.modules[module] = None  # type: ignore[assignment]
    try:
        __import__(module)
    except ImportError as exc:
        return exc
    finally:
        if saved is None:
            del sys.modules[module]
        else:
            sys.modules[module] = saved
    raise AssertionError(f"importing {module} did not fail")


@pytest.mark.parametrize("module", sorted(EXTRA_OF_MODULE))
def test_every_optional_module_names_its_extra(module: str) -> None:
    exc = _import_blocked(module)
    found = missing_extra(exc)
    assert found is not None and found.extra == EXTRA_OF_MODULE[module]
    assert f"pip install 'kafeed[{found.extra}]'" in (found.hint or "")


def test_a_wrapped_import_error_is_followed_to_its_cause() -> None:
    try:
        try:
            raise _import_blocked("torch")
        except ImportError as inner:
            raise ImportError("KafkaTokenDataset needs PyTorch") from inner
    except ImportError as outer:
        found = missing_extra(outer)
    assert isinstance(found, MissingExtra) and found.extra == "torch"


def test_a_module_kafeed_does_not_know_is_not_an_extra() -> None:
    assert missing_extra(ModuleNotFoundError("no module", name="left_pad")) is None
    assert missing_extra(ValueError("x")) is None


def test_the_cli_says_which_extra_in_one_sentence_with_exit_2() -> None:
    # A command whose code imports torch, run where torch cannot be imported.
    script = ("import sys; sys.modules['torch'] = None\n"
              "import typer\n"
              "from kafeed.cli import main as m\n"
              "@m.app.command('needs-torch', hidden=True)\n"
              "def needs_torch() -> None:\n"
              "    from kafeed.loader import KafkaTokenDataset  # noqa: F401\n"
              "sys.exit(m.main(['needs-torch']))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert lines[0] == "error: This needs torch, which is not installed.", proc.stderr
    assert "pip install 'kafeed[torch]'" in proc.stderr and "bug in kafeed" not in proc.stderr


def test_version_names_kafeed_kafka_librdkafka_and_torch(capsys: pytest.CaptureFixture[str]) -> None:
    import confluent_kafka
    import torch

    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kafeed ")
    for part in ("Kafka 4.", f"librdkafka {confluent_kafka.libversion()[0]}",
                 f"torch {torch.__version__.split('+')[0]}"):
        assert part in out, out
