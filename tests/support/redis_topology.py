"""Replicated Redis for tests: a Sentinel group and a Cluster, real ``redis-server`` processes.

* `SentinelGroup`: one primary, one replica and three sentinels (``redis-server --sentinel``:
  Debian's redis-server is also the sentinel), on held loopback ports (`ports.hold_port`),
  quick to fail over (``down-after-milliseconds`` 1000);
* `ClusterGroup`: six nodes made a 3-primary Cluster with one replica each by
  ``redis-cli --cluster create`` (``cluster-node-timeout`` 1000: a killed primary's replica
  takes over within seconds).

Every process runs in the test's own directory, without persistence, and is killed by
`stop`; every wait is bounded. Start-up is synchronous (before a test's daemons start); the
waits a test makes while agents keep sending are coroutines.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import redis
import redis.asyncio as aioredis
from polling import wait_until
from ports import hold_port

WAIT_S = 30.0
"""Bound of every wait here (a failover takes 2-5 s on a quiet machine)."""


def _server() -> str:
    path = shutil.which("redis-server")
    assert path, "redis-server is not installed (Debian: apt-get install redis-server)"
    return path


def poll(predicate: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:  # noqa: ASYNC109
    """Wait (synchronously) until ``predicate()`` holds; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def _die_with_parent() -> list[str]:
    """The command prefix that SIGKILLs a server when the test process dies (a worker killed by a
    timeout never runs its fixtures' teardown; its servers must not outlive it).

    util-linux's ``setpriv`` sets the signal and execs the server, so the test process runs
    no code of its own between fork and exec: a ``preexec_fn`` runs Python (and gRPC's fork
    handlers) in the child of a process with gRPC threads, where a restarted node once died
    before its first log line."""
    path = shutil.which("setpriv")
    assert path, "setpriv is not installed (Debian: apt-get install util-linux)"
    return [path, "--pdeathsig", "KILL", "--"]


def _answers(port: int) -> bool:
    client = redis.Redis(port=port, socket_timeout=1, socket_connect_timeout=1)
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
    finally:
        client.close()


class Node:
    """One ``redis-server`` process (a data node or a sentinel) on a held port."""

    def __init__(self, root: Path, name: str, *extra: str, sentinel: bool = False) -> None:
        self.holder = hold_port()
        self.port = int(self.holder.getsockname()[1])
        self.dir = root / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.extra = list(extra)
        self.sentinel = sentinel
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_from = 0

    def start(self, *more: str) -> Node:
        """Start the server (``more``: arguments for this start only) and wait until it answers."""
        args = [*_die_with_parent(), _server()]
        if self.sentinel:
            args += [str(self.dir / "sentinel.conf"), "--sentinel"]
        args += ["--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.dir), "--save", "",
                 "--appendonly", "no", "--logfile", str(self.dir / "server.log"), *self.extra, *more]
        log = self.dir / "server.log"
        self.log_from = log.stat().st_size if log.exists() else 0  # this start's lines come after
        with (self.dir / "stderr.log").open("ab") as stderr:
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr)
        poll(lambda: self.alive() and _answers(self.port), f"redis on {self.port} ({self.dir}/server.log)")
        return self

    def alive(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            log = (self.dir / "server.log").read_text()[self.log_from:][-2000:]
            stderr = (self.dir / "stderr.log").read_text()[-1000:]
            raise AssertionError(f"redis on {self.port} exited with {self.proc.returncode}; its log since this start: "
                                 f"{log or '(nothing)'}; stderr: {stderr or '(nothing)'}")
        return True

    def kill(self) -> None:
        """SIGKILL: the server dies with whatever it had not replicated."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5, socket_connect_timeout=2)

    def stop(self) -> None:
        self.kill()
        self.holder.close()


class SentinelGroup:
    """A primary, a replica and three sentinels watching them as ``primary``."""

    NAME = "primary"

    def __init__(self, root: Path) -> None:
        self.nodes = [Node(root, "redis-a"), Node(root, "redis-b")]
        self.sentinels = [Node(root, f"sentinel-{i}", sentinel=True) for i in range(3)]

    def start(self) -> SentinelGroup:
        first, second = self.nodes
        first.start()
        second.start("--replicaof", "127.0.0.1", str(first.port))
        poll(lambda: second.client().info("replication").get("master_link_status") == "up", "the replica in sync")
        for sentinel in self.sentinels:
            (sentinel.dir / "sentinel.conf").write_text(
                f"sentinel monitor {self.NAME} 127.0.0.1 {first.port} 2\n"
                f"sentinel down-after-milliseconds {self.NAME} 1000\n"
                f"sentinel failover-timeout {self.NAME} 4000\n"
                f"sentinel parallel-syncs {self.NAME} 1\n")
            sentinel.start()
        poll(lambda: all(self._sentinel_sees_all(s) for s in self.sentinels), "every sentinel knowing the group")
        return self

    def _sentinel_sees_all(self, sentinel: Node) -> bool:
        state = sentinel.client().sentinel_master(self.NAME)
        return int(state["num-slaves"]) >= 1 and int(state["num-other-sentinels"]) >= 2

    def url(self, db: int = 0) -> str:
        """The ``redis+sentinel://`` URL of the group."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.NAME}/{db}"

    def primary(self) -> Node:
        """The data node the sentinels name primary now."""
        host, port = self.sentinels[0].client().execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.NAME)
        return next(n for n in self.nodes if n.port == int(port))

    async def wait_primary_other_than(self, old: Node) -> Node:
        """Wait until every sentinel names another node primary, and that node takes writes."""
        async def moved() -> bool:
            for sentinel in self.sentinels:
                client = aioredis.Redis(port=sentinel.port, socket_timeout=2)
                try:
                    _, port = await client.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.NAME)
                finally:
                    await client.aclose()
                if int(port) == old.port:
                    return False
            client = aioredis.Redis(port=self.primary().port, socket_timeout=2)
            try:
                role = await client.execute_command("ROLE")
            finally:
                await client.aclose()
            return bool(role[0] == b"master")

        await wait_until(moved, what="the sentinels promoting the replica")
        return self.primary()

    def stop(self) -> None:
        for node in [*self.sentinels, *self.nodes]:
            node.stop()


