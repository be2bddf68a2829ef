//! A loopback fault proxy between a replica and PostgreSQL that reads just enough of the wire
//! protocol (frontend messages: Parse, Bind, Execute, simple Query) to act on one statement: it
//! lets the server receive and run a transaction's COMMIT and withholds the reply, then cuts the
//! connection, so the transaction committed and the client never learns it. It also partitions
//! (blackholes both ways, starting at an admission statement, which reaches the server only when
//! the partition heals), adds latency, and resets the connection of an admission statement.
//! Everything else is passed through byte for byte. Clients must not ask for TLS through it
//! (`sslmode=disable`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::{mpsc, watch};

/// Where the proxy forwards to: the server's TCP address or its Unix socket.
#[derive(Debug, Clone)]
pub enum Upstream {
    Tcp(String, u16),
    Unix(PathBuf),
}

impl Upstream {
    /// The server the test settings name: its first host, TCP or a socket directory.
    pub fn of(settings: &qlsched::store::ConnectionSettings) -> Upstream {
        let config = settings.driver_config("proxy");
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

/// The faults the proxy applies, shared by every connection it relays and by the test that
/// drives it.
#[derive(Default)]
struct Faults {
    /// Admission COMMITs whose reply is still to be withheld.
    cuts_left: AtomicU32,
    cuts_done: AtomicU32,
    /// Whether the next admission statement starts a partition (held back until healed).
    blackhole_armed: AtomicBool,
    /// Admission statements still to answer with a reset instead (RST both ways).
    resets_left: AtomicU32,
    resets_done: AtomicU32,
    /// Added to every chunk relayed, either way.
    latency_ms: AtomicU64,
    /// Whether the next admission statement cuts every connection and starts refusing new ones.
    cut_off_armed: AtomicBool,
    /// While true, a new connection is closed as soon as it is accepted, as by a server or
    /// pooler that is down: the client learns it at once.
    refusing: AtomicBool,
    /// When the first connection was relayed after refusals ended.
    reconnected_at: std::sync::Mutex<Option<Instant>>,
}

/// A proxy listening on 127.0.0.1, forwarding to `upstream`, until dropped.
pub struct WireProxy {
    pub addr: SocketAddr,
    faults: Arc<Faults>,
    /// True while partitioned: nothing is relayed either way (it waits, as TCP retransmits), and
    /// new connections get no answer.
    partition: Arc<watch::Sender<bool>>,
    /// Bumped to close every connection relayed so far (kept for the relays' subscriptions).
    _sever: Arc<watch::Sender<u64>>,
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
        let faults = Arc::new(Faults::default());
        faults.cuts_left.store(cuts, Ordering::SeqCst);
        let partition = Arc::new(watch::channel(false).0);
        let sever = Arc::new(watch::channel(0u64).0);
        let (stop, stopped) = watch::channel(false);
        let (shared, partitioned, severing) = (faults.clone(), partition.clone(), sever.clone());
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
                            if shared.refusing.load(Ordering::SeqCst) {
                                let _ = client.set_zero_linger();
                                drop(client);
                                continue;
                            }
                            shared
                                .reconnected_at
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .get_or_insert_with(Instant::now);
                            tokio::spawn(relay(
                                client, upstream.clone(), shared.clone(), partitioned.clone(),
                                severing.clone(), stopped,
                            ));
                        }
                        _ = stopped.changed() => return,
                    }
                }
            });
        });
        WireProxy {
            addr,
            faults,
            partition,
            _sever: sever,
            _stop: stop,
        }
    }

    /// Admission COMMITs whose reply was withheld so far.
    pub fn cuts_done(&self) -> u32 {
        self.faults.cuts_done.load(Ordering::SeqCst)
    }

    /// Withholds the replies of the next `n` admission COMMITs (and cuts their connections).
    pub fn cut_next_commits(&self, n: u32) {
        self.faults.cuts_left.store(n, Ordering::SeqCst);
    }

    /// Stops cutting; everything passes from now on.
    pub fn pass_everything(&self) {
        self.faults.cuts_left.store(0, Ordering::SeqCst);
    }

    /// Partitions at the next admission statement a client sends: that statement is held back
    /// with everything else until [`Self::heal`], so it reaches the server late.
    pub fn partition_at_next_admission(&self) {
        self.faults.blackhole_armed.store(true, Ordering::SeqCst);
    }

    /// Partitions now, whatever is on the wire: nothing is relayed either way, and new
    /// connections get no answer, until [`Self::heal`]: to the client, the whole server hangs.
    pub fn partition_now(&self) {
        self.partition.send_replace(true);
    }

    /// Whether a partition is in force.
    pub fn partitioned(&self) -> bool {
        *self.partition.borrow()
    }

    /// Ends the partition: what was held back is delivered, in order.
    pub fn heal(&self) {
        self.faults.blackhole_armed.store(false, Ordering::SeqCst);
        self.partition.send_replace(false);
    }

    /// Resets (RST, both ways) the connections of the next `n` admission statements, before the
    /// server sees them.
    pub fn reset_next_admissions(&self, n: u32) {
        self.faults.resets_left.store(n, Ordering::SeqCst);
    }

    /// Connections reset so far.
    pub fn resets_done(&self) -> u32 {
        self.faults.resets_done.load(Ordering::SeqCst)
    }

    /// At the next admission statement a client sends: that statement never reaches the server,
    /// every connection is closed and new ones are refused until [`Self::accept_connections`],
    /// as when a pooler or the server goes down in the middle of a round.
    pub fn cut_off_at_next_admission(&self) {
        self.faults.cut_off_armed.store(true, Ordering::SeqCst);
    }

    /// Whether new connections are being refused.
    pub fn refusing(&self) -> bool {
        self.faults.refusing.load(Ordering::SeqCst)
    }

    /// Ends the refusals: connections are relayed again.
    pub fn accept_connections(&self) {
        *self
            .faults
            .reconnected_at
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = None;
        self.faults.refusing.store(false, Ordering::SeqCst);
    }

    /// When the first connection was relayed after [`Self::accept_connections`].
    pub fn reconnected_at(&self) -> Option<Instant> {
        *self
            .faults
            .reconnected_at
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `latency` to every chunk relayed, each way.
    pub fn set_latency(&self, latency: Duration) {
        let ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
        self.faults.latency_ms.store(ms, Ordering::SeqCst);
    }
}

