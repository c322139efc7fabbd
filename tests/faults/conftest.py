from tests.kafka_fixtures import admin, kafka, kafka_cluster, make_topic, work_dir  # noqa: F401
