//! TLS for the SoupBinTCP links between sites (rustls): the byte stream a [`crate::tcp`]
//! server or client reads and writes is a [`Link`], plain TCP or TLS over it, so the sessions
//! above it do not change. Certificates and keys are PEM files.
//!
//! The sockets are non-blocking: a TLS record the socket would not take at once stays in
//! rustls's buffer, and [`Link::flush_tls`] (called whenever the session's own buffer is
//! written) sends it on.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConnection, ServerConnection, StreamOwned};

/// The TLS settings of a server: its certificate chain and key.
pub type ServerTls = Arc<rustls::ServerConfig>;

/// The TLS settings of a client: the certificates it trusts, and the name the server's
/// certificate must carry.
#[derive(Clone)]
pub struct ClientTls {
    pub config: Arc<rustls::ClientConfig>,
    pub server_name: ServerName<'static>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClientTls({:?})", self.server_name)
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn invalid(path: &Path, what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        ErrorKind::InvalidInput,
        format!("{}: {what}: {e}", path.display()),
    )
}

/// A server's TLS settings from a PEM certificate chain and a PEM private key.
pub fn server_config(cert: &Path, key: &Path) -> io::Result<ServerTls> {
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| invalid(cert, "certificate", e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(cert, "certificate", e))?;
    if chain.is_empty() {
        return Err(invalid(cert, "certificate", "no certificate in the file"));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| invalid(key, "private key", e))?;
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| io::Error::other(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| invalid(cert, "certificate and key", e))?;
    Ok(Arc::new(config))
}

/// A client's TLS settings: trust the PEM certificates of `ca`; the server's certificate must
/// name `server_name`, or the IP address connected to.
pub fn client_config(ca: &Path, server_name: Option<&str>, ip: IpAddr) -> io::Result<ClientTls> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).map_err(|e| invalid(ca, "certificate", e))? {
        let c = c.map_err(|e| invalid(ca, "certificate", e))?;
        roots.add(c).map_err(|e| invalid(ca, "certificate", e))?;
    }
    if roots.is_empty() {
        return Err(invalid(ca, "certificate", "no certificate in the file"));
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| io::Error::other(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let server_name = match server_name {
        Some(n) => ServerName::try_from(n.to_string())
            .map_err(|e| io::Error::new(ErrorKind::InvalidInput, format!("{n:?}: {e}")))?,
        None => ServerName::IpAddress(ip.into()),
    };
    Ok(ClientTls {
        config: Arc::new(config),
        server_name,
    })
}

/// The byte stream of one SoupBinTCP connection.
pub enum Link {
    Plain(TcpStream),
    Server(Box<StreamOwned<ServerConnection, TcpStream>>),
    Client(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Link {
    /// The server side of an accepted connection (TLS when `tls` is given).
    pub fn accept(stream: TcpStream, tls: Option<&ServerTls>) -> io::Result<Link> {
        Ok(match tls {
            None => Link::Plain(stream),
            Some(c) => {
                let conn = ServerConnection::new(c.clone()).map_err(io::Error::other)?;
                Link::Server(Box::new(StreamOwned::new(conn, stream)))
            }
        })
    }

    /// The client side of a connection made (TLS when `tls` is given).
    pub fn connect(stream: TcpStream, tls: Option<&ClientTls>) -> io::Result<Link> {
        Ok(match tls {
            None => Link::Plain(stream),
            Some(c) => {
                let conn = ClientConnection::new(c.config.clone(), c.server_name.clone())
                    .map_err(io::Error::other)?;
                Link::Client(Box::new(StreamOwned::new(conn, stream)))
            }
        })
    }

    pub fn tcp(&self) -> &TcpStream {
        match self {
            Link::Plain(s) => s,
            Link::Server(s) => s.get_ref(),
            Link::Client(s) => s.get_ref(),
        }
    }

    /// True while TLS records wait to be written to the socket.
    pub fn tls_pending(&self) -> bool {
        match self {
            Link::Plain(_) => false,
            Link::Server(s) => s.conn.wants_write(),
            Link::Client(s) => s.conn.wants_write(),
        }
    }

    /// Writes what TLS holds back, as far as the socket takes it now.
    pub fn flush_tls(&mut self) -> io::Result<()> {
        let r = match self {
            Link::Plain(_) => return Ok(()),
            Link::Server(s) => flush(&mut s.conn, &mut s.sock),
            Link::Client(s) => flush(&mut s.conn, &mut s.sock),
        };
        match r {
            Err(e) if e.kind() == ErrorKind::WouldBlock => Ok(()),
            r => r,
        }
    }
}

fn flush<C, D>(conn: &mut C, sock: &mut TcpStream) -> io::Result<()>
where
    C: std::ops::DerefMut<Target = rustls::ConnectionCommon<D>>,
{
    while conn.wants_write() {
        if conn.write_tls(sock)? == 0 {
            break;
        }
    }
    Ok(())
}

impl Read for Link {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Link::Plain(s) => s.read(buf),
            Link::Server(s) => s.read(buf),
            Link::Client(s) => s.read(buf),
        }
    }
}

impl Write for Link {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = match self {
            Link::Plain(s) => return s.write(buf),
            Link::Server(s) => s.write(buf)?,
            Link::Client(s) => s.write(buf)?,
        };
        self.flush_tls()?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_tls()
    }
}

impl AsRawFd for Link {
    fn as_raw_fd(&self) -> RawFd {
        self.tcp().as_raw_fd()
    }
}
