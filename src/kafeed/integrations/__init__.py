"""kafeed's loader inside other training frameworks, with their checkpoints resuming it exactly.

- :mod:`kafeed.integrations.hf`: :class:`~kafeed.integrations.hf.KafeedTrainer`, a Hugging
  Face ``Trainer`` fed by a :class:`kafeed.StreamLoader` (extra ``kafeed[hf]``);
- :mod:`kafeed.integrations.lightning`:
  :class:`~kafeed.integrations.lightning.KafeedDataModule` for PyTorch Lightning (extra
  ``kafeed[lightning]``).

Importing this package imports neither framework; importing one of its modules without
its extra raises :class:`kafeed.extras.MissingExtra`. See docs/integrations.md.
"""
