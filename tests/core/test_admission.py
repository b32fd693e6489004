"""Traffic control in the call path (issue 12): the manifest's ``limits:``, upstream 429/503 with
``Retry-After``, read retries and the circuit breaker, through ``Gateway.call``; and the PostgreSQL
token buckets holding one limit across two instances.

Time is injected (a fake monotonic clock and a recording ``sleep``): no test waits for a limit.
"""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest

from mcp_gateway.core.admission import TrafficGate
from mcp_gateway.manifest import parse_manifest
from mcp_gateway.services.identity import OPERATOR, Principal
from mcp_gateway.vocabulary.errors import ManifestError
from mcp_gateway.vocabulary.model import Action, Denied, ErrorResult, HttpBinding, Ok
from tests.core.test_gateway import Harness, harness, manifest_text

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _text(limits: str = "", connector_extra: str = "") -> str:
    text = manifest_text(default_mode="allow_all")
    if connector_extra:
        text = text.replace("  - slug: api\n", "  - slug: api\n" + textwrap.indent(connector_extra, "    "), 1)
    return text + limits


@pytest.fixture
def fake() -> FakeTime:
    return FakeTime()


@asynccontextmanager
async def _gateway(tmp_path: Path, text: str, fake: FakeTime) -> AsyncIterator[Harness]:
    async with harness(tmp_path, text) as h:
        h.gateway._calls.traffic = TrafficGate(clock=fake, sleep=fake.sleep, jitter=lambda: 1.0)
        yield h


# -- the manifest ---------------------------------------------------------------------------------------------


def test_limits_parse_and_bad_ones_are_located() -> None:
    m = parse_manifest(
        _text(
            "limits:\n  - {agent: 'bot*', rate: 10, burst: 20}\n  - {connector: api, concurrency: 2}\n",
            "circuit_breaker: {threshold: 3, cooldown: 5}\nretries: {reads: 2}\n",
        )
    )
    assert [(limit.scope, limit.pattern) for limit in m.limits] == [("agent", "bot*"), ("connector", "api")]
    api = m.connector("api")
    assert api is not None and api.circuit_breaker is not None and api.circuit_breaker.threshold == 3
    assert api.retries.reads == 2
    with pytest.raises(ManifestError) as caught:
        parse_manifest(_text("limits:\n  - {rate: 10}\n  - {connector: api, agent: x, rate: 1}\n"), file="m.yaml")
    issues = caught.value.issues
    assert [i.field for i in issues] == ["limits[0]", "limits[1]"]
    assert all(i.line is not None and i.file == "m.yaml" for i in issues)
    assert "exactly one of" in issues[0].message and issues[0].fix
    with pytest.raises(ManifestError):
        parse_manifest(_text(connector_extra="retries: {reads: 99}\n"))


# -- limits ---------------------------------------------------------------------------------------------------


async def test_fifty_calls_a_second_against_ten_a_second(tmp_path: Path, fake: FakeTime) -> None:
    text = _text("limits:\n  - {connector: api, rate: 10}\n")
    async with _gateway(tmp_path, text, fake) as h:
        ok = limited = 0
        for _ in range(150):  # 50/s offered for 3 s of (fake) time
            result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
            if isinstance(result, Ok):
                ok += 1
            else:
                assert isinstance(result, ErrorResult) and result.reason == "rate_limited", result
                assert result.retry_after is not None and 0 < result.retry_after <= 0.1
                limited += 1
            fake.now += 0.02
        # The burst (10 tokens) and then 10/s for 3 s.
        assert 38 <= ok <= 41 and ok + limited == 150
        assert h.upstream.hits("/items/1") == ok  # a refused call never reaches the upstream
        rows = await h.store.list_audit(limit=1000)
        assert sum(1 for r in rows if r.reason == "rate_limited") == limited


async def test_limits_are_per_agent_and_by_action_pattern(tmp_path: Path, fake: FakeTime) -> None:
    text = _text("limits:\n  - {agent: '*', rate: 1, burst: 2}\n  - {action: 'api.items.create', rate: 1, burst: 1}\n")
    async with _gateway(tmp_path, text, fake) as h:
        alice, bob = Principal("alice"), Principal("bob")
        got = [await h.gateway.call(alice, "api.items.get", {"id": "1"}) for _ in range(3)]
        assert [r.status for r in got] == ["ok", "ok", "error"]
        assert (await h.gateway.call(bob, "api.items.get", {"id": "1"})).status == "ok"  # bob has his own bucket
        fake.now += 10
        first = await h.gateway.call(bob, "api.items.create", {"name": "x"})
        second = await h.gateway.call(alice, "api.items.create", {"name": "y"})
        assert first.status == "ok"
        assert isinstance(second, ErrorResult) and second.reason == "rate_limited" and "action:" in second.message


