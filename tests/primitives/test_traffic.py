"""Rate limits, concurrency caps and the circuit breaker (``traffic``), on a clock that moves when told."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from mcp_gateway.primitives.traffic import (
    Admission,
    CircuitBreaker,
    LimitRule,
    MemoryBuckets,
    Refusal,
    Scope,
    TrafficControl,
)


class Tick:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def everyone(_: str) -> bool:
    return True


def rule(
    scope: Scope = "connector", *, rate: float | None = None, burst: float | None = None, concurrency: int | None = None
) -> LimitRule:
    return LimitRule(scope=scope, matches=everyone, name=f"{scope}:*", rate=rate, burst=burst, concurrency=concurrency)


async def admit(
    tc: TrafficControl, agent: str = "bot", connector: str = "github", action: str = "github.repos.get"
) -> Admission | Refusal:
    return await tc.admit(agent=agent, connector=connector, action=action)


@pytest.mark.anyio
async def test_a_token_bucket_allows_its_rate_over_time() -> None:
    tick = Tick()
    tc = TrafficControl([rule(rate=10, burst=10)], clock=tick)
    ok = sum([isinstance(await admit(tc), Admission) for _ in range(50)])  # 50 at once: the burst gets through
    assert ok == 10
    refused = await admit(tc)
    assert isinstance(refused, Refusal) and refused.reason == "rate_limited" and refused.retry_after == 0.1
    total = 0
    for _ in range(250):  # 50/s offered for 5 s against 10/s
        tick.now += 0.02
        total += isinstance(await admit(tc), Admission)
    assert 49 <= total <= 51


@pytest.mark.anyio
async def test_each_subject_has_its_own_bucket() -> None:
    tc = TrafficControl([rule("agent", rate=1, burst=1)], clock=Tick())
    assert isinstance(await admit(tc, agent="a"), Admission)
    assert isinstance(await admit(tc, agent="b"), Admission)
    assert isinstance(await admit(tc, agent="a"), Refusal)


@pytest.mark.anyio
async def test_a_refusal_takes_no_token_from_the_other_buckets() -> None:
    tick = Tick()
    agent_rule = LimitRule(scope="agent", matches=everyone, name="agent:*", rate=1, burst=5)
    action_rule = LimitRule(
        scope="action", matches=lambda n: n.endswith(".delete"), name="action:*.delete", rate=1, burst=1
    )
    tc = TrafficControl([agent_rule, action_rule], clock=tick)
    assert isinstance(await admit(tc, action="x.delete"), Admission)
    for _ in range(3):
        assert isinstance(await admit(tc, action="x.delete"), Refusal)  # the action's bucket is empty …
    assert sum([isinstance(await admit(tc, action="x.get"), Admission) for _ in range(5)]) == 4  # … the agent's kept 4


@pytest.mark.anyio
async def test_an_action_pattern_is_one_bucket_for_every_action_it_matches() -> None:
    deletes = LimitRule(scope="action", matches=lambda n: ".delete" in n, name="action:*.delete*", rate=0.1)
    tc = TrafficControl([deletes], clock=Tick())
    assert isinstance(await admit(tc, action="github.repos.delete"), Admission)
    refused = await admit(tc, action="github.repos.deleteBranch")
    assert isinstance(refused, Refusal) and refused.scope == "action:*.delete*"
    assert isinstance(await admit(tc, action="github.repos.get"), Admission)  # not matched: not limited


@pytest.mark.anyio
async def test_new_rules_keep_the_buckets_and_the_calls_in_flight() -> None:
    tc = TrafficControl([rule(rate=0.01, burst=1), rule("agent", concurrency=1)], clock=Tick())
    running = await admit(tc)
    assert isinstance(running, Admission)
    tc.adopt([rule(rate=0.01, burst=1), rule("agent", concurrency=1)])  # a reload that changed nothing
    refused = await admit(tc)
    assert isinstance(refused, Refusal) and "in flight" in refused.message
    running.release()
    refused = await admit(tc)
    assert isinstance(refused, Refusal) and refused.reason == "rate_limited" and refused.retry_after > 90


@pytest.mark.anyio
async def test_concurrency_caps_hold_slots_until_released() -> None:
    tc = TrafficControl([rule(concurrency=2)], clock=Tick())
    first, second = await admit(tc), await admit(tc)
    assert isinstance(first, Admission) and isinstance(second, Admission)
    third = await admit(tc)
    assert isinstance(third, Refusal) and "in flight" in third.message
    with first:
        pass
    first.release()  # releasing twice frees one slot, not two
    assert isinstance(await admit(tc), Admission)
    assert isinstance(await admit(tc), Refusal)


@pytest.mark.anyio
async def test_no_rules_admit_everything() -> None:
    tc = TrafficControl([])
    assert not tc and all([isinstance(await admit(tc), Admission) for _ in range(100)])


class SlowSharedBuckets:
    """A shared bucket store whose every round trip lets other tasks run (as a database's does)."""

    def __init__(self, tick: Tick) -> None:
        self._memory = MemoryBuckets()
        self._tick = tick
        self.given_back: list[str] = []

    async def take(self, key: str, *, rate: float, capacity: float) -> float:
        await anyio.lowlevel.checkpoint()
        return self._memory.take(key, rate=rate, capacity=capacity, now=self._tick())

    async def give_back(self, key: str, *, rate: float, capacity: float) -> None:
        await anyio.lowlevel.checkpoint()
        self.given_back.append(key)
        self._memory.give_back(key, capacity=capacity)


@pytest.mark.anyio
async def test_with_a_shared_store_the_cap_is_checked_again_after_the_tokens_and_they_go_back() -> None:
    tick = Tick()
    shared = SlowSharedBuckets(tick)
    tc = TrafficControl([rule(rate=1, burst=2, concurrency=1)], clock=tick, shared=shared)
    results: list[Admission | Refusal] = []

    async def one() -> None:
        results.append(await admit(tc))

    async with anyio.create_task_group() as tg:  # both pass the first cap check, then wait for the store
        tg.start_soon(one)
        tg.start_soon(one)
    admitted = [r for r in results if isinstance(r, Admission)]
    refused = [r for r in results if isinstance(r, Refusal)]
    assert len(admitted) == 1 and len(refused) == 1 and "in flight" in refused[0].message
    assert shared.given_back == ["connector:*\0github"]  # the refused call's token went back …
    admitted[0].release()
    assert isinstance(await admit(tc), Admission)  # … so the burst of 2 still has one for the next call


def test_the_circuit_opens_after_consecutive_failures_then_lets_one_trial_through() -> None:
    tick = Tick()
    breaker = CircuitBreaker(threshold=3, cooldown=30, clock=tick)
    for _ in range(2):
        breaker.failed("slow")
    breaker.succeeded("slow")  # not consecutive any more
    for _ in range(3):
        assert isinstance(breaker.admit("slow"), Admission)
        breaker.failed("slow")
    refusal = breaker.admit("slow")
    assert isinstance(refusal, Refusal) and refusal.reason == "upstream_unavailable" and refusal.retry_after == 30
    assert breaker.state("slow") == "open" and isinstance(breaker.admit("other"), Admission)
    tick.now += 30
    assert isinstance(breaker.admit("slow"), Admission)  # the trial call
    assert isinstance(breaker.admit("slow"), Refusal)  # the others wait for its outcome
    breaker.failed("slow")
    assert breaker.state("slow") == "open"
    tick.now += 30
    assert isinstance(breaker.admit("slow"), Admission)
    breaker.succeeded("slow")
    assert breaker.state("slow") == "closed" and isinstance(breaker.admit("slow"), Admission)


def test_a_trial_released_without_an_outcome_lets_the_next_call_be_the_trial() -> None:
    tick = Tick()
    breaker = CircuitBreaker(threshold=1, cooldown=5, clock=tick)
    breaker.failed("slow")
    tick.now += 5
    trial = breaker.admit("slow")
    assert isinstance(trial, Admission) and isinstance(breaker.admit("slow"), Refusal)
    trial.release()  # cancelled: neither a success nor a failure
    assert breaker.state("slow") == "half_open"
    second = breaker.admit("slow")
    assert isinstance(second, Admission)
    breaker.failed("slow")  # its outcome opens the circuit again …
    tick.now += 5
    third = breaker.admit("slow")
    assert isinstance(third, Admission)
    second.release()  # … so releasing it later frees nothing: the third call's trial stands
    assert isinstance(breaker.admit("slow"), Refusal)
    third.release()
    assert breaker.refusal("slow") is not None and isinstance(breaker.admit("slow"), Admission)


def test_breaker_arguments_are_checked() -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(threshold=0)


@pytest.mark.anyio
async def test_discovery_has_its_own_more_generous_bucket_per_agent() -> None:
    tick = Tick()
    tc = TrafficControl([rule("agent", rate=1, burst=2)], clock=tick)
    assert [isinstance(await admit(tc), Admission) for _ in range(3)] == [True, True, False]  # the calls' bucket
    # An empty call bucket leaves discovery alone: 4 times the burst, then a refusal that says why.
    assert [await tc.admit_discovery(agent="bot") for _ in range(8)] == [None] * 8
    refused = await tc.admit_discovery(agent="bot")
    assert refused is not None and refused.reason == "rate_limited" and refused.retry_after == 0.3
    assert refused.scope == "agent:* (discovery)" and "4 discover or describe requests/s" in refused.message
    assert await tc.admit_discovery(agent="other") is None  # every agent has its own
    tick.now += 0.25  # 4/s: one more token
    assert await tc.admit_discovery(agent="bot") is None
    # ... and discovery takes nothing from the call bucket.
    tick.now += 1.0
    assert isinstance(await admit(tc), Admission)
    assert await TrafficControl([rule("connector", rate=1, burst=1)], clock=tick).admit_discovery(agent="bot") is None
