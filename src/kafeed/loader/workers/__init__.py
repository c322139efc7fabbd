"""Batches handed from where they are made to the trainer: DataLoader workers and threads.

The worker pool's start (``worker_start``), batches in shared memory (``shared_slots``,
``bundles``), the prefetch thread of an in-process loader (``prefetch``), workers that end with
their parent however it dies (``parent``, ``forkserver_guard``, ``main_guard``, ``at_exit``), a
worker's error carried as data (``worker_error``), states deferred until asked for
(``deferred_entry``), batches to the device (``device_feed``) and ranks that end together
(``rank_sync``).
"""
