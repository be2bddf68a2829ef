//! Questions to the person at the terminal: whether there is one, and their answer, read without
//! blocking the async runtime.

use tokio::sync::oneshot;

use super::CliError;
use super::signals::Shutdown;

/// True when a person can answer a prompt: stdin and stderr are both terminals.
pub fn interactive() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Asks `question` on stderr and returns the answer, trimmed and lower-cased (empty at the end
/// of input). The line is read off the async runtime, which keeps serving the connections (and
/// their keepalives) while a person thinks.
pub async fn ask(question: &str) -> Result<String, CliError> {
    put_question(question)?;
    match read_line().await {
        Ok(Ok((_, line))) => Ok(line.trim().to_lowercase()),
        Ok(Err(error)) => Err(error.into()),
        Err(_) => Ok(String::new()),
    }
}

/// One line of stdin, read on a thread of its own: a thread blocked in `read_line` cannot be
/// cancelled, and is simply left behind when the process exits (a blocking task of the runtime
/// would hold up its shutdown instead).
fn read_line() -> oneshot::Receiver<std::io::Result<(usize, String)>> {
    let (sender, receiver) = oneshot::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = std::io::stdin().read_line(&mut line).map(|n| (n, line));
        let _ = sender.send(read);
    });
    receiver
}

/// The question on stderr, the cursor after it.
fn put_question(question: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut stderr = std::io::stderr().lock();
    write!(stderr, "{question} ")?;
    stderr.flush()
}

/// What a prompt that can be cut short got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// A line, trimmed and lower-cased.
    Line(String),
    /// End of input (Ctrl-D) before any line.
    EndOfInput,
    /// SIGINT or SIGTERM, named.
    Interrupted(&'static str),
}

/// Asks like [`ask`], but a signal `shutdown` catches (Ctrl-C) or the end of input ends the wait
/// instead of the process, so that the caller can give back what it holds.
pub async fn ask_or_interrupted(
    question: &str,
    shutdown: &mut Shutdown,
) -> Result<Answer, CliError> {
    put_question(question)?;
    tokio::select! {
        read = read_line() => Ok(match read {
            Ok(Ok((0, _))) | Err(_) => Answer::EndOfInput,
            Ok(Ok((_, line))) => Answer::Line(line.trim().to_lowercase()),
            Ok(Err(error)) => return Err(error.into()),
        }),
        signal = shutdown.recv() => Ok(Answer::Interrupted(signal)),
    }
}
