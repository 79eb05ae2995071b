"""A real Valkey (or Redis) Cluster on loopback ports: primaries, one replica each, a short
node timeout so a failover takes seconds. Built with CLUSTER commands through redis-py
(no `valkey-cli --cluster create`, which may not be installed), torn down by `stop()`.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from proxy.store.embedded import find_server_binary

SLOTS = 16384
NODE_TIMEOUT_MS = 1000


def free_ports(count: int) -> list[int]:
    sockets = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sockets.append(sock)
    ports = [int(s.getsockname()[1]) for s in sockets]
    for sock in sockets:
        sock.close()
    return ports


@dataclass
class Node:
    port: int
    bus_port: int
    directory: Path
    cluster: bool = True
    """False: a plain server, for what must refuse to treat it as a cluster."""
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5, decode_responses=True)

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        args = [
            "--port", str(self.port), "--bind", "127.0.0.1",
            "--dir", str(self.directory), "--logfile", str(self.directory / "server.log"),
            "--save", "", "--appendonly", "no", "--daemonize", "no", "--repl-diskless-sync-delay", "0",
        ]  # fmt: skip
        if self.cluster:
            args += [
                "--cluster-enabled", "yes", "--cluster-port", str(self.bus_port),
                "--cluster-config-file", str(self.directory / "nodes.conf"),
                "--cluster-node-timeout", str(NODE_TIMEOUT_MS),
                "--cluster-replica-validity-factor", "0",
            ]  # fmt: skip
        self.process = subprocess.Popen(
            [find_server_binary(), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _until(lambda: self._answers(), f"node {self.port} to start")

    def kill(self) -> None:
        """SIGKILL: the node vanishes as in a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self.process = None

    def node_id(self) -> str:
        return str(self.client().execute_command("CLUSTER MYID"))

    def _answers(self) -> bool:
        try:
            return bool(self.client().ping())
        except redis.RedisError:
            return False


@dataclass
class LocalCluster:
    root: Path
    primaries: int = 3
    nodes: list[Node] = field(default_factory=list)

    @property
    def seeds(self) -> str:
        """`redis.url` for the proxy: two seed nodes, comma-separated."""
        return ",".join(node.url for node in self.nodes[:2])

    def start(self) -> None:
        ports = free_ports(4 * self.primaries)
        for i in range(2 * self.primaries):
            self.nodes.append(Node(ports[2 * i], ports[2 * i + 1], self.root / f"node{i}"))
        for node in self.nodes:
            node.start()
        primaries, replicas = self.nodes[: self.primaries], self.nodes[self.primaries :]
        for i, node in enumerate(primaries):
            first, last = i * SLOTS // self.primaries, (i + 1) * SLOTS // self.primaries - 1
            node.client().execute_command("CLUSTER SET-CONFIG-EPOCH", i + 1)
            node.client().execute_command("CLUSTER ADDSLOTSRANGE", first, last)
        for node in self.nodes[1:]:
            node.client().execute_command("CLUSTER MEET", "127.0.0.1", self.nodes[0].port, self.nodes[0].bus_port)
        _until(lambda: all(self._knows_everyone(node) for node in self.nodes), "every node to meet every other")
        for replica, primary in zip(replicas, primaries, strict=True):
            replica.client().execute_command("CLUSTER REPLICATE", primary.node_id())
        self.wait_ok()

    def wait_ok(self, timeout_s: float = 20.0) -> None:
        """Every live node says every slot is served, and every primary has its replica in sync."""
        _until(lambda: all(self._healthy(node) for node in self.live()), "cluster_state:ok", timeout_s)

    def live(self) -> list[Node]:
        return [node for node in self.nodes if node.process is not None]

    def primary_for(self, key: str) -> Node:
        """The node that serves `key`'s slot now."""
        client = self.live()[0].client()
        slot = int(client.execute_command("CLUSTER KEYSLOT", key))
        for address, view in self._view(self.live()[0]).items():
            if "master" in view["flags"] and any(int(a) <= slot <= int(b) for a, b, *_ in view["slots"]):
                return next(node for node in self.nodes if node.port == int(address.rsplit(":", 1)[1]))
        raise LookupError(f"no node serves slot {slot}")

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()

    def _knows_everyone(self, node: Node) -> bool:
        view = self._view(node)
        return len(view) == len(self.nodes) and not any("handshake" in n["flags"] for n in view.values())

    @staticmethod
    def _view(node: Node) -> dict[str, dict[str, Any]]:
        """CLUSTER NODES as redis-py parses it: address -> flags, slots, ..."""
        return dict(node.client().execute_command("CLUSTER NODES"))

    def _healthy(self, node: Node) -> bool:
        try:
            info = _info(node.client().execute_command("CLUSTER INFO"))
            replication = node.client().info("replication")
        except redis.RedisError:
            return False
        if info.get("cluster_state") != "ok" or int(info.get("cluster_slots_ok", 0)) != SLOTS:
            return False
        return replication["role"] == "master" or replication.get("master_link_status") == "up"


def _info(raw: object) -> dict[str, str]:
    if isinstance(raw, dict):
        return {str(k): str(v) for k, v in raw.items()}
    return dict(line.split(":", 1) for line in str(raw).splitlines() if ":" in line)


def _until(check: object, what: str, timeout_s: float = 20.0) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")
