"""The steps from a source's records to a reader's batches, each in one process, no torch.

Each step is a node with one contract (``node``: how it hands out, ``state()``, ``reset``),
its state versioned and nested in the node that holds it. The reader (``reader.ShardReader``)
hands a source's records out in a deterministic order; ``decode`` and ``record_kinds`` turn
bytes into payloads; ``shuffle`` and ``packing`` reorder and pack them; ``stream`` makes a
reader's batches, ``mixture_stream`` (with ``mixing`` and ``windows_ahead``) interleaves
several streams at set proportions; ``collate`` makes tensors.
"""