async def test_discover_and_describe_are_inside_the_agents_discovery_limit(tmp_path: Path, fake: FakeTime) -> None:
    async with _gateway(tmp_path, _text("limits:\n  - {agent: '*', rate: 1, burst: 1}\n"), fake) as h:
        alice = Principal("alice")
        assert (await h.gateway.call(alice, "api.items.get", {"id": "1"})).status == "ok"
        assert (await h.gateway.call(alice, "api.items.get", {"id": "1"})).status == "error"  # calls: empty
        answered = [await h.gateway.discover(alice, "items") for _ in range(2)]
        answered += [await h.gateway.describe(alice, "api.items.get") for _ in range(2)]
        assert not any(isinstance(r, ErrorResult) for r in answered)  # 4x the burst, apart from calls
        for limited in (await h.gateway.discover(alice, "items"), await h.gateway.describe(alice, "api.items.get")):
            assert isinstance(limited, ErrorResult) and limited.reason == "rate_limited", limited
            assert limited.retry_after is not None and "discovery rate limit" in limited.message
        assert not isinstance(await h.gateway.discover(Principal("bob"), "items"), ErrorResult)


async def test_a_concurrency_cap_refuses_the_call_over_it(tmp_path: Path, fake: FakeTime) -> None:
    async with _gateway(tmp_path, _text("limits:\n  - {connector: api, concurrency: 2}\n"), fake) as h:
        release = anyio.Event()
        transport = h.gateway._http._transport  # pyright: ignore[reportPrivateUsage]
        answer = transport.handler  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]

        async def slow(request: httpx2.Request) -> httpx2.Response:
            await release.wait()
            return await answer(request)

        transport.handler = slow  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
        results: list[str] = []

        async def call() -> None:
            results.append((await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})).status)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            tg.start_soon(call)
            await anyio.wait_all_tasks_blocked()
            refused = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
            assert isinstance(refused, ErrorResult) and refused.reason == "rate_limited"
            release.set()
        assert results == ["ok", "ok"]
        assert (await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})).status == "ok"  # slots released


# -- the upstream's own limits, retries, the circuit breaker -------------------------------------------------


def _scripted(h: Harness, answers: list[httpx2.Response | Exception]) -> list[str]:
    seen: list[str] = []

    async def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.url.path)
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    transport = h.gateway._http._transport  # pyright: ignore[reportPrivateUsage]
    transport.handler = handler  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
    return seen


async def test_an_upstream_429_with_retry_after_is_rate_limited_with_its_value(tmp_path: Path, fake: FakeTime) -> None:
    async with _gateway(tmp_path, _text(), fake) as h:
        _scripted(h, [httpx2.Response(429, headers={"Retry-After": "7"}, json={"message": "slow down"})])
        result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(result, ErrorResult)
        assert (result.reason, result.retry_after, result.upstream_status) == ("rate_limited", 7.0, 429)
        _scripted(h, [httpx2.Response(503, headers={"Retry-After": "2"})])
        result = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"})
        assert isinstance(result, ErrorResult) and (result.reason, result.retry_after) == ("rate_limited", 2.0)


@pytest.mark.parametrize("headers", [{}, {"Retry-After": "soon"}, {"RateLimit-Reset": "30"}])
async def test_an_upstream_429_is_rate_limited_whatever_its_headers(
    tmp_path: Path, fake: FakeTime, headers: dict[str, str]
) -> None:
    async with _gateway(tmp_path, _text(), fake) as h:
        _scripted(h, [httpx2.Response(429, headers=headers, text="slow down, retry in 30 seconds")])
        result = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"})
    assert isinstance(result, ErrorResult) and (result.reason, result.upstream_status) == ("rate_limited", 429)
    assert result.retry_after is None and result.upstream_message == "slow down, retry in 30 seconds"
    assert result.hint and "Wait" in result.hint and "describe" not in result.hint