class ClusterGroup:
    """Six nodes: a 3-primary Cluster, one replica per primary."""

    def __init__(self, root: Path) -> None:
        self.bus = [hold_port() for _ in range(6)]
        self.nodes = [Node(root, f"cluster-{i}", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                           "--cluster-node-timeout", "1000", "--cluster-replica-validity-factor", "0", "--cluster-port", str(bus.getsockname()[1]),
                           "--repl-diskless-sync-delay", "0")
                      for i, bus in enumerate(self.bus)]

    def start(self) -> ClusterGroup:
        for node in self.nodes:
            node.start()
        cli = shutil.which("redis-cli")
        assert cli, "redis-cli is not installed"
        subprocess.run([cli, "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
                        "--cluster-replicas", "1", "--cluster-yes"],
                       check=True, capture_output=True, timeout=WAIT_S)
        poll(self.healthy, "cluster_state:ok on every node")
        # A replica holds nothing until its first sync finishes: a takeover before that would
        # lose everything written so far, whatever the replication lag.
        poll(self.replicas_in_sync, "every replica's link to its primary up")
        return self

    def live(self) -> list[Node]:
        """The nodes running now (a killed one is left out until it is started again)."""
        return [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def replicas_in_sync(self) -> bool:
        """Every live replica has finished its first sync with its primary."""
        for node in self.live():
            info = node.client().info("replication")
            if info.get("role") == "slave" and info.get("master_link_status") != "up":
                return False
        return True

    def healthy(self) -> bool:
        """Every live node says the Cluster is ok and knows 3 primaries."""
        for node in self.live():
            text = node.client().execute_command("CLUSTER INFO")
            info = text if isinstance(text, dict) else dict(
                line.split(":", 1) for line in text.decode().splitlines() if ":" in line)
            if info.get("cluster_state") != "ok" or int(info.get("cluster_size", 0)) != 3:
                return False
        return True

    def url(self) -> str:
        """A ``redis+cluster://`` URL naming two startup nodes."""
        return f"redis+cluster://127.0.0.1:{self.nodes[0].port},127.0.0.1:{self.nodes[1].port}"

    def owner(self, key: str) -> Node:
        """The primary serving ``key``'s slot now."""
        for node in self.live():
            slot = int(node.client().execute_command("CLUSTER", "KEYSLOT", key))
            for start, end, primary, *_ in node.client().execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end:
                    return next(n for n in self.nodes if n.port == int(primary[1]))
        raise AssertionError("no live node")

    def primaries(self) -> list[Node]:
        """The nodes that are primaries now."""
        return [n for n in self.live() if n.client().execute_command("ROLE")[0] == b"master"]

    async def wait_takeover(self, key: str, old: Node) -> Node:
        """Wait until another node serves ``key``'s slot and the Cluster is ok again."""
        await wait_until(lambda: self.owner(key).port != old.port and self.healthy(), what="a replica taking over")
        return self.owner(key)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()
        for bus in self.bus:
            bus.close()
