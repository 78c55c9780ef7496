#!/usr/bin/env python3
"""Writes xxh3_vectors.txt from the reference C library (libxxhash.so.0).

Run from sharding/testdata: python3 gen_xxh3_vectors.py > xxh3_vectors.txt
Needs Debian's libxxhash0 (or any libxxhash >= 0.8.0). The input of length n
is the first n bytes of the buffer that xxHash's own sanity tests use:
gen = 2654435761; byte i = gen >> 56; gen = gen * 11400714785074694797 mod 2^64.
"""
import ctypes

lib = ctypes.CDLL("libxxhash.so.0")
f = lib.XXH3_64bits_withSeed
f.restype = ctypes.c_uint64
f.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint64]
ver = lib.XXH_versionNumber
ver.restype = ctypes.c_uint

MAX = 10240
buf = bytearray(MAX)
gen = 2654435761
for i in range(MAX):
    buf[i] = gen >> 56
    gen = (gen * 11400714785074694797) % (1 << 64)
buf = bytes(buf)

lengths = list(range(0, 257)) + [
    300, 403, 511, 512, 513, 1023, 1024, 1025, 1088, 2047, 2048, 2049, 2240, 2367,
    4096, 4097, 10240]
seeds = [0, 1, 0x9E3779B185EBCA8D, 0xFFFFFFFFFFFFFFFF]
print("# XXH3_64bits_withSeed reference vectors from libxxhash %d" % ver())
print("# length seed(hex) hash(hex); input = sanity buffer prefix (see gen_xxh3_vectors.py)")
for n in lengths:
    for s in seeds:
        print("%d %x %016x" % (n, s, f(buf[:n], n, s)))
