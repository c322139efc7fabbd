"""Data shipped with kafeed: the demo corpus (Tiny Shakespeare, public domain)."""
