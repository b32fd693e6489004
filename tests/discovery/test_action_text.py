"""What discovery reads of an action besides its name and summary: response field names, the text that
is embedded, and how the hybrid fusion weighs the two rankings (issue 11, items 1 and 2)."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_gateway.discovery import DiscoveryIndex
from mcp_gateway.discovery._index import MAX_QUERY_TERMS
from mcp_gateway.discovery._segment import DENSE_WORDS, dense_text, readable
from mcp_gateway.sources.openapi import normalize_openapi
from mcp_gateway.vocabulary.model import Action, OpenAPIBinding


def action(path: str, summary: str = "", description: str = "", *, returns: str = "", group: str = "") -> Action:
    return Action(
        connector="pay",
        path=path,
        summary=summary,
        description=description,
        risk="read",
        binding=OpenAPIBinding(method="GET", url="/" + path.replace(".", "/")),
        response_fields=returns,
        group=group,
    )


def openapi(responses: dict[str, Any], schemas: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {"/thing": {"get": {"operationId": "get_thing", "responses": responses}}},
        "components": {"schemas": schemas or {}},
    }


def json_response(schema: dict[str, Any]) -> dict[str, Any]:
    return {"200": {"description": "ok", "content": {"application/json": {"schema": schema}}}}


# -- response field names ----------------------------------------------------------------------------


def test_response_fields_follow_refs_list_items_and_one_level_of_nested_objects() -> None:
    schemas = {
        "Team": {"type": "object", "properties": {"name": {"type": "string"}, "domain": {"type": "string"}}},
        "Wrapper": {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}, "team": {"$ref": "#/components/schemas/Team"}},
        },
    }
    (wrapped,) = normalize_openapi(
        openapi(json_response({"$ref": "#/components/schemas/Wrapper"}), schemas), connector="t"
    ).actions
    assert wrapped.response_fields.split() == ["ok", "team", "name", "domain"]
    listed = openapi(json_response({"type": "array", "items": {"$ref": "#/components/schemas/Team"}}), schemas)
    assert normalize_openapi(listed, connector="t").actions[0].response_fields == "name domain"
    swagger = {
        "swagger": "2.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/b": {"get": {"responses": {"201": {"description": "ok", "schema": {"properties": {"available": {}}}}}}}
        },
    }
    assert normalize_openapi(swagger, connector="t").actions[0].response_fields == "available"


def test_an_unresolvable_or_missing_response_schema_gives_no_fields_and_no_error() -> None:
    broken = openapi(json_response({"$ref": "#/components/schemas/Nowhere"}))
    assert normalize_openapi(broken, connector="t").actions[0].response_fields == ""
    assert (
        normalize_openapi(openapi({"204": {"description": "nothing"}}), connector="t").actions[0].response_fields == ""
    )


def test_a_field_the_action_returns_breaks_a_tie_but_is_not_indexed() -> None:
    index = DiscoveryIndex()
    index.replace_connector(
        "pay",
        [
            action("balance.get", "Retrieve the balance of the account", returns="available pending currency"),
            action("payouts.get", "Retrieve the balance of a payout", returns="amount arrival_date"),
        ],
    )
    found = index.search("how much money is available on the balance", limit=2)
    assert [a.path for a, _ in found] == ["balance.get", "payouts.get"]
    # Only a response field matches: not found at all (field names are too common to index).
    assert index.search("arrival", limit=2) == []


def test_a_quota_the_action_returns_says_how_much_is_left() -> None:
    index = DiscoveryIndex()
    index.replace_connector(
        "pay",
        [
            action("about.get", "Gets information about the user and the drive", returns="user storageQuota limit"),
            action("files.list", "Lists the files of the drive", returns="files nextPageToken"),
        ],
    )
    found = index.search("how much space is left on my drive", limit=2)
    assert [a.path for a, _ in found][:1] == ["about.get"]


# -- long queries ------------------------------------------------------------------------------------


def test_a_long_query_keeps_its_most_telling_words_wherever_they_stand() -> None:
    # Context words each found in three actions; the one word that matters, in one, at the very end.
    filler = [f"zz{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(MAX_QUERY_TERMS + 20)]
    n = len(filler)
    actions = [
        action(f"misc.m{chr(97 + i // 26)}{chr(97 + i % 26)}", " ".join(filler[(i + j) % n] for j in range(3)))
        for i in range(n)
    ]
    index = DiscoveryIndex()
    index.replace_connector("pay", [*actions, action("refunds.create", "Create a refund")])
    query = "Here is some context. " + " ".join(filler) + ". Then create a refund please."
    assert len(set(query.split())) > MAX_QUERY_TERMS
    assert index.search(query, limit=1)[0][0].path == "refunds.create"


# -- the embedded text -------------------------------------------------------------------------------


def test_the_embedded_text_is_a_short_plain_card_without_repeats() -> None:
    text = dense_text(
        action(
            "transfers.post_transfers",
            "POST /transfers",
            "**Create** a transfer.\n\n> [!NOTE]\n> Funds leave at once. Scopes and pagination follow. More.",
            group="transfers",
        )
    )
    assert text.startswith("transfers post transfers: Create a transfer. Funds leave at once.")
    assert "*" not in text and "[!NOTE]" not in text and ">" not in text
    assert text.count("Create a transfer") == 1 and "More." not in text  # two sentences of description at most
    grouped = dense_text(action("get_balance", "Retrieve the balance", group="Balance API"))
    assert grouped.startswith("get balance (balance api): Retrieve the balance.")
    long = dense_text(action("a.b", "Summary", " ".join(["word"] * 500) + "."))
    assert len(long.split()) <= DENSE_WORDS


def test_a_description_ends_where_its_markdown_sections_and_tables_begin() -> None:
    changelog = "Mute a user in a room.\n\n### Changelog\n\n| Version | Description |\n| --- | --- |\n| 6.8.0 | Added |"
    fields = "Pin a message.\n| Field | Meaning |\n| --- | --- |\n| id | the message |"
    for description, kept in ((changelog, "Mute a user in a room."), (fields, "Pin a message.")):
        text = dense_text(action("x.do", "Do it", description))
        assert kept in text and "Version" not in text and "Field" not in text and "|" not in text
        index = DiscoveryIndex()
        index.replace_connector("pay", [action("x.do", "Do it", description)])
        assert not index.find("changelog version added").hits and not index.find("field meaning").hits
    # A description that opens with a heading keeps it: there is nothing before it to say what the action does.
    assert "Overview" in dense_text(action("x.do", "Do it", "## Overview\nMutes a user."))


@pytest.mark.parametrize("summary", ["GET /v1/rates", ""])
def test_a_bare_or_missing_summary_reads_as_words(summary: str) -> None:
    assert dense_text(action("rates.get_rates", summary)).startswith("rates get rates:")


def test_a_summary_that_is_only_an_identifier_reads_as_words() -> None:
    # Generated descriptions put the operationId there (Square: 199 of 200 operations).
    listed = action("list_employees", "ListEmployees", "Returns a list of employees of the business.")
    assert dense_text(listed).startswith("list employees: List employees.")
    opaque = action("staff.op_17", "ListEmployees")  # its words are in its summary alone
    index = DiscoveryIndex()
    index.replace_connector("pay", [opaque, action("staff.op_18", "ListLocations")])
    assert index.find("list the employees").hits[0][0] is opaque
    assert dense_text(action("a.b", "get_user_info")).startswith("a b: Get user info.")
    assert dense_text(action("a.b", "List employees")).startswith("a b: List employees.")
    # Trello's generated description writes the call: ``getBoardsByIdBoard()``
    assert dense_text(action("a.b", "getBoardsByIdBoard()")).startswith("a b: Get boards by id board.")


# -- summaries a connector's operations share -------------------------------------------------------

GENERIC = "Inserts a new resource into this collection."


def video_api() -> list[Action]:
    """YouTube's way: one boilerplate summary (and description) for every insert."""

    def insert(path: str, url: str) -> Action:
        return Action(
            connector="videos",
            path=path,
            summary=GENERIC,
            description=GENERIC + " Quota cost: 50 units.",
            risk="write",
            binding=OpenAPIBinding(method="POST", url=url),
        )

    return [
        insert("subscriptions.insert", "/youtube/v3/subscriptions"),
        insert("comments.insert", "/youtube/v3/comments"),
        insert("playlists.insert", "/youtube/v3/playlists"),
        insert("abuse_reports.insert", "/youtube/v3/abuseReports"),
        Action(
            connector="videos",
            path="videos.rate",
            summary="Adds a like or dislike rating to a video.",
            risk="write",
            binding=OpenAPIBinding(method="POST", url="/youtube/v3/videos/rate"),
        ),
    ]


