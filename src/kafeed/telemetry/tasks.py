"""The task queue's ``kafeed_tasks_*`` metrics, in kafeed's registry (docs/tasks.md)."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from kafeed.telemetry.metrics import REGISTRY

SUBMITTED = Counter("kafeed_tasks_submitted_total", "Tasks written to a queue.", ["kind"],
                    registry=REGISTRY)
STARTED = Counter("kafeed_tasks_started_total", "Handler runs started.", ["kind"], registry=REGISTRY)
SUCCEEDED = Counter("kafeed_tasks_succeeded_total", "Tasks whose handler returned.", ["kind"],
                    registry=REGISTRY)
FAILED = Counter("kafeed_tasks_failed_total", "Handler runs that raised.", ["kind"], registry=REGISTRY)
RETRIED = Counter("kafeed_tasks_retried_total", "Failed tasks put back with a backoff.", ["kind"],
                  registry=REGISTRY)
PARKED = Counter("kafeed_tasks_parked_total", "Tasks parked after their last attempt.", ["kind"],
                 registry=REGISTRY)
SKIPPED = Counter("kafeed_tasks_skipped_total", "Deliveries acknowledged unrun (done, cancelled, "
                  "expired or held by another worker's lease).", ["kind", "reason"], registry=REGISTRY)
RUNNING = Gauge("kafeed_tasks_running", "Handlers running now.", ["kind"], registry=REGISTRY)
QUEUE_AGE = Gauge("kafeed_tasks_queue_age_seconds", "Age of the oldest task waiting, per kind "
                  "(set by `kafeed tasks status` and the monitor).", ["kind"], registry=REGISTRY)
DURATION = Histogram("kafeed_tasks_handler_seconds", "Handler run time.", ["kind"],
                     buckets=(0.001, 0.01, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
                     registry=REGISTRY)
DISPATCH = Histogram("kafeed_tasks_dispatch_seconds", "Submit (or not-before) to handler start.",
                     ["kind"], buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60,
                                        300), registry=REGISTRY)
