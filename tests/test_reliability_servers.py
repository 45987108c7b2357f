"""The throwaway-server fixtures do what the fault tests rely on: crash, restart, pause, fill, secure."""

from __future__ import annotations

import pytest
import redis
import redis.asyncio

from redis_servers import RedisFactory, RedisServer, TLSFiles


def test_kill_and_restart_keep_the_port_and_lose_the_data(throwaway_redis: RedisServer) -> None:
    port = throwaway_redis.port
    with throwaway_redis.client() as client:
        client.set("k", "v")
    throwaway_redis.kill()
    with throwaway_redis.client(socket_connect_timeout=0.5) as client, pytest.raises(redis.ConnectionError):
        client.ping()
    throwaway_redis.start()
    assert throwaway_redis.port == port
    with throwaway_redis.client() as client:
        assert client.get("k") is None


async def test_client_pause_makes_a_client_time_out(throwaway_redis: RedisServer) -> None:
    slow = redis.asyncio.Redis.from_url(throwaway_redis.url, socket_timeout=0.2)
    with throwaway_redis.client() as admin:
        admin.execute_command("CLIENT PAUSE", 1000, "ALL")
    try:
        with pytest.raises(redis.TimeoutError):
            await slow.ping()
    finally:
        await slow.aclose()


def test_noeviction_refuses_writes_when_full(throwaway_redis: RedisServer) -> None:
    with throwaway_redis.client() as client:
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", client.info("memory")["used_memory"] + 100_000)
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            for i in range(10_000):
                client.set(f"fill:{i}", "x" * 1000)


def test_password_and_tls(redis_factory: RedisFactory, tmp_path) -> None:
    server = redis_factory.start(password="s3cret", tls=TLSFiles.create(tmp_path))
    assert server.url.startswith("rediss://:s3cret@")
    with server.client() as client:
        assert client.ping()
    wrong = server.url.replace("s3cret", "wrong")
    assert wrong != server.url
    with redis.Redis.from_url(wrong, ssl_ca_certs=str(server.tls.cert)) as client, pytest.raises(
        redis.AuthenticationError
    ):
        client.ping()


def test_factory_close_kills_every_server(tmp_path) -> None:
    factory = RedisFactory(tmp_path)
    processes = [factory.start().process, factory.start().process]
    factory.close()
    assert all(process.poll() is not None for process in processes)
