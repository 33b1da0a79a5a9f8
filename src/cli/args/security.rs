//! `serve`'s security flags: credentials by role and TLS (flattened into `ServeArgs`).

use std::path::PathBuf;

use clap::Args;

/// Every flag also reads `LEAFRAFT_<FLAG>` and the `--config` TOML file (flags > env > file).
/// `Debug` shows which secrets were given, never their values.
#[derive(Args, Default)]
pub struct SecurityArgs {
    /// Shorthand for --peer-secret S --admin-token S (visible in `ps` as a flag: prefer the
    /// variable or --secret-file).
    #[arg(long, env = "LEAFRAFT_SECRET", hide_env_values = true)]
    pub secret: Option<String>,
    /// --secret read from a file.
    #[arg(long, env = "LEAFRAFT_SECRET_FILE")]
    pub secret_file: Option<PathBuf>,
    /// The secret peers send on `/raft/*` (and this node sends to them).
    #[arg(long, env = "LEAFRAFT_PEER_SECRET", hide_env_values = true)]
    pub peer_secret: Option<String>,
    /// --peer-secret read from a file.
    #[arg(long, env = "LEAFRAFT_PEER_SECRET_FILE")]
    pub peer_secret_file: Option<PathBuf>,
    /// The token tag, namespace, worker and membership writes, import and backup need (it also
    /// takes IDs of every tag); a node started with --join sends it to its seeds.
    #[arg(long, env = "LEAFRAFT_ADMIN_TOKEN", hide_env_values = true)]
    pub admin_token: Option<String>,
    /// --admin-token read from a file.
    #[arg(long, env = "LEAFRAFT_ADMIN_TOKEN_FILE")]
    pub admin_token_file: Option<PathBuf>,
    /// A client token, NAME:TOKEN[:tag1,tag2] (repeatable; in the variable separated by ';'): ID
    /// endpoints need one once any is given; with tags, only for those tags (and snowflake).
    #[arg(long, env = "LEAFRAFT_CLIENT_TOKEN", hide_env_values = true, value_delimiter = ';')]
    pub client_token: Vec<String>,
    /// Client tokens from a file, one NAME:TOKEN[:tags] a line.
    #[arg(long, env = "LEAFRAFT_CLIENT_TOKEN_FILE")]
    pub client_token_file: Option<PathBuf>,
    /// This node's certificate chain (PEM): TLS on its port, and its client certificate towards
    /// peers. Reloaded on SIGHUP and when the file changes.
    #[arg(long, env = "LEAFRAFT_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, env = "LEAFRAFT_TLS_KEY")]
    pub tls_key: Option<PathBuf>,
    /// CA certificates (PEM): `/raft/*` needs a client certificate chaining to them that names the
    /// member the request claims (DNS name node-<ID>.leafraft).
    #[arg(long, env = "LEAFRAFT_PEER_CA")]
    pub peer_ca: Option<PathBuf>,
    /// CA certificates (PEM) this node trusts for its peers' server certificates [default: --peer-ca].
    #[arg(long, env = "LEAFRAFT_CA")]
    pub ca: Option<PathBuf>,
    /// Let an empty --admin-token-file (or --secret-file) open the admin role instead of keeping
    /// the last good token (loopback or --insecure only).
    #[arg(long, env = "LEAFRAFT_ADMIN_OPEN", action = clap::ArgAction::SetTrue)]
    pub admin_open: bool,
    /// Let an empty --client-token-file open the ID endpoints instead of keeping the last good
    /// tokens (loopback or --insecure only).
    #[arg(long, env = "LEAFRAFT_CLIENT_OPEN", action = clap::ArgAction::SetTrue)]
    pub client_open: bool,
    /// How long a connection may take to send a request's headers, counted from when the node
    /// starts waiting for them; also how long a kept-alive connection may wait between requests
    /// and how long a TLS handshake may take [default: 10000].
    #[arg(long, env = "LEAFRAFT_HEADER_READ_TIMEOUT_MS")]
    pub header_read_timeout_ms: Option<u64>,
    /// A connection that moves no byte either way for this long is closed (a stalled body, an
    /// answer nobody reads) [default: 120000; above the longest request, --learner-timeout-ms].
    #[arg(long, env = "LEAFRAFT_IDLE_TIMEOUT_MS")]
    pub idle_timeout_ms: Option<u64>,
    /// How many connections (handshakes included) this node holds at once; further ones wait in
    /// the listen backlog [default: 10000; keep it under the process's file descriptor limit].
    #[arg(long, env = "LEAFRAFT_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// How many of those connections one source address holds at once; a further one is closed
    /// as soon as it is accepted [default: a quarter of the connections the node admits].
    #[arg(long, env = "LEAFRAFT_MAX_CONNECTIONS_PER_SOURCE")]
    pub max_connections_per_source: Option<usize>,
}

impl std::fmt::Debug for SecurityArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |given: bool| if given { "<redacted>" } else { "-" };
        f.debug_struct("SecurityArgs")
            .field("secret", &shown(self.secret.is_some()))
            .field("secret_file", &self.secret_file)
            .field("peer_secret", &shown(self.peer_secret.is_some()))
            .field("peer_secret_file", &self.peer_secret_file)
            .field("admin_token", &shown(self.admin_token.is_some()))
            .field("admin_token_file", &self.admin_token_file)
            .field("client_tokens", &self.client_token.len())
            .field("client_token_file", &self.client_token_file)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("peer_ca", &self.peer_ca)
            .field("ca", &self.ca)
            .field("admin_open", &self.admin_open)
            .field("client_open", &self.client_open)
            .field("header_read_timeout_ms", &self.header_read_timeout_ms)
            .field("idle_timeout_ms", &self.idle_timeout_ms)
            .field("max_connections", &self.max_connections)
            .field("max_connections_per_source", &self.max_connections_per_source)
            .finish()
    }
}

impl std::fmt::Debug for super::ClientArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientArgs")
            .field("server", &self.server)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_file", &self.token_file)
            .field("ca", &self.ca)
            .finish()
    }
}

/// The flags that put a secret on the command line, where `ps` shows it.
pub const SECRET_FLAGS: [&str; 4] = ["--secret", "--peer-secret", "--admin-token", "--client-token"];

/// The secret flags among `args` (the process's arguments).
pub fn secret_flags_given(args: impl IntoIterator<Item = std::ffi::OsString>) -> Vec<&'static str> {
    let args: Vec<String> = args.into_iter().map(|a| a.to_string_lossy().into_owned()).collect();
    SECRET_FLAGS
        .into_iter()
        .filter(|flag| args.iter().any(|a| a == flag || a.starts_with(&format!("{flag}="))))
        .collect()
}
