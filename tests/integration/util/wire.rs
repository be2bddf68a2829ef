//! A loopback fault proxy between a replica and PostgreSQL that reads just enough of the wire
//! protocol (frontend messages: Parse, Bind, Execute, simple Query) to act on one statement: it
//! lets the server receive and run a transaction's COMMIT and withholds the reply, then cuts the
//! connection, so the transaction committed and the client never learns it. Everything else is
//! passed through byte for byte. Clients must not ask for TLS through it (`sslmode=disable`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::watch;

/// Where the proxy forwards to: the server's TCP address or its Unix socket.
#[derive(Debug, Clone)]
pub enum Upstream {
    Tcp(String, u16),
    Unix(PathBuf),
}

impl Upstream {
    /// The server the test settings name: its first host, TCP or a socket directory.
    pub fn of(settings: &qlsched::store::ConnectionSettings) -> Upstream {
        let config = settings.driver_config(&qlsched::store::SchemaName::default(), "proxy");
        let port = config.get_ports().first().copied().unwrap_or(5432);
        match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Unix(dir)) => {
                Upstream::Unix(dir.join(format!(".s.PGSQL.{port}")))
            }
            Some(tokio_postgres::config::Host::Tcp(host)) => Upstream::Tcp(host.clone(), port),
            None => Upstream::Tcp("127.0.0.1".to_owned(), port),
        }
    }

    async fn connect(
        &self,
    ) -> Option<(
        Box<dyn AsyncRead + Unpin + Send>,
        Box<dyn AsyncWrite + Unpin + Send>,
    )> {
        match self {
            Upstream::Tcp(host, port) => {
                let (read, write) = TcpStream::connect((host.as_str(), *port))
                    .await
                    .ok()?
                    .into_split();
                Some((Box::new(read), Box::new(write)))
            }
            Upstream::Unix(path) => {
                let (read, write) = UnixStream::connect(path).await.ok()?.into_split();
                Some((Box::new(read), Box::new(write)))
            }
        }
    }
}

/// A proxy listening on 127.0.0.1, forwarding to `upstream`, until dropped.
pub struct WireProxy {
    pub addr: SocketAddr,
    cuts_left: Arc<AtomicU32>,
    cuts_done: Arc<AtomicU32>,
    _stop: watch::Sender<bool>,
}

impl WireProxy {
    /// Starts the proxy; it cuts the first `cuts` admission COMMITs it sees, after the server has
    /// received them, and passes everything else.
    /// It runs on a thread and runtime of its own: a test that blocks its own runtime (waiting
    /// for a child process, say) must not stall the connections of the replica it watches.
    pub async fn start(upstream: Upstream, cuts: u32) -> WireProxy {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("non-blocking");
        let addr = listener.local_addr().expect("address");
        let cuts_left = Arc::new(AtomicU32::new(cuts));
        let cuts_done = Arc::new(AtomicU32::new(0));
        let (stop, stopped) = watch::channel(false);
        let (left, done) = (cuts_left.clone(), cuts_done.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the proxy's runtime");
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener).expect("listener");
                loop {
                    let mut stopped = stopped.clone();
                    tokio::select! {
                        accepted = listener.accept() => {
                            let Ok((client, _)) = accepted else { return };
                            tokio::spawn(relay(
                                client, upstream.clone(), left.clone(), done.clone(), stopped,
                            ));
                        }
                        _ = stopped.changed() => return,
                    }
                }
            });
        });
        WireProxy {
            addr,
            cuts_left,
            cuts_done,
            _stop: stop,
        }
    }

    /// Admission COMMITs whose reply was withheld so far.
    pub fn cuts_done(&self) -> u32 {
        self.cuts_done.load(Ordering::SeqCst)
    }

    /// Stops cutting; everything passes from now on.
    pub fn pass_everything(&self) {
        self.cuts_left.store(0, Ordering::SeqCst);
    }
}