def test_a_summary_many_operations_share_reads_as_each_ones_route() -> None:
    actions = video_api()
    read = readable(actions)
    assert [a.summary for a in read[:4]] == [
        "create youtube subscriptions",
        "create youtube comments",
        "create youtube playlists",
        "create youtube abuse reports",
    ]
    assert read[0].description == "Quota cost: 50 units."  # the shared sentence out, the rest kept
    assert read[4] is actions[4]  # a summary of its own stays
    assert dense_text(read[0]).startswith("subscriptions insert: create youtube subscriptions.")
    # Two operations sharing a summary may be near-twins; a summary of an upstream tool has no route.
    assert readable(actions[:2]) == actions[:2]


def test_the_index_tells_apart_operations_that_share_a_summary_by_their_routes() -> None:
    index = DiscoveryIndex()
    actions = video_api()
    index.replace_connector("videos", actions)
    first = index.find("create a subscription").hits[0][0]
    assert first is actions[0]  # the hit is the API's own action, its own summary
    assert index.find("new comment").hits[0][0].qualified_name == "videos.comments.insert"
    # The boilerplate itself no longer matches every operation that carries it.
    assert index.find("resource in this collection").hits == []


# -- fusion ------------------------------------------------------------------------------------------


def _dense(vectors: dict[str, list[float]]) -> Any:
    np = pytest.importorskip("numpy")
    from mcp_gateway.discovery.dense import DenseIndex

    dense = DenseIndex()
    rows = np.array(list(vectors.values()), dtype=np.float32)
    dense.replace_connector("pay", list(vectors), rows / np.linalg.norm(rows, axis=1, keepdims=True))
    return dense