/// What one direction of a connection has to deliver: each chunk with the time it is due.
type Outbox = mpsc::UnboundedSender<(Instant, Vec<u8>)>;

/// Queues `bytes` to be delivered after the added latency. Chunks keep their order and overlap
/// in flight, as on a long link: the latency delays them, it does not throttle them.
fn post(outbox: &Outbox, faults: &Faults, bytes: Vec<u8>) -> bool {
    let latency = Duration::from_millis(faults.latency_ms.load(Ordering::SeqCst));
    outbox.send((Instant::now() + latency, bytes)).is_ok()
}

/// Writes what is posted to `sink` once it is due and no partition is in force, until the
/// outbox is closed (and emptied) or the socket fails.
async fn deliver(
    mut posted: mpsc::UnboundedReceiver<(Instant, Vec<u8>)>,
    mut sink: impl AsyncWrite + Unpin,
    partition: &watch::Sender<bool>,
) {
    while let Some((due, bytes)) = posted.recv().await {
        tokio::time::sleep_until(due.into()).await;
        wait_out_partition(partition).await;
        if sink.write_all(&bytes).await.is_err() {
            return;
        }
    }
}

async fn wait_out_partition(partition: &watch::Sender<bool>) {
    let mut open = partition.subscribe();
    let _ = open.wait_for(|partitioned| !partitioned).await;
}

/// Takes one from `counter` if it is above zero.
fn take_one(counter: &AtomicU32) -> bool {
    counter
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
}

