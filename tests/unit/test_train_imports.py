"""The training path never imports torch._dynamo (about 5 s of imports on 2 cores).

torch.optim's optimizers import it when built and in every step; kafeed's trainers use
their own AdamW over torch's functional update instead. The check runs in a fresh
interpreter: the training loop, model, optimizer, a checkpoint written and resumed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path

    import kafeed.cli.train
    import kafeed.train.classifier
    import torch
    from kafeed.train.checkpoint import CheckpointManager
    from kafeed.train.gpt import train_gpt  # noqa: F401
    from kafeed.train.models import GPTConfig, TinyGPT, next_token_loss
    from kafeed.train.optim import AdamW
    from kafeed.train.runner import Runner

    class Batches:
        def __iter__(self):
            gen = torch.Generator().manual_seed(0)
            return iter([{"tokens": torch.randint(0, 50, (2, 17), generator=gen)} for _ in range(3)])
        def state_dict(self):
            return {}
        def load_state_dict(self, state):
            pass

    def make():
        model = TinyGPT(GPTConfig(vocab_size=50, seq_len=16, d_model=16, n_layers=1, n_heads=2))
        opt = AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, warmup=1, total=3)
        def step_fn(batch):
            loss = next_token_loss(model, batch["tokens"])
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return float(loss.detach()), 32
        return Runner(model=model, optimizer=opt, loader=Batches(), step_fn=step_fn,
                      checkpoints=CheckpointManager(Path(sys.argv[1])), checkpoint_every=2,
                      total_steps=3, progress=lambda line: None)

    assert make().run().steps == 3
    again = make()
    assert again.resume() is not None and again.step == 3
    loaded = sorted(m for m in sys.modules if m == "torch._dynamo" or m.startswith("torch._dynamo."))
    print(",".join(loaded) or "none")
""")


def test_training_path_does_not_import_torch_dynamo(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-X", "importtime", "-c", SCRIPT, str(tmp_path / "ck")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "none", proc.stdout
    # the import graph as Python reports it: nothing under torch._dynamo, not even lazily
    assert "torch._dynamo" not in proc.stderr
    assert "| kafeed.train.gpt" in proc.stderr  # the report covers the trainer's imports
