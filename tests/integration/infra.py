"""Locate (or start) the real Kafka broker and PostgreSQL server for integration tests.

Each helper honours an explicit env override first, then reuses a server already
listening on loopback, and only otherwise runs the repo's own start script
(``deploy/kafka/kafka.sh up`` / ``deploy/postgres/postgres.sh up``), which is idempotent
and waits until the server is ready.

    KAFKA_BOOTSTRAP        e.g. "127.0.0.1:9092"; used as is when set (a cluster's addresses,
                           "host:port,host:port", too: deploy/kafka/cluster.sh bootstrap)
    KAFKA_TEST_REPLICAS    the replication factor of the test spaces' topics (default: as many
                           as the bootstrap names brokers, at most 3, as production runs a
                           cluster, with a minimum of 2 in sync)
    KAFKA_PORT             broker port when starting locally (default 9092)
    KAFKA_SASL_BOOTSTRAP   the broker's SASL_SSL listener; default 127.0.0.1:<KAFKA_SASL_PORT>
                           (KAFKA_PORT + 2), with the certificate kafka.sh made
                           (<KAFKA_CACHE_DIR or .cache/kafka>/tls/ca.pem, or KAFKA_SASL_CAFILE)
    BLACKJACK_TEST_PG_URL  e.g. "postgresql+asyncpg://u:p@host:5432/db"; used as is when set
    BLACKJACK_TEST_PG_CAFILE  the certificate that verifies that server's TLS; default the one
                           postgres.sh made for the server at the URL's port (``cafile``)
    PG_PORT                PostgreSQL port when starting locally (default 55432)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_SCRIPT = REPO_ROOT / "deploy" / "kafka" / "kafka.sh"
CLUSTER_SCRIPT = REPO_ROOT / "deploy" / "kafka" / "cluster.sh"
POSTGRES_SCRIPT = REPO_ROOT / "deploy" / "postgres" / "postgres.sh"

LOOPBACK = "127.0.0.1"
DEFAULT_KAFKA_PORT = 9092
DEFAULT_PG_PORT = 55432
PG_USER = PG_PASSWORD = PG_DATABASE = "blackjack"

# A cold `up` may download the Kafka jars first; the scripts bound their own waits.
_START_TIMEOUT_S = 600.0


def port_open(host: str, port: int, timeout: float = 1.0) -> bool:
    """True if a TCP connection to host:port succeeds right now."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port() -> int:
    """A port nothing listens on now, for a server that binds it later.

    Picked at random below the range the OS hands out for ``bind(0)`` and for outgoing
    connections (``ip_local_port_range``): the OS's own pick was free when asked, but between
    then and the server's bind any process on the machine (a Kafka client connecting, another
    test session asking the OS) could be given it, and the server failed to start by chance.
    A port outside that range is taken only by someone asking for it by number."""
    low = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(100):
        port = rng.randrange(PICKED_PORTS_FROM, low) if low > PICKED_PORTS_FROM + 1000 else 0
        with socket.socket() as probe:
            try:
                probe.bind((LOOPBACK, port))
            except OSError:
                continue
            picked: int = probe.getsockname()[1]
            return picked
    raise OSError("no free port found")


PICKED_PORTS_FROM = 20_000
"""free_port's lowest port: above the services' usual ones (Kafka 9092, PostgreSQL 5432)"""


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0  # unknown: the OS's pick


def wait_for_port(host: str, port: int, timeout: float = 30.0, interval: float = 0.25) -> None:
    """Poll until host:port accepts a connection; raise TimeoutError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not port_open(host, port):
        if time.monotonic() >= deadline:
            raise TimeoutError(f"nothing listening on {host}:{port} after {timeout:.0f}s")
        time.sleep(interval)


def _env_port(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


def _run_up(script: Path) -> str:
    """Run ``script up`` (raises CalledProcessError on failure); return its stdout."""
    return _run(script, "up")


def _run(script: Path, command: str, **env: str) -> str:
    """``script command``'s stdout (CalledProcessError on failure), ``env`` added to ours."""
    result = subprocess.run(
        ["bash", str(script), command],
        check=True,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        text=True,
        timeout=_START_TIMEOUT_S,
        env={**os.environ, **env},
    )
    return result.stdout


def kafka_bootstrap() -> str:
    """Bootstrap servers of a reachable broker, starting the local one if needed."""
    override = os.environ.get("KAFKA_BOOTSTRAP", "").strip()
    if override:
        return override
    port = _env_port("KAFKA_PORT", DEFAULT_KAFKA_PORT)
    if not port_open(LOOPBACK, port):
        _run_up(KAFKA_SCRIPT)
        wait_for_port(LOOPBACK, port)
    return f"{LOOPBACK}:{port}"