def _unit(values: list[float]) -> Any:
    np = pytest.importorskip("numpy")
    return np.asarray(values, dtype=np.float32)


def test_fusion_lets_the_model_bring_in_what_no_word_matched_and_keeps_lexical_order_when_it_has_no_opinion() -> None:
    from mcp_gateway.discovery.hybrid import fuse

    actions = {a.qualified_name: a for a in (action("refunds.create"), action("charges.list"), action("balance.get"))}
    lexical = [(actions["pay.charges.list"], 2.0), (actions["pay.refunds.create"], 1.0)]
    # The model puts balance.get, which the lexical side never found, far ahead: it enters, above the
    # lexical hit the model ranks last.
    sure = _dense({"pay.balance.get": [1.0, 0.0], "pay.charges.list": [0.2, 1.0], "pay.refunds.create": [0.1, 1.0]})
    fused = fuse(lexical, sure, _unit([1.0, 0.0]), lookup=actions.get, allowed={"pay"})
    assert [a.path for a, _ in fused] == ["charges.list", "balance.get", "refunds.create"]
    # Cosines a hair apart say nothing: the lexical order stands (no scaling of noise into an opinion).
    flat = _dense({"pay.balance.get": [1.0, 0.02], "pay.charges.list": [1.0, 0.0], "pay.refunds.create": [1.0, 0.01]})
    fused = fuse(lexical, flat, _unit([1.0, 0.0]), lookup=actions.get, allowed={"pay"})
    assert [a.path for a, _ in fused][:2] == ["charges.list", "refunds.create"]
    # A caller who may not see balance.get never gets it from the dense side either.
    hidden = fuse(
        lexical, sure, _unit([1.0, 0.0]), lookup=actions.get, allowed={"pay"}, allow=lambda a: a.path != "balance.get"
    )
    assert "balance.get" not in [a.path for a, _ in hidden]


def test_a_connector_the_query_names_stays_a_prior_through_fusion() -> None:
    np = pytest.importorskip("numpy")
    from mcp_gateway.discovery.dense import DenseIndex
    from mcp_gateway.discovery.hybrid import fuse

    ours, other = action("search.items"), action("refunds.create")
    theirs = action("invoices.search").model_copy(update={"connector": "bill"})
    by_name = {a.qualified_name: a for a in (ours, other, theirs)}
    dense = DenseIndex()
    rows = np.array([[0.98, 0.199], [0.0, 1.0]], dtype=np.float32)
    dense.replace_connector("pay", [ours.qualified_name, other.qualified_name], rows)
    dense.replace_connector("bill", [theirs.qualified_name], np.array([[1.0, 0.0]], dtype=np.float32))
    lexical = [(theirs, 2.0), (ours, 1.9), (other, 0.0)]
    query, allowed = _unit([1.0, 0.0]), {"pay", "bill"}
    plain = fuse(lexical, dense, query, lookup=by_name.get, allowed=allowed)
    assert [a.qualified_name for a, _ in plain][:2] == ["bill.invoices.search", "pay.search.items"]
    named = fuse(lexical, dense, query, lookup=by_name.get, allowed=allowed, named={"pay"})
    assert [a.qualified_name for a, _ in named][:2] == ["pay.search.items", "bill.invoices.search"]


