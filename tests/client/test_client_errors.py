"""Client error mapping and retry policy, at the transport boundary (httpx.MockTransport)."""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from rewardhub_client import (
    APIError,
    AsyncRewardClient,
    Conflict,
    Forbidden,
    InvalidRequest,
    LimitExceeded,
    NotConfigured,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    RequestTimeout,
    RetryPolicy,
    RewardClient,
    RewardHubClientError,
    ServerError,
    ServiceUnavailable,
    TransportError,
    Unauthorized,
    UnknownReward,
)
from rewardhub_client._core import transient

FAST = RetryPolicy(max_retries=3, backoff_s=0.001, max_backoff_s=0.01)
OK_BODY: dict[str, Any] = {
    "request_id": "req_1",
    "results": [
        {
            "id": "0",
            "reward": "math",
            "score": 1.0,
            "valid": True,
            "reason": None,
            "components": {},
            "details": {},
            "cached": False,
            "reward_version": "1",
            "latency_ms": 0.1,
        }
    ],
    "metrics": {"items": 1},
}


def error(status: int, etype: str | None, headers: dict[str, str] | None = None) -> httpx.Response:
    body = {"error": {"message": f"{etype} happened", "type": etype, "param": "items.0", "code": status}}
    return httpx.Response(status, json=body, headers=headers)


def too_many_items() -> httpx.Response:
    """The service's refusal of a request over its item limit (param ``items``: the count, which a
    client can split, not an item's field)."""
    body = {"error": {"message": "too many", "type": "limit_exceeded", "param": "items", "code": 422}}
    return httpx.Response(422, json=body)


def answered(items: list[dict[str, Any]]) -> httpx.Response:
    """A 200 with one valid result per item sent, each with its id."""
    results = [{**OK_BODY["results"][0], "id": it["id"]} for it in items]
    return httpx.Response(200, json={**OK_BODY, "results": results})


def client_for(handler: Callable[[httpx.Request], httpx.Response], retry: RetryPolicy = FAST) -> RewardClient:
    return RewardClient("http://svc", transport=httpx.MockTransport(handler), retry=retry)


@pytest.mark.parametrize(
    "status, etype, cls",
    [
        (422, "invalid_request", InvalidRequest),
        (422, "limit_exceeded", LimitExceeded),
        (413, "payload_too_large", PayloadTooLarge),
        (401, "unauthorized", Unauthorized),
        (403, "forbidden", Forbidden),
        (404, "unknown_reward", UnknownReward),
        (404, "not_found", NotFound),
        (409, "conflict", Conflict),
        (500, "internal_error", ServerError),
        (501, "not_configured", NotConfigured),
        (418, None, APIError),  # an unknown status without a body type falls back to APIError
    ],
)
def test_each_error_maps_to_its_class(status: int, etype: str | None, cls: type[APIError]) -> None:
    with client_for(lambda r: error(status, etype)) as c, pytest.raises(cls) as info:
        c.score([{"response": "x"}], "math")
    assert info.value.status_code == status
    assert info.value.error_type == etype
    if etype:
        assert info.value.param == "items.0" and f"{etype} happened" in info.value.message


def test_unknown_reward_is_a_not_found() -> None:
    assert issubclass(UnknownReward, NotFound) and issubclass(LimitExceeded, InvalidRequest)


def test_non_json_error_body() -> None:
    with client_for(
        lambda r: httpx.Response(502, text="bad gateway from proxy"), RetryPolicy(max_retries=0)
    ) as c:
        with pytest.raises(ServerError, match="bad gateway from proxy"):
            c.health()


@pytest.mark.parametrize(
    "body, said",
    [
        ({"detail": "Invalid API key"}, "Invalid API key"),  # FastAPI's own shape, an auth proxy's
        ({"error": "rate limit: 100 requests per minute"}, "rate limit: 100 requests per minute"),
        ({"message": "model is loading"}, "model is loading"),
        ({"errors": [{"code": 7}]}, '"code":7'),
    ],
)
def test_a_json_error_body_outside_the_envelope_keeps_its_message(body: Any, said: str) -> None:
    # A JSON error body not in the service's envelope (a gateway's, an auth proxy's) lost what it said:
    # "401 error: Unauthorized", where a text body's words were kept.
    with client_for(lambda r: httpx.Response(401, json=body)) as c, pytest.raises(Unauthorized) as info:
        c.health()
    assert said in info.value.message and said in str(info.value)


def test_429_is_retried_honouring_retry_after() -> None:
    calls: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(time.monotonic())
        if len(calls) < 3:
            return error(429, "overloaded", {"Retry-After": "1"})
        return httpx.Response(200, json=OK_BODY)

    with client_for(handler) as c:
        resp = c.score([{"response": "x"}], "math")
    assert resp.scores == [1.0] and len(calls) == 3
    assert calls[1] - calls[0] >= 0.95 and calls[2] - calls[1] >= 0.95  # waited as told, not the tiny backoff