def kafka_test_replicas(bootstrap: str) -> tuple[int, int]:
    """The replication factor and minimum in sync of the test spaces' topics on ``bootstrap``."""
    brokers = len([server for server in bootstrap.split(",") if server.strip()])
    replicas = _env_port("KAFKA_TEST_REPLICAS", min(3, brokers))
    return replicas, min(2, replicas)


def postgres_url() -> str:
    """SQLAlchemy asyncpg URL of a reachable PostgreSQL, starting the local one if needed."""
    override = os.environ.get("BLACKJACK_TEST_PG_URL", "").strip()
    if override:
        return override
    port = _env_port("PG_PORT", DEFAULT_PG_PORT)
    url = f"postgresql+asyncpg://{PG_USER}:{PG_PASSWORD}@{LOOPBACK}:{port}/{PG_DATABASE}"
    if not port_open(LOOPBACK, port):
        lines = _run_up(POSTGRES_SCRIPT).strip().splitlines()
        if lines and lines[-1].startswith("postgresql"):
            url = lines[-1]
        wait_for_port(LOOPBACK, port)
    return url


def postgres_cafile(url: str) -> str:
    """The certificate that verifies the TLS of the PostgreSQL server ``url`` names."""
    override = os.environ.get("BLACKJACK_TEST_PG_CAFILE", "").strip()
    if override:
        return override
    port = urlsplit(url).port
    assert port is not None, url
    return _run(POSTGRES_SCRIPT, "cafile", PG_PORT=str(port)).strip()


@dataclass(frozen=True)
class SaslListener:
    """The local broker's SASL_SSL listener (deploy/kafka/kafka.sh) and its dev credentials."""

    bootstrap: str
    cafile: str
    username: str = "blackjack"
    password: str = "blackjack-dev-secret"

    def service_env(self) -> dict[str, str]:
        """The service's BLACKJACK_KAFKA_* settings that connect to this listener: what an
        operator sets for a cluster that requires TLS and SASL."""
        return {
            "BLACKJACK_KAFKA_BOOTSTRAP": self.bootstrap,
            "BLACKJACK_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "BLACKJACK_KAFKA_SASL_MECHANISM": "PLAIN",
            "BLACKJACK_KAFKA_SASL_USERNAME": self.username,
            "BLACKJACK_KAFKA_SASL_PASSWORD": self.password,
            "BLACKJACK_KAFKA_SSL_CAFILE": self.cafile,
        }


def kafka_cache_dir() -> Path:
    """Where kafka.sh keeps the local broker's jars, data and TLS files."""
    return Path(os.environ.get("KAFKA_CACHE_DIR", "").strip() or REPO_ROOT / ".cache" / "kafka")


def kafka_sasl() -> SaslListener:
    """The broker's TLS + SASL/PLAIN listener; the broker must have been started by kafka.sh
    (a broker started before the listener existed must be restarted: ``kafka.sh down; up``)."""
    override = os.environ.get("KAFKA_SASL_BOOTSTRAP", "").strip()
    port = _env_port("KAFKA_SASL_PORT", _env_port("KAFKA_PORT", DEFAULT_KAFKA_PORT) + 2)
    bootstrap = override or f"{LOOPBACK}:{port}"
    cafile = os.environ.get("KAFKA_SASL_CAFILE", "").strip() or str(
        kafka_cache_dir() / "tls" / "ca.pem"
    )
    host, _, listening = bootstrap.rpartition(":")
    if not port_open(host, int(listening)) or not Path(cafile).exists():
        raise RuntimeError(
            f"no SASL_SSL listener at {bootstrap} with {cafile}: restart the local broker "
            "(deploy/kafka/kafka.sh down; deploy/kafka/kafka.sh up) to add it"
        )
    return SaslListener(bootstrap, cafile)


