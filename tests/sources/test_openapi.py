"""The OpenAPI normalizer against real specs (tests/data/openapi) and small hand-written fixtures."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import trustme
import yaml

from mcp_gateway.discovery import DiscoveryIndex
from mcp_gateway.execution.http_request import build_request
from mcp_gateway.manifest import ApiKeyAuth, AuthConfig, BearerAuth, ConnectorConfig, NoAuth
from mcp_gateway.sources.base import LoadContext, Normalized
from mcp_gateway.sources.openapi import (
    PATH_RE,
    NormalizedSource,
    OpenAPILoader,
    action_path,
    credential_places,
    declared_base_url,
    legacy_action_path,
    load_openapi,
    normalize_openapi,
    snake_case,
)
from mcp_gateway.vocabulary.errors import SourceError
from mcp_gateway.vocabulary.model import ACTIONS_ADAPTER, Action, OpenAPIBinding, ParamSpec
from tests.support.named_pipe import outcome_of_reading
from tests.support.upstream import LoopbackServer, Receive, Scope, Send, read_body, reply_json

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = REPO_ROOT / "tests" / "data" / "openapi"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "openapi"


# file -> operation count, from tests/data/SOURCES.md
REAL_SPECS = {
    "github/api.github.com.json.gz": 1223,
    "stripe/spec3.json": 417,
    "slack/slack_web_openapi_v2.json": 174,
    "nytimes/books_api.json": 6,
    "realworld/openapi.yml": 19,
    "notion/notion-openapi.json": 24,
    "petstore/petstore-swagger2.json": 20,
    "petstore/petstore-oas3.json": 20,
    "petstore/petstore3-openapi.yaml": 19,
    "readme-examples/security.json": 15,
    "readme-examples/security-multiple.json": 4,
}
_BIG = {"github/api.github.com.json.gz", "stripe/spec3.json"}


def _load(ref: str | Path, **kwargs: Any) -> NormalizedSource:
    async def go() -> NormalizedSource:
        return await load_openapi(str(ref), connector="test", **kwargs)

    return anyio.run(go)


_cache: dict[str, NormalizedSource] = {}


def _real(name: str) -> NormalizedSource:
    """Each real spec is normalized once per test session (GitHub's takes most of a second)."""
    if name not in _cache:
        _cache[name] = _load(DATA / name)
    return _cache[name]


def _by_path(source: NormalizedSource) -> dict[str, Action]:
    return {a.path: a for a in source.actions}


def _assert_consistent(actions: list[Action]) -> None:
    paths = [a.path for a in actions]
    assert len(paths) == len(set(paths)), "duplicate action paths"
    for action in actions:
        assert PATH_RE.match(action.path), action.path
        schema = action.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        names = [p.name for p in action.binding.params]
        assert len(names) == len(set(names)), f"{action.path}: two ParamSpecs for one argument"
        assert set(names) == set(schema["properties"]), f"{action.path}: properties and ParamSpecs differ"
        assert set(schema["required"]) <= set(schema["properties"]), action.path
        for spec in action.binding.params:
            if spec.location == "path":
                assert spec.name in schema["required"], f"{action.path}: path param {spec.name} not required"
                assert "{" + spec.on_wire + "}" in action.binding.url
        if action.binding.body_param is not None:
            assert action.binding.body_param in schema["properties"]
        has_body = any(p.location == "body" for p in action.binding.params)
        assert (action.binding.body != "none") == has_body, action.path


# -- real specs -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _BIG else n for n in REAL_SPECS])
def test_real_spec_normalizes_every_operation(name: str) -> None:
    source = _real(name)
    assert len(source.actions) == REAL_SPECS[name]
    _assert_consistent(source.actions)
    assert source.title
    assert source.files == [str(DATA / name)]
    json.loads(ACTIONS_ADAPTER.dump_json(source.actions))  # serializable, valid JSON


@pytest.mark.slow
def test_github_spot_checks() -> None:
    source = _real("github/api.github.com.json.gz")
    assert source.base_url == "https://api.github.com"
    actions = _by_path(source)
    create = actions["issues.create"]
    assert create.risk == "write"
    assert create.binding.method == "POST" and create.binding.url == "/repos/{owner}/{repo}/issues"
    assert create.binding.body == "json" and create.binding.body_param is None
    locations = {p.name: p.location for p in create.binding.params}
    assert locations["owner"] == locations["repo"] == "path"
    assert locations["title"] == "body"
    assert {"owner", "repo", "title"} <= set(create.input_schema["required"])
    assert create.summary == "Create an issue"
    assert actions["repos.delete"].risk == "destructive"
    assert actions["repos.get_content"].binding.operation_id == "repos/get-content"
    assert actions["repos.get_content"].risk == "read"
    size = len(ACTIONS_ADAPTER.dump_json(source.actions))
    assert size < 5_000_000, f"GitHub's actions serialize to {size} bytes"


@pytest.mark.slow
def test_stripe_posts_are_form_encoded_and_its_upload_multipart() -> None:
    source = _real("stripe/spec3.json")
    assert source.warnings == ()  # its deepObject arrays (``expand``) are written by index, as Stripe reads them
    actions = _by_path(source)
    posts = [a for a in actions.values() if a.binding.method == "POST" and a.path != "post_files"]
    assert posts
    for action in posts:
        assert action.binding.body in ("form", "none"), action.path
        if any(p.location == "body" for p in action.binding.params):
            assert action.binding.body == "form", action.path
    assert actions["post_customers"].binding.body == "form"
    upload = actions["post_files"]  # Stripe's one multipart/form-data operation
    assert isinstance(upload.binding, OpenAPIBinding) and upload.binding.body == "multipart"
    specs = {p.name: p for p in upload.binding.params}
    # Its `file` is a plain string (no format: binary), so a text part; its objects are deepObject fields.
    assert not specs["file"].file and specs["purpose"].style == "form"
    assert specs["file_link_data"].style == "deepObject" and specs["expand"].style == "deepObject"
    assert actions["get_customers_customer"].binding.url == "/v1/customers/{customer}"
    # Stripe's GETs declare an empty form body: it must not become a `body` argument.
    assert "body" not in actions["get_customers"].input_schema["properties"]
    assert not actions["get_customers"].summary.startswith("<p>")


def test_nytimes_api_key_parameter_is_dropped() -> None:
    for action in _real("nytimes/books_api.json").actions:
        assert all(p.on_wire != "api-key" for p in action.binding.params), action.path
    lists = _by_path(_real("nytimes/books_api.json"))["get_lists_format"]
    spec = next(p for p in lists.binding.params if p.name == "weeks_on_list")
    assert spec.wire_name == "weeks-on-list" and spec.location == "query"


def test_slacks_token_parameter_carries_the_credential_and_is_no_argument() -> None:
    # Slack declares the token as a `token` parameter of 170 of its 174 methods (in the header on
    # 101, the query on 54, the form on 15) beside its oauth2 scheme: no apiKey scheme names it.
    path = DATA / "slack" / "slack_web_openapi_v2.json"
    declared = [a for a in _real("slack/slack_web_openapi_v2.json").actions if "token" in a.input_schema["properties"]]
    assert len(declared) == 170
    slack = _load(path, credentials=credential_places(BearerAuth(type="bearer"), ["token"]))
    assert len(slack.actions) == 174
    for action in slack.actions:
        assert isinstance(action.binding, OpenAPIBinding)
        assert "token" not in action.input_schema["properties"], action.path
        assert "token" not in action.input_schema.get("required", []), action.path
        assert all(p.on_wire != "token" for p in action.binding.params), action.path
    actions = _by_path(slack)
    assert actions["auth_test"].input_schema["properties"] == {}  # its one parameter was the token
    post = actions["chat_post_message"]  # a form method keeps its other fields
    assert isinstance(post.binding, OpenAPIBinding) and post.binding.body == "form"
    assert {"channel", "text"} <= set(post.input_schema["properties"])
    # The same spec for a connector that does not name `token` keeps it: nothing is guessed.
    assert (
        "token"
        in _by_path(_load(path, credentials=credential_places(BearerAuth(type="bearer"))))["auth_test"].input_schema[
            "properties"
        ]
    )


def test_the_parameters_the_connectors_auth_writes_are_no_arguments() -> None:
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/items/{key}": {
                "get": {
                    "operationId": "items_get",
                    "parameters": [
                        {"name": "key", "in": "path", "required": True, "schema": {"type": "string"}},
                        {"name": "key", "in": "query", "schema": {"type": "string"}},
                        {"name": "X-Access-Token", "in": "header", "schema": {"type": "string"}},
                        {"name": "limit", "in": "query", "schema": {"type": "integer"}},
                    ],
                }
            }
        },
    }

    def arguments(auth: AuthConfig, names: list[str] | None = None) -> set[str]:
        credentials = credential_places(auth, names or [])
        (action,) = normalize_openapi(document, connector="t", credentials=credentials).actions
        assert isinstance(action.binding, OpenAPIBinding)
        return {f"{p.location}:{p.on_wire}" for p in action.binding.params}

    everything = {"path:key", "query:key", "header:X-Access-Token", "query:limit"}
    assert arguments(NoAuth()) == everything
    assert arguments(ApiKeyAuth.model_validate({"type": "api_key", "in": "query", "name": "key"})) == everything - {
        "query:key"
    }
    assert arguments(BearerAuth(type="bearer", header="x-access-token", prefix="")) == everything - {
        "header:X-Access-Token"
    }
    # A name the source lists goes in every location but the path, which the URL cannot do without.
    assert arguments(NoAuth(), ["key"]) == everything - {"query:key"}


