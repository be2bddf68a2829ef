//! TLS to PostgreSQL as libpq's `sslmode` defines it, through rustls (docs/DECISIONS.md, "TLS").
//!
//! Managed PostgreSQL services refuse connections without TLS, so every connection opened
//! (pools, single connections, cancel requests) goes through the one
//! connector built here. The certificate files are read once, when the settings are resolved, so
//! that a missing or unreadable file is a configuration error before any connection.
//!
//! What is verified follows libpq, not rustls' defaults: with a root certificate at hand (an
//! `sslrootcert` file, `~/.postgresql/root.crt`, or `system`) every TLS mode checks the chain;
//! only `verify-full` also checks the host name; without one, `require`, `prefer` and `allow`
//! accept any certificate (they still check that the server holds its key).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::Error;

/// libpq's `sslmode`, every value of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// Never TLS.
    Disable,
    /// Without TLS first; with TLS if the server refuses that.
    Allow,
    /// With TLS if the server offers it, else without (libpq's default).
    Prefer,
    /// TLS or nothing; the certificate is checked only against a root certificate at hand.
    Require,
    /// TLS, and a certificate signed by a trusted CA.
    VerifyCa,
    /// TLS, a certificate signed by a trusted CA, and naming the host connected to.
    VerifyFull,
}

