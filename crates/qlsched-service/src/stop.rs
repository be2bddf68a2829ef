//! A stop asked of a service from outside it: the CLI trips it from its signal handler, a test or
//! an embedding program from wherever it likes. The services ([`crate::replica`],
//! [`crate::backfill`]) only look at it; what asked, and why, is the caller's business, carried
//! as a short reason (`SIGTERM`) for the log.

use std::sync::Arc;

use tokio::sync::watch;

/// Tripped once, with the reason of the first trip; cheap to clone, every clone the same token.
#[derive(Clone, Debug)]
pub struct StopToken {
    reason: Arc<watch::Sender<Option<&'static str>>>,
}

impl Default for StopToken {
    fn default() -> Self {
        Self::new()
    }
}

impl StopToken {
    pub fn new() -> Self {
        StopToken {
            reason: Arc::new(watch::Sender::new(None)),
        }
    }

    /// Asks for the stop. A later trip keeps the first reason: it is the one that stopped.
    pub fn trip(&self, reason: &'static str) {
        self.reason.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(reason);
            true
        });
    }

    /// The reason, once tripped.
    pub fn reason(&self) -> Option<&'static str> {
        *self.reason.borrow()
    }

    /// Resolves with the reason once tripped (at once if it already is). Cancel-safe: dropped in
    /// a `select!`, nothing is lost, since the token keeps its state.
    pub async fn tripped(&self) -> &'static str {
        let mut seen = self.reason.subscribe();
        match seen.wait_for(Option::is_some).await {
            Ok(reason) => reason.unwrap_or("stop"),
            // The sender lives in `self`: it cannot have gone.
            Err(_) => "stop",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_reason_is_kept_and_a_trip_before_the_wait_is_not_lost() {
        let token = StopToken::new();
        assert_eq!(token.reason(), None);
        let clone = token.clone();
        clone.trip("SIGTERM");
        token.trip("SIGINT");
        assert_eq!(token.reason(), Some("SIGTERM"));
        assert_eq!(token.tripped().await, "SIGTERM");
    }

    #[tokio::test]
    async fn a_waiter_wakes_when_another_clone_trips() {
        let token = StopToken::new();
        let waiter = tokio::spawn({
            let token = token.clone();
            async move { token.tripped().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        token.trip("SIGINT");
        assert_eq!(waiter.await.ok(), Some("SIGINT"));
    }
}