@pytest.mark.parametrize("name", ["petstore/petstore-swagger2.json", "petstore/petstore-oas3.json"])
def test_petstore(name: str) -> None:
    actions = _by_path(_real(name))
    pet = actions["get_pet_by_id"]
    assert pet.binding.url == "/pet/{petId}" and pet.input_schema["required"] == ["petId"]
    assert actions["delete_pet"].risk == "destructive"
    # the `api_key` header parameter is the apiKey scheme's: a credential, not an argument
    assert "api_key" not in actions["delete_pet"].input_schema["properties"]
    assert actions["update_pet_with_form"].binding.body == "form"
    assert actions["add_pet"].binding.body == "json"
    assert "name" in actions["add_pet"].input_schema["required"]


def test_petstore3_yaml_and_realworld_31() -> None:
    pet3 = _by_path(_real("petstore/petstore3-openapi.yaml"))
    assert pet3["find_pets_by_status"].risk == "read"
    realworld = _by_path(_real("realworld/openapi.yml"))
    assert realworld["create_article"].binding.body == "json"
    assert realworld["create_article"].input_schema["required"] == ["article"]


# -- naming -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operation_id", "method", "url", "expected"),
    [
        ("issues/create", "POST", "/x", "issues.create"),
        ("repos/get-content", "GET", "/x", "repos.get_content"),
        ("addPet", "POST", "/pet", "add_pet"),
        ("GetCustomersCustomer", "GET", "/x", "get_customers_customer"),
        ("chat_postMessage", "POST", "/x", "chat_post_message"),
        ("getHTTPServer v2", "GET", "/x", "get_http_server_v2"),
        (None, "GET", "/pet/{petId}", "get_pet"),
        (None, "GET", "/deployments/{id}/builds", "list_deployment_builds"),
        (None, "GET", "/status", "get_status"),
        (None, "POST", "/v1/pets", "create_pet"),
        (None, "POST", "/v1/customers/{customer}", "update_customer"),
        (None, "POST", "/deployments/{id}/cancel", "cancel_deployment"),
        (None, "GET", "/users/search", "search_users"),
        (None, "GET", "/lists.{format}", "list_lists"),
        (None, "DELETE", "/", "delete"),
        ("2fa/enable", "POST", "/x", "n2fa.enable"),
        ("//", "PUT", "/a-b/{c}", "update_a_b"),
        ("listRedirectURLs", "GET", "/x", "list_redirect_urls"),
        ("getOAuthAccessToken", "GET", "/x", "get_oauth_access_token"),
        ("createM2MToken", "POST", "/x", "create_m2m_token"),
        ("resetE2EKey", "POST", "/x", "reset_e2e_key"),
        ("delete-impersonation-o-auth-token", "DELETE", "/x", "delete_impersonation_oauth_token"),
        ("getOEmbed", "GET", "/x", "get_oembed"),
        ("getCallQoS", "GET", "/x", "get_call_qos"),
        ("SignalR_Delete", "DELETE", "/x", "signalr_delete"),
        ("Get3dSecureThreeDSecure", "GET", "/x", "get_3d_secure_three_d_secure"),
        ("list2faMethods", "GET", "/x", "list_2fa_methods"),
        ("base64Encode", "POST", "/x", "base64_encode"),
        # A bare number opening the URL is its version, as ``v1`` is.
        (None, "GET", "/api/2/issue/{key}/properties", "list_issue_properties"),
        (None, "GET", "/1.0/programs", "list_programs"),
        (None, "GET", "/v1beta1/projects/{id}", "get_project"),
        (None, "GET", "/users/{id}/folders/0", "get_user_folders_0"),
        # An id given as the operationId (API Management exports) names nothing.
        ("54763641281d830c946a3d77", "GET", "/incidents", "list_incidents"),
        ("3fa85f64-5717-4562-b3fc-2c963f66afa6", "DELETE", "/items/{id}", "delete_item"),
        ("deadbeef", "GET", "/x", "deadbeef"),  # a word, however it looks
        # RPC-style methods are named as their API writes them; a PUT/PATCH/DELETE on one gets its verb.
        (None, "POST", "/api/v1/chat.postMessage", "chat_post_message"),
        (None, "GET", "/conversations.list", "conversations_list"),
        (None, "GET", "/api/v1/livechat/inquiries.queuedForUser", "livechat_inquiries_queued_for_user"),
        (None, "DELETE", "/api/v1/push.token", "delete_push_token"),
        (None, "POST", "/api/v1/dns.resolve.txt", "dns_resolve_txt"),
        (None, "GET", "/openapi.json", "get_openapi_json"),  # a file, not a method
        # An operationId that only spells out its method and URL is no name; its method and the URL's
        # version segments opening one are scaffolding.
        ("post-api-v1-chat.delete", "POST", "/api/v1/chat.delete", "chat_delete"),
        ("pos-api-v1-channels.rename", "POST", "/api/v1/channels.rename", "channels_rename"),
        ("get_api_v1_users_id", "GET", "/api/v1/users/{id}", "get_user"),
        ("api-v1-users-get", "GET", "/api/v1/users", "list_users"),
        ("post-api-v1-im.setTopic", "POST", "/api/v1/dm.setTopic", "im_set_topic"),
        # What Spring and FastAPI add around a function's name is theirs, not the operation's.
        ("getUserUsingGET", "GET", "/users/{id}", "get_user"),
        ("listPetsUsingGET_1", "GET", "/v2/pets", "list_pets"),
        ("read_item_items__item_id__get", "GET", "/items/{item_id}", "read_item"),
        ("create_user_api_v1_users__post", "POST", "/api/v1/users/", "create_user"),
        ("UsersController_findAll", "GET", "/users", "users_find_all"),  # NestJS
        # Trello's generator restates each path parameter: ``By<Param>``.
        (
            "updateCardsChecklistCheckItemStateByIdCardByIdChecklistByIdCheckItem",
            "PUT",
            "/cards/{idCard}/checklist/{idChecklist}/checkItem/{idCheckItem}/state",
            "update_cards_checklist_check_item_state",
        ),
        ("getBoardsByIdBoard", "GET", "/boards/{idBoard}", "get_boards"),
        # ...but a name someone chose stays, scaffolding-like words and all.
        ("calendar.colors.get", "GET", "/colors", "calendar_colors_get"),
        ("items_get", "GET", "/items", "items_get"),
        ("usingGet", "GET", "/x", "using_get"),
        ("listUsers", "GET", "/api/v1/users", "list_users"),
        ("PostCustomers", "POST", "/v1/customers", "post_customers"),
        ("getUsers", "GET", "/users", "get_users"),
        ("getProfileByUsername", "GET", "/profiles/{username}", "get_profile_by_username"),
        ("getPetById", "GET", "/pet/{petId}", "get_pet_by_id"),
        ("getRoleById", "GET", "/role/{id}", "get_role_by_id"),
        ("GET_api_keys", "GET", "/api_keys", "get_api_keys"),
        ("api_test", "GET", "/api.test", "api_test"),
    ],
)
def test_action_path(operation_id: str | None, method: str, url: str, expected: str) -> None:
    assert action_path(operation_id, method, url) == expected
    assert PATH_RE.match(expected)