impl SslMode {
    pub fn parse(text: &str) -> Option<SslMode> {
        Some(match text {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    fn verifies(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The TLS settings of a connection string, before any file is read.
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    /// `sslrootcert`: a PEM file of CA certificates, or `system`.
    pub root_cert: Option<String>,
    /// `sslcert`: the client's certificate chain (PEM).
    pub cert: Option<PathBuf>,
    /// `sslkey`: the client's private key (PEM).
    pub key: Option<PathBuf>,
    /// The home directory, where libpq looks for `.postgresql/root.crt`, `postgresql.crt` and
    /// `postgresql.key` when the settings name none.
    pub home: Option<PathBuf>,
}

/// Where the trusted roots came from, to say so when a certificate is refused.
#[derive(Debug, Clone)]
enum Roots {
    None,
    File(PathBuf),
    System,
}

/// The one connector every connection uses, with what it was built from.
#[derive(Clone)]
pub struct Tls {
    pub connector: MakeRustlsConnect,
    roots: Roots,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls").field("roots", &self.roots).finish()
    }
}

/// Resolves `sslmode` and the files as libpq does and reads them: the effective mode (an unset
/// `sslmode` with `sslrootcert=system` means `verify-full`) and the connector.
pub fn build(mode: Option<SslMode>, files: &TlsFiles) -> Result<(SslMode, Tls), Error> {
    let system = files.root_cert.as_deref() == Some("system");
    let mode = match mode {
        Some(mode) => mode,
        None if system => SslMode::VerifyFull,
        None => SslMode::Prefer,
    };
    if system && mode != SslMode::VerifyFull && mode != SslMode::Disable {
        // As libpq 16: the system's roots vouch for any public name, so only a host name check
        // makes them mean anything.
        return Err(Error::Config(format!(
            "weak sslmode \"{mode}\" may not be used with sslrootcert=system (use \"verify-full\")"
        )));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    if mode == SslMode::Disable {
        // Never used for a handshake; built so that every connection has the same type.
        let config = base_config(&provider, Arc::new(Verifier::any_certificate(&provider)))?;
        return Ok((
            mode,
            Tls {
                connector: MakeRustlsConnect::new(config.with_no_client_auth()),
                roots: Roots::None,
            },
        ));
    }

    let default_file = |name: &str| {
        files
            .home
            .as_ref()
            .map(|home| home.join(".postgresql").join(name))
    };
    let roots = match files.root_cert.as_deref() {
        Some("system") => Roots::System,
        Some(path) => existing(Path::new(path), mode)?,
        None => match default_file("root.crt") {
            Some(path) => existing(&path, mode)?,
            None if mode.verifies() => return Err(no_root_cert("~/.postgresql/root.crt")),
            None => Roots::None,
        },
    };
    let verifier = match &roots {
        Roots::None => Verifier::any_certificate(&provider),
        Roots::File(path) => {
            let mut store = RootCertStore::empty();
            for cert in read_certs(path, "sslrootcert")? {
                store.add(cert).map_err(|error| {
                    Error::Config(format!(
                        "sslrootcert {}: a certificate cannot be used as a root: {error}",
                        path.display()
                    ))
                })?;
            }
            Verifier::chain(store, mode, &provider)?
        }
        Roots::System => {
            let found = rustls_native_certs::load_native_certs();
            let mut store = RootCertStore::empty();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(Error::Config(
                    "sslrootcert=system: the system's certificate store holds no usable root \
                     (on Debian, install ca-certificates)"
                        .to_owned(),
                ));
            }
            Verifier::chain(store, mode, &provider)?
        }
    };

    let config = base_config(&provider, Arc::new(verifier))?;
    let cert = files
        .cert
        .clone()
        .or_else(|| default_file("postgresql.crt"));
    let mut config = match cert.filter(|path| path.exists()) {
        // As libpq: no certificate file, no client certificate (the server may not want one).
        None => config.with_no_client_auth(),
        Some(cert_path) => {
            let key_path = files
                .key
                .clone()
                .or_else(|| default_file("postgresql.key"))
                .ok_or_else(|| {
                    Error::Config(format!(
                        "certificate present, but no private key file (sslkey) for {}",
                        cert_path.display()
                    ))
                })?;
            let chain = read_certs(&cert_path, "sslcert")?;
            let key = read_key(&key_path)?;
            config.with_client_auth_cert(chain, key).map_err(|error| {
                Error::Config(format!(
                    "sslcert {} and sslkey {} cannot be used together: {error}",
                    cert_path.display(),
                    key_path.display()
                ))
            })?
        }
    };
    // As libpq 17 sends it: a server with direct TLS negotiation (sslnegotiation=direct)
    // insists on it, and older servers ignore it.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok((
        mode,
        Tls {
            connector: MakeRustlsConnect::new(config),
            roots,
        },
    ))
}

fn base_config(
    provider: &Arc<CryptoProvider>,
    verifier: Arc<dyn ServerCertVerifier>,
) -> Result<rustls::ConfigBuilder<ClientConfig, rustls::client::WantsClientCert>, Error> {
    Ok(ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|error| Error::Config(format!("TLS: {error}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier))
}

/// A root certificate file that exists, or what libpq does without one: refuse for the
/// verifying modes, go on unverified for the others.
fn existing(path: &Path, mode: SslMode) -> Result<Roots, Error> {
    if path.exists() {
        Ok(Roots::File(path.to_owned()))
    } else if mode.verifies() {
        Err(no_root_cert(&path.display().to_string()))
    } else {
        Ok(Roots::None)
    }
}

fn no_root_cert(path: &str) -> Error {
    Error::Config(format!(
        "root certificate file \"{path}\" does not exist; provide it (sslrootcert), use the \
         system's trusted roots with sslrootcert=system, or choose an sslmode that does not \
         verify the server's certificate"
    ))
}

fn read_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|error| {
            Error::Config(format!("{what} {}: {}", path.display(), pem_error(&error)))
        })?;
    if certs.is_empty() {
        return Err(Error::Config(format!(
            "{what} {}: no PEM certificate in it",
            path.display()
        )));
    }
    Ok(certs)
}

/// The private key, refused (as libpq does) when others may read it.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, Error> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path)
            .map_err(|error| Error::Config(format!("sslkey {}: {error}", path.display())))?;
        let mode = meta.mode();
        // libpq: 0600 or less for the user's own file, 0640 or less for one root owns (so that a
        // system service can share a key with a group).
        let too_open = if meta.uid() == 0 {
            mode & 0o037 != 0
        } else {
            mode & 0o077 != 0
        };
        if too_open {
            return Err(Error::Config(format!(
                "private key file \"{}\" has group or world access; it must have permissions \
                 u=rw (0600) or less if owned by the current user, or u=rw,g=r (0640) or less \
                 if owned by root",
                path.display()
            )));
        }
    }
    PrivateKeyDer::from_pem_file(path)
        .map_err(|error| Error::Config(format!("sslkey {}: {}", path.display(), pem_error(&error))))
}

fn pem_error(error: &rustls::pki_types::pem::Error) -> String {
    match error {
        rustls::pki_types::pem::Error::Io(error) => error.to_string(),
        rustls::pki_types::pem::Error::NoItemsFound => {
            "no PEM item of the expected kind in it".to_owned()
        }
        other => format!("not a valid PEM file ({other:?})"),
    }
}

/// The server-certificate check `sslmode` asks for, as libpq makes it. With a root certificate at
/// hand (`chain`, rustls' WebPKI verifier over the roots) the chain and the dates are checked, and
/// the host name only for `verify-full`: for `verify-ca` and the modes below it a certificate that
/// names another host is accepted. Without one (`require`, `prefer`, `allow`), no certificate is
/// refused: encryption against a passive listener, no proof of who the server is. In every mode
/// the handshake signature is checked, so the server must hold the key of the certificate it shows.
#[derive(Debug)]
struct Verifier {
    chain: Option<Arc<WebPkiServerVerifier>>,
    check_name: bool,
    algorithms: WebPkiSupportedAlgorithms,
}

