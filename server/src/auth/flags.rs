//! The browser-token flags (`--browser-token-*`), flattened into
//! [`crate::Config`]. Each has an environment twin; bad values are refused
//! at start by [`super::keys::BrowserKeys::new`], naming the flag.

use clap::Args;

/// How browser tokens (short-lived JWTs minted by the application's
/// backend, see PROTOCOL.md "Credentials") are verified.
#[derive(Debug, Clone, Args)]
pub struct BrowserTokenFlags {
    /// A key browser tokens of TENANT are verified with, named KID (the
    /// token header's `kid`): `TENANT:KID=HS256:<base64 secret of at least
    /// 32 bytes>`, or `TENANT:KID=EdDSA:<base64 DER>` /
    /// `TENANT:KID=ES256:<base64 DER>` for an Ed25519 / P-256 public key
    /// (the body of its PEM file on one line; the minting backend keeps the
    /// private key). Repeatable: list the new key next to the old one during
    /// a rotation (both are accepted), then drop the old one. KIDs are
    /// unique across tenants. The environment twin takes a comma-separated
    /// list. Default: none (browser tokens are refused).
    #[arg(
        long = "browser-token-key",
        env = "TASKWIRE_BROWSER_TOKEN_KEY",
        value_name = "TENANT:KID=ALG:KEY",
        value_delimiter = ','
    )]
    pub keys: Vec<String>,

    /// The `aud` every browser token must carry.
    #[arg(
        long = "browser-token-audience",
        env = "TASKWIRE_BROWSER_TOKEN_AUDIENCE",
        default_value = "taskwire",
        value_name = "AUD"
    )]
    pub audience: String,

    /// Clock skew allowed on a browser token's `exp` and `nbf`, in seconds.
    #[arg(
        long = "browser-token-leeway-secs",
        env = "TASKWIRE_BROWSER_TOKEN_LEEWAY_SECS",
        default_value_t = 30,
        value_parser = clap::value_parser!(u64).range(0..=300),
        value_name = "SECS"
    )]
    pub leeway_secs: u64,

    /// The longest a browser token may still be valid when it is used
    /// (`exp` minus now), in seconds: a token minted for longer is refused,
    /// so no long-lived credential can ride in a URL.
    #[arg(
        long = "browser-token-max-ttl-secs",
        env = "TASKWIRE_BROWSER_TOKEN_MAX_TTL_SECS",
        default_value_t = 3_600,
        value_parser = clap::value_parser!(u64).range(1..=604_800),
        value_name = "SECS"
    )]
    pub max_ttl_secs: u64,
}
