"""The manifest package: the SPEC 3.4 schema, catalog defaults, relative paths and located, readable errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from pydantic import ValidationError

from mcp_gateway.manifest import (
    AUTH_TYPES,
    DEFAULT_MANIFEST,
    EXAMPLE_MANIFEST,
    ApiKeyAuth,
    BasicAuth,
    BearerAuth,
    ConnectorConfig,
    GraphQLSource,
    HttpSource,
    Manifest,
    McpSource,
    OpenAPISource,
    PostmanSource,
    load_manifest,
    parse_manifest,
)
from mcp_gateway.policy import OPERATORS
from mcp_gateway.vocabulary.errors import Issue, ManifestError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "manifests"


def issues_of(text: str, **kwargs: object) -> list[Issue]:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(textwrap.dedent(text), file="acme.yaml", **kwargs)  # type: ignore[arg-type]
    return caught.value.issues


def only_issue(text: str, **kwargs: object) -> Issue:
    found = issues_of(text, **kwargs)
    assert len(found) == 1, "\n".join(map(str, found))
    return found[0]


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    folder = tmp_path / "catalog"
    (folder / "specs").mkdir(parents=True)
    (folder / "github.yaml").write_text(
        textwrap.dedent(
            """\
            # An integration identity, as catalog/ holds them.
            name: GitHub
            description: Repositories and issues.
            source: { openapi: specs/github.json }
            base_url: https://api.github.com
            auth: { type: bearer }
            headers: { Accept: application/vnd.github+json }
            docs_url: https://docs.github.com/rest   # not a connector field: ignored
            """
        )
    )
    (folder / "petstore.yaml").write_text(
        "name: Petstore\nbase_url: https://petstore.example\nauth: { type: api_key, in: header, name: api_key }\n"
    )
    return folder


# -- the SPEC example and the bundled manifests -------------------------------------------------


def test_spec_example_parses(catalog: Path) -> None:
    manifest = load_manifest(FIXTURES / "spec_example.yaml", catalog_dir=catalog)

    assert (manifest.project, manifest.default_mode, manifest.public_url) == ("acme", "risk", "http://127.0.0.1:8765")
    assert [r.match for r in manifest.policies] == ["*.delete*", "/^stripe\\.refunds\\./i"]
    refunds = manifest.policies[1]
    assert refunds.action == "require_approval" and refunds.when is not None
    assert refunds.when["amount"].gt == 10000
    assert refunds.matcher.matches("stripe.Refunds.create") and refunds.matcher.error is None

    assert [c.slug for c in manifest.connectors] == ["github", "conduit", "swapi", "clock", "everything", "internal"]
    github = manifest.connector("github")
    assert github is not None and github.catalog == "github"
    assert isinstance(github.source, OpenAPISource)
    # The manifest's own source wins over the catalog's, and resolves against the manifest's folder.
    assert manifest.resolve(github.source.openapi) == str(FIXTURES.resolve() / "catalog/specs/github.json")
    assert isinstance(github.auth, BearerAuth) and github.request_action and not github.sensitive
    assert github.name == "GitHub" and github.headers == {"Accept": "application/vnd.github+json"}
    assert [(r.match, r.action) for r in github.policies] == [("issues.create", "always_run")]

    kinds = {
        c.slug: kind
        for c in manifest.connectors
        for kind, cls in (("postman", PostmanSource), ("graphql", GraphQLSource), ("mcp", McpSource))
        if isinstance(c.source, cls)
    }
    assert kinds == {"conduit": "postman", "swapi": "graphql", "clock": "mcp", "everything": "mcp"}
    everything = manifest.connector("everything")
    assert everything is not None and everything.trust_annotations

    internal = manifest.connector("internal")
    assert internal is not None and isinstance(internal.source, HttpSource)
    (deploy,) = internal.source.http.actions
    assert (deploy.path, deploy.method, deploy.url) == ("deploys.create", "POST", "/deploys/{service}")
    assert deploy.input_schema["required"] == ["service"]

    assert manifest.agents is not None and [(a.name, a.connectors) for a in manifest.agents] == [
        ("release-bot", ["github"])
    ]
    # The SPEC's example names spec files it does not ship: only those are reported (validate's file check).
    assert manifest.diagnostics() and all("no such file" in d for d in manifest.diagnostics())


@pytest.mark.parametrize("path", [DEFAULT_MANIFEST, EXAMPLE_MANIFEST])
def test_bundled_manifests_validate_cleanly(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} is not in this checkout")
    manifest = load_manifest(path)
    assert manifest.connectors and manifest.diagnostics() == []


def test_empty_manifest_is_the_defaults() -> None:
    manifest = parse_manifest("# nothing yet\n")
    assert (manifest.project, manifest.default_mode, manifest.connectors, manifest.agents) == (
        "default",
        "risk",
        [],
        None,
    )


# -- located, readable errors -------------------------------------------------------------------


def test_bad_yaml_reports_the_line() -> None:
    issue = only_issue(
        """\
        project: acme
        connectors:
          - slug: a
           base_url: http://x
        """
    )
    assert (issue.file, issue.line) == ("acme.yaml", 4)
    assert "not valid YAML" in issue.message and issue.fix


def test_tabs_get_a_specific_fix() -> None:
    issue = only_issue("connectors:\n\t- slug: a\n")
    assert issue.line == 2 and "tabs" in issue.fix


def test_a_python_tag_gets_a_fix_naming_the_tag() -> None:
    issue = only_issue("project: x\nconnectors: !!python/object/apply:os.system ['true']\n")
    assert issue.line == 2 and "remove the tag" in issue.fix and "indentation" not in issue.fix, issue.fix


def test_top_level_list_is_refused() -> None:
    issue = only_issue("- slug: a\n- slug: b\n")
    assert issue.line == 1 and "a manifest is a YAML mapping, not a list" in issue.message
    assert "project:" in issue.fix


def test_unknown_top_level_key() -> None:
    issue = only_issue("project: acme\nfoo: 1\n")
    assert (issue.line, issue.field, issue.message) == (2, "foo", "unknown key 'foo'")
    assert issue.fix.startswith("remove it") and "connectors" in issue.fix


def test_misspelled_key_gets_a_suggestion() -> None:
    issue = only_issue("project: acme\nconectors: []\n")
    assert (issue.line, issue.field) == (2, "conectors")
    assert "did you mean 'connectors'?" in issue.fix and "remove it" in issue.fix


def test_unknown_auth_type_names_the_field_line_and_valid_types() -> None:
    issue = only_issue(
        """\
        project: acme
        connectors:
          - slug: corp
            auth: {type: kerberos}
        """
    )
    assert (issue.line, issue.field) == (4, "connectors[0].auth.type")
    assert issue.message == "unknown auth type 'kerberos'"
    assert all(kind in issue.fix for kind in AUTH_TYPES)
    assert str(issue).startswith("acme.yaml:4: connectors[0].auth.type: unknown auth type 'kerberos' (fix: use one of:")


def test_auth_without_type() -> None:
    issue = only_issue("connectors:\n  - slug: a\n    auth: {header: X-Token}\n")
    assert issue.field == "connectors[0].auth" and "needs a 'type'" in issue.message and "bearer" in issue.fix


def test_misspelled_auth_field_is_located_without_union_noise() -> None:
    issue = only_issue("connectors:\n  - slug: a\n    auth:\n      type: bearer\n      heder: X-Token\n")
    assert (issue.line, issue.field, issue.message) == (5, "connectors[0].auth.heder", "unknown key 'heder'")
    assert "did you mean 'header'?" in issue.fix


def test_missing_required_auth_field() -> None:
    issue = only_issue("connectors:\n  - slug: a\n    auth: {type: aws_sigv4, service: s3}\n")
    assert (issue.field, issue.message) == ("connectors[0].auth.region", "missing required key 'region'")
    assert issue.line == 3 and issue.fix == "add 'region: …'"


def test_duplicate_slug_points_at_the_second() -> None:
    issue = only_issue("connectors:\n  - slug: gh\n  - slug: gl\n  - slug: gh\n")
    assert (issue.line, issue.field) == (4, "connectors[2].slug")
    assert "duplicate connector slug 'gh'" in issue.message and "connectors[0]" in issue.message


@pytest.mark.parametrize("slug", ["GitHub", "1password", "my.api", "a" * 64, ""])
def test_bad_slug(slug: str) -> None:
    issue = only_issue(f"connectors:\n  - slug: '{slug}'\n")
    assert (issue.line, issue.field) == (2, "connectors[0].slug")
    assert "not a valid slug" in issue.message and "lowercase" in issue.fix


def test_static_authorization_header_is_refused() -> None:
    issue = only_issue("connectors:\n  - slug: a\n    headers:\n      Authorization: Bearer abc123\n")
    assert (issue.line, issue.field) == (4, "connectors[0].headers.Authorization")
    assert "would carry a credential" in issue.message and "auth:" in issue.fix


@pytest.mark.parametrize(
    ("yaml_text", "line", "field"),
    [
        ("connectors:\n  - slug: a\n    headers:\n      X-HTTP-Method-Override: DELETE\n", 4, "headers"),
        ("connectors:\n  - slug: a\n    headers:\n      X-Forwarded-For: 10.0.0.1\n", 4, "headers"),
        (
            "connectors:\n  - slug: a\n    source:\n      mcp:\n        url: https://m.test/mcp\n"
            "        headers:\n          X-Original-URL: /admin\n",
            7,
            "source.mcp.headers",
        ),
        (
            "connectors:\n  - slug: a\n    base_url: https://a.test\n    source:\n      http:\n        actions:\n"
            "          - path: users.list\n            url: /users\n            params:\n"
            "              Forwarded: header\n",
            10,
            "source.http.actions[0].params",
        ),
    ],
)
def test_method_url_or_client_override_headers_in_the_manifest_are_refused(
    yaml_text: str, line: int, field: str
) -> None:
    # Policy and approvals judge each action by its own method and URL; a fixed header telling a
    # server on the way to use others would run what nobody judged.
    issue = only_issue(yaml_text)
    assert issue.line == line and issue.field.startswith(f"connectors[0].{field}."), issue
    assert "another method, URL or client" in issue.message and issue.fix.startswith("remove it")
    assert "abc123" not in str(issue)


def test_static_header_may_not_shadow_the_auth_header() -> None:
    issue = only_issue("connectors:\n  - slug: a\n    auth: {type: api_key, name: X-Key}\n    headers: {x-key: k}\n")
    assert issue.field == "connectors[0].headers.x-key" and "auth type 'api_key' sets" in issue.message


def test_header_values_are_never_echoed() -> None:
    issue = only_issue("connectors:\n  - slug: a\n    headers: {X-Thing: 123456789}\n")
    assert issue.field == "connectors[0].headers.X-Thing" and "123456789" not in str(issue)


def test_agent_granted_unknown_connector() -> None:
    issue = only_issue(
        """\
        connectors:
          - slug: github
          - slug: jira
        agents:
          - name: release-bot
            connectors: [github, githb]
        """
    )
    assert (issue.line, issue.field) == (6, "agents[0].connectors[1]")
    assert issue.message == "agent 'release-bot' is granted unknown connector 'githb'"
    assert "did you mean 'github'?" in issue.fix and "jira" in issue.fix


def test_http_action_with_a_bad_method() -> None:
    issue = only_issue(
        """\
        connectors:
          - slug: internal
            source:
              http:
                actions:
                  - path: deploys.create
                    method: FETCH
                    url: /deploys
        """
    )
    assert (issue.line, issue.field) == (7, "connectors[0].source.http.actions[0].method")
    assert issue.message == "unknown HTTP method 'FETCH'" and "POST" in issue.fix


def test_http_action_paths_are_dotted_and_unique() -> None:
    actions = "connectors:\n  - slug: internal\n    source:\n      http:\n        actions:\n"
    issue = only_issue(
        actions + "          - {path: deploys.create, url: /a}\n          - {path: deploys.create, url: /b}\n"
    )
    assert (issue.line, issue.field) == (7, "connectors[0].source.http.actions[1].path")
    assert "duplicate action path 'deploys.create'" in issue.message
    issue = only_issue(actions + "          - {path: 'deploys/list', url: /c}\n")
    assert (issue.line, issue.field) == (6, "connectors[0].source.http.actions[0].path")
    assert "dot-separated" in issue.message and "deploys.create" in issue.fix


def test_source_with_no_or_two_kinds() -> None:
    issue = only_issue("connectors:\n  - slug: a\n    source: {openapi: a.json, http: {actions: []}}\n")
    assert issue.field == "connectors[0].source"
    assert "exactly one of: openapi, http, postman, graphql, mcp (found: openapi, http)" in issue.message
    assert only_issue("connectors:\n  - slug: a\n    source: spec.json\n").fix.startswith("write e.g. 'source:")


def test_a_mistake_inside_a_source_is_reported_once_for_its_kind() -> None:
    issue = only_issue("connectors:\n  - slug: a\n    source: {openapi: 5}\n")
    assert (issue.field, issue.message) == ("connectors[0].source.openapi", "should be a string, not 5")


def test_bad_regex_in_policies_is_a_diagnostic_not_an_error() -> None:
    manifest = parse_manifest(
        textwrap.dedent(
            """\
            project: acme
            policies:
              - match: "*.read"
                action: always_run
              - match: "/^(a+)+$/"
                action: block
            connectors:
              - slug: gh
                policies:
                  - match: "/([a-z/"
                    action: block
            """
        ),
        file="acme.yaml",
    )
    assert not manifest.policies[1].matcher.matches("aaaa")
    found = manifest.diagnostic_issues()
    assert [(i.file, i.line, i.field) for i in found] == [
        ("acme.yaml", 5, "policies[1].match"),
        ("acme.yaml", 10, "connectors[0].policies[0].match"),
    ]
    assert "never matches" in found[0].message and "catastrophic" in found[0].message
    assert "invalid regex" in found[1].message and found[1].fix
    assert manifest.diagnostics() == [str(i) for i in found]
    assert manifest.diagnostics()[0].startswith("acme.yaml:5: policies[1].match: '/^(a+)+$/' never matches")


def test_when_with_an_unknown_operator_is_an_error() -> None:
    issue = only_issue(
        """\
        policies:
          - match: "*"
            action: block
            when: { amount: { greater: 5 } }
        """
    )
    assert (issue.line, issue.field, issue.message) == (
        4,
        "policies[0].when.amount.greater",
        "unknown operator 'greater'",
    )
    assert all(op in issue.fix for op in OPERATORS)


def test_when_in_is_spelled_in() -> None:
    issue = only_issue("policies:\n  - match: '*'\n    action: block\n    when: {branch: {in_: [main]}}\n")
    assert issue.message == "unknown operator 'in_'" and "did you mean 'in'?" in issue.fix
    manifest = parse_manifest("policies:\n  - match: '*'\n    action: block\n    when: {branch: {in: [main]}}\n")
    assert manifest.policies[0].when is not None and manifest.policies[0].when["branch"].in_ == ["main"]


@pytest.mark.parametrize(
    ("condition", "field", "says"),
    [
        ("{gt: '10000'}", "gt", "needs a number here, not the string '10000'"),
        ("{in: main}", "in", "should be a list"),
        ("{matches: '(a+)+$'}", "matches", "catastrophic"),
        ("{}", "", "at least one operator"),
    ],
)
def test_malformed_when(condition: str, field: str, says: str) -> None:
    issue = only_issue(f"policies:\n  - match: '*'\n    action: block\n    when: {{amount: {condition}}}\n")
    assert issue.line == 4 and issue.field == "policies[0].when.amount" + (f".{field}" if field else "")
    assert says in issue.message and issue.fix


def test_literal_choices_are_listed() -> None:
    issue = only_issue("default_mode: strict\n")
    assert issue.message == "must be 'risk' or 'allow_all', not 'strict'" and "'allow_all'" in issue.fix
    issue = only_issue("policies:\n  - match: '*'\n    action: deny\n")
    assert issue.field == "policies[0].action" and "'require_approval'" in issue.message


def test_duplicate_yaml_keys_are_errors() -> None:
    issue = only_issue("project: acme\npolicies: []\npolicies:\n  - {match: '*', action: block}\n")
    assert (issue.line, issue.field) == (3, "policies") and "appears twice (first on line 2)" in issue.message


def test_yaml_merge_keys_may_override() -> None:
    text = "connectors:\n  - &a {slug: a, sensitive: true, timeout: 5}\n  - {<<: *a, slug: b, timeout: 9}\n"
    manifest = parse_manifest(text)
    assert [(c.slug, c.sensitive, c.timeout) for c in manifest.connectors] == [("a", True, 5), ("b", True, 9)]


def test_internal_names_are_not_manifest_keys() -> None:
    assert only_issue("base_dir: /etc\n").message == "unknown key 'base_dir'"
    assert only_issue("policies:\n  - {match: '*', action: block, matcher: x}\n").message == "unknown key 'matcher'"


def test_every_problem_is_reported_at_once_in_line_order() -> None:
    found = issues_of(
        """\
        project: acme
        default_mode: strict
        connectors:
          - slug: Bad
            auth: {type: kerberos}
          - slug: ok
            timeout: -1
        agents:
          - name: bot
            connectors: [ok]
        """
    )
    assert [(i.line, i.field) for i in found] == [
        (2, "default_mode"),
        (4, "connectors[0].slug"),
        (5, "connectors[0].auth.type"),
        (7, "connectors[1].timeout"),
    ]
    assert all(i.fix for i in found)


@pytest.mark.parametrize(
    "text",
    [
        "connectors:\n  - slug: a\n    auth: {type: kerberos}\n",
        "connectors:\n  - slug: a\n    auth: {type: bearer, heder: x}\n",
        "connectors:\n  - slug: a\n    auth: {type: api_key, in: body}\n",
        "connectors:\n  - slug: a\n    source: {openapi: [x]}\n",
        "connectors:\n  - slug: a\n    source: {http: {actions: [{path: a, url: /a, method: FETCH}]}}\n",
        "policies:\n  - {match: '*', action: block, when: {x: {in: 3}}}\n",
        "policies:\n  - {match: '*', action: block, when: {x: {gt: yes}}}\n",
        "policies:\n  - {match: '*', action: block, when: {x: {bogus: 1}}}\n",
        "agents:\n  - {connectors: [a]}\n",
        "connectors:\n  - {slug: a, sensitive: maybe}\n",
    ],
)
def test_messages_carry_no_pydantic_internals(text: str) -> None:
    rendered = "\n".join(str(i) for i in issues_of(text))
    for noise in ("function-after", "tagged-union", "in_", "Input should", "Value error", "[type=", "pydantic"):
        assert noise not in rendered, rendered
    for issue in issues_of(text):
        assert issue.file == "acme.yaml" and issue.line is not None and issue.field and issue.message and issue.fix


def test_api_key_in_is_spelled_in() -> None:
    issue = only_issue("connectors:\n  - slug: a\n    auth: {type: api_key, in: body}\n")
    assert issue.field == "connectors[0].auth.in" and "'header', 'query' or 'cookie'" in issue.message
    auth = (
        parse_manifest("connectors:\n  - slug: a\n    auth: {type: api_key, in: query, name: key}\n").connectors[0].auth
    )
    assert isinstance(auth, ApiKeyAuth) and auth.in_ == "query"


def test_direct_construction_still_runs_the_cross_checks() -> None:
    with pytest.raises(ValidationError, match="duplicate connector slug"):
        Manifest(connectors=[ConnectorConfig(slug="a"), ConnectorConfig(slug="a")])


# -- catalog defaults ---------------------------------------------------------------------------


def test_catalog_supplies_defaults(catalog: Path, tmp_path: Path) -> None:
    manifest = parse_manifest("connectors:\n  - {slug: gh, catalog: github}\n", base_dir=tmp_path, catalog_dir=catalog)
    gh = manifest.connectors[0]
    assert (gh.name, gh.description, gh.base_url) == ("GitHub", "Repositories and issues.", "https://api.github.com")
    assert isinstance(gh.auth, BearerAuth) and gh.headers == {"Accept": "application/vnd.github+json"}
    # The entry's relative spec path resolves against the catalog folder, not the manifest's.
    assert isinstance(gh.source, OpenAPISource)
    assert gh.source.openapi == str((catalog / "specs" / "github.json").resolve())
    assert manifest.resolve(gh.source.openapi) == gh.source.openapi


def test_manifest_fields_win_over_the_catalog(catalog: Path, tmp_path: Path) -> None:
    text = """\
        connectors:
          - slug: gh
            catalog: github
            name: GitHub Enterprise
            base_url: https://ghe.example/api/v3
            source: { openapi: specs/ghe.json }
            headers: { X-Extra: "1" }
        """
    gh = parse_manifest(textwrap.dedent(text), base_dir=tmp_path, catalog_dir=catalog).connectors[0]
    assert (gh.name, gh.base_url) == ("GitHub Enterprise", "https://ghe.example/api/v3")
    assert gh.description == "Repositories and issues."
    assert isinstance(gh.source, OpenAPISource) and gh.source.openapi == "specs/ghe.json"
    assert gh.headers == {"Accept": "application/vnd.github+json", "X-Extra": "1"}


def test_manifest_auth_refines_or_replaces_the_catalog_auth(catalog: Path) -> None:
    refined = parse_manifest(
        "connectors:\n  - {slug: p, catalog: petstore, auth: {prefix: 'Token '}}\n", catalog_dir=catalog
    ).connectors[0]
    assert isinstance(refined.auth, ApiKeyAuth) and (refined.auth.name, refined.auth.prefix) == ("api_key", "Token ")
    replaced = parse_manifest(
        "connectors:\n  - {slug: p, catalog: petstore, auth: {type: basic}}\n", catalog_dir=catalog
    ).connectors[0]
    assert isinstance(replaced.auth, BasicAuth)


def test_unknown_catalog_entry_lists_the_known_ones(catalog: Path) -> None:
    issue = only_issue("connectors:\n  - slug: gh\n    catalog: githib\n", catalog_dir=catalog)
    assert (issue.line, issue.field) == (3, "connectors[0].catalog")
    assert "no catalog entry 'githib'" in issue.message
    assert "did you mean 'github'?" in issue.fix and "petstore" in issue.fix
    issue = only_issue("connectors:\n  - slug: gh\n    catalog: zzz\n", catalog_dir=catalog)
    assert issue.fix == "use one of the entries: github, petstore"


def test_catalog_name_cannot_walk_out_of_the_catalog(catalog: Path) -> None:
    issue = only_issue("connectors:\n  - slug: gh\n    catalog: ../secrets\n", catalog_dir=catalog)
    assert issue.field == "connectors[0].catalog" and "not a catalog entry name" in issue.message


def test_a_mistake_in_a_catalog_entry_points_at_the_entry(catalog: Path) -> None:
    (catalog / "broken.yaml").write_text("name: Broken\nauth:\n  type: kerberos\n")
    issue = only_issue("connectors:\n  - {slug: b, catalog: broken}\n", catalog_dir=catalog)
    assert (issue.file, issue.line, issue.field) == (str(catalog / "broken.yaml"), 3, "auth.type")
    assert "catalog entry 'broken', used by connectors[0]" in issue.message


# -- paths and files ----------------------------------------------------------------------------


def test_relative_paths_resolve_against_the_manifest_folder(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "gw.yaml").write_text(
        "connectors:\n"
        "  - {slug: rel, source: {openapi: specs/api.json}}\n"
        "  - {slug: abs, source: {openapi: /srv/api.json}}\n"
        "  - {slug: url, source: {openapi: 'https://example.com/openapi.json'}}\n"
    )
    manifest = load_manifest(folder / "gw.yaml")
    refs = [c.source.openapi for c in manifest.connectors if isinstance(c.source, OpenAPISource)]
    assert [manifest.resolve(r) for r in refs] == [
        str(folder.resolve() / "specs" / "api.json"),
        "/srv/api.json",
        "https://example.com/openapi.json",
    ]


def test_load_manifest_names_the_file_in_every_issue(tmp_path: Path) -> None:
    path = tmp_path / "gw.yaml"
    path.write_text("project: acme\nconnectors:\n  - slug: Bad\n")
    with pytest.raises(ManifestError) as caught:
        load_manifest(path)
    assert str(caught.value).startswith(f"{path}:3: connectors[0].slug: 'Bad' is not a valid slug (fix: ")


def test_unreadable_manifest_is_a_located_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read the manifest"):
        load_manifest(tmp_path / "missing.yaml")
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"project: \xff\xfe\n")
    with pytest.raises(ManifestError, match="not UTF-8"):
        load_manifest(binary)


def test_a_manifest_that_is_no_regular_file_is_refused_before_it_is_read(tmp_path: Path) -> None:
    # A FIFO no one writes to waited for ever, and /dev/zero was read for ever.
    import os

    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a named pipe"), (Path("/dev/zero"), "a device"), (tmp_path, "a directory")):
        with pytest.raises(ManifestError, match=f"cannot read the manifest: it is {kind}, not a file"):
            load_manifest(path)


def test_a_missing_bundled_default_does_not_blame_the_manifest_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mcp_gateway.manifest.loader.DEFAULT_MANIFEST", tmp_path / "gone.yaml")
    with pytest.raises(ManifestError, match="cannot read the manifest") as caught:
        load_manifest()
    assert "check the path given" not in str(caught.value)
    assert "reinstall" in str(caught.value)


def test_a_missing_manifest_names_both_places_its_path_comes_from(tmp_path: Path) -> None:
    # The path may come from $MCP_GATEWAY_MANIFEST, where "given to --manifest" sent the operator astray.
    with pytest.raises(ManifestError) as caught:
        load_manifest(tmp_path / "nonexistent.yaml")
    (issue,) = caught.value.issues
    assert "--manifest" in issue.fix and "$MCP_GATEWAY_MANIFEST" in issue.fix


@pytest.mark.parametrize(
    "written", ["CANARY-55zz-notaurl", "api.example.com/v1", "ftp://files.example.com", "https://", "http://h:port/"]
)
def test_a_base_url_that_is_no_http_url_is_refused_at_its_line_without_quoting_it(written: str) -> None:
    # Accepted, it failed every call with an internal error; quoted, a credential pasted there would be logged.
    (issue,) = issues_of(f"project: p\nconnectors:\n  - slug: a\n    base_url: {written}\n")
    assert issue.field == "connectors[0].base_url" and issue.line == 4
    assert "not an http(s) URL with a host" in issue.message and "https://api.example.com" in issue.fix
    assert written not in issue.message


@pytest.mark.parametrize(
    ("written", "says"),
    [
        ("http://u:CANARY@127.0.0.1:99999/spec.json", "has a port that is not a number from 1 to 65535"),
        ("http://u:CANARY@127.0.0.1:port/spec.json", "has a port that is not a number from 1 to 65535"),
        ('"http://u:CANARY@[::1/spec.json"', "has a host that does not parse"),
        ('"http://u:CANARY@127.0.0.1/sp\\tec.json"', "holds a space, a tab or a line break"),
        ("https://u:CANARY@:443/spec.json", "names no host"),
    ],
)
@pytest.mark.parametrize(
    ("source", "field", "what"),
    [
        ("{{openapi: {url}}}", "openapi", "spec"),
        ("{{postman: {url}}}", "postman", "collection"),
        ("{{mcp: {{url: {url}}}}}", "mcp.url", "MCP server"),
    ],
)
def test_a_source_url_that_cannot_be_fetched_is_refused_at_its_line_naming_the_connector(
    written: str, says: str, source: str, field: str, what: str
) -> None:
    # Accepted, sync failed deep in the HTTP client and logged a traceback of some 80 lines.
    text = f"project: p\nconnectors:\n  - slug: billing\n    source: {source.format(url=written)}\n"
    (issue,) = issues_of(text)
    assert issue.field == f"connectors[0].source.{field}" and issue.line == 4
    assert issue.message == f"connector 'billing': its {what} URL {says}"
    assert "CANARY" not in issue.message + issue.fix


def test_a_source_url_that_can_be_fetched_passes() -> None:
    text = "project: p\nconnectors:\n"
    for i, url in enumerate(["http://[::1]:8080/s.json", "https://u:pw@api.example.com/s.json?x=1", "http://h:65535/"]):
        text += f"  - slug: c{i}\n    source: {{openapi: '{url}'}}\n"
    assert len(parse_manifest(text).connectors) == 3


@pytest.mark.parametrize(
    "where",
    [
        "    auth: CANARY-pasted-token\n",
        "    auth: {type: bearer, prefix: [CANARY-pasted-token]}\n",
        "    source: {mcp: {command: [srv], env: {TOKEN: [CANARY-pasted-token]}}}\n",
        "    source: {mcp: {url: 'htp://u:CANARY-pasted-token@h/mcp'}}\n",
    ],
)
def test_a_wrong_value_where_a_credential_goes_is_described_not_quoted(where: str) -> None:
    # The error reaches terminals and, on a hot reload, the server's log.
    issues = issues_of(f"project: p\nconnectors:\n  - slug: a\n{where}")
    assert issues and all("CANARY" not in issue.message + issue.fix for issue in issues), issues


def test_aliases_nested_into_millions_of_copies_are_refused_at_once() -> None:
    # Eight lines grew into millions of values for every later walk: seconds and a gigabyte at 7 levels.
    levels = ['a0: &a0 ["x","x","x","x","x","x","x","x","x"]']
    levels += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 8)]
    (issue,) = issues_of("\n".join(levels) + "\nproject: p\n")
    assert "copy more than 100,000 values" in issue.message and "fewer aliases nested" in issue.fix


@pytest.mark.parametrize(
    "nested", ["[" * 1000 + "]" * 1000, "{a: " * 1000 + "1" + "}" * 1000], ids=["lists", "mappings"]
)
def test_a_value_nested_a_thousand_levels_deep_is_refused_at_its_line(nested: str) -> None:
    # It was "unexpected RecursionError", exit 1, and the same at a running server's reload.
    (issue,) = issues_of(f"project: p\nconnectors: []\nx: {nested}\n")
    assert issue.line == 3 and "more than 200 levels deep" in issue.message and "flatten" in issue.fix


def test_a_nul_byte_is_named_at_its_line_without_the_parsers_offset() -> None:
    (issue,) = issues_of("project: p\nconnectors: []\n\0\n")
    assert issue.line == 3 and "U+0000" in issue.message and "\n" not in issue.message
    assert "<unicode string>" not in issue.message and "indentation" not in issue.fix


def test_a_large_manifest_written_out_or_with_a_few_aliases_is_read() -> None:
    first = "  - slug: c0\n    base_url: https://api0.example\n    headers: &h {X-Team: platform}\n"
    rest = "".join(f"  - slug: c{i}\n    base_url: https://api{i}.example\n    headers: *h\n" for i in range(1, 2000))
    manifest = parse_manifest(f"project: p\nconnectors:\n{first}{rest}")
    assert len(manifest.connectors) == 2000


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ("127.0.0.1:19240", "not an http(s) URL"),
        ("http://127.0.0.1:99999", "not a valid URL"),
        ("http://:8765", "names no host"),
        ("https://u:CANARY-PW@gw.example.com:0", "port 0"),
        ("https://u:CANARY-PW@gw.example.com/", "holds a user name or password"),  # every link would carry it
        ("https://CANARY-PW@gw.example.com/", "holds a user name or password"),
    ],
)
def test_a_public_url_that_cannot_be_a_link_base_is_refused_at_its_line(written: str, said: str) -> None:
    # The same check as --public-url: a port out of range passed validate, then every command crashed.
    issue = only_issue(f"project: p\npublic_url: '{written}'\n")
    assert issue.field == "public_url" and issue.line == 2 and said in issue.message, issue
    assert "CANARY-PW" not in issue.message