def test_a_generated_operation_id_spells_out_the_base_path_too() -> None:
    # The paths are relative to the server's /api/v1, which the generator wrote into every operationId.
    assert action_path("get_api_v1_users", "GET", "/users", "/api/v1") == "list_users"
    assert action_path("post-api-v1-im.close", "POST", "/dm.close", "/api/v1") == "im_close"
    assert legacy_action_path("get_api_v1_users", "GET", "/users", "/api/v1") == "get_api_v1_users"
    assert action_path("getUsers", "GET", "/users", "/api/v1") == "get_users"  # chosen, kept
    document = {
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://chat.example/api/v1"}],
        "paths": {"/chat.delete": {"post": {"operationId": "post-api-v1-chat.delete", "responses": {}}}},
    }
    (action,) = normalize_openapi(document, connector="chat").actions
    assert (action.path, action.aliases) == ("chat_delete", ("post_api_v1_chat_delete", "chat.delete"))


def test_generated_operation_ids_and_rpc_methods_keep_their_old_and_documented_spellings() -> None:
    def operation(operation_id: str) -> dict[str, Any]:
        return {"operationId": operation_id, "responses": {"200": {"description": "ok"}}}

    document = {
        "openapi": "3.0.0",
        "info": {"title": "chat", "version": "1"},
        "paths": {
            "/api/v1/chat.postMessage": {"post": operation("post-api-v1-chat.postMessage")},
            "/api/v1/push.token": {
                "post": operation("post-api-v1-push.token"),
                "delete": operation("delete-api-v1-push.token"),
            },
            "/api/v1/dm.close": {"post": operation("post-api-v1-im.close")},
            "/api/v1/users.list": {"get": operation("listUsers")},
        },
    }
    actions = {action.path: action for action in normalize_openapi(document, connector="chat").actions}
    assert actions["chat_post_message"].aliases == ("post_api_v1_chat_post_message", "chat.post_message")
    assert actions["push_token"].aliases == ("post_api_v1_push_token", "push.token")
    assert actions["delete_push_token"].aliases == ("delete_api_v1_push_token",)
    assert actions["im_close"].aliases == ("post_api_v1_im_close",)
    assert actions["list_users"].aliases == ()  # a chosen name: nothing was renamed
    index = DiscoveryIndex()
    index.replace_connector("chat", list(actions.values()))
    for spelled, meant in (
        ("chat.post_api_v1_chat_post_message", "chat.chat_post_message"),  # the name issued before
        ("chat.chat.postMessage", "chat.chat_post_message"),  # as the API's documentation writes it
        ("chat.post-api-v1-im-close", "chat.im_close"),
    ):
        found = index.resolve(spelled)
        assert found is not None and found.qualified_name == meant


def test_names_from_urls_tell_a_collection_from_its_member() -> None:
    """A GET on a URL another path extends with a ``{param}`` lists, singular noun or not; handlers that
    share one name are named from their URLs; each name issued before still resolves to its operation."""

    def operation(operation_id: str | None = None) -> dict[str, Any]:
        return {"responses": {"200": {"description": "ok"}}, **({"operationId": operation_id} if operation_id else {})}

    document = {
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/setup/flow/": {"get": operation(), "post": operation()},
            "/setup/flow/{id}": {"get": operation(), "delete": operation()},
            "/nh/furniture": {"get": operation()},
            "/nh/furniture/{name}": {"get": operation()},
            "/teammates/pending": {"get": operation()},
            "/teammates/pending/{token}": {"delete": operation()},
            "/status": {"get": operation()},
            "/qrcode/sms": {"post": operation("dispatcher_qrcode_sms_post")},
            "/qrcode/geo": {"post": operation("dispatcher_qrcode_geo_post")},
            "/qrcode/batch": {"post": operation("batch_qrcode_batch_post")},
            "/flows/{id}": {"get": operation()},
            "/flow/{id}": {"get": operation()},
        },
    }
    actions = {a.path: a for a in normalize_openapi(document, connector="x").actions}
    assert list(actions) == [
        "list_setup_flows",
        "create_setup_flow",
        "get_setup_flow",
        "delete_setup_flow",
        "list_nh_furniture",
        "get_nh_furniture",
        "list_teammates_pending",
        "delete_teammates_pending",
        "get_status",
        "create_qrcode_sms",
        "create_qrcode_geo",
        "batch",
        "get_flow",
        "get_flow_2",  # a collision, suffixed in document order
    ]
    # the names the previous release gave, but where another operation now holds that name
    assert actions["list_setup_flows"].aliases == ("setup.flow.get",)
    assert actions["get_setup_flow"].aliases == ("get_setup_flow_2", "setup.flow.by_id.get")
    assert actions["create_qrcode_geo"].aliases == ("dispatcher_2", "dispatcher_qrcode_geo_post")
    index = DiscoveryIndex()
    index.replace_connector("x", list(actions.values()))
    for spelled, meant in (
        ("x.get_setup_flow_2", "x.get_setup_flow"),
        ("x.get_nh_furniture_2", "x.get_nh_furniture"),
        ("x.dispatcher", "x.create_qrcode_sms"),
        ("x.dispatcher_2", "x.create_qrcode_geo"),
    ):
        found = index.resolve(spelled)
        assert found is not None and found.qualified_name == meant, spelled


def test_snake_case() -> None:
    assert snake_case("HTTPServerURL") == "http_server_url"
    assert snake_case("  --Weird__Name!! ") == "weird_name"
    # an acronym is one word, however it is followed: a plural s, digits, the next capitalized word
    assert snake_case("listUserIDs") == "list_user_ids"
    assert snake_case("Get a file’s lock, don't notify") == "get_a_files_lock_dont_notify"
    assert snake_case("Get a file's lock", former=True) == "get_a_file_s_lock"
    assert snake_case("HTTP2Server") == "http2_server"
    assert snake_case("getAUser") == "get_a_user"
    assert snake_case("getV2Users") == "get_v2_users"
    assert snake_case("OAuth2Token") == "oauth2_token"


# -- fixtures: multi-file YAML, cycles, Swagger 2.0 forms ---------------------------------------


