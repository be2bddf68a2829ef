//! The signals a command stops on: SIGINT and SIGTERM (and SIGHUP for one that asks a person),
//! caught so that a command can give back what it holds before it exits.

use super::CliError;

/// SIGINT and SIGTERM, caught from the moment [`Shutdown::install`] returns: a signal that comes
/// before anyone waits for it is kept, not lost and not fatal.
pub struct Shutdown {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: Option<tokio::signal::unix::Signal>,
}

impl Shutdown {
    /// Replaces the default actions of SIGINT and SIGTERM for the rest of the process. SIGHUP is
    /// left alone: `nohup qlsched run` must keep running when its terminal goes.
    pub fn install() -> Result<Self, CliError> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: None,
        })
    }

    /// As [`Shutdown::install`], and SIGHUP too: for a command that holds something while it
    /// asks a person, whose terminal may close under it.
    pub fn install_with_hangup() -> Result<Self, CliError> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut shutdown = Self::install()?;
        shutdown.hangup = Some(signal(SignalKind::hangup())?);
        Ok(shutdown)
    }

    /// The name of the next signal. Cancel-safe: a signal is not lost when a `select!` drops this.
    /// Should tokio's signal driver go away (it does not while the runtime lives), this resolves
    /// too: a process that can no longer hear signals stops rather than runs on deaf.
    pub async fn recv(&mut self) -> &'static str {
        const ENDED: &str = "none (signal handling ended)";
        let hangup = async {
            match self.hangup.as_mut() {
                Some(hangup) => hangup.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            received = self.interrupt.recv() => if received.is_some() { "SIGINT" } else { ENDED },
            received = self.terminate.recv() => if received.is_some() { "SIGTERM" } else { ENDED },
            received = hangup => if received.is_some() { "SIGHUP" } else { ENDED },
        }
    }
}

impl Shutdown {
    /// Trips `token` with the first signal's name, from a task of its own, so that a service
    /// waiting on the token stops as it would on the signal. Aborting the task leaves the signals
    /// caught (and then ignored).
    pub fn trip(mut self, token: crate::stop::StopToken) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let signal = self.recv().await;
            token.trip(signal);
        })
    }
}
