"""Writes key_slots.tsv beside this file: keys and the hash slot redis-py gives each.

The golden values come from a third party, redis-py's `redis.crc.key_slot`, so the Rust
test (crates/client/tests/resp_slots.rs) checks our CRC16 and hash-tag rule against it.
Run from the repository root with the project's venv (redis-py is a test dependency):

    .venv/bin/python crates/client/tests/data/key_slots.py

Each line: the key in hex, a tab, its slot. The keys: the cluster spec's examples and the
edge cases of hash tags, binary keys, and 2,000 pseudo-random keys (a fixed seed) over an
alphabet rich in braces.
"""

import random
from pathlib import Path

from redis.crc import key_slot

FIXED = [
    b"",
    b"a",
    b"123456789",
    b"foo",
    b"user:1000",
    b"{user1000}.following",
    b"{user1000}.followers",
    b"foo{}{bar}",
    b"foo{{bar}}zap",
    b"foo{bar}{zap}",
    b"{}",
    b"{}{}",
    b"{",
    b"}",
    b"}{",
    b"{a",
    b"a}",
    b"a}b{c}",
    b"a{b}c{d}",
    b"{{}}",
    b"{}a}",
    b"x{}y{z}",
    b"{\x00}",
    b"\x00",
    b"\xff\xfe{\x80}\x01",
    b"k \r\n\x00\xff*1\r\n",
    "caf\u00e9{\u00fcber}".encode(),
    b"cachelab:run-1:{" + b"t" * 100 + b"}:" + b"v" * 200,
    b"z" * 1000,
]


def main():
    rng = random.Random(34)
    alphabet = b"ab{}{}:\x00\xff01"
    keys = list(FIXED)
    for _ in range(1000):
        n = rng.randint(1, 24)
        keys.append(bytes(rng.choice(alphabet) for _ in range(n)))
    for _ in range(1000):
        n = rng.randint(1, 64)
        keys.append(bytes(rng.randrange(256) for _ in range(n)))
    out = Path(__file__).with_name("key_slots.tsv")
    lines = [f"{k.hex()}\t{key_slot(k)}\n" for k in keys]
    out.write_text("".join(lines))


if __name__ == "__main__":
    main()