def test_multifile_yaml_with_cycle_across_files() -> None:
    source = _load(FIXTURES / "multifile" / "main.yaml")
    _assert_consistent(source.actions)
    assert source.base_url == "https://eu.zoo.example/v2"
    assert source.title == "Multi-file Zoo"
    assert source.description == "A zoo API split across several files."
    folder = FIXTURES / "multifile"
    assert source.files[0] == str(folder / "main.yaml")
    assert set(source.files) == {
        str(p)
        for p in (
            folder / "main.yaml",
            folder / "parameters.yaml",
            folder / "bodies.yaml",
            folder / "paths.yaml",
            folder / "schemas" / "common.yaml",
            folder / "schemas" / "animal.yaml",
            folder / "schemas" / "enclosure.yaml",
        )
    }
    actions = _by_path(source)
    assert list(actions) == [
        "list_animals",
        "animals.create",
        "get_animal",
        "animals.update",
        "keepers.list",
    ]

    listing = actions["list_animals"]
    # X-Zoo-Key is the apiKey scheme's header, Authorization is the gateway's
    assert list(listing.input_schema["properties"]) == ["limit"]
    assert listing.input_schema["properties"]["limit"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 100,
        "default": 20,
        "description": "How many animals to return.",
    }

    create = actions["animals.create"]
    props = create.input_schema["properties"]
    assert "id" not in props  # readOnly
    assert create.input_schema["required"] == ["name"]
    assert props["name"] == {"type": "string"}  # x-* and example dropped
    assert props["born"] == {"type": "string", "format": "date"}
    # Animal -> Enclosure -> Animal, across two files
    assert props["enclosure"]["properties"]["resident"] == {"type": "object", "description": "(recursive: Animal)"}
    # 3.0 nullable -> type array, and null joins the enum
    assert props["zone"] == {"type": ["string", "null"], "enum": ["north", "south", None]}
    # a broken ref deep in one schema degrades that schema only
    assert set(props["missing"]) == {"description"} and "DoesNotExist" in props["missing"]["description"]

    update = actions["animals.update"]
    assert update.binding.body == "json"  # application/merge-patch+json counts as JSON
    assert update.input_schema["required"] == ["animalId", "name"]
    assert actions["get_animal"].summary == "Get one animal"
    assert actions["get_animal"].aliases == ("animals.by_animal_id.get",)  # the name earlier releases gave it
    assert actions["list_animals"].aliases == ()
    assert actions["keepers.list"].binding.url == "/keepers"


def test_swagger2_body_and_form_parameters() -> None:
    source = _load(FIXTURES / "swagger2_forms.json")
    _assert_consistent(source.actions)
    assert source.base_url == "https://forms.example/api"
    actions = _by_path(source)
    # ``listNotes`` is given twice: each is named from its URL, the name issued before kept as an alias
    assert list(actions) == ["notes.replace", "notes.attach", "create_note", "list_notes", "get_notes_all"]
    assert actions["get_notes_all"].aliases == ("list_notes_2",)

    replace = actions["notes.replace"]
    assert "api_key" not in replace.input_schema["properties"]  # apiKey scheme in query
    specs = {p.name: p for p in replace.binding.params}
    assert specs["text"].location == "query"
    assert specs["body_text"].location == "body" and specs["body_text"].wire_name == "text"
    assert replace.input_schema["required"] == ["id", "body_text"]
    assert replace.input_schema["properties"]["body_text"] == {"type": ["string", "null"]}  # x-nullable
    assert replace.input_schema["properties"]["parent"]["description"] == "(recursive: Note)"
    assert replace.binding.body == "json" and replace.binding.body_param is None

    attach = actions["notes.attach"]
    assert attach.binding.body == "multipart"  # it has a `type: file` field
    specs = {p.name: p for p in attach.binding.params}
    assert attach.input_schema["properties"]["file"]["anyOf"][0]["type"] == "string"  # or {content, filename?}
    assert specs["file"].location == "body" and specs["file"].file
    assert specs["body_id"].wire_name == "id" and specs["body_id"].location == "body"
    assert specs["x_trace_id"].wire_name == "X-Trace-Id" and specs["x_trace_id"].location == "header"
    assert specs["labels"].style_explode is True  # collectionFormat: multi
    assert specs["ids"].style_explode is False  # collectionFormat defaults to csv
    assert attach.input_schema["required"] == ["id", "file"]

    whole = actions["create_note"]  # no operationId, and an array body
    assert whole.binding.body_param == "body" and whole.input_schema["properties"]["body"]["type"] == "array"
    assert actions["list_notes"].input_schema["properties"]["limit"] == {"type": "integer", "exclusiveMinimum": 0}
    assert actions["get_notes_all"].binding.url == "/notes/all"


def test_openapi31_features() -> None:
    document = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "/relative"}],
        "components": {
            "schemas": {
                "Name": {"type": ["string", "null"], "examples": ["a"], "description": "from the target"},
                "Tree": {
                    "type": "object",
                    "properties": {"children": {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}}},
                },
            }
        },
        "paths": {
            "/items/{id}": {
                "put": {
                    "operationId": "items.put",
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}},
                        {"name": "tags", "in": "query", "style": "form", "explode": False, "schema": {"type": "array"}},
                        {"name": "Accept", "in": "header", "schema": {"type": "string"}},
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "*/*": {
                                "schema": {
                                    "type": "object",
                                    "required": ["id", "name"],
                                    "properties": {
                                        "id": {"type": "string"},
                                        "name": {"$ref": "#/components/schemas/Name", "description": "sibling wins"},
                                        "tree": {"$ref": "#/components/schemas/Tree"},
                                    },
                                }
                            }
                        },
                    },
                }
            },
            "/raw": {"post": {"requestBody": {"content": {"text/plain": {"schema": {"type": "string"}}}}}},
        },
    }
    source = normalize_openapi(document, connector="t")
    _assert_consistent(source.actions)
    assert source.base_url is None  # relative and no host to resolve it against
    put, raw = source.actions
    assert put.path == "items_put"  # '.' is punctuation, only '/' splits
    props = put.input_schema["properties"]
    assert props["body_id"] == {"type": "string"}
    assert props["name"] == {"type": ["string", "null"], "description": "sibling wins"}
    assert props["tree"]["properties"]["children"]["items"] == {"type": "object", "description": "(recursive: Tree)"}
    assert "Accept" not in props and "accept" not in props
    assert put.input_schema["required"] == ["id", "body_id", "name"]
    assert {p.name: p.style_explode for p in put.binding.params}["tags"] is False
    assert raw.path == "create_raw" and raw.aliases == ("raw.post",) and raw.binding.body_param == "body"
    assert raw.input_schema["properties"]["body"]["type"] == "string"
    assert "text/plain" in raw.input_schema["properties"]["body"]["description"]


@pytest.mark.parametrize(
    ("media", "schema", "sent"),
    [
        ("text/plain", {"type": "string"}, b"line1\nline2"),
        ("application/octet-stream", {"type": "string", "format": "binary"}, b"line1\nline2"),
        ("application/xml", {"type": "object", "properties": {"a": {"type": "string"}}}, b"line1\nline2"),
        ("text/csv; charset=utf-8", {"type": "string"}, b"line1\nline2"),
    ],
)
def test_a_body_neither_json_nor_a_form_goes_out_as_its_text_with_its_media_type(
    media: str, schema: dict[str, Any], sent: bytes
) -> None:
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {"/v1/text": {"post": {"requestBody": {"content": {media: {"schema": schema}}}}}},
    }
    [action] = normalize_openapi(document, connector="t").actions
    body = action.input_schema["properties"]["body"]
    assert body["type"] == "string" and f"as it is (UTF-8) with Content-Type {media}" in body["description"]
    request = build_request(action, {"body": "line1\nline2"}, base_url="https://api.test")
    # Not the JSON string '"line1\\nline2"' labelled application/json.
    assert (request.content, request.headers["content-type"]) == (sent, media)


def test_a_body_media_type_no_header_can_carry_is_sent_as_plain_text() -> None:
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {"/t": {"post": {"requestBody": {"content": {"text/plain\r\nX-A: 1": {"schema": {}}}}}}},
    }
    [action] = normalize_openapi(document, connector="t").actions
    request = build_request(action, {"body": "x"}, base_url="https://api.test")
    assert request.headers["content-type"] == "text/plain; charset=utf-8"


