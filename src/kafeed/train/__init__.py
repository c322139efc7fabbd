"""Reference trainers, atomic checkpoints and lineage."""
