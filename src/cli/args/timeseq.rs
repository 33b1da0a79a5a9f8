//! The arguments of `leafraft timeseq ...` (`docs/semantics.md#command-line`, `docs/semantics.md#time-sequence-ids`); `id timeseq` is an `IdCommand`.

use clap::Args;
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub enum TimeseqCommand {
    /// Create a namespace; its epoch, time zone and bit widths never change.
    Create(NamespaceFields),
    /// The namespaces, their layouts and the answering node's ranges.
    List {
        #[arg(long)]
        json: bool,
    },
    /// One namespace, its layout and the answering node's ranges.
    Get {
        name: String,
        #[arg(long)]
        json: bool,
    },
}

/// A namespace and what `timeseq create` fixes for it.
#[derive(Debug, Args)]
pub struct NamespaceFields {
    pub name: String,
    /// Second zero of the IDs' time bits, RFC 3339, a whole second [default: 2020-01-01T00:00:00Z].
    #[arg(long)]
    pub epoch: Option<String>,
    /// The string form's calendar: UTC or a fixed offset such as +08:00 [default: UTC].
    #[arg(long, allow_hyphen_values = true)]
    pub time_zone: Option<String>,
    /// Bits of the caller's shard [default: 12]; time, shard and sequence bits sum to 63.
    #[arg(long)]
    pub shard_bits: Option<u8>,
    /// Bits of sequence per second [default: 19: 524,288 IDs per second per namespace].
    #[arg(long)]
    pub seq_bits: Option<u8>,
    #[arg(long)]
    pub description: Option<String>,
}

/// `leafraft id timeseq NS --shard N [-n K] [--string [--prefix P]]`.
#[derive(Debug, Args)]
pub struct TimeseqIdArgs {
    pub namespace: String,
    /// The caller's shard, 0 to 2^shard_bits - 1 (for instance user_id % 4096).
    #[arg(long)]
    pub shard: u64,
    #[arg(short = 'n', long = "count", default_value_t = 1)]
    pub count: u64,
    /// The string form: prefix + yyyyMMddHHmmss + sequence + shard.
    #[arg(long)]
    pub string: bool,
    /// The string form's prefix: at most 32 of A-Z a-z 0-9 - _.
    #[arg(long, requires = "string", allow_hyphen_values = true)]
    pub prefix: Option<String>,
}