def test_allof_is_merged_and_depth_is_capped() -> None:
    def nest(depth: int) -> dict[str, Any]:
        return {"type": "string"} if depth == 0 else {"type": "object", "properties": {"x": nest(depth - 1)}}

    document = {
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "components": {
            "schemas": {"Base": {"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}}
        },
        "paths": {
            "/m": {
                "post": {
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {
                                    "allOf": [
                                        {"$ref": "#/components/schemas/Base"},
                                        {"type": "object", "properties": {"b": {"type": "integer"}, "deep": nest(12)}},
                                    ]
                                }
                            }
                        }
                    }
                }
            }
        },
    }
    (action,) = normalize_openapi(document, connector="t").actions
    assert list(action.input_schema["properties"]) == ["a", "b", "deep"]
    assert action.input_schema["required"] == ["a"]
    depth, node = 0, action.input_schema["properties"]["deep"]
    while "properties" in node:
        node, depth = node["properties"]["x"], depth + 1
    assert depth < 12 and node == {"type": "object"}


def test_risk_overrides_and_determinism() -> None:
    path = FIXTURES / "multifile" / "main.yaml"
    first = _load(path, risk_overrides={"list_animals": "destructive"})
    second = _load(path, risk_overrides={"list_animals": "destructive"})
    assert _by_path(first)["list_animals"].risk == "destructive"
    assert ACTIONS_ADAPTER.dump_json(first.actions) == ACTIONS_ADAPTER.dump_json(second.actions)
    assert first.files == second.files


def test_real_spec_determinism() -> None:
    path = DATA / "slack" / "slack_web_openapi_v2.json"
    document = json.loads(path.read_text())
    once = normalize_openapi(document, connector="test", source_file=path)
    twice = normalize_openapi(document, connector="test", source_file=path)
    assert ACTIONS_ADAPTER.dump_json(once.actions) == ACTIONS_ADAPTER.dump_json(twice.actions)
    assert ACTIONS_ADAPTER.dump_json(once.actions) == ACTIONS_ADAPTER.dump_json(
        _real("slack/slack_web_openapi_v2.json").actions
    )


# -- malformed input ----------------------------------------------------------------------------


def _error_for(path: Path) -> str:
    with pytest.raises(SourceError) as info:
        _load(path)
    message = str(info.value)
    assert str(path) in message
    return message


def test_truncated_json(tmp_path: Path) -> None:
    text = (FIXTURES / "swagger2_forms.json").read_text()
    path = tmp_path / "spec.json"
    path.write_text(text[: len(text) // 2])
    assert "truncated" in _error_for(path)


def test_json_cut_inside_a_string_is_called_truncated_and_says_where(tmp_path: Path) -> None:
    # Python's own message was quoted cut short: "Unterminated string starting at."
    path = tmp_path / "spec.json"
    path.write_text('{"openapi": "3.0.0", "info": {"title": "Pet')
    message = _error_for(path)
    assert "inside a string that starts at line 1, column 40; the file looks truncated" in message, message
    assert "starting at." not in message


def test_a_utf16_spec_is_told_to_be_saved_as_utf8(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes("openapi: 3.0.0\n".encode("utf-16"))
    assert "the file is UTF-16 text; save it as UTF-8" in _error_for(path)


def test_a_python_tag_in_a_yaml_spec_is_named_as_a_tag_not_an_indentation_problem(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("openapi: 3.0.0\ninfo: !!python/object/apply:os.system ['true']\n")
    message = _error_for(path)
    assert "Remove the tag" in message and "indentation" not in message, message


def test_truncated_gzip(tmp_path: Path) -> None:
    path = tmp_path / "spec.json.gz"
    path.write_bytes(gzip.compress((FIXTURES / "swagger2_forms.json").read_bytes())[:200])
    assert "gzip" in _error_for(path)


def test_gzip_json_is_read_transparently(tmp_path: Path) -> None:
    path = tmp_path / "spec.json.gz"
    path.write_bytes(gzip.compress((FIXTURES / "swagger2_forms.json").read_bytes()))
    assert len(_load(path).actions) == 5


def test_yaml_list_is_not_a_spec(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("- openapi: 3.0.0\n- paths: {}\n")
    assert "is a list, not a mapping" in _error_for(path)


def test_bad_yaml_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text("openapi: 3.0.0\ninfo:\n  title: [unclosed\npaths: {}\n")
    assert "not valid YAML at line" in _error_for(path)


def test_document_without_paths(tmp_path: Path) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"openapi": "3.0.0", "info": {"title": "t", "version": "1"}}))
    assert "no 'paths'" in _error_for(path)


def test_not_an_openapi_document(tmp_path: Path) -> None:
    path = tmp_path / "collection.json"
    path.write_text(json.dumps({"info": {"name": "a postman collection"}, "item": []}))
    assert "not an OpenAPI or Swagger document" in _error_for(path)


def test_missing_file(tmp_path: Path) -> None:
    assert "no such file" in _error_for(tmp_path / "absent.yaml")


def test_a_spec_path_that_is_no_regular_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    # A named pipe no one writes to waited for ever; /dev/zero was read for ever (/dev/null stands in).
    pipe = tmp_path / "spec.yaml"
    os.mkfifo(pipe)
    refused = outcome_of_reading(lambda: _load(pipe), pipe)
    assert isinstance(refused, SourceError) and "is a named pipe, not a spec file" in str(refused), refused
    assert "is a device, not a spec file" in _error_for(Path("/dev/null"))
    assert "is a directory, not a spec file" in _error_for(tmp_path)


def test_an_operation_whose_parameter_ref_cannot_be_resolved_is_left_out_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # One looping or missing ref took every other operation of the connector down with it.
    loop = {"$ref": "#/components/parameters/P1"}
    document = {
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "components": {"parameters": {"P1": {"$ref": "#/components/parameters/P2"}, "P2": loop}},
        "paths": {
            "/inventory": {"get": {"operationId": "getInventory", "parameters": [loop]}},
            "/missing": {"get": {"operationId": "getMissing", "parameters": [{"$ref": "absent.yaml#/p"}]}},
            "/gone": {"$ref": "absent.yaml#/item"},
            "/pets": {"get": {"operationId": "listPets"}},
        },
    }
    spec = tmp_path / "api.json"
    spec.write_text(json.dumps(document))
    with caplog.at_level("WARNING", logger="mcp_gateway.sources.openapi"):
        loaded = _load(spec)
    assert [action.path for action in loaded.actions] == ["list_pets"]
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 3 and all(m.startswith("connector test: an operation is left out: ") for m in warned)
    assert "GET /inventory: parameter: $ref '#/components/parameters/P1'" in warned[0] and "loops" in warned[0]
    assert "GET /missing" in warned[1] and "path item /gone" in warned[2]
    assert len(loaded.left_out) == 3


def test_an_operation_whose_path_has_an_unfillable_brace_is_left_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # describe asked for 'd' in /p/{{d}}, which call then refused; /p/{} asked for 'param' and sent %7B%7D.
    odd = ["/p1/{{d}}", "/p2/{}", "/p3/{ }", "/p4/{a", "/p5/a}"]
    fine = ["/q1/{a}{b}", "/q2/{c}.{fmt}", "/q3/{x-y}"]
    document = {
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "paths": {url: {"get": {"responses": {"200": {"description": "ok"}}}} for url in odd + fine},
    }
    with caplog.at_level("WARNING", logger="mcp_gateway.sources.openapi"):
        loaded = normalize_openapi(document, connector="t")
    assert sorted(action.binding.url for action in loaded.actions) == fine
    assert [reason.split(":")[0] for reason in loaded.left_out] == [f"GET {url}" for url in odd]
    assert all("Write each path parameter as {name}" in reason for reason in loaded.left_out)
    assert len(caplog.records) == len(odd)


def test_a_method_url_or_client_override_header_parameter_is_left_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # With a const or a single enum value the operation is one its method does not name; as an
    # argument it is refused at every call.
    override = {"name": "X-HTTP-Method-Override", "in": "header", "required": True, "schema": {"const": "DELETE"}}
    forwarded = {"name": "X-Forwarded-For", "in": "header", "schema": {"type": "string", "default": "10.0.0.1"}}
    plain = {"name": "X-Request-Id", "in": "header", "schema": {"type": "string"}}
    document = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {"/users": {"get": {"operationId": "listUsers", "parameters": [override, forwarded, plain]}}},
    }
    with caplog.at_level("WARNING", logger="mcp_gateway.sources.openapi"):
        loaded = normalize_openapi(document, connector="t")
    (action,) = loaded.actions
    assert isinstance(action.binding, OpenAPIBinding)
    assert [spec.on_wire for spec in action.binding.params] == ["X-Request-Id"]
    assert action.risk == "read" and action.input_schema.get("required", []) == []
    assert [warning.split(" is left out")[0] for warning in loaded.warnings] == [
        "header parameter 'X-HTTP-Method-Override' of GET /users",
        "header parameter 'X-Forwarded-For' of GET /users",
    ]
    warned = [r.getMessage() for r in caplog.records]
    assert warned[0] == (
        "connector t: header parameter 'X-HTTP-Method-Override' of GET /users is left out: servers on the way "
        "read it as another method, URL or client than the operation's"
    )
    assert len(warned) == 2


def test_a_header_parameter_whose_name_is_no_header_name_is_left_out_with_a_warning() -> None:
    odd = {"name": "X-Trace; risk: read", "in": "header", "schema": {"type": "string"}}
    plain = {"name": "X-Request-Id", "in": "header", "schema": {"type": "string"}}
    document = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {"/users": {"get": {"operationId": "listUsers", "parameters": [odd, plain]}}},
    }
    loaded = normalize_openapi(document, connector="t")
    (action,) = loaded.actions
    assert isinstance(action.binding, OpenAPIBinding)
    assert [spec.on_wire for spec in action.binding.params] == ["X-Request-Id"]
    assert [w.split(" is left out")[0] for w in loaded.warnings] == [
        "header parameter 'X-Trace; risk: read' of GET /users"
    ]