def test_gives_up_after_max_retries() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return error(503, "unavailable")

    with client_for(handler) as c, pytest.raises(ServiceUnavailable):
        c.score([{"response": "x"}], "math")
    assert len(calls) == 1 + FAST.max_retries


def test_4xx_is_never_retried() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return error(422, "invalid_request")

    with client_for(handler) as c, pytest.raises(InvalidRequest):
        c.score([{"response": "x"}], "math")
    assert len(calls) == 1


def test_transport_errors_are_retried_then_raised() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.ConnectError("connection refused", request=request)

    with client_for(handler) as c, pytest.raises(TransportError):
        c.rewards()
    assert len(calls) == 1 + FAST.max_retries


def test_overloaded_carries_retry_after() -> None:
    with client_for(
        lambda r: error(429, "overloaded", {"Retry-After": "7"}), RetryPolicy(max_retries=0)
    ) as c:
        with pytest.raises(Overloaded) as info:
            c.score([{"response": "x"}], "math")
    assert info.value.retry_after_s == 7.0


def test_retry_after_as_an_http_date() -> None:
    # RFC 9110 allows Retry-After as an HTTP-date (what a proxy or gateway in front of the service sends):
    # it was read as no Retry-After at all, so the client came back after its tiny backoff.
    def refused(headers: dict[str, str]) -> Overloaded:
        with client_for(lambda r: error(429, "overloaded", headers), RetryPolicy(max_retries=0)) as c:
            with pytest.raises(Overloaded) as info:
                c.score([{"response": "x"}], "math")
        return info.value

    later = email.utils.format_datetime(
        datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=120), usegmt=True
    )
    waited = refused({"Retry-After": later}).retry_after_s
    assert waited is not None and 100.0 < waited <= 120.0
    assert refused({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}).retry_after_s == 0.0  # in the past
    assert refused({"Retry-After": "soon"}).retry_after_s is None
    assert refused({"Retry-After": "inf"}).retry_after_s is None  # would sleep forever


@pytest.mark.timeout(30)
@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_retry_after_past_the_cap_is_raised_not_slept_through(asynchronous: bool) -> None:
    # A gateway's quota answered 429 with Retry-After: 86400 (or an HTTP-date a day off): the client slept
    # a day before its retry, max_retries times over, the training step blocked without a word.
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return error(429, "overloaded", {"Retry-After": "86400"})

    retry = RetryPolicy(max_retries=3, backoff_s=0.001, max_backoff_s=0.01, max_retry_after_s=60.0)
    with pytest.raises(Overloaded) as info:
        if asynchronous:

            async def run() -> None:
                transport = httpx.MockTransport(handler)
                async with AsyncRewardClient("http://svc", transport=transport, retry=retry) as c:
                    await c.score([{"response": "x"}], "math")

            asyncio.run(run())
        else:
            with client_for(handler, retry) as c:
                c.score([{"response": "x"}], "math")
    assert info.value.retry_after_s == 86400.0 and len(calls) == 1
    assert RetryPolicy().max_retry_after_s <= 300  # the default does not sleep for hours either


async def test_async_client_maps_and_retries() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return (
            error(429, "overloaded", {"Retry-After": "0"})
            if len(calls) == 1
            else httpx.Response(200, json=OK_BODY)
        )

    async with AsyncRewardClient("http://svc", transport=httpx.MockTransport(handler), retry=FAST) as c:
        assert (await c.score([{"response": "x"}], "math")).scores == [1.0]
    assert len(calls) == 2

    async with AsyncRewardClient(
        "http://svc", transport=httpx.MockTransport(lambda r: error(403, "forbidden"))
    ) as c:
        with pytest.raises(Forbidden):
            await c.score([{"response": "x"}], "math")


def test_api_key_and_idempotency_headers_are_sent() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(
            202, json={"job_id": "job_1", "status": "queued", "created_at": 1.0, "items": 1}
        )

    with RewardClient("http://svc", api_key="secret", transport=httpx.MockTransport(handler)) as c:
        job = c.submit_job([{"response": "x"}], "math", idempotency_key="k1")
    assert job.job_id == "job_1" and job.status == "queued"
    assert seen[0].headers["authorization"] == "Bearer secret"
    assert seen[0].headers["idempotency-key"] == "k1"


def test_a_late_score_answer_is_not_sent_again() -> None:
    # The service is still scoring a request whose answer is late: a copy would only queue the same work.
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        raise httpx.ReadTimeout("timed out", request=request)

    with client_for(handler) as c, pytest.raises(RequestTimeout, match="not sent again"):
        c.score([{"response": "x"}], "math")
    assert calls == ["/v1/score"]
    calls.clear()
    with client_for(handler) as c, pytest.raises(RequestTimeout):
        c.rewards()  # a read is sent again as before
    assert len(calls) == 1 + FAST.max_retries


