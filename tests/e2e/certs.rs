//! Throwaway certificate authorities and node certificates for the TLS tests (rcgen, ring).
//!
//! A node's certificate names it the way leafraft checks (`node-<ID>.leafraft`) and carries the
//! loopback address the tests reach it at; it is for both server and client authentication, since
//! a node presents the same certificate to its peers.

use std::path::Path;

use rcgen::BasicConstraints;
use rcgen::CertificateParams;
use rcgen::DnType;
use rcgen::ExtendedKeyUsagePurpose;
use rcgen::IsCa;
use rcgen::KeyPair;
use rcgen::KeyUsagePurpose;

/// A certificate authority that can sign node certificates.
pub struct Ca {
    certificate: rcgen::Certificate,
    key: KeyPair,
}

/// A certificate and its key, PEM.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let key = KeyPair::generate().expect("a CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let certificate = params.self_signed(&key).expect("a self-signed CA");
        Ca { certificate, key }
    }

    pub fn pem(&self) -> String {
        self.certificate.pem()
    }

    /// A certificate for node `id` at 127.0.0.1.
    pub fn node(&self, id: u64) -> Issued {
        self.issue(&[format!("node-{id}.leafraft"), "127.0.0.1".to_string(), "localhost".to_string()])
    }

    /// A certificate for `names` (DNS names or IP addresses).
    pub fn issue(&self, names: &[String]) -> Issued {
        let key = KeyPair::generate().expect("a key");
        let mut params = CertificateParams::new(names.to_vec()).expect("certificate parameters");
        params.distinguished_name.push(DnType::CommonName, names.first().cloned().unwrap_or_default());
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let certificate = params.signed_by(&key, &self.certificate, &self.key).expect("a signed certificate");
        Issued { cert_pem: certificate.pem(), key_pem: key.serialize_pem() }
    }
}

impl Issued {
    /// Writes `cert` and `key` atomically (a temporary file renamed over each), as an operator's
    /// rotation should.
    pub fn write(&self, cert: &Path, key: &Path) {
        write_atomically(key, &self.key_pem);
        write_atomically(cert, &self.cert_pem);
    }

    /// The certificate and key, PEM, as one client identity (reqwest's `Identity::from_pem`).
    pub fn identity_pem(&self) -> String {
        format!("{}{}", self.cert_pem, self.key_pem)
    }
}

pub fn write_atomically(path: &Path, text: &str) {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, text).expect("write a temporary file");
    std::fs::rename(&temporary, path).expect("rename it into place");
}
