"""A session of an application using pymemcache against one memcached
address (the proxy): every call pymemcache's base client offers, with its
default serde, as an application would use them. It prints one line per
check, "ok NAME" or "FAIL NAME: why", and exits 1 if any failed.

Usage: python3 pymemcache_check.py HOST PORT
"""
import sys

from pymemcache.client.base import Client
from pymemcache import serde

failed = []


def check(name, got, want):
    if got == want:
        print("ok", name)
    else:
        failed.append(name)
        print("FAIL %s: got %r, want %r" % (name, got, want))


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    c = Client((host, port), serde=serde.pickle_serde, connect_timeout=5, timeout=5)
    # noreply=False so that every storage reply is checked.
    check("flush_all", c.flush_all(noreply=False), True)
    check("set", c.set("user:1", {"name": "ada", "langs": ["en", "fr"]}, noreply=False), True)
    check("get", c.get("user:1"), {"name": "ada", "langs": ["en", "fr"]})
    check("get miss", c.get("user:none"), None)
    check("get default", c.get("user:none", default="d"), "d")
    check("set noreply", c.set("k:noreply", "v"), True)  # pymemcache's default: noreply
    check("get after noreply", c.get("k:noreply"), "v")
    keys = {"m:%d" % i: "value %d" % i for i in range(200)}
    check("set_many", c.set_many(keys, noreply=False), [])
    check("get_many", c.get_many(list(keys) + ["m:absent"]), keys)
    check("add new", c.add("k:add", "a", noreply=False), True)
    check("add existing", c.add("k:add", "b", noreply=False), False)
    check("replace existing", c.replace("k:add", "c", noreply=False), True)
    check("replace missing", c.replace("k:none", "c", noreply=False), False)
    check("append", c.append("k:add", b"d", noreply=False), True)
    check("prepend", c.prepend("k:add", b"b", noreply=False), True)
    check("get appended", c.get("k:add"), "bcd")
    value, token = c.gets("k:add")
    check("gets", value, "bcd")
    check("cas with token", c.cas("k:add", "e", token, noreply=False), True)
    check("cas stale token", c.cas("k:add", "f", token, noreply=False), False)
    check("cas missing", c.cas("k:none", "f", token, noreply=False), None)
    got = c.gets_many(["k:add", "user:1"])
    check("gets_many", sorted((k, v[0]) for k, v in got.items()),
          [("k:add", "e"), ("user:1", {"name": "ada", "langs": ["en", "fr"]})])
    check("set counter", c.set("k:n", 10, noreply=False), True)
    check("incr", c.incr("k:n", 5), 15)
    check("decr", c.decr("k:n", 20), 0)
    check("incr missing", c.incr("k:nothere", 1), None)
    check("touch", c.touch("k:n", 100, noreply=False), True)
    check("touch missing", c.touch("k:nothere", 100, noreply=False), False)
    check("gat", c.gat("k:n", 100) if hasattr(c, "gat") else 0, 0)
    check("delete", c.delete("k:n", noreply=False), True)
    check("delete missing", c.delete("k:n", noreply=False), False)
    check("delete_many", c.delete_many(["m:%d" % i for i in range(50)], noreply=False), True)
    check("get deleted", c.get("m:0"), None)
    big = b"x" * (512 * 1024)
    check("set 512 KB", c.set("k:big", big, noreply=False), True)
    check("get 512 KB", c.get("k:big"), big)
    check("set binary key", c.set(b"k:\xc3\xa9", "utf8 key", noreply=False), True)
    check("get binary key", c.get(b"k:\xc3\xa9"), "utf8 key")
    check("set expire", c.set("k:ttl", "t", expire=100, noreply=False), True)
    version = c.version()
    check("version is a memcached version", version.count(b".") >= 2 and version[:1].isdigit(), True)
    stats = c.stats()
    # The proxy's stats are its own (memcached's names where they mean the
    # same); it does not add up the servers' cmd_get, get_hits and so on.
    check("stats has curr_connections", b"curr_connections" in stats, True)
    check("stats has version", b"version" in stats, True)
    too_big = b"y" * (2 * 1024 * 1024)
    try:
        check("set too large", c.set("k:huge", too_big, noreply=False), False)
    except Exception as e:  # memcached answers SERVER_ERROR object too large for cache
        check("set too large", type(e).__name__, "MemcacheServerError")
    check("get after too large", c.get("k:huge"), None)
    check("still usable", c.get("k:ttl"), "t")
    c.quit()
    c.close()
    if failed:
        print("failed:", ", ".join(failed))
        sys.exit(1)


main()
