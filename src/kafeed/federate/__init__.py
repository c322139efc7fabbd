"""Federated training: sites train on data that never leaves their clusters; their model
updates meet in the training cluster, once each, and the coordinator publishes the next global
model in the same transaction as the offsets of the updates it used (docs/federated.md).

Modules: ``config`` (the job's TOML file), ``blobs`` (tensors in chunked records, reassembled
exactly), ``ledger`` (each site's own record of what it sent), ``site`` (local training),
``coordinator`` (the rounds), ``setup`` (topics and ACLs), ``secagg`` and ``aggregate``
(secure sums and the server-side math).
"""