class TcpGate:
    """A port where a server is down (connections refused) until ``open`` forwards it to
    the real one on ``server_port``: a database or a broker that comes up late."""

    def __init__(self, server_port: int) -> None:
        self.server_port = server_port
        self.port = free_port()
        self._server: asyncio.Server | None = None

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)

    async def _forward(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        server_in, server_out = await asyncio.open_connection("127.0.0.1", self.server_port)
        await asyncio.gather(_pipe(client_in, server_out), _pipe(server_in, client_out))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while chunk := await source.read(65536):
            sink.write(chunk)
            await sink.drain()
    except ConnectionError:
        pass
    finally:
        sink.close()


def below_ephemeral_ports(count: int) -> list[int]:
    """Ports nothing listens on, below the range the OS picks clients' ports from. A broker
    on a port of that range cannot always be started again: a client retrying to connect
    while it is down may be given that very port as its own and connect to itself (TCP's
    simultaneous open), holding the port; the outage drill met it twice in four runs."""
    low, _ = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    found: list[int] = []
    candidates = list(range(max(low - 10_000, 1024), low))
    random.shuffle(candidates)
    for port in candidates:
        with socket.socket() as probe:
            try:
                probe.bind((LOOPBACK, port))
            except OSError:
                continue
        found.append(port)
        if len(found) == count:
            return found
    raise RuntimeError(f"no {count} free ports below {low}")


class PrivateBroker:
    """A broker of a test's own (its ports, its data directory), which the test may stop and
    start: the shared broker must stay up for the other tests. It takes the Kafka jars of the
    local broker's cache when there are some (else ``kafka.sh`` fetches them)."""

    def __init__(self, directory: Path) -> None:
        ports = below_ephemeral_ports(3)
        self.bootstrap = f"{LOOPBACK}:{ports[0]}"
        self.directory = directory
        self.env = {
            "KAFKA_PORT": str(ports[0]),
            "KAFKA_CONTROLLER_PORT": str(ports[1]),
            "KAFKA_SASL_PORT": str(ports[2]),
            "KAFKA_CACHE_DIR": str(directory),
        }

    def command(self, action: str) -> str:
        """The shell command that runs ``kafka.sh ACTION`` on this broker."""
        settings = " ".join(f"{name}={shlex.quote(value)}" for name, value in self.env.items())
        return f"{settings} bash {shlex.quote(str(KAFKA_SCRIPT))} {action}"

    def sasl(self) -> SaslListener:
        """Its SASL_SSL listener (``kafka_sasl`` for this broker): TLS with the certificate
        kafka.sh made in its directory, and the dev credentials."""
        return SaslListener(
            f"{LOOPBACK}:{self.env['KAFKA_SASL_PORT']}", str(self.directory / "tls" / "ca.pem")
        )

    def kill_command(self) -> str:
        """The shell command that kills the broker's process (SIGKILL: a crash)."""
        return f"kill -9 $(cat {shlex.quote(str(self.directory / 'kafka.pid'))})"

    def up(self) -> None:
        shared = kafka_cache_dir()
        self.directory.mkdir(parents=True, exist_ok=True)
        if (shared / "libs").is_dir() and not (self.directory / "libs").exists():
            (self.directory / "libs").symlink_to((shared / "libs").resolve())
        subprocess.run(self.command("up"), shell=True, check=True, timeout=_START_TIMEOUT_S)

    def down(self) -> None:
        subprocess.run(self.command("down"), shell=True, check=True, timeout=_START_TIMEOUT_S)


def consecutive_free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports nothing listens on, below the range the OS
    picks clients' ports from (``below_ephemeral_ports``: a node stopped and started again
    must get its ports back)."""
    low, _ = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    bases = list(range(max(low - 10_000, 1024), low - count))
    random.shuffle(bases)
    for base in bases[:200]:
        with contextlib.ExitStack() as bound:
            try:
                for port in range(base, base + count):
                    bound.enter_context(socket.socket()).bind((LOOPBACK, port))
            except OSError:
                continue
        return base
    raise RuntimeError(f"no {count} consecutive free ports below {low}")


class PrivateCluster:
    """Three Kafka nodes of a test's own (``deploy/kafka/cluster.sh``: KRaft, each node broker
    and controller, internal topics on all three, two in sync at least), any of which the test
    may kill and start again. The jars and TLS files are the local broker's cache's."""

    NODES = 3

    def __init__(self, directory: Path) -> None:
        base = consecutive_free_ports(3 * self.NODES)
        self.directory = directory
        self.env = {
            "KAFKA_CLUSTER_PORT": str(base),
            "KAFKA_CLUSTER_DIR": str(directory),
            "KAFKA_CACHE_DIR": str(kafka_cache_dir()),
        }
        self.bootstrap = ",".join(f"{LOOPBACK}:{base + 3 * n}" for n in range(self.NODES))

    def command(self, *action: str) -> str:
        """The shell command that runs ``cluster.sh ACTION...`` on this cluster."""
        settings = " ".join(f"{name}={shlex.quote(value)}" for name, value in self.env.items())
        return f"{settings} bash {shlex.quote(str(CLUSTER_SCRIPT))} {' '.join(action)}"

    def up(self) -> None:
        subprocess.run(self.command("up"), shell=True, check=True, timeout=_START_TIMEOUT_S)

    def reset(self) -> None:
        """Every node stopped, the data deleted."""
        subprocess.run(self.command("reset"), shell=True, check=True, timeout=_START_TIMEOUT_S)
