"""Regenerate the committed protobuf modules: ``python -m kafeed.schema.generate``.

Needs ``grpcio-tools`` (a dev dependency). A unit test checks that the committed
modules match what this produces, so an edited ``.proto`` cannot drift.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTOS = ("records.proto",)


def generate(out_dir: Path = HERE) -> list[Path]:
    """Compile every ``.proto`` beside this module into ``out_dir``; return the files written."""
    from grpc_tools import protoc

    for proto in PROTOS:
        rc = protoc.main(["protoc", f"-I{HERE}", f"--python_out={out_dir}", f"--pyi_out={out_dir}",
                          str(HERE / proto)])
        if rc != 0:
            raise RuntimeError(f"protoc failed on {proto} (exit {rc})")
    return [out_dir / f"{Path(p).stem}_pb2{ext}" for p in PROTOS for ext in (".py", ".pyi")]


if __name__ == "__main__":
    for path in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print(path)