@pytest.mark.parametrize(("status", "headers"), [(503, {}), (500, {}), (502, {"Retry-After": "soon"})])
async def test_an_upstream_failure_of_its_own_does_not_blame_the_arguments(
    tmp_path: Path, fake: FakeTime, status: int, headers: dict[str, str]
) -> None:
    async with _gateway(tmp_path, _text(), fake) as h:
        _scripted(h, [httpx2.Response(status, headers=headers, text="upstream exploded")])
        write = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"})
        read = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
    for result, is_write in ((write, True), (read, False)):
        assert isinstance(result, ErrorResult) and (result.reason, result.upstream_status) == ("upstream_error", status)
        assert result.hint and "describe" not in result.hint and "try again later" in result.hint
        assert "failed on its side" in result.message
        assert ("may have taken effect" in result.message) == is_write


@pytest.mark.parametrize(
    ("headers", "wait"),
    [
        ({"Retry-After": "60"}, 60.0),  # GitHub's secondary rate limit
        ({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "RESET"}, 120.0),  # its primary one, an epoch time
        ({"RateLimit-Remaining": "0"}, None),
    ],
)
async def test_a_rate_limit_told_with_403_is_rate_limited_not_final(
    tmp_path: Path, fake: FakeTime, headers: dict[str, str], wait: float | None
) -> None:
    # GitHub answers a spent allowance with 403: "retrying will not help; the credential lacks the
    # permission" was false twice over, and its wait was never passed on.
    import time

    headers = {k: v.replace("RESET", str(int(time.time()) + 120)) for k, v in headers.items()}
    async with _gateway(tmp_path, _text(), fake) as h:
        _scripted(h, [httpx2.Response(403, headers=headers, json={"message": "API rate limit exceeded"})])
        result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(result, ErrorResult), result
        assert (result.reason, result.upstream_status) == ("rate_limited", 403)
        if wait is None:
            assert result.retry_after is None
        else:
            assert result.retry_after is not None and abs(result.retry_after - wait) <= 2
        assert "will not help" not in result.message and "answered 403" in result.message
        _scripted(h, [httpx2.Response(403, json={"message": "Resource not accessible by integration"})])
        final = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(final, Denied) and final.reason == "upstream_forbidden"  # a plain 403 stays final


async def test_a_retry_after_past_the_cap_is_not_quoted_as_the_upstreams(tmp_path: Path, fake: FakeTime) -> None:
    async with _gateway(tmp_path, _text(), fake) as h:
        _scripted(h, [httpx2.Response(503, headers={"Retry-After": "Fri, 01 Jan 2037 00:00:00 GMT"})])
        result = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"})
    assert isinstance(result, ErrorResult) and (result.reason, result.retry_after) == ("rate_limited", 86_400)
    assert "asks to wait at least 86400 s" in result.message and "retry in 86400" not in result.message


async def test_reads_are_retried_with_bounded_backoff_writes_never(tmp_path: Path, fake: FakeTime) -> None:
    async with _gateway(tmp_path, _text(connector_extra="retries: {reads: 2}\n"), fake) as h:
        seen = _scripted(
            h,
            [
                httpx2.Response(503),
                httpx2.Response(429, headers={"Retry-After": "1"}),
                httpx2.Response(200, json={"a": 1}),
            ],
        )
        result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(result, Ok) and len(seen) == 3
        assert fake.slept == [0.2, 1.0]  # jittered back-off (jitter pinned to its top), then the upstream's value
        rows = await h.store.list_audit()
        assert [r.status for r in rows] == ["ok"]  # one call, one row, however many attempts
        seen = _scripted(h, [httpx2.Response(503), httpx2.Response(200, json={})])
        result = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"})
        assert isinstance(result, ErrorResult) and len(seen) == 1  # a write is not retried
        seen = _scripted(h, [httpx2.Response(429, headers={"Retry-After": "600"}), httpx2.Response(200, json={})])
        result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(result, ErrorResult) and result.retry_after == 600 and len(seen) == 1  # too long to wait


