"""Throwaway redis-server processes for fault, security and cluster tests.

Fault tests kill, pause, flush and fill a Redis; doing that to the shared server on 6379 would break
every other test running against it. Each server here has its own loopback port and directory, is a
child of the test process (``PR_SET_PDEATHSIG``: it dies with pytest even when pytest is killed), and
is killed at fixture teardown whatever the test's outcome.
"""

from __future__ import annotations

import ctypes
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest
import redis

READY_TIMEOUT = 10.0
CLUSTER_NODE_TIMEOUT_MS = 1000  # failure detection; a failover completes in about 2-3 such periods

_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)


def _die_with_parent() -> None:
    """Runs in the forked child before exec: SIGKILL it when the test process goes away."""
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port() -> int:
    """A loopback TCP port nobody listens on right now (the caller retries if it loses the race)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def value_of(client: redis.Redis | redis.RedisCluster, key: bytes) -> object:
    """Any key's value as comparable plain data (sets sorted), for keyspace snapshots."""
    kind = client.type(key).decode()
    if kind == "zset":
        return client.zrange(key, 0, -1, withscores=True)
    if kind == "set":
        return sorted(client.smembers(key))
    if kind == "stream":
        return client.xrange(key)
    if kind == "list":
        return client.lrange(key, 0, -1)
    return {"string": client.get, "hash": client.hgetall}[kind](key)


@dataclass(frozen=True)
class TLSFiles:
    """A self-signed certificate and its key, trusted as its own CA."""

    cert: Path
    key: Path

    @classmethod
    def create(cls, directory: Path) -> TLSFiles:
        """Generate a throwaway certificate for 127.0.0.1 with ``cryptography`` (a Scrapy dependency)."""
        import datetime
        import ipaddress

        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256())
        )
        files = cls(directory / "cert.pem", directory / "key.pem")
        files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        files.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        return files


