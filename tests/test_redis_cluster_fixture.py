"""The ``redis_cluster_url`` fixture gives a real cluster whose keys spread over 3 masters."""

from __future__ import annotations

import uuid

import redis


def test_redis_cluster_spreads_keys_over_three_masters(redis_cluster_url: str) -> None:
    assert redis_cluster_url.startswith("redis+cluster://")
    prefix = f"scrapy-dedup-test:{uuid.uuid4().hex[:12]}"
    keys = [f"{prefix}:key-{i}" for i in range(300)]
    cluster = redis.RedisCluster.from_url(
        redis_cluster_url.replace("redis+cluster://", "redis://")
    )
    try:
        for key in keys:
            cluster.set(key, b"1")
        primaries = cluster.get_primaries()
        assert len(primaries) == 3
        per_node: dict[int, int] = {}
        for primary in primaries:
            node = redis.Redis(host=primary.host, port=primary.port)
            try:
                assert int(node.dbsize()) > 0
                per_node[primary.port] = sum(
                    1 for _ in node.scan_iter(match=f"{prefix}:*", count=1000)
                )
            finally:
                node.close()
        assert all(count > 0 for count in per_node.values()), per_node
        assert sum(per_node.values()) == len(keys)
    finally:
        for key in keys:
            cluster.delete(key)
        cluster.close()