async def test_the_circuit_opens_after_consecutive_failures_then_half_opens(tmp_path: Path, fake: FakeTime) -> None:
    text = _text(connector_extra="circuit_breaker: {threshold: 2, cooldown: 10}\n")
    async with _gateway(tmp_path, text, fake) as h:
        seen = _scripted(h, [httpx2.ConnectError("refused")])
        for _ in range(2):
            result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
            assert isinstance(result, ErrorResult) and result.reason == "upstream_unreachable"
        fast = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(fast, ErrorResult) and fast.reason == "upstream_unavailable"
        assert fast.retry_after == 10.0 and len(seen) == 2  # failed fast: nothing sent
        fake.now += 10
        _scripted(h, [httpx2.Response(200, json={})])
        assert (await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})).status == "ok"  # the trial call
        assert (await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})).status == "ok"  # closed again


async def test_a_cancelled_trial_call_lets_the_next_call_be_the_trial(tmp_path: Path, fake: FakeTime) -> None:
    text = _text(connector_extra="circuit_breaker: {threshold: 1, cooldown: 3}\n")
    async with _gateway(tmp_path, text, fake) as h:
        _scripted(h, [httpx2.ConnectError("refused")])
        assert (await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})).status == "error"  # opens
        fake.now += 3
        transport = h.gateway._http._transport  # pyright: ignore[reportPrivateUsage]
        transport.handler = h.upstream  # type: ignore[attr-defined]  # pyright: ignore[reportAttributeAccessIssue]
        with anyio.move_on_after(5) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(h.gateway.call, OPERATOR, "api.items.get", {"id": "hang"})  # the trial
                await h.upstream.hanging.wait()
                tg.cancel_scope.cancel()  # the client gives up on it
        assert not scope.cancelled_caught
        result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(result, Ok), result  # the next call was the trial, and closed the circuit
        assert (await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})).status == "ok"


async def test_a_call_the_circuit_refuses_spends_no_rate_limit_token(tmp_path: Path, fake: FakeTime) -> None:
    text = _text(
        "limits:\n  - {connector: api, rate: 0.01, burst: 2}\n", "circuit_breaker: {threshold: 1, cooldown: 3}\n"
    )
    async with _gateway(tmp_path, text, fake) as h:
        _scripted(h, [httpx2.Response(503), httpx2.Response(200, json={})])
        assert (await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})).status == "error"  # a token; opens
        for _ in range(3):
            refused = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
            assert isinstance(refused, ErrorResult) and refused.reason == "upstream_unavailable"
        fake.now += 3
        assert (await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})).status == "ok"  # the second token


async def test_a_circuit_that_opens_during_retries_says_when_to_retry(tmp_path: Path, fake: FakeTime) -> None:
    text = _text(connector_extra="circuit_breaker: {threshold: 2, cooldown: 20}\nretries: {reads: 3}\n")
    async with _gateway(tmp_path, text, fake) as h:
        seen = _scripted(h, [httpx2.Response(503)])
        result = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(result, ErrorResult) and result.reason == "upstream_unavailable" and len(seen) == 2
        assert (result.upstream_status, result.retry_after) == (503, 20.0)
        assert result.hint and "Wait 20 s" in result.hint and "Not retried" in result.message
        rows = await h.store.list_audit()
        assert [(r.reason, r.upstream_status) for r in rows] == [("upstream_unavailable", 503)]


@pytest.mark.parametrize(
    "broken", [httpx2.RemoteProtocolError("garbage"), httpx2.DecodingError("cut gzip")], ids=["garbage", "cut"]
)
async def test_a_broken_exchange_counts_as_a_failure(tmp_path: Path, fake: FakeTime, broken: Exception) -> None:
    text = _text(connector_extra="circuit_breaker: {threshold: 3, cooldown: 10}\n")
    async with _gateway(tmp_path, text, fake) as h:
        seen = _scripted(h, [httpx2.Response(503), broken, httpx2.Response(503), broken])
        for _ in range(3):
            failed = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
            assert isinstance(failed, ErrorResult) and failed.reason == "upstream_error"
        fast = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(fast, ErrorResult) and fast.reason == "upstream_unavailable" and len(seen) == 3
        fake.now += 10
        assert (await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})).status == "error"  # the trial: broken
        fast = await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"})
        assert isinstance(fast, ErrorResult) and fast.reason == "upstream_unavailable" and len(seen) == 4