/// Relays one connection. Client to server is read message by message; server to client is
/// copied until a cut, after which nothing more reaches the client and both sockets close.
async fn relay(
    client: TcpStream,
    upstream: Upstream,
    faults: Arc<Faults>,
    partition: Arc<watch::Sender<bool>>,
    sever: Arc<watch::Sender<u64>>,
    mut stopped: watch::Receiver<bool>,
) {
    let mut severed = sever.subscribe();
    // A partition in force: the new connection gets no answer until it heals.
    wait_out_partition(&partition).await;
    let (faults, partition) = (&*faults, &*partition);
    let Some((mut server_read, server_write)) = upstream.connect().await else {
        return;
    };
    let (mut client_read, client_write) = client.into_split();
    let (cut, cut_seen) = watch::channel(false);
    let (to_client_box, to_client_posted) = mpsc::unbounded_channel();
    let (to_server_box, to_server_posted) = mpsc::unbounded_channel();
    // After a cut, the server's replies are read and dropped (not left unread: closing a socket
    // with unread data resets it, and the server might lose what it had not read yet).
    // Owns its outbox: when the server closes, the outbox closes, and the client's side closes
    // once what was posted is delivered.
    let cut_seen = &cut_seen;
    let from_server = async move {
        let outbox = to_client_box;
        let mut buffer = vec![0u8; 16 * 1024];
        loop {
            let n = match server_read.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if !*cut_seen.borrow() && !post(&outbox, faults, buffer[..n].to_vec()) {
                return;
            }
        }
    };
    let to_client = async {
        tokio::join!(
            from_server,
            deliver(to_client_posted, client_write, partition)
        );
    };
    // Returns the client's read half (to reset the socket with) and whether to reset it.
    let cut = &cut;
    let from_client = async move {
        let outbox = to_server_box;
        // The startup message has no type byte.
        let Some(startup) = read_untyped(&mut client_read).await else {
            return (client_read, false);
        };
        if !post(&outbox, faults, startup) {
            return (client_read, false);
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
            let admission = query
                .as_deref()
                .is_some_and(|query| query.trim_start().starts_with("WITH input AS"));
            if admission && take_one(&faults.resets_left) {
                // RST to the client; the server sees its connection close and rolls back.
                faults.resets_done.fetch_add(1, Ordering::SeqCst);
                return (client_read, true);
            }
            if admission && faults.cut_off_armed.swap(false, Ordering::SeqCst) {
                faults.refusing.store(true, Ordering::SeqCst);
                sever.send_modify(|generation| *generation += 1);
                return (client_read, true);
            }
            if admission && faults.blackhole_armed.swap(false, Ordering::SeqCst) {
                partition.send_replace(true);
            }
            if !post(&outbox, faults, message) {
                return (client_read, false);
            }
            let Some(query) = query else { continue };
            if admission {
                admitting = true;
            } else if query.trim() == "COMMIT" && admitting {
                admitting = false;
                if take_one(&faults.cuts_left) {
                    // The server has the COMMIT (and, pipelined, its Sync follows at once): let
                    // it arrive and run, then cut before any reply reaches the client.
                    let _ = cut.send(true);
                    if let Some((_, sync)) = read_typed(&mut client_read).await {
                        post(&outbox, faults, sync);
                    }
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    faults.cuts_done.fetch_add(1, Ordering::SeqCst);
                    return (client_read, false);
                }
            }
        }
        (client_read, false)
    };
    // The outbox closes when `from_client` ends: what it posted is delivered first.
    let to_server = async {
        let (ended, ()) = tokio::join!(
            from_client,
            deliver(to_server_posted, server_write, partition)
        );
        ended
    };
    let ended = tokio::select! {
        () = to_client => None,
        ended = to_server => Some(ended),
        _ = stopped.changed() => None,
        _ = severed.changed() => None,
    };
    if let Some((client_read, true)) = ended {
        let _ = client_read.as_ref().set_zero_linger();
    }
    // Dropping the halves closes both connections: the client sees its connection die with the
    // COMMIT's reply never received (or, after a reset, sees it reset).
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