/// Relays one connection. Client to server is read message by message; server to client is
/// copied until a cut, after which nothing more reaches the client and both sockets close.
async fn relay(
    mut client: TcpStream,
    upstream: Upstream,
    cuts_left: Arc<AtomicU32>,
    cuts_done: Arc<AtomicU32>,
    mut stopped: watch::Receiver<bool>,
) {
    let Some((mut server_read, mut server_write)) = upstream.connect().await else {
        return;
    };
    let (mut client_read, mut client_write) = client.split();
    let (cut, cut_seen) = watch::channel(false);
    // After a cut, the server's replies are read and dropped (not left unread: closing a socket
    // with unread data resets it, and the server might lose what it had not read yet).
    let to_client = async {
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let n = match server_read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if !*cut_seen.borrow() && client_write.write_all(&buffer[..n]).await.is_err() {
                return;
            }
        }
    };
    let to_server = async {
        // The startup message has no type byte.
        let Some(startup) = read_untyped(&mut client_read).await else {
            return;
        };
        if server_write.write_all(&startup).await.is_err() {
            return;
        }
        let mut statements: HashMap<String, String> = HashMap::new();
        let mut portals: HashMap<String, String> = HashMap::new();
        let mut admitting = false;
        while let Some((kind, message)) = read_typed(&mut client_read).await {
            let body = &message[5..];
            let query = match kind {
                b'P' => {
                    let mut fields = cstrings(body);
                    let (name, text) = (fields.next(), fields.next());
                    if let (Some(name), Some(text)) = (name, text) {
                        statements.insert(name.clone(), text.clone());
                    }
                    None
                }
                b'B' => {
                    let mut fields = cstrings(body);
                    if let (Some(portal), Some(statement)) = (fields.next(), fields.next()) {
                        portals.insert(portal, statement);
                    }
                    None
                }
                b'E' => cstrings(body)
                    .next()
                    .and_then(|portal| portals.get(&portal))
                    .and_then(|statement| statements.get(statement))
                    .cloned(),
                b'Q' => cstrings(body).next(),
                _ => None,
            };
            if server_write.write_all(&message).await.is_err() {
                return;
            }
            let Some(query) = query else { continue };
            if query.trim_start().starts_with("WITH input AS") {
                admitting = true;
            } else if query.trim() == "COMMIT" && admitting {
                admitting = false;
                let take = cuts_left
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                if take {
                    // The server has the COMMIT (and, pipelined, its Sync follows at once): let
                    // it arrive and run, then cut before any reply reaches the client.
                    let _ = cut.send(true);
                    if let Some((_, sync)) = read_typed(&mut client_read).await {
                        let _ = server_write.write_all(&sync).await;
                    }
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    cuts_done.fetch_add(1, Ordering::SeqCst);
                    return;
                }
            }
        }
    };
    tokio::select! {
        _ = to_client => {}
        _ = to_server => {}
        _ = stopped.changed() => {}
    }
    // Dropping the halves closes both connections: the client sees its connection die with the
    // COMMIT's reply never received.
}

/// A message without a type byte: length (4 bytes, itself included), then the body.
async fn read_untyped(stream: &mut (impl AsyncReadExt + Unpin)) -> Option<Vec<u8>> {
    let mut length = [0u8; 4];
    stream.read_exact(&mut length).await.ok()?;
    let total = usize::try_from(u32::from_be_bytes(length)).ok()?;
    let mut message = length.to_vec();
    message.resize(total.max(4), 0);
    stream.read_exact(&mut message[4..]).await.ok()?;
    Some(message)
}

/// A typed message: its type byte, and the whole message (type, length, body).
async fn read_typed(stream: &mut (impl AsyncReadExt + Unpin)) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 5];
    stream.read_exact(&mut head).await.ok()?;
    let length = usize::try_from(u32::from_be_bytes([head[1], head[2], head[3], head[4]])).ok()?;
    let mut message = head.to_vec();
    message.resize(1 + length.max(4), 0);
    stream.read_exact(&mut message[5..]).await.ok()?;
    Some((head[0], message))
}

/// The NUL-terminated strings at the start of a message body.
fn cstrings(body: &[u8]) -> impl Iterator<Item = String> + '_ {
    body.split(|&b| b == 0)
        .map(|part| String::from_utf8_lossy(part).into_owned())
}