def test_unresolvable_relative_file_ref() -> None:
    (message,) = _load(FIXTURES / "broken_ref.yaml").left_out
    assert "no-such-file.yaml" in message and "GET /things" in message


def test_relative_ref_without_a_source_file() -> None:
    document = {
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "paths": {"/a": {"get": {"parameters": [{"$ref": "other.yaml#/p"}]}}},
    }
    (reason,) = normalize_openapi(document, connector="t").left_out
    assert "needs the spec's own path" in reason


def test_odd_documents_do_not_crash() -> None:
    document = {
        "swagger": "2.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/a": None,
            "/b": {"get": "not an operation", "x-thing": {}, "parameters": [{"in": "query"}]},
            "/c/{id}": {"post": {"parameters": [{"name": "id", "in": "query", "type": "string"}]}},
        },
    }
    (action,) = normalize_openapi(document, connector="t").actions
    _assert_consistent([action])
    # `id` is a query parameter, and the undeclared {id} of the template still gets a path argument
    assert {(p.name, p.location, p.on_wire) for p in action.binding.params} == {
        ("id", "query", "id"),
        ("path_id", "path", "id"),
    }


# -- URLs ---------------------------------------------------------------------------------------


def _serve(files: dict[str, Any]) -> Callable[[httpx2.Request], httpx2.Response]:
    def handler(request: httpx2.Request) -> httpx2.Response:
        body = files.get(request.url.path)
        if body is None:
            return httpx2.Response(404, text="not found")
        return httpx2.Response(200, text=body if isinstance(body, str) else json.dumps(body))

    return handler


def test_load_from_url_with_relative_refs() -> None:
    main = """
openapi: 3.0.0
info: {title: Remote, version: "1"}
servers: [{url: /v1}]
paths:
  /things:
    post:
      operationId: things/create
      parameters: [{$ref: "common.yaml#/components/parameters/Trace"}]
      requestBody:
        content:
          application/json:
            schema: {$ref: "common.yaml#/components/schemas/Thing"}
"""
    common = {
        "components": {
            "parameters": {"Trace": {"name": "X-Trace", "in": "header", "schema": {"type": "string"}}},
            "schemas": {
                "Thing": {"type": "object", "properties": {"name": {"$ref": "#/components/schemas/Name"}}},
                "Name": {"type": "string", "maxLength": 10},
            },
        }
    }
    handler = _serve({"/specs/api.yaml": main, "/specs/common.yaml": common})

    async def go() -> NormalizedSource:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
            return await load_openapi("https://specs.example/specs/api.yaml", connector="r", client=client)

    source = anyio.run(go)
    assert source.base_url == "https://specs.example/v1"
    assert source.files == []
    (action,) = source.actions
    assert action.input_schema["properties"] == {
        "x_trace": {"type": "string"},
        "name": {"type": "string", "maxLength": 10},
    }


def _remote_ref_spec(ref: str) -> str:
    return f"""
openapi: 3.0.0
info: {{title: Remote, version: "1"}}
paths:
  /things:
    get:
      operationId: things/list
      parameters: [{{name: size, in: query, schema: {{$ref: "{ref}"}}}}]
      responses: {{"200": {{description: ok}}}}
"""


@pytest.mark.parametrize(
    "ref",
    [
        "https://attacker.example/common.yaml#/Size",  # another host
        "//attacker.example/common.yaml#/Size",  # scheme-relative: another host too
        "http://specs.example/common.yaml#/Size",  # another scheme
        "https://specs.example:8443/common.yaml#/Size",  # another port
    ],
)
def test_a_ref_to_another_origin_is_refused_and_never_fetched(ref: str) -> None:
    asked: list[str] = []
    files = {"/specs/api.yaml": _remote_ref_spec(ref), "/common.yaml": {"Size": {"type": "integer"}}}
    serve = _serve(files)

    def handler(request: httpx2.Request) -> httpx2.Response:
        asked.append(str(request.url))
        return serve(request)

    async def go() -> NormalizedSource:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
            return await load_openapi("https://specs.example/specs/api.yaml", connector="r", client=client)

    (action,) = anyio.run(go).actions
    assert asked == ["https://specs.example/specs/api.yaml"]
    note = action.input_schema["properties"]["size"]["description"]
    assert f"(unresolved $ref {ref}: the $ref {ref!r} points at another origin" in note
    assert "than the spec's own (https://specs.example)" in note and "it was not fetched" in note
    assert "Download that document beside the spec" in note


def test_a_same_origin_ref_that_redirects_elsewhere_is_not_followed() -> None:
    asked: list[str] = []
    files = {"/specs/api.yaml": _remote_ref_spec("/common.yaml#/Size")}
    serve = _serve(files)

    def handler(request: httpx2.Request) -> httpx2.Response:
        asked.append(str(request.url))
        if request.url.path == "/common.yaml":
            return httpx2.Response(302, headers={"location": "https://attacker.example/common.yaml"})
        return serve(request)

    async def go() -> NormalizedSource:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler), follow_redirects=True) as client:
            return await load_openapi("https://specs.example/specs/api.yaml", connector="r", client=client)

    (action,) = anyio.run(go).actions
    assert asked == ["https://specs.example/specs/api.yaml", "https://specs.example/common.yaml"]
    note = action.input_schema["properties"]["size"]["description"]
    assert "redirects to another origin (https://attacker.example)" in note


