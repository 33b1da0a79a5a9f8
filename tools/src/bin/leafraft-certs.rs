//! `leafraft-certs`: a throwaway CA and node certificates for TLS and mutual TLS (rcgen, ring; no
//! OpenSSL), as `scripts/make-certs.sh` runs it.
//!
//! ```text
//! leafraft-certs --out DIR --node 1=127.0.0.1 --node 2=127.0.0.1,leafraft2 [--new-ca]
//! ```
//! writes `DIR/ca.pem` and `DIR/ca.key` (kept when they exist: certificates issued later, for a
//! rotation, chain to the same CA; `--new-ca` makes a new one) and, per node, `DIR/node<ID>.pem`
//! and `DIR/node<ID>.key`: a certificate for server and client authentication that names the node
//! as `node-<ID>.leafraft` (what leafraft checks on `/raft/*` with `--peer-ca`) and the given hosts
//! (IP addresses or DNS names, for clients and peers verifying the server). Keys are written 0600.

use std::path::Path;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use rcgen::BasicConstraints;
use rcgen::CertificateParams;
use rcgen::DnType;
use rcgen::ExtendedKeyUsagePurpose;
use rcgen::IsCa;
use rcgen::KeyPair;
use rcgen::KeyUsagePurpose;

#[derive(Debug, Parser)]
#[command(name = "leafraft-certs", about = "A throwaway CA and node certificates for leafraft's TLS")]
struct Args {
    /// The directory to write into (created if missing).
    #[arg(long)]
    out: PathBuf,
    /// ID=HOST[,HOST...]: a node certificate naming node-<ID>.leafraft and these hosts (repeatable).
    #[arg(long = "node", required = true)]
    nodes: Vec<String>,
    /// Make a new CA even when DIR holds one (its files are replaced).
    #[arg(long)]
    new_ca: bool,
    /// The CA's common name.
    #[arg(long, default_value = "leafraft throwaway CA")]
    ca_name: String,
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    std::fs::create_dir_all(&args.out).map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;
    let (ca_cert_path, ca_key_path) = (args.out.join("ca.pem"), args.out.join("ca.key"));
    let ca_key = if ca_key_path.exists() && !args.new_ca {
        let pem = std::fs::read_to_string(&ca_key_path).map_err(|e| format!("{}: {e}", ca_key_path.display()))?;
        KeyPair::from_pem(&pem).map_err(|e| format!("{}: {e}", ca_key_path.display()))?
    } else {
        KeyPair::generate().map_err(|e| e.to_string())?
    };
    // The same name and key give a CA that verifies what the earlier one signed.
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, args.ca_name.as_str());
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca = params.self_signed(&ca_key).map_err(|e| e.to_string())?;
    if !ca_cert_path.exists() || args.new_ca {
        write(&ca_key_path, &ca_key.serialize_pem(), true)?;
        write(&ca_cert_path, &ca.pem(), false)?;
        println!("wrote {} (the CA: give it as --peer-ca/--ca, and to clients as --ca)", ca_cert_path.display());
    }
    for node in &args.nodes {
        let (id, hosts) = node.split_once('=').ok_or_else(|| format!("--node {node}: not ID=HOST[,HOST...]"))?;
        let id: u64 = id.trim().parse().map_err(|_| format!("--node {node}: '{id}' is not a node ID"))?;
        let mut names = vec![format!("node-{id}.leafraft")];
        names.extend(hosts.split(',').map(str::trim).filter(|h| !h.is_empty()).map(str::to_string));
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let mut params = CertificateParams::new(names.clone()).map_err(|e| format!("--node {node}: {e}"))?;
        params.distinguished_name.push(DnType::CommonName, names[0].as_str());
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let certificate = params.signed_by(&key, &ca, &ca_key).map_err(|e| e.to_string())?;
        let (cert_path, key_path) = (args.out.join(format!("node{id}.pem")), args.out.join(format!("node{id}.key")));
        write(&key_path, &key.serialize_pem(), true)?;
        write(&cert_path, &certificate.pem(), false)?;
        println!("wrote {} and {} ({})", cert_path.display(), key_path.display(), names.join(", "));
    }
    Ok(())
}

/// Writes atomically (a temporary file renamed into place): a node reloading on a file change
/// never reads half a certificate. Keys are 0600.
fn write(path: &Path, text: &str, secret: bool) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let temporary = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true).mode(if secret { 0o600 } else { 0o644 });
    let mut file = options.open(&temporary).map_err(|e| format!("{}: {e}", temporary.display()))?;
    file.write_all(text.as_bytes()).map_err(|e| format!("{}: {e}", temporary.display()))?;
    std::fs::rename(&temporary, path).map_err(|e| format!("{}: {e}", path.display()))
}
