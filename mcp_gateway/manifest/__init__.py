"""The manifest: a pydantic schema and a YAML loader whose errors are located.

Import from the package (``from mcp_gateway.manifest import X``); its modules hold one part each:

* ``loader``: the top-level models (``Manifest``, ``ConnectorConfig``, ``PolicyRule``, ...) and the entry
  points ``parse_manifest`` and ``load_manifest``;
* ``auth`` and ``sources``: the ``auth:`` and ``source:`` models of a connector;
* ``catalog``: catalog entries as connector defaults; ``bundled``: where the bundled catalog and
  manifests are (package data);
* ``issues``: pydantic's errors as located issues; ``yaml_lines``: YAML with the line of every key and
  duplicate keys as issues; ``validation``: the strict model config, the slug rule and ``Problem``.
"""

from ..vocabulary.errors import ManifestError
from .auth import (
    AUTH_TYPES,
    CREDENTIAL_HEADERS,
    ApiKeyAuth,
    AuthConfig,
    AwsSigV4Auth,
    BasicAuth,
    BearerAuth,
    CustomAuth,
    HmacAuth,
    MtlsAuth,
    NoAuth,
    OAuth1Auth,
    OAuth2Auth,
    auth_headers,
    auth_params,
)
from .bundled import BUNDLED_DIR, CATALOG_DIR, DEFAULT_MANIFEST, EXAMPLE_MANIFEST
from .loader import (
    AgentConfig,
    ApprovalsConfig,
    ConnectorConfig,
    DiscoveryConfig,
    EmbeddingsEndpoint,
    FrontDoorConfig,
    Manifest,
    PolicyRule,
    TlsConfig,
    blank_manifest,
    load_manifest,
    parse_manifest,
)
from .sources import (
    ACTION_PATH_RE,
    SOURCE_KINDS,
    GraphQLSource,
    GraphQLSpec,
    HttpActionConfig,
    HttpActions,
    HttpSource,
    McpSource,
    McpSpec,
    OpenAPISource,
    PostmanSource,
    SourceConfig,
)
from .traffic_settings import AgentLimitsConfig

__all__ = [
    "ACTION_PATH_RE",
    "AUTH_TYPES",
    "BUNDLED_DIR",
    "CATALOG_DIR",
    "CREDENTIAL_HEADERS",
    "DEFAULT_MANIFEST",
    "EXAMPLE_MANIFEST",
    "SOURCE_KINDS",
    "AgentConfig",
    "AgentLimitsConfig",
    "ApiKeyAuth",
    "ApprovalsConfig",
    "AuthConfig",
    "AwsSigV4Auth",
    "BasicAuth",
    "BearerAuth",
    "ConnectorConfig",
    "CustomAuth",
    "DiscoveryConfig",
    "EmbeddingsEndpoint",
    "FrontDoorConfig",
    "GraphQLSource",
    "GraphQLSpec",
    "HmacAuth",
    "HttpActionConfig",
    "HttpActions",
    "HttpSource",
    "Manifest",
    "ManifestError",
    "McpSource",
    "McpSpec",
    "MtlsAuth",
    "NoAuth",
    "OAuth1Auth",
    "OAuth2Auth",
    "OpenAPISource",
    "PolicyRule",
    "PostmanSource",
    "SourceConfig",
    "TlsConfig",
    "auth_headers",
    "auth_params",
    "blank_manifest",
    "load_manifest",
    "parse_manifest",
]