async def test_a_reload_keeps_buckets_calls_in_flight_and_open_circuits() -> None:
    text = _text(
        "limits:\n  - {connector: api, concurrency: 1}\n  - {action: 'api.items.*', rate: 0.01, burst: 1}\n",
        "circuit_breaker: {threshold: 1, cooldown: 60}\n",
    )
    fake = FakeTime()
    gate = TrafficGate(clock=fake)
    action = Action(
        connector="api", path="items.get", risk="read", binding=HttpBinding(method="GET", url="/items/{id}")
    )
    running = await gate.admit(parse_manifest(text), OPERATOR, action)
    assert not isinstance(running, ErrorResult)
    refused = await gate.admit(parse_manifest(text + "# a comment\n"), OPERATOR, action)  # reloaded
    assert isinstance(refused, ErrorResult) and "in flight" in refused.message
    running.release()
    refused = await gate.admit(parse_manifest(text), OPERATOR, action)
    assert isinstance(refused, ErrorResult) and refused.reason == "rate_limited"  # the action's bucket stays empty
    gate.outcome("api", failed=True)
    refused = await gate.admit(parse_manifest(text), OPERATOR, action)
    assert isinstance(refused, ErrorResult) and refused.reason == "upstream_unavailable"
    # New breaker settings start a new circuit (closed); the bucket is still the rule's.
    changed = parse_manifest(text.replace("cooldown: 60", "cooldown: 30"))
    refused = await gate.admit(changed, OPERATOR, action)
    assert isinstance(refused, ErrorResult) and refused.reason == "rate_limited"


# -- PostgreSQL: one limit across instances ----------------------------------------------------------------


async def test_a_limit_holds_across_two_instances_on_postgres(postgres_url: str, tmp_path: Path) -> None:
    from mcp_gateway.store.postgres import PostgresBuckets, PostgresStore

    manifest = parse_manifest(_text("limits:\n  - {connector: api, rate: 10, burst: 10}\n"))
    action = Action(
        connector="api", path="items.get", risk="read", binding=HttpBinding(method="GET", url="/items/{id}")
    )
    async with PostgresStore(postgres_url) as one, PostgresStore(postgres_url) as two:
        gates = [TrafficGate(shared=PostgresBuckets(one)), TrafficGate(shared=PostgresBuckets(two))]
        allowed = refused = 0
        started = anyio.current_time()
        for i in range(60):  # alternating instances, as a load balancer would
            got = await gates[i % 2].admit(manifest, OPERATOR, action)
            if isinstance(got, ErrorResult):
                assert got.reason == "rate_limited" and got.retry_after is not None
                refused += 1
            else:
                got.release()
                allowed += 1
        elapsed = anyio.current_time() - started
    # The burst of 10 plus what 10/s refilled meanwhile: the two instances share one bucket.
    assert 10 <= allowed <= 10 + 10 * elapsed + 1, (allowed, elapsed)
    assert allowed + refused == 60


async def test_a_200_whose_body_says_it_failed_is_an_error(tmp_path: Path, fake: FakeTime) -> None:
    # Slack answers {"ok": false, "error": ...} with HTTP 200: told "ok", an agent reported a message
    # posted that never was.
    async with _gateway(tmp_path, _text(), fake) as h:
        _scripted(h, [httpx2.Response(200, json={"ok": False, "error": "channel_not_found"})])
        write = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"})
        assert isinstance(write, ErrorResult), write
        assert (write.reason, write.upstream_status) == ("upstream_error", 200)
        assert write.upstream_message and "channel_not_found" in write.upstream_message
        assert write.hint and "took effect" in write.hint
        _scripted(h, [httpx2.Response(200, json={"ok": True, "channel": "C1"})])
        assert isinstance(await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"}), Ok)
        _scripted(h, [httpx2.Response(200, json={"ok": False, "count": 0})])  # a field named ok, no error
        assert isinstance(await h.gateway.call(OPERATOR, "api.items.get", {"id": "1"}), Ok)


@pytest.mark.parametrize(("status", "says"), [(409, "do not just repeat it"), (412, "precondition"), (402, "payment")])
async def test_a_conflict_or_a_failed_precondition_is_not_told_to_check_the_arguments(
    tmp_path: Path, fake: FakeTime, status: int, says: str
) -> None:
    # "Check the arguments against describe" after a 409 on a write invited a duplicate.
    async with _gateway(tmp_path, _text(), fake) as h:
        _scripted(h, [httpx2.Response(status, json={"message": "nope"})])
        result = await h.gateway.call(OPERATOR, "api.items.create", {"name": "x"})
    assert isinstance(result, ErrorResult) and result.upstream_status == status
    assert result.hint and says in result.hint and "Check the arguments" not in result.hint