class RedisServer:
    """One redis-server child process: no persistence, own port and directory, restartable on its port."""

    def __init__(
        self,
        directory: Path,
        *args: str,
        password: str | None = None,
        tls: TLSFiles | None = None,
    ) -> None:
        self.directory = directory
        self.args = args
        self.password = password
        self.tls = tls
        self.port = 0
        self.bus_port = 0
        self.process: subprocess.Popen | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        scheme = "rediss" if self.tls else "redis"
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        return f"{scheme}://{auth}127.0.0.1:{self.port}/0"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def client(self, **kwargs) -> redis.Redis:
        """A synchronous admin client (for DEBUG, CONFIG, INFO; not the code under test)."""
        options = {"socket_timeout": 5, **({"ssl_ca_certs": str(self.tls.cert)} if self.tls else {}), **kwargs}
        return redis.Redis.from_url(self.url, **options)

    def _command(self) -> list[str]:
        command = ["redis-server", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        command += ["--enable-debug-command", "local"]
        command += ["--dir", str(self.directory), "--logfile", "redis.log"]
        if self.tls:
            command += ["--port", "0", "--tls-port", str(self.port)]
            command += ["--tls-cert-file", str(self.tls.cert), "--tls-key-file", str(self.tls.key)]
            command += ["--tls-ca-cert-file", str(self.tls.cert), "--tls-auth-clients", "no"]
        else:
            command += ["--port", str(self.port)]
        if self.password:
            command += ["--requirepass", self.password]
        if self.bus_port:
            command += ["--cluster-port", str(self.bus_port)]
        return command + list(self.args)

    def start(self) -> RedisServer:
        """Start on a fresh free port (first start, retried if the port is taken) or on its old port."""
        first_start = not self.port
        for _ in range(5 if first_start else 1):
            if first_start:
                self.port = free_port()
                if "--cluster-enabled" in self.args:
                    self.bus_port = free_port()
            self.process = subprocess.Popen(
                self._command(), cwd=self.directory, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                preexec_fn=_die_with_parent,
            )
            if self._wait_ready():
                return self
            self.process.wait()
            self.process = None
        raise RuntimeError(f"redis-server did not start in {self.directory}:\n{self.log_tail()}")

    def _wait_ready(self) -> bool:
        deadline = time.monotonic() + READY_TIMEOUT
        with self.client(socket_timeout=0.5, socket_connect_timeout=0.5) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    return False
                try:
                    if client.ping():
                        return True
                except redis.ConnectionError:
                    time.sleep(0.02)
        return False

    def kill(self) -> None:
        """SIGKILL: the crash case, nothing is flushed or handed to replicas."""
        self._end(signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM: a graceful shutdown (a Redis 7 primary first lets lagging replicas catch up)."""
        self._end(signal.SIGTERM)

    def _end(self, sig: signal.Signals) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def restart(self) -> RedisServer:
        """Kill and start again on the same port: an empty server (no persistence), like a crash."""
        self.kill()
        return self.start()

    def log_tail(self, lines: int = 20) -> str:
        log = self.directory / "redis.log"
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""


class RedisFactory:
    """Starts servers under one directory and kills every one of them at :meth:`close`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.servers: list[RedisServer] = []

    def start(self, *args: str, password: str | None = None, tls: TLSFiles | None = None) -> RedisServer:
        server = RedisServer(self.directory / f"redis-{len(self.servers)}", *args, password=password, tls=tls)
        self.servers.append(server)
        return server.start()

    def close(self) -> None:
        for server in self.servers:
            server.kill()


class LocalCluster:
    """A real Redis Cluster on loopback: ``primaries`` primaries with one replica each.

    With ``tls`` every connection is TLS (clients, replication, the cluster bus) and ``password``
    is required of clients and replicas alike.
    """

    def __init__(
        self, directory: Path, primaries: int = 3, *, tls: TLSFiles | None = None, password: str | None = None
    ) -> None:
        # No 5 s diskless-sync delay, and replica pings every second: Redis 7 leaves a replica out
        # of CLUSTER SLOTS until its offset moves, which would otherwise take 10 s on an idle cluster.
        args = (
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS),
            "--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1",
        )
        create = ["redis-cli", "--cluster", "create"]
        if tls:
            args += ("--tls-cluster", "yes", "--tls-replication", "yes")
            create += ["--tls", "--cacert", str(tls.cert)]
        if password:
            args += ("--masterauth", password)
            create += ["-a", password, "--no-auth-warning"]
        self.factory = RedisFactory(directory)
        try:
            self.nodes = [self.factory.start(*args, tls=tls, password=password) for _ in range(2 * primaries)]
            create += [node.address for node in self.nodes]
            subprocess.run(create + ["--cluster-replicas", "1", "--cluster-yes"], check=True,
                           capture_output=True, timeout=60)
            self.wait_healthy()
        except BaseException:
            self.factory.close()
            raise

    @property
    def url(self) -> str:
        """The first node's URL (``rediss://`` and the password when so configured)."""
        return self.nodes[0].url.removesuffix("/0")

    @property
    def startup_nodes(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", node.port) for node in self.nodes]

    def node_for_port(self, port: int) -> RedisServer:
        return next(node for node in self.nodes if node.port == port)

    def primary_of(self, key: str) -> RedisServer:
        """The node serving ``key``'s slot now, as the live nodes see it."""
        with self._live_node().client() as client:
            slot = client.execute_command("CLUSTER KEYSLOT", key)
            for start, end, primary, *_ in client.execute_command("CLUSTER SLOTS"):
                if start <= slot <= end:
                    return self.node_for_port(int(primary[1]))
        raise LookupError(f"no node serves slot {slot}")

    def primaries(self) -> list[RedisServer]:
        """The live nodes that are primaries now."""
        primaries = []
        for node in self.nodes:
            if node.alive:
                with node.client() as client:
                    if client.info("replication")["role"] == "master":
                        primaries.append(node)
        return primaries

    def replicas_of(self, primary: RedisServer) -> list[RedisServer]:
        with primary.client() as client:
            info = client.info("replication")
        return [self.node_for_port(int(info[f"slave{i}"]["port"])) for i in range(info["connected_slaves"])]

    def _live_node(self) -> RedisServer:
        return next(node for node in self.nodes if node.alive)

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Until every live node says ``cluster_state:ok`` and all agree on who serves which slots."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._healthy():
                return
            time.sleep(0.1)
        raise TimeoutError("cluster did not become healthy:\n" + "\n".join(n.log_tail(5) for n in self.nodes))

    def _healthy(self) -> bool:
        views = set()
        for node in self.nodes:
            if not node.alive:
                continue
            try:
                with node.client() as client:
                    if client.cluster("info")["cluster_state"] != "ok":
                        return False
                    slots = client.execute_command("CLUSTER SLOTS")
            except redis.RedisError:
                return False
            views.add(tuple(sorted((start, end, *(int(n[1]) for n in nodes)) for start, end, *nodes in slots)))
        live = sum(node.alive for node in self.nodes)
        # One shared view in which every live node serves slots (replicas attached too).
        return len(views) == 1 and len({port for shard in views.pop() for port in shard[2:]}) == live

    def wait_primary(self, node: RedisServer, timeout: float = 30.0) -> None:
        """Until ``node`` reports itself a primary (after a failover promoted it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with node.client() as client:
                if client.info("replication")["role"] == "master":
                    return
            time.sleep(0.1)
        raise TimeoutError(f"{node.address} was not promoted:\n{node.log_tail()}")

    def heal(self) -> None:
        """Restart every stopped node (it rejoins from its nodes.conf as a replica) and wait for health."""
        for node in self.nodes:
            if not node.alive:
                node.start()
        self.wait_healthy()

    def flush(self) -> None:
        """Empty every primary: cluster tests share one cluster, each starts from an empty keyspace."""
        for node in self.nodes:
            with node.client() as client:
                if client.info("replication")["role"] == "master":
                    client.flushall()

    def close(self) -> None:
        self.factory.close()


@pytest.fixture
def redis_factory(tmp_path: Path) -> Iterator[RedisFactory]:
    """Start throwaway redis-servers with ``redis_factory.start(*args)``; all are killed after the test."""
    factory = RedisFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.close()


@pytest.fixture
def throwaway_redis(redis_factory: RedisFactory) -> RedisServer:
    """A Redis of this test's own, free to kill, pause, flush, fill or reconfigure."""
    return redis_factory.start()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A 3-primary, 3-replica Redis Cluster on loopback, shared by the session, healed between tests."""
    cluster = LocalCluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def cluster(redis_cluster: LocalCluster) -> Iterator[LocalCluster]:
    """The session cluster, empty and healthy at the start of the test, healed again after it."""
    redis_cluster.heal()
    redis_cluster.flush()
    yield redis_cluster
    redis_cluster.heal()


def keyspace(url: str, prefix: str) -> dict:
    """Every key of the index under ``prefix`` (and its page data), with its value, as plain data."""
    from scrapy_simhash.redis_url import sync_client

    client = sync_client(url)
    data_prefix = prefix.replace("{", "").replace("}", "")
    found = {}
    try:
        for pattern in (f"{prefix}:*", f"{data_prefix}:d:*"):
            nodes = client.get_primaries() if hasattr(client, "get_primaries") else [None]
            for node in nodes:
                scan = client.scan_iter(match=pattern.replace("{", "[{]").replace("}", "[}]"), count=1000,
                                        **({"target_nodes": node} if node is not None else {}))
                for key in scan:
                    found[key] = value_of(client, key)
    finally:
        client.close()
    return found
