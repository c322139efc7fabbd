from __future__ import annotations

import kafeed


def test_all_is_sorted_and_importable() -> None:
    assert list(kafeed.__all__) == sorted(kafeed.__all__)
    for name in kafeed.__all__:
        assert hasattr(kafeed, name), name


def test_errors_share_one_root() -> None:
    for name in kafeed.__all__:
        obj = getattr(kafeed, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            assert issubclass(obj, kafeed.KafeedError)


def test_ingest_subpackage_is_not_shadowed() -> None:
    import kafeed.ingest

    assert callable(kafeed.ingest.ingest)
    assert kafeed.IngestOptions is kafeed.ingest.IngestOptions
