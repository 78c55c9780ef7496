"""A verified load through redis-py's RedisCluster, a cluster-aware client
that is not go-redis: it asks the node it is given for the slot map, then
sets and reads back keys, each on the node the map names, until the file
STOP exists and it has answered at least MIN requests (or for 60 s). It prints one JSON line: requests answered, wrong replies,
failed requests and the first failure, and how many answered requests
each node served.

Usage: python3 redis_cluster_load.py HOST PORT STOP PREFIX MIN
"""
import json
import os
import sys
import time

from redis.cluster import RedisCluster


def main():
    host, port, stop, prefix = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    least, deadline = int(sys.argv[5]), time.monotonic() + 60
    rc = RedisCluster(host=host, port=port, socket_timeout=5)
    ok = wrong = failed = 0
    first = None
    nodes = {}
    seq = 0
    while time.monotonic() < deadline and (ok < least or not os.path.exists(stop)):
        key, value = "%s-k%d" % (prefix, seq % 200), str(seq)
        seq += 1
        try:
            rc.set(key, value)
            got = rc.get(key)
        except Exception as e:  # a failed request: counted, the load goes on
            failed += 1
            first = first or "%s: %r" % (key, e)
            continue
        if got != value.encode():
            wrong += 1
            first = first or "GET %s: %r, want %r" % (key, got, value)
            continue
        ok += 1
        node = rc.get_node_from_key(key).name
        nodes[node] = nodes.get(node, 0) + 1
    rc.close()
    print(json.dumps({"ok": ok, "wrong": wrong, "failed": failed, "first": first, "nodes": nodes}))


main()
