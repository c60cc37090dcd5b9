"""OpenID Connect: the provider's JWTs as bearer credentials, and signing people in.

``provider`` (discovery, JWKS with bounded refetch) → ``tokens`` (verify a JWT) →
``mapping`` (groups → tenant and roles) → ``bearer`` (a JWT → ``Principal``, for the
``Authenticator``) and ``client`` (authorization code with PKCE, for sign-in pages;
``pending`` seals a sign-in under way into the browser's cookie).
Built by ``modelport.app.build_oidc`` when ``MODELPORT_OIDC_ISSUER`` is set; it needs the
``oidc`` extra (authlib, joserfc), so nothing else imports this package at run time.
"""

from modelport.tenancy.oidc.bearer import OidcBearer
from modelport.tenancy.oidc.client import AuthorizationRequest, OidcClient, SignIn
from modelport.tenancy.oidc.mapping import GroupRoles
from modelport.tenancy.oidc.pending import PendingSignIns
from modelport.tenancy.oidc.provider import KeyStore, Provider, ProviderMetadata
from modelport.tenancy.oidc.tokens import TokenVerifier, VerifiedToken

__all__ = [
    "AuthorizationRequest",
    "GroupRoles",
    "KeyStore",
    "OidcBearer",
    "OidcClient",
    "PendingSignIns",
    "Provider",
    "ProviderMetadata",
    "SignIn",
    "TokenVerifier",
    "VerifiedToken",
]