impl Verifier {
    /// The verifier of the modes without a root certificate.
    fn any_certificate(provider: &CryptoProvider) -> Self {
        Verifier {
            chain: None,
            check_name: false,
            algorithms: provider.signature_verification_algorithms,
        }
    }

    /// The verifier over the roots in `store`.
    fn chain(
        store: RootCertStore,
        mode: SslMode,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Self, Error> {
        let chain = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider.clone())
            .build()
            .map_err(|error| Error::Config(format!("TLS root certificates: {error}")))?;
        Ok(Verifier {
            chain: Some(chain),
            check_name: mode == SslMode::VerifyFull,
            ..Verifier::any_certificate(provider)
        })
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            // The chain and the dates are checked before the name: a name error means the rest
            // held.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    // The signatures are checked with the provider's algorithms, as the WebPKI verifier checks
    // them.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

impl Tls {
    /// What a refused server certificate failed on, in words, when `error` (a driver error and
    /// its causes) is one; `None` for every other failure.
    pub fn certificate_failure(
        &self,
        error: &(dyn std::error::Error + 'static),
        host: &str,
    ) -> Option<String> {
        let certificate = rustls_error(error).and_then(|error| match error {
            rustls::Error::InvalidCertificate(certificate) => Some(certificate),
            _ => None,
        })?;
        let roots = match &self.roots {
            Roots::None => "no root certificate".to_owned(),
            Roots::File(path) => format!("sslrootcert {}", path.display()),
            Roots::System => "the system's trusted roots (sslrootcert=system)".to_owned(),
        };
        Some(match certificate {
            CertificateError::NotValidForName => format!(
                "the server's certificate does not name the host \"{host}\" (sslmode=verify-full)"
            ),
            CertificateError::NotValidForNameContext { presented, .. } => format!(
                "the server's certificate does not name the host \"{host}\" (sslmode=verify-full); \
                 it names {}",
                if presented.is_empty() {
                    "no host".to_owned()
                } else {
                    presented.join(", ")
                }
            ),
            CertificateError::UnknownIssuer => {
                format!("the server's certificate is not signed by a CA in {roots} (unknown CA)")
            }
            CertificateError::BadSignature => format!(
                "the server's certificate chain has a bad signature (checked against {roots})"
            ),
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                let when = match certificate {
                    CertificateError::ExpiredContext { not_after, .. } => {
                        format!(" on {}", unix_time(*not_after))
                    }
                    _ => String::new(),
                };
                format!("the server's certificate has expired{when}")
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "the server's certificate is not valid yet (or this machine's clock is wrong)"
                    .to_owned()
            }
            other => format!("the server's certificate was refused: {other:?}"),
        })
    }
}

/// The rustls error under a driver error: tokio-rustls wraps it in an `io::Error`, whose
/// `source()` skips it, so each `io::Error` is opened with `get_ref`.
fn rustls_error<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut current: Option<&'a (dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = current {
        if let Some(found) = error.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(found) = rustls_error(inner)
        {
            return Some(found);
        }
        current = error.source();
    }
    None
}

fn unix_time(time: UnixTime) -> String {
    let seconds = i64::try_from(time.as_secs()).unwrap_or(i64::MAX);
    chrono::DateTime::from_timestamp(seconds, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| format!("{seconds} s after 1970"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words a refused certificate gets, found under the driver's and tokio-rustls' wrapping.
    #[test]
    fn a_refused_certificate_is_named() {
        let (_, tls) = build(Some(SslMode::Require), &TlsFiles::default()).expect("builds");
        let wrapped = |error: CertificateError| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                rustls::Error::InvalidCertificate(error),
            )
        };
        let expired = wrapped(CertificateError::ExpiredContext {
            time: UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_800_000_000)),
            not_after: UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_700_000_000)),
        });
        let text = tls
            .certificate_failure(&expired, "db")
            .expect("a certificate failure");
        assert!(text.contains("has expired on 2023-11-14"), "{text}");
        let unknown = wrapped(CertificateError::UnknownIssuer);
        let text = tls
            .certificate_failure(&unknown, "db")
            .expect("a certificate failure");
        assert!(text.contains("unknown CA"), "{text}");
        let other = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert_eq!(tls.certificate_failure(&other, "db"), None);
    }
}