def test_the_connector_a_query_fits_as_a_whole_wins_between_look_alikes() -> None:
    np = pytest.importorskip("numpy")
    from mcp_gateway.discovery.dense import DenseIndex
    from mcp_gateway.discovery.hybrid import connector_fit, fuse

    def of(connector: str, path: str) -> Action:
        return action(path).model_copy(update={"connector": connector})

    reply, listing = of("files", "replies.create"), of("files", "files.list")
    comment, videos, rate = of("video", "comments.insert"), of("video", "videos.list"), of("video", "videos.rate")
    by_name = {a.qualified_name: a for a in (reply, listing, comment, videos, rate)}

    def unit(rows: list[list[float]]) -> Any:
        matrix = np.array(rows, dtype=np.float32)
        return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)

    dense = DenseIndex()
    # "reply to the top comment on my cooking video": the files API's reply says "reply" more plainly
    # (lexically and by cosine), but the query sits near everything the video API does.
    dense.replace_connector("files", [reply.qualified_name, listing.qualified_name], unit([[0.8, 0.6], [0.0, 1.0]]))
    dense.replace_connector(
        "video",
        [comment.qualified_name, videos.qualified_name, rate.qualified_name],
        unit([[0.75, 0.66], [0.9, 0.44], [0.9, 0.44]]),
    )
    query = _unit([1.0, 0.0])
    fit = connector_fit(dense, query, {"files", "video"})
    assert fit == {"video": 1.0, "files": 0.0}
    lexical = [(reply, 2.0), (comment, 1.5), (listing, 0.0)]
    fused = fuse(lexical, dense, query, lookup=by_name.get, allowed={"files", "video"})
    assert [a.path for a, _ in fused][:2] == ["comments.insert", "replies.create"]
    # One connector searched: nothing to choose between, the order is the two sides' alone.
    assert connector_fit(dense, query, {"files"}) == {}
    alone = fuse([(reply, 2.0), (listing, 0.0)], dense, query, lookup=by_name.get, allowed={"files"})
    assert alone[0][0].path == "replies.create"


def test_a_raw_json_body_example_lends_its_keys_as_parameters() -> None:
    from mcp_gateway.discovery._segment import params_of

    example = '{\n  "targetAccount": <accountId>,\n  "quote": <quoteId>,\n  "details": {"reference": "rent"}\n}'
    schema = {"type": "object", "properties": {"body": {"type": "string", "default": example}, "quote": {}}}
    assert [name for name, _ in params_of(schema)] == ["body", "targetAccount", "details", "reference", "quote"]
    transfer = action("transfers.post_transfers", "POST /transfers").model_copy(update={"input_schema": schema})
    assert dense_text(transfer).endswith("Parameters: body, targetAccount, details, reference, quote")


# -- the verb an agent asks with ---------------------------------------------------------------------


def test_a_get_of_a_whole_collection_answers_to_list_and_a_get_of_one_member_does_not() -> None:
    def op(path: str, method: str, url: str, summary: str) -> Action:
        return Action(
            connector="ads",
            path=path,
            summary=summary,
            risk="read",
            binding=OpenAPIBinding(method=method, url=url),
        )

    # eBay's marketing API: ``getCampaigns`` is ``GET /ad_campaign``; every summary speaks of listings,
    # which an index stems as "list" too.
    actions = [
        op("get_campaigns", "GET", "/ad_campaign", "Retrieves the details of all the seller's campaigns"),
        op("get_campaign", "GET", "/ad_campaign/{campaign_id}", "Retrieves the details of a campaign"),
        *(
            op(f"{verb}_ads_by_listing_id", method, "/ad_campaign/{campaign_id}/ad", f"{verb} ads for listings")
            for verb, method in (("create", "POST"), ("bulk_create", "POST"), ("get", "GET"))
        ),
        op("create_campaign", "POST", "/ad_campaign", "Creates a campaign for promoted listings"),
    ]
    index = DiscoveryIndex()
    index.replace_connector("ads", actions)
    assert index.find("list campaigns", limit=3).hits[0][0].path == "get_campaigns"
    (segment,) = index._visible(None)
    listed = {segment.actions[i - segment.start].path for i in segment.postings("list")[0]}  # type: ignore[index]
    assert "get_campaigns" in listed and "get_campaign" not in listed
