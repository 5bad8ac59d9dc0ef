#!/usr/bin/env python3
"""Rebuilds the fuzzer's seed corpus (tests/fuzz/corpus/) from real traces of small programs.

Each trace is written twice: as recorded (zstd blocks) and with every block stored raw
(codec 0), which lets the fuzzer's mutations reach the record decoder instead of failing
zstd's checksum. Names do not end in .gtrace (traces are git-ignored).

    python3 tests/fuzz/make_corpus.py [--build build-robust]
"""
from __future__ import annotations

import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import zstandard

BLOCK_MAGIC = 0x4B425447


def raw_blocks(data: bytes) -> bytes:
    out = bytearray(data[:16])
    offset = 16
    while offset + 16 <= len(data):
        magic, codec, stored, raw = struct.unpack_from("<IB3xII", data, offset)
        if magic != BLOCK_MAGIC:
            break
        payload = data[offset + 16: offset + 16 + stored]
        if codec == 1:
            payload = zstandard.ZstdDecompressor().decompress(payload, max_output_size=raw)
        out += struct.pack("<IB3xII", BLOCK_MAGIC, 0, len(payload), len(payload)) + payload
        offset += 16 + stored
    return bytes(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    parser.add_argument("--build", default=os.path.join(root, "build-robust"))
    args = parser.parse_args()
    bindir = os.path.join(args.build, "bin")
    plugin = os.path.join(args.build, "lib", "libgt_stress_plugin.so")
    stress = os.path.join(bindir, "gt_stress")
    programs = {
        "memo_table": [os.path.join(bindir, "memo_table"), "20", "0"],
        "bounded_lru": [os.path.join(bindir, "bounded_lru"), "300", "50", "100", "0"],
        "threads": [stress, "threads", "2", "3"],
        "realloc": [stress, "realloc", "40"],
        "memalign": [stress, "memalign"],
        "dlclose": [stress, "dlclose", plugin],
        "killed": [stress, "kill"],  # no End record
        "fork_exec": [stress, "fork-exec", stress],  # parent, child and exec'd image
    }
    corpus = os.path.join(root, "tests", "fuzz", "corpus")
    os.makedirs(corpus, exist_ok=True)
    work = tempfile.mkdtemp(prefix="growtrace-corpus-")
    try:
        for name, cmd in programs.items():
            trace = os.path.join(work, name + ".gtrace")
            subprocess.run([os.path.join(bindir, "growtrace"), "run", "-o", trace, "--"] + cmd,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            for produced in sorted(os.listdir(work)):
                if not produced.startswith(name + ".") or not produced.endswith(".gtrace"):
                    continue
                data = open(os.path.join(work, produced), "rb").read()
                base = produced[: -len(".gtrace")].replace(".", "-")
                open(os.path.join(corpus, base + ".zst.trace"), "wb").write(data)
                raw = raw_blocks(data)
                if len(raw) <= 64 * 1024:  # keeps the corpus small
                    open(os.path.join(corpus, base + ".raw.trace"), "wb").write(raw)
                os.unlink(os.path.join(work, produced))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = sum(os.path.getsize(os.path.join(corpus, f)) for f in os.listdir(corpus))
    print(f"make_corpus: {len(os.listdir(corpus))} files, {total / 1024:.0f} KiB in {corpus}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