def test_a_local_spec_resolves_no_remote_ref(tmp_path: Path) -> None:
    spec = tmp_path / "api.yaml"
    spec.write_text(_remote_ref_spec("https://specs.example/common.yaml#/Size"))
    (action,) = normalize_openapi(yaml.safe_load(spec.read_text()), connector="r", source_file=spec).actions
    note = action.input_schema["properties"]["size"]["description"]
    assert "points at another origin (https://specs.example) than a spec read from a file" in note


def test_a_local_spec_reads_refs_only_from_its_own_folder_tree(tmp_path: Path) -> None:
    # A spec that can name any file makes the gateway show it to agents (~/.ssh, the state folder).
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"type": "string", "description": "CANARY-OUTSIDE"}))
    folder = tmp_path / "api"
    (folder / "schemas").mkdir(parents=True)
    (folder / "schemas" / "size.json").write_text(json.dumps({"type": "integer", "description": "beside it"}))
    spec = folder / "api.json"
    parameters = [
        {"name": "up", "in": "query", "schema": {"$ref": "../outside.json"}},
        {"name": "absolute", "in": "query", "schema": {"$ref": str(outside)}},
        {"name": "size", "in": "query", "schema": {"$ref": "schemas/size.json"}},
        {"name": "below", "in": "query", "schema": {"$ref": "schemas/absent.json"}},
    ]
    document = {
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "paths": {"/a": {"get": {"operationId": "a", "parameters": parameters, "responses": {"200": {}}}}},
    }
    spec.write_text(json.dumps(document))
    (action,) = _load(spec).actions
    props = action.input_schema["properties"]
    assert "CANARY" not in json.dumps(props)
    for name in ("up", "absolute"):
        assert "points outside the spec's folder" in props[name]["description"], props[name]
    assert props["size"] == {"type": "integer", "description": "beside it"}
    missing = props["below"]["description"]
    assert "the file schemas/absent.json does not exist beside the spec" in missing and str(tmp_path) not in missing


def _load_as_connector(spec: Path, **entry: Any) -> Normalized:
    cfg = ConnectorConfig.model_validate({"slug": "c", "source": {"openapi": str(spec)}, **entry})

    async def go() -> Normalized:
        return await OpenAPILoader(str(spec)).load(cfg, LoadContext(lambda ref: ref))

    return anyio.run(go)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"swagger": "2.0", "host": "api.example.com", "schemes": ["ftp"]}, "(ftp://api.example.com) uses ftp:"),
        (
            {"openapi": "3.0.0", "servers": [{"url": "https://{tenant}.example.com", "variables": {"tenant": {}}}]},
            "has the variable {tenant}, with no default",
        ),
        ({"openapi": "3.0.0", "servers": [{"url": "file:///etc"}]}, "uses file:"),
    ],
)
def test_a_declared_server_that_cannot_be_called_fails_the_load_until_base_url_is_set(
    tmp_path: Path, fields: dict[str, Any], said: str
) -> None:
    # Taken as the default base URL, each call answered with a traceback or "could not reach {tenant}...".
    document = {**fields, "info": {"title": "t", "version": "1"}, "paths": {"/x": {"get": {"operationId": "x"}}}}
    spec = tmp_path / "api.json"
    spec.write_text(json.dumps(document))
    with pytest.raises(SourceError) as info:
        _load_as_connector(spec)
    assert said in str(info.value) and "Set base_url: in the manifest" in str(info.value)
    assert declared_base_url(document, str(spec)) is None
    loaded = _load_as_connector(spec, base_url="https://api.example.com")
    assert loaded.base_url is None and [a.path for a in loaded.actions] == ["x"]


def test_url_errors_are_source_errors() -> None:
    async def go() -> None:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(_serve({}))) as client:
            await load_openapi("https://specs.example/missing.json", connector="r", client=client)

    with pytest.raises(SourceError, match=r"https://specs.example/missing.json: the server answered HTTP 404"):
        anyio.run(go)


def test_fan_out_is_bounded() -> None:
    # Ten schemas that each reference all ten at the next level: 10**6 nodes if inlined naively.
    schemas = {
        f"L{level}S{i}": {
            "type": "object",
            "properties": {f"p{j}": {"$ref": f"#/components/schemas/L{level + 1}S{j}"} for j in range(10)},
        }
        for level in range(6)
        for i in range(10)
    }
    schemas.update({f"L6S{i}": {"type": "string"} for i in range(10)})
    document = {
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "components": {"schemas": schemas},
        "paths": {
            "/x": {
                "post": {
                    "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/L0S0"}}}}
                }
            }
        },
    }
    (action,) = normalize_openapi(document, connector="t").actions
    assert len(json.dumps(action.input_schema)) < 1_000_000


def test_the_first_tag_is_the_action_group() -> None:
    document = {
        "openapi": "3.0.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/refunds": {"post": {"operationId": "createRefund", "tags": ["Refunds", "Payments"], "responses": {}}},
            "/ping": {"get": {"operationId": "ping", "responses": {}}},
        },
    }
    groups = {a.path: a.group for a in normalize_openapi(document, connector="t").actions}
    assert groups == {"create_refund": "Refunds", "ping": ""}


@pytest.mark.parametrize(
    ("body", "said"),
    [(None, "the server answered HTTP 404"), ("just: text", "not an OpenAPI or Swagger document")],
)
def test_a_spec_urls_password_and_token_never_reach_its_errors(body: str | None, said: str) -> None:
    files = {} if body is None else {"/spec.yaml": body}
    url = "https://user:CANARY-pw@specs.example/spec.yaml?v=2&access_token=CANARY-tok"

    async def go() -> None:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(_serve(files))) as client:
            await load_openapi(url, connector="r", client=client)

    with pytest.raises(SourceError) as raised:
        anyio.run(go)
    message = str(raised.value)
    assert "CANARY" not in message and said in message
    assert message.startswith("https://user:***@specs.example/spec.yaml?v=2&access_token=[redacted]: ")


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://u:CANARY@127.0.0.1:99999/spec.json", "has a port that is not a number from 1 to 65535"),
        ("http://u:CANARY@[::1/spec.json", "has a host that does not parse"),
    ],
)
def test_a_spec_url_the_client_cannot_use_is_a_source_error(url: str, said: str) -> None:
    # The client failed deep inside (OverflowError, InvalidURL): an unexpected error and a long traceback.
    with pytest.raises(SourceError) as raised:
        anyio.run(lambda: load_openapi(url, connector="r"))
    message = str(raised.value)
    assert f": the URL is not valid: it {said}; " in message and "CANARY" not in message


def test_a_download_failure_never_quotes_the_spec_urls_token() -> None:
    url = "https://specs.example/spec.yaml?api_key=CANARY-key"

    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError(f"cannot reach {request.url}", request=request)

    async def go() -> None:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(refuse)) as client:
            await load_openapi(url, connector="r", client=client)

    with pytest.raises(SourceError, match=r"cannot download the spec \(ConnectError") as raised:
        anyio.run(go)
    assert "CANARY" not in str(raised.value) and "api_key=[redacted]" in str(raised.value)


def test_an_operation_id_of_thousands_of_characters_gives_a_short_distinct_name() -> None:
    # A 10,000-character operationId became a 10,002-character action name that discover listed and
    # a mistyped-name error quoted whole.
    long_id = "a" * 10_000
    document = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/one": {"get": {"operationId": long_id + "One", "responses": {"200": {"description": "ok"}}}},
            "/two": {"get": {"operationId": long_id + "Two", "responses": {"200": {"description": "ok"}}}},
        },
    }
    names = [a.path for a in normalize_openapi(document, connector="t").actions]
    assert len(names) == 2 and len(set(names)) == 2
    assert all(len(name) <= 120 for name in names), [len(n) for n in names]


def _one_operation(parameters: list[dict[str, Any]], body: dict[str, Any] | None = None) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": "op",
        "parameters": parameters,
        "responses": {"200": {"description": "ok"}},
    }
    if body is not None:
        operation["requestBody"] = {"content": body}
    return {"openapi": "3.0.3", "info": {"title": "t", "version": "1"}, "paths": {"/x/{id}": {"post": operation}}}