async def test_async_late_score_answer_is_not_sent_again() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        raise httpx.ReadTimeout("timed out", request=request)

    transport = httpx.MockTransport(handler)
    async with AsyncRewardClient("http://svc", transport=transport, retry=FAST) as c:
        with pytest.raises(RequestTimeout, match="not sent again"):
            await c.score([{"response": "x"}], "math")
    assert calls == ["/v1/score"]


def test_score_read_timeout_outlasts_the_requested_deadline() -> None:
    seen: list[dict[str, float | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["timeout"])
        return httpx.Response(200, json=OK_BODY)

    with RewardClient("http://svc", timeout=5.0, transport=httpx.MockTransport(handler)) as c:
        c.score([{"response": "x"}], "math", timeout_s=60)
        c.score([{"response": "x"}], "math")
    assert seen[0]["read"] == 75.0 and seen[0]["connect"] == 5.0
    assert seen[1]["read"] == 5.0


def test_retry_after_is_a_floor_with_a_growing_spread() -> None:
    policy = RetryPolicy(backoff_s=0.5, max_backoff_s=30.0)
    for attempt in range(5):
        delays = [policy.delay(attempt, retry_after_s=1.0) for _ in range(50)]
        assert all(1.0 + 0.25 * 2**attempt <= d <= 1.0 + 0.5 * 2**attempt for d in delays)
        assert max(delays) - min(delays) > 0.05 * 2**attempt  # not all back at the same moment


async def test_chunks_refused_together_do_not_come_back_together() -> None:
    # A model queue with room for one chunk at a time, drained in 20 ms, refuses the rest with the same
    # Retry-After. Chunks that waited exactly that long came back at one moment and were refused again
    # (one got in per round), so a batch of 8 failed after 1 + max_retries rounds.
    busy_until = 0.0
    admitted: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal busy_until
        now = time.monotonic()
        if now < busy_until:
            return error(429, "overloaded", {"Retry-After": "0.1"})
        busy_until = now + 0.02
        item_id = json.loads(request.content)["items"][0]["id"]
        admitted.append(item_id)
        body = {**OK_BODY, "results": [{**OK_BODY["results"][0], "id": item_id}]}
        return httpx.Response(200, json=body)

    retry = RetryPolicy(max_retries=5, backoff_s=0.1, max_backoff_s=1.0)
    transport = httpx.MockTransport(handler)
    async with AsyncRewardClient(
        "http://svc", transport=transport, retry=retry, chunk_size=1, max_concurrency=8
    ) as c:
        resp = await c.score([{"id": f"i{k}", "response": "x"} for k in range(8)], "math")
    assert [r.id for r in resp.results] == [f"i{k}" for k in range(8)]  # item order kept
    assert sorted(admitted) == sorted(f"i{k}" for k in range(8))  # each chunk scored once


async def test_a_failed_chunk_stops_the_other_chunks() -> None:
    # score() raised for one chunk while the others went on in the background, retrying against the
    # service for a result nobody would read. (It slept 0.3 s after the raise and looked for requests sent
    # meanwhile: on a loaded host the retries might not come round in that time, and it passed anyway.)
    # The chunks are tasks: none of them may outlive the raise. Their retries would go on for a minute.
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        item_id = json.loads(request.content)["items"][0]["id"]
        sent.append(item_id)
        if item_id == "bad":
            return error(422, "invalid_request")
        return error(429, "overloaded", {"Retry-After": "0.05"})

    retry = RetryPolicy(max_retries=1000, backoff_s=0.01, max_backoff_s=0.02)
    transport = httpx.MockTransport(handler)
    async with AsyncRewardClient(
        "http://svc", transport=transport, retry=retry, chunk_size=1, max_concurrency=4
    ) as c:
        items = [{"id": i, "response": "x"} for i in ("a", "b", "bad", "c")]
        before = asyncio.all_tasks()
        with pytest.raises(InvalidRequest):
            await c.score(items, "math")
        left = asyncio.all_tasks() - before
    assert "bad" in sent
    assert not left, left  # and none of them goes on sending


def test_sync_client_splits_a_chunk_over_the_byte_limit() -> None:
    # A body over the service's limit got a 413 for the whole batch; the sync client now splits the refused
    # chunk along group lines, as the async one does (tested against the real app in test_client_roundtrip).
    sent: list[list[str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        items = json.loads(request.content)["items"]
        if len(request.content) > 30_000:
            return error(413, "payload_too_large")
        sent.append([it["group"] for it in items])
        return answered(items)

    items = [{"id": f"i{k}", "response": "x" * 2000, "group": f"g{k % 8}"} for k in range(40)]
    with client_for(handler) as c:
        resp = c.score(items, "math")
        assert [r.id for r in resp.results] == [f"i{k}" for k in range(40)]
        assert sorted(g for groups in sent for g in groups) == sorted(f"g{k % 8}" for k in range(40))
        assert all(groups.count(g) == 5 for groups in sent for g in groups)
        with pytest.raises(PayloadTooLarge):  # one group over the limit: nothing to split
            c.score([{**it, "group": "one"} for it in items], "math")


def test_sync_client_splits_a_chunk_over_the_item_limit() -> None:
    # The service's item limit (REWARDHUB_MAX_ITEMS) below chunk_size refused the batch whole; the chunk is
    # now split along group lines as one over the byte limit is. A field over its limit (a param naming an
    # item's field) is not about the count: splitting cannot help, it is raised.
    sent: list[list[str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        items = json.loads(request.content)["items"]
        if len(items) > 12:
            return too_many_items()
        if any(len(it["response"]) > 100 for it in items):
            return error(422, "limit_exceeded")  # param items.0: a field
        sent.append([it["group"] for it in items])
        return answered(items)

    items = [{"id": f"i{k}", "response": "x", "group": f"g{k % 8}"} for k in range(40)]
    with client_for(handler) as c:
        resp = c.score(items, "math")
        assert [r.id for r in resp.results] == [f"i{k}" for k in range(40)]
        assert sorted(g for groups in sent for g in groups) == sorted(f"g{k % 8}" for k in range(40))
        assert all(groups.count(g) == 5 for groups in sent for g in groups)
        with pytest.raises(LimitExceeded):  # one group over the limit: nothing to split
            c.score([{**it, "group": "one"} for it in items], "math")
        with pytest.raises(LimitExceeded):  # a field too long: not split
            c.score([{**it, "response": "x" * 200} for it in items[:8]], "math")


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_chunk_size_the_service_refused_is_not_tried_again(asynchronous: bool) -> None:
    """Splitting a refused chunk in halves repeated on every call: against an item limit of 12, each
    1024-item batch cost 127 refused requests before its first accepted one, call after call. The client
    now sends later batches in chunks no larger than the largest one accepted after a split."""
    refused: list[tuple[int, int]] = []  # (call, items)
    call = [0]

    def handler(request: httpx.Request) -> httpx.Response:
        items = json.loads(request.content)["items"]
        if len(items) > 12:
            refused.append((call[0], len(items)))
            return too_many_items()
        return answered(items)

    items = [{"id": f"i{k}", "response": "x"} for k in range(200)]
    answers: list[list[str]] = []
    if asynchronous:

        async def run() -> None:
            async with AsyncRewardClient(
                "http://svc", transport=httpx.MockTransport(handler), retry=FAST
            ) as c:
                for k in range(2):
                    call[0] = k
                    answers.append([r.id for r in (await c.score(items, "math")).results])

        asyncio.run(run())
    else:
        with client_for(handler) as c:
            for k in range(2):
                call[0] = k
                answers.append([r.id for r in c.score(items, "math").results])
    assert answers[0] == answers[1] == [f"i{k}" for k in range(200)]
    assert (0, 200) in refused  # the first call learnt by splitting
    assert [r for r in refused if r[0] == 1] == []  # the second sent nothing the service refuses


def test_a_byte_limit_split_is_not_remembered() -> None:
    """The byte limit (413) depends on the items sent, so one batch of long responses must not shrink
    the chunks of every later batch: only the item limit, a property of the service, is remembered."""
    sizes: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        items = json.loads(request.content)["items"]
        sizes.append(len(items))
        if sum(len(it["response"]) for it in items) > 1000:
            return error(413, "payload_too_large")
        return answered(items)

    with client_for(handler) as c:
        c.score([{"id": f"l{k}", "response": "x" * 100} for k in range(64)], "math")  # split to 8s
        sizes.clear()
        c.score([{"id": f"s{k}", "response": "x"} for k in range(64)], "math")
    assert sizes == [64]  # short items: one request, as before


def test_an_answer_with_the_wrong_number_of_results_is_a_protocol_error() -> None:
    """One result per item is the contract. A one-chunk answer was returned as it came: a trainer that
    zipped its rollouts with a short list gave rewards to the wrong rollouts (or dropped some)."""
    from rewardhub_client import ProtocolError

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=OK_BODY)  # one result, whatever was asked

    with RewardClient("http://svc", transport=httpx.MockTransport(handler), retry=FAST) as c:
        assert len(c.score([{"response": "x"}], "math").results) == 1
        with pytest.raises(ProtocolError, match="1 results for 2 items"):
            c.score([{"response": "x"}, {"response": "y"}], "math")
    chunked = RewardClient("http://svc", transport=httpx.MockTransport(handler), retry=FAST, chunk_size=2)
    with chunked as c, pytest.raises(ProtocolError):  # each chunk is checked too
        c.score([{"response": str(k)} for k in range(4)], "math")


def _reordered(request: httpx.Request) -> httpx.Response:
    """A service that answers every item, in the wrong order (its results reversed)."""
    return answered(json.loads(request.content)["items"][::-1])


def _misnumbered(request: httpx.Request) -> httpx.Response:
    """A service that answers every item in order but numbers them 0, 1, ... within its request."""
    answer = answered(json.loads(request.content)["items"])
    body = json.loads(answer.content)
    body["results"] = [{**r, "id": str(k)} for k, r in enumerate(body["results"])]
    return httpx.Response(200, json=body)


def test_an_answer_whose_ids_are_not_its_items_is_a_protocol_error() -> None:
    """The trainer and the adapters pair results with items by position, and only the count was checked:
    a 200 with the results reordered (or numbered as another request's) gave each reward to another
    completion. Each result's id must be its item's: the item's own, else its index in the batch (the id
    the client sends for it)."""
    from rewardhub_client import ProtocolError

    ours = [{"id": "a", "response": "x"}, {"id": "b", "response": "y"}]
    with client_for(_reordered) as c:
        with pytest.raises(ProtocolError, match=r"result 0 has id 'b'.*item 0 is 'a'"):
            c.score(ours, "math")
        with pytest.raises(ProtocolError, match=r"result 0 has id '1'.*item 0 is '0'"):
            c.score([{"response": "x"}, {"response": "y"}], "math")  # the index ids the client sends
        assert [r.id for r in c.score([{"response": "x"}], "math").results] == ["0"]
    # chunked: the second chunk's items go as "2", "3"; an answer numbering them "0", "1" is refused
    chunked = RewardClient(
        "http://svc", transport=httpx.MockTransport(_misnumbered), retry=FAST, chunk_size=2
    )
    with chunked as c:
        with pytest.raises(ProtocolError, match=r"result 2 has id '0'.*item 2 is '2'"):
            c.score([{"response": str(k)} for k in range(4)], "math")
        assert [r.id for r in c.score([{"response": "x"}, {"response": "y"}], "math").results] == ["0", "1"]

    async def run() -> None:
        async with AsyncRewardClient(
            "http://svc", transport=httpx.MockTransport(_reordered), retry=FAST, chunk_size=2
        ) as ac:
            with pytest.raises(ProtocolError, match=r"result 0 has id 'b'"):
                await ac.score(ours, "math")

    asyncio.run(run())

    # a chunk failing transiently next to a misnumbered one: its results are not handed back as partial
    # results (nothing of a malformed answer is kept, as for a miscounted one)
    def down_and_misnumbered(request: httpx.Request) -> httpx.Response:
        items = json.loads(request.content)["items"]
        if items[0]["id"] == "down":
            return error(503, "unavailable")
        return _misnumbered(request) if items[0]["id"] == "b" else answered(items)

    transport = httpx.MockTransport(down_and_misnumbered)
    with RewardClient("http://svc", transport=transport, retry=FAST, chunk_size=1) as c:
        with pytest.raises(ServiceUnavailable) as info:
            c.score([{"id": i, "response": "x"} for i in ("a", "down", "b")], "math")
    assert info.value.partial_results is None


@pytest.mark.parametrize("url", ["localhost:8000", "127.0.0.1:8000", "rewardhub:8000"])
def test_a_base_url_without_its_scheme_is_refused_at_once(url: str) -> None:
    # httpx takes "localhost:8000" for a URL of scheme "localhost": every call failed with UnsupportedProtocol,
    # retried as a transport failure (about 10 s of backoff), then reported as "could not reach the service".
    with pytest.raises(ValueError, match="http://"):
        RewardClient(url)
    with pytest.raises(ValueError, match="http://"):
        AsyncRewardClient(url)


def test_wait_until_ready_probes_within_its_own_deadline() -> None:
    # Each /ready probe waited up to the client's timeout (120 s by default): behind a proxy or load
    # balancer that holds the connection open, wait_until_ready(timeout_s=5) blocked two minutes per probe.
    probes: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        probes.append(request.extensions["timeout"]["read"])
        return httpx.Response(503, json={"ready": False, "checks": {}})

    with client_for(handler) as c, pytest.raises(TransportError, match="not ready"):
        c.wait_until_ready(timeout_s=0.2, interval_s=0.05)
    assert probes and max(probes) <= 0.2

    async def run() -> None:
        transport = httpx.MockTransport(handler)
        async with AsyncRewardClient("http://svc", transport=transport, retry=FAST) as ac:
            with pytest.raises(TransportError, match="not ready"):
                await ac.wait_until_ready(timeout_s=0.2, interval_s=0.05)

    probes.clear()
    asyncio.run(run())
    assert probes and max(probes) <= 0.2


def test_wait_until_ready_says_what_is_not_ready() -> None:
    # The error said only "was not ready within 60s": a trainer whose service waited for a model backend
    # (or had no CPU workers) learnt nothing of which, though /ready's 503 names the failing checks.
    checks = {
        "cpu_pool": {"ok": True, "alive": 2},
        "model:prm": {"ok": False, "reason": "the server does not serve model 'prm-7b'"},
    }
    with (
        client_for(lambda r: httpx.Response(503, json={"ready": False, "checks": checks})) as c,
        pytest.raises(TransportError, match="not ready") as info,
    ):
        c.wait_until_ready(timeout_s=0.05, interval_s=0.01)
    assert "model:prm" in str(info.value) and "prm-7b" in str(info.value)
    assert "cpu_pool" not in str(info.value)  # only what fails

    def unreachable(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    with client_for(unreachable) as c, pytest.raises(TransportError, match="not ready") as info:
        c.wait_until_ready(timeout_s=0.05, interval_s=0.01)
    assert "connection refused" in str(info.value)


async def test_async_wait_until_ready_says_what_is_not_ready() -> None:
    # the real app before its start-up has run (ASGITransport runs no lifespan): /ready's 503 says so
    from conftest import make_settings
    from rewardhub.app import create_app

    transport = httpx.ASGITransport(app=create_app(make_settings()))
    async with AsyncRewardClient("http://rewardhub.test", transport=transport, retry=FAST) as ac:
        with pytest.raises(TransportError, match="not ready") as info:
            await ac.wait_until_ready(timeout_s=0.05, interval_s=0.01)
    assert "startup" in str(info.value)


def test_max_concurrency_below_one_is_refused() -> None:
    # max_concurrency=0 (read as "no limit") made a semaphore no chunk could ever acquire: score() hung
    # for ever without sending a request.
    with pytest.raises(ValueError, match="max_concurrency"):
        AsyncRewardClient("http://svc", max_concurrency=0)


def test_a_200_that_is_not_the_answer_is_a_protocol_error() -> None:
    # A proxy in front of the service answering 200 with its own page made pydantic's ValidationError (or
    # a KeyError) escape, outside the client's exception tree: callers catching RewardHubClientError missed it.
    from rewardhub_client import ProtocolError

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>maintenance</html>", headers={"content-type": "text/html"})

    with client_for(handler) as c:
        with pytest.raises(ProtocolError, match="maintenance"):
            c.score([{"response": "x"}], "math")
        with pytest.raises(ProtocolError):
            c.rewards()
        with pytest.raises(ProtocolError):
            c.check("math")
        with pytest.raises(ProtocolError):
            c.job("job_1")
        with pytest.raises(ProtocolError):
            c.health()

    async def run() -> None:
        async with AsyncRewardClient("http://svc", transport=httpx.MockTransport(handler), retry=FAST) as ac:
            with pytest.raises(ProtocolError, match="maintenance"):
                await ac.score([{"response": "x"}], "math")
            with pytest.raises(ProtocolError):
                await ac.rewards()

    asyncio.run(run())


def test_sync_client_names_a_refused_item_by_its_place_in_the_batch() -> None:
    # The service numbers the items of its request; the second chunk's items.1 is the batch's item 3.
    def handler(request: httpx.Request) -> httpx.Response:
        ids = [it["id"] for it in json.loads(request.content)["items"]]
        if "3" in ids:
            body = {"error": {"message": "items.1.reference: not a JSON object", "type": "invalid_request"}}
            body["error"]["param"] = "items.1.reference"
            return httpx.Response(422, json=body)
        results = [{**OK_BODY["results"][0], "id": i} for i in ids]
        return httpx.Response(200, json={**OK_BODY, "results": results})

    with RewardClient("http://svc", transport=httpx.MockTransport(handler), chunk_size=2) as c:
        with pytest.raises(InvalidRequest) as info:
            c.score([{"response": "x"}] * 4, "math")
    assert info.value.param == "items.3.reference"
    assert str(info.value) == "422 invalid_request: items.3.reference: not a JSON object"


@pytest.mark.parametrize("cls", [APIError, UnknownReward, LimitExceeded, Overloaded, ServerError])
def test_errors_survive_pickling(cls: type[APIError]) -> None:
    # Raised in a worker process (verl's reward workers, a ProcessPoolExecutor), an error is pickled back
    # to the trainer: rebuilding it as cls(*args) failed (status_code is keyword-only), and the pool broke
    # ("terminated abruptly") instead of the trainer seeing the service's message.
    import pickle

    err = cls("items.3.reference: bad", status_code=422, error_type="x", param="items.3", retry_after_s=2.0)
    err.body = {"error": {"message": "items.3.reference: bad"}}
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls and str(back) == str(err) and back.args == err.args
    assert (back.status_code, back.error_type, back.param, back.retry_after_s) == (422, "x", "items.3", 2.0)
    assert back.message == err.message and back.body == err.body


def test_reward_unavailable_survives_pickling() -> None:
    import pickle

    from rewardhub_client import RewardCheck, RewardUnavailable

    check = RewardCheck.model_validate(
        {
            "name": "prm",
            "version": "1",
            "cacheable": True,
            "ok": False,
            "unavailable": [{"where": "reward", "reward": "prm", "message": "set REWARDHUB_PRM_MODEL"}],
        }
    )
    back = pickle.loads(pickle.dumps(RewardUnavailable("http://svc", check)))
    assert isinstance(back, RewardUnavailable) and back.check == check and "REWARDHUB_PRM_MODEL" in str(back)


def _one_chunk_down(handler_calls: list[str]) -> Callable[[httpx.Request], httpx.Response]:
    """Chunks of one item each; the chunk of item ``down`` is answered 503 every time, the others 200."""

    def handler(request: httpx.Request) -> httpx.Response:
        item_id = json.loads(request.content)["items"][0]["id"]
        handler_calls.append(item_id)
        if item_id == "down":
            return error(503, "unavailable")
        return httpx.Response(200, json={**OK_BODY, "results": [{**OK_BODY["results"][0], "id": item_id}]})

    return handler


async def test_a_transiently_failed_chunk_keeps_the_answered_chunks_results() -> None:
    # One chunk failing after its retries cancelled the others and raised: the rewards already answered
    # (possibly expensive judge or sandbox results) were lost with the whole batch.
    calls: list[str] = []
    transport = httpx.MockTransport(_one_chunk_down(calls))
    async with AsyncRewardClient(
        "http://svc", transport=transport, retry=FAST, chunk_size=1, max_concurrency=4
    ) as c:
        items = [{"id": i, "response": "x"} for i in ("a", "down", "b", "c")]
        with pytest.raises(ServiceUnavailable) as info:
            await c.score(items, "math")
    partial = info.value.partial_results
    assert partial is not None
    assert [r.id if r is not None else None for r in partial] == ["a", None, "b", "c"]
    assert info.value.failed_indices == [1]
    assert sorted(set(calls)) == ["a", "b", "c", "down"]


def test_sync_client_a_transiently_failed_chunk_keeps_the_others() -> None:
    # The sync client raised at the failed chunk: the chunks after it were never sent, those before it
    # were answered and thrown away.
    calls: list[str] = []
    transport = httpx.MockTransport(_one_chunk_down(calls))
    with RewardClient("http://svc", transport=transport, retry=FAST, chunk_size=1) as c:
        items = [{"id": i, "response": "x"} for i in ("a", "down", "b")]
        with pytest.raises(ServiceUnavailable) as info:
            c.score(items, "math")
    partial = info.value.partial_results
    assert partial is not None
    assert [r.id if r is not None else None for r in partial] == ["a", None, "b"]
    assert info.value.failed_indices == [1]


def test_an_unchunked_failure_carries_no_partial_results() -> None:
    """Nothing answered: the error is as before (no ``partial_results``)."""
    calls: list[str] = []
    with client_for(_one_chunk_down(calls)) as c, pytest.raises(ServiceUnavailable) as info:
        c.score([{"id": "down", "response": "x"}], "math")
    assert info.value.partial_results is None and not info.value.failed_indices


def _limit_two_first_half_down(request: httpx.Request) -> httpx.Response:
    """A service taking at most 2 items a request, whose chunk holding the item ``down`` answers 503."""
    items = json.loads(request.content)["items"]
    if len(items) > 2:
        return too_many_items()
    if any(it["response"] == "down" for it in items):
        return error(503, "unavailable")
    return answered(items)


async def test_a_half_answered_before_its_other_half_failed_is_kept() -> None:
    # A chunk over the service's item limit is sent again in halves; the async client kept a half's
    # answer only once every half was answered, so the half after it failing lost it.
    transport = httpx.MockTransport(_limit_two_first_half_down)
    async with AsyncRewardClient("http://svc", transport=transport, retry=FAST) as c:
        items = [{"response": r} for r in ("a", "b", "c", "down")]
        with pytest.raises(ServiceUnavailable) as info:
            await c.score(items, "math")
    partial = info.value.partial_results
    assert partial is not None
    assert [r.id if r is not None else None for r in partial] == ["0", "1", None, None]
    assert info.value.failed_indices == [2, 3]


async def test_a_half_that_fails_first_does_not_stop_the_half_after_it() -> None:
    """A chunk over the service's item limit is sent again in halves, one after the other; the first
    half failing after its retries raised at once, so the second was never sent and its items were
    lost with the failed ones (an adapter or the trainer masked the whole chunk). Found in review. The
    later halves are still sent and their answers kept on the error."""
    items = [{"response": r} for r in ("down", "a", "b", "c")]
    transport = httpx.MockTransport(_limit_two_first_half_down)
    async with AsyncRewardClient("http://svc", transport=transport, retry=FAST) as c:
        with pytest.raises(ServiceUnavailable) as info:
            await c.score(items, "math")
    partial = info.value.partial_results
    assert partial is not None
    assert [r.id if r is not None else None for r in partial] == [None, None, "2", "3"]
    assert info.value.failed_indices == [0, 1]
    with client_for(_limit_two_first_half_down) as sync, pytest.raises(ServiceUnavailable) as info:
        sync.score(items, "math")
    partial = info.value.partial_results
    assert partial is not None
    assert [r.id if r is not None else None for r in partial] == [None, None, "2", "3"]


def test_a_partly_answered_batch_keeps_its_results_across_pickling() -> None:
    """An APIError was pickled as its constructor's arguments only: raised in a worker process (verl's Ray
    reward workers with REWARDHUB_VERL_ON_REQUEST_FAILURE=raise, a process pool), a chunked batch's error
    reached the trainer without ``partial_results`` and ``failed_indices``, the rewards the service had
    already computed (a TransportError, pickled with its attributes, kept them)."""
    import pickle

    calls: list[str] = []
    transport = httpx.MockTransport(_one_chunk_down(calls))
    with RewardClient("http://svc", transport=transport, retry=FAST, chunk_size=1) as c:
        with pytest.raises(ServiceUnavailable) as info:
            c.score([{"id": i, "response": "x"} for i in ("a", "down", "b")], "math")
    back = pickle.loads(pickle.dumps(info.value))
    assert type(back) is ServiceUnavailable and str(back) == str(info.value)
    assert back.partial_results == info.value.partial_results and back.partial_results is not None
    assert [r.id if r is not None else None for r in back.partial_results] == ["a", None, "b"]
    assert list(back.failed_indices) == [1]


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_request_that_cannot_be_sent_is_not_retried_as_an_unreachable_service(asynchronous: bool) -> None:
    """An API key read from a file with its newline ("Bearer abc\\n") makes every request one the HTTP
    library refuses to send (httpx.LocalProtocolError, "Illegal header value"): it was taken for a
    service that could not be reached, retried with backoff max_retries times on every call, and raised
    as a TransportError, which the adapters and the trainer take for an outage (the items masked as
    request_failed, the run going on). It is raised at once now, not as a TransportError, naming the
    cause."""
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.LocalProtocolError("Illegal header value b'Bearer abc\\n'")

    items = [{"response": "x"}, {"response": "y"}]
    with pytest.raises(RewardHubClientError) as info:
        if asynchronous:

            async def run() -> None:
                transport = httpx.MockTransport(handler)
                async with AsyncRewardClient(
                    "http://svc", transport=transport, retry=FAST, chunk_size=1
                ) as c:
                    await c.score(items, "math")

            asyncio.run(run())
        else:
            with RewardClient("http://svc", transport=httpx.MockTransport(handler), retry=FAST) as c:
                c.score(items, "math")
    assert not isinstance(info.value, TransportError) and not transient(info.value)
    assert "Illegal header value" in str(info.value)
    assert len(calls) <= 2  # one try per chunk at most, no retry


@pytest.mark.timeout(60)
@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_readiness_probe_that_cannot_be_sent_is_raised_at_once(asynchronous: bool) -> None:
    """wait_until_ready with an API key holding a newline probed until its timeout, every probe refused
    by the HTTP library before it was sent, then said the service was not ready: no probe can succeed,
    so the first raises, naming the cause (as every other call does)."""
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.LocalProtocolError("Illegal header value b'Bearer abc\\n'")

    with pytest.raises(RewardHubClientError) as info:
        if asynchronous:

            async def run() -> None:
                async with AsyncRewardClient("http://svc", transport=httpx.MockTransport(handler)) as c:
                    await c.wait_until_ready(timeout_s=1.0, interval_s=0.01)

            asyncio.run(run())
        else:
            with RewardClient("http://svc", transport=httpx.MockTransport(handler)) as c:
                c.wait_until_ready(timeout_s=1.0, interval_s=0.01)
    assert not isinstance(info.value, TransportError) and "Illegal header value" in str(info.value)
    assert len(calls) == 1
