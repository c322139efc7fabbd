"""The loader's state: what a checkpoint holds of it, and how a reader resumes from it.

``checkpoint``: the whole state (its layout, checks, epochs, merges for elastic resume);
``resume``: which entry or plan a reader resumes from and where each shard starts;
``rank_states``: every rank's state in one document.
"""