def _params(action: Action) -> tuple[ParamSpec, ...]:
    assert isinstance(action.binding, OpenAPIBinding)
    return action.binding.params


def test_parameter_styles_are_kept_with_the_defaults_of_each_location() -> None:
    array = {"type": "array", "items": {"type": "string"}}
    document = _one_operation(
        [
            {"name": "id", "in": "path", "required": True, "style": "label", "explode": True, "schema": array},
            {"name": "filter", "in": "query", "style": "deepObject", "explode": True, "schema": {"type": "object"}},
            {"name": "pipe", "in": "query", "style": "pipeDelimited", "schema": array},
            {"name": "plain", "in": "query", "schema": array},
            {"name": "X-H", "in": "header", "schema": array},
            {"name": "q", "in": "query", "content": {"application/json": {"schema": {"type": "object"}}}},
        ]
    )
    source = normalize_openapi(document, connector="t")
    specs = {p.on_wire: (p.style, p.style_explode) for p in _params(source.actions[0])}
    assert specs == {
        "id": ("label", True),
        "filter": ("deepObject", True),
        "pipe": ("pipeDelimited", False),
        "plain": ("form", True),
        "X-H": ("simple", False),
        "q": ("json", False),
    }
    assert source.warnings == ()


def test_swagger2_collection_formats_become_styles() -> None:
    def param(name: str, location: str, fmt: str | None) -> dict[str, Any]:
        extra = {"collectionFormat": fmt} if fmt else {}
        return {"name": name, "in": location, "type": "array", "items": {"type": "string"}, **extra}

    document = {
        "swagger": "2.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/x/{p}": {
                "get": {
                    "parameters": [
                        param("p", "path", "pipes"),
                        param("csv", "query", None),
                        param("ssv", "query", "ssv"),
                        param("tsv", "query", "tsv"),
                        param("multi", "query", "multi"),
                        param("H", "header", "multi"),
                    ],
                    "responses": {"200": {"description": "ok"}},
                }
            }
        },
    }
    source = normalize_openapi(document, connector="t")
    specs = {p.on_wire: (p.style, p.style_explode) for p in _params(source.actions[0])}
    assert specs == {
        "p": ("pipeDelimited", False),
        "csv": ("form", False),
        "ssv": ("spaceDelimited", False),
        "tsv": ("tabDelimited", False),
        "multi": ("form", True),
        "H": ("simple", False),
    }
    [warning] = source.warnings  # a header cannot repeat its name: said, and sent as csv
    assert "parameter 'H' (in: header): collectionFormat multi" in warning and "sent as csv" in warning


def test_a_style_the_request_cannot_honour_is_named_in_a_warning_at_load(caplog: pytest.LogCaptureFixture) -> None:
    nested = {"type": "object", "properties": {"inner": {"type": "object"}}}
    document = _one_operation(
        [
            {"name": "id", "in": "path", "required": True, "style": "deepObject", "schema": {"type": "string"}},
            {"name": "tags", "in": "query", "style": "deepObject", "explode": False, "schema": {"type": "object"}},
            {"name": "s", "in": "cookie", "schema": {"type": "array", "items": {"type": "string"}}},
            {"name": "n", "in": "query", "schema": nested},
        ],
        {"multipart/mixed": {"schema": {"type": "object", "properties": {"a": {"type": "string"}}}}},
    )
    with caplog.at_level("WARNING", logger="mcp_gateway.sources.openapi"):
        source = normalize_openapi(document, connector="t")
    warned = "\n".join(r.getMessage() for r in caplog.records)
    for expected in (
        "action t.op (POST /x/{id}): parameter 'id' (in: path): style 'deepObject' is not defined for a path "
        "parameter; it is sent in style simple",
        "parameter 'tags' (in: query): style deepObject is defined with explode: true only; it is sent exploded",
        "parameter 's' (in: cookie): an exploded cookie cannot repeat its name; it is sent as with explode: false",
        "parameter 'n' (in: query): style form cannot write nested objects or arrays; those are sent as JSON text",
        "the request body's multipart/mixed is sent as multipart/form-data",
    ):
        assert expected in warned
    assert len(source.warnings) == 5
    specs = {p.on_wire: (p.style, p.style_explode) for p in _params(source.actions[0])}
    assert specs["id"] == ("simple", False) and specs["tags"] == ("deepObject", True)


def test_a_multipart_body_keeps_its_files_json_parts_and_encoding() -> None:
    schema = {
        "type": "object",
        "required": ["file"],
        "properties": {
            "file": {"type": "string", "format": "binary", "description": "The document."},
            "pages": {"type": "array", "items": {"type": "string", "format": "binary"}},
            "meta": {"type": "object", "properties": {"k": {"type": "string"}}},
            "csv": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "filter": {"type": "object"},
        },
    }
    encoding = {"csv": {"contentType": "text/csv, text/plain"}, "filter": {"style": "deepObject", "explode": True}}
    document = _one_operation([], {"multipart/form-data": {"schema": schema, "encoding": encoding}})
    action = normalize_openapi(document, connector="t").actions[0]
    assert isinstance(action.binding, OpenAPIBinding) and action.binding.body == "multipart"
    specs = {p.on_wire: (p.style, p.style_explode, p.file, p.content_type) for p in _params(action)}
    assert specs == {
        "id": (None, True, False, None),  # undeclared: the template's own placeholder
        "file": (None, False, True, None),
        "pages": (None, False, True, None),
        "meta": ("json", False, False, None),
        "csv": ("form", True, False, "text/csv"),
        "tags": ("form", True, False, None),
        "filter": ("deepObject", True, False, None),
    }
    properties = action.input_schema["properties"]
    assert properties["file"]["description"] == "The document."
    assert [one["type"] for one in properties["file"]["anyOf"]] == ["string", "object"]  # text, or {content, …}
    assert properties["pages"]["type"] == "array" and "anyOf" in properties["pages"]["items"]


_SPEC_BEHIND_A_PRIVATE_CA = {
    "openapi": "3.0.0",
    "info": {"title": "private", "version": "1"},
    "paths": {"/who": {"get": {"operationId": "who", "responses": {"200": {"description": "ok"}}}}},
}


async def _serve_spec(scope: Scope, receive: Receive, send: Send) -> None:
    await read_body(receive)
    await reply_json(send, 200, _SPEC_BEHIND_A_PRIVATE_CA)


def test_a_spec_url_behind_a_private_ca_is_fetched_with_the_connectors_tls_ca_file(tmp_path: Path) -> None:
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    leaf = ca.issue_cert("127.0.0.1")
    leaf.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    tls = {"ssl_certfile": str(tmp_path / "server.pem")}
    (tmp_path / "not-pem.txt").write_text("hello")

    def load(url: str, **entry: Any) -> Normalized:
        cfg = ConnectorConfig.model_validate({"slug": "c", "source": {"openapi": url}, **entry})
        resolve = lambda ref: ref if "://" in ref else str(tmp_path / ref)  # noqa: E731 - as Manifest.resolve
        return anyio.run(lambda: OpenAPILoader(url).load(cfg, LoadContext(resolve)))

    with LoopbackServer(_serve_spec, **tls) as server:
        url = f"{server.base_url}/openapi.json"
        with pytest.raises(SourceError, match=r"its TLS certificate is not trusted \(.*\); .* tls\.ca_file"):
            load(url)
        (action,) = load(url, tls={"ca_file": "ca.pem"}).actions
        assert action.qualified_name == "c.who"
        with pytest.raises(SourceError, match=r"the connector's tls.ca_file 'not-pem.txt' cannot be used"):
            load(url, tls={"ca_file": "not-pem.txt"})
