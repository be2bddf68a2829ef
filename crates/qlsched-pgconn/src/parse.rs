//! The text of the settings: libpq's keywords taken out of a URL or a key=value string before
//! the driver parses the rest, the `PG*` variables, and the values read here rather than by the driver.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use tokio_postgres::Config;

use crate::Error;

/// libpq's `target_session_attrs`: what the session found on a host must be for the connection
/// to stay there; otherwise the next host of the list is tried. `prefer-standby` goes through the
/// list twice: a standby first, then any server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionAttrs {
    Any,
    /// `SHOW transaction_read_only` is `off`.
    ReadWrite,
    /// `SHOW transaction_read_only` is `on`.
    ReadOnly,
    /// `pg_is_in_recovery()` is false.
    Primary,
    /// `pg_is_in_recovery()` is true.
    Standby,
    PreferStandby,
}

/// The libpq keywords read by this crate rather than by tokio-postgres: taken out of a string
/// before the driver parses the rest ([`split_own_keywords`]), and kept from a service file.
pub(crate) const OWN_KEYWORDS: [&str; 8] = [
    "sslmode",
    "target_session_attrs",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "passfile",
    "connect_timeout",
    "service",
];

impl SessionAttrs {
    pub const ALL: [SessionAttrs; 6] = [
        SessionAttrs::Any,
        SessionAttrs::ReadWrite,
        SessionAttrs::ReadOnly,
        SessionAttrs::Primary,
        SessionAttrs::Standby,
        SessionAttrs::PreferStandby,
    ];

    /// The value as libpq spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionAttrs::Any => "any",
            SessionAttrs::ReadWrite => "read-write",
            SessionAttrs::ReadOnly => "read-only",
            SessionAttrs::Primary => "primary",
            SessionAttrs::Standby => "standby",
            SessionAttrs::PreferStandby => "prefer-standby",
        }
    }

    /// The value of `target_session_attrs` or `PGTARGETSESSIONATTRS`; anything else is a
    /// configuration error naming it, as libpq refuses it.
    pub fn parse(text: &str) -> Result<SessionAttrs, Error> {
        Self::ALL
            .into_iter()
            .find(|attrs| attrs.as_str() == text)
            .ok_or_else(|| {
                Error::Config(format!(
                    "target_session_attrs={text:?} is not one of {}",
                    Self::ALL.map(SessionAttrs::as_str).join(", ")
                ))
            })
    }

    /// The passes through the host list, each with what a session must be in it.
    pub(crate) fn passes(self) -> &'static [SessionAttrs] {
        match self {
            SessionAttrs::PreferStandby => &[SessionAttrs::Standby, SessionAttrs::Any],
            SessionAttrs::Any => &[SessionAttrs::Any],
            SessionAttrs::ReadWrite => &[SessionAttrs::ReadWrite],
            SessionAttrs::ReadOnly => &[SessionAttrs::ReadOnly],
            SessionAttrs::Primary => &[SessionAttrs::Primary],
            SessionAttrs::Standby => &[SessionAttrs::Standby],
        }
    }
}

impl std::fmt::Display for SessionAttrs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// libpq's `connect_timeout`: whole seconds; zero or less waits forever; 1 means 2, libpq's
/// minimum.
pub(crate) fn parse_connect_timeout(text: &str) -> Result<Option<Duration>, Error> {
    let seconds = text.trim().parse::<i64>().map_err(|_| {
        Error::Config(format!(
            "connect_timeout={text:?} is not a whole number of seconds"
        ))
    })?;
    Ok(match seconds {
        i64::MIN..=0 => None,
        1 => Some(Duration::from_secs(2)),
        n => Some(Duration::from_secs(n.unsigned_abs())),
    })
}

/// Takes libpq's keywords that tokio-postgres must not see ([`OWN_KEYWORDS`]) out of a URL's
/// query or a key=value string. `None` when the text does not tokenize (the driver's parser then
/// names the fault).
pub(crate) fn split_own_keywords(text: &str) -> Option<(String, BTreeMap<String, String>)> {
    let mut own = BTreeMap::new();
    if ["postgresql://", "postgres://"]
        .iter()
        .any(|scheme| text.starts_with(scheme))
    {
        let Some((base, query)) = text.split_once('?') else {
            return Some((text.to_owned(), own));
        };
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key_text = percent_decode(key)?;
            if OWN_KEYWORDS.contains(&key_text.as_str()) {
                own.insert(key_text, percent_decode(value)?);
            } else {
                kept.push(pair);
            }
        }
        let rest = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        return Some((rest, own));
    }
    let mut kept = Vec::new();
    for (key, value) in tokenize_key_values(text)? {
        if OWN_KEYWORDS.contains(&key.as_str()) {
            own.insert(key, value);
        } else {
            let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
            kept.push(format!("{key}='{quoted}'"));
        }
    }
    Some((kept.join(" "), own))
}

/// libpq's `key = value` syntax: values unquoted up to white space, or single-quoted; a
/// backslash escapes the next character in either.
fn tokenize_key_values(text: &str) -> Option<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Some(pairs);
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        chars.next_if_eq(&'=')?;
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next()? {
                    '\'' => break,
                    '\\' => value.push(chars.next()?),
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
            if value.is_empty() {
                return None;
            }
        }
        pairs.push((key, value));
    }
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Applies `PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`, `PGPASSWORD` and `PGAPPNAME`
/// to whatever the connection string left unset, then libpq's compiled-in defaults.
pub(crate) fn fill_from_libpq_environment(
    config: &mut Config,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<(), Error> {
    if config.get_hosts().is_empty() {
        match env("PGHOST") {
            Some(hosts) => {
                for host in hosts.split(',') {
                    config.host(host);
                }
            }
            None => {
                config.host(default_socket_dir());
            }
        }
    }
    if config.get_ports().is_empty()
        && let Some(port) = env("PGPORT")
    {
        let port = port
            .parse::<u16>()
            .map_err(|_| Error::Config(format!("PGPORT={port:?} is not a port number")))?;
        config.port(port);
    }
    if config.get_user().is_none() {
        let user = env("PGUSER").unwrap_or_else(os_user);
        config.user(&user);
    }
    if config.get_dbname().is_none() {
        let dbname =
            env("PGDATABASE").unwrap_or_else(|| config.get_user().unwrap_or("postgres").to_owned());
        config.dbname(&dbname);
    }
    if config.get_password().is_none()
        && let Some(password) = env("PGPASSWORD")
    {
        config.password(password);
    }
    if config.get_application_name().is_none()
        && let Some(name) = env("PGAPPNAME")
    {
        config.application_name(name);
    }
    // As libpq (and so psql): PGOPTIONS is the `options` the string does not give.
    if config.get_options().is_none()
        && let Some(options) = env("PGOPTIONS")
    {
        config.options(&options);
    }
    Ok(())
}

/// `text` with `:port` after each host, when it is a URL that names hosts and none with a port;
/// `None` when it is not such a URL (a key=value string is left to the parser and
/// [`fill_from_libpq_environment`]). `from` names where the port came from, for a message.
pub(crate) fn url_with_port(text: &str, port: &str, from: &str) -> Result<Option<String>, Error> {
    let Some(rest) = ["postgresql://", "postgres://"]
        .iter()
        .find_map(|scheme| text.strip_prefix(scheme))
    else {
        return Ok(None);
    };
    let netloc_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let netloc = &rest[..netloc_end];
    let hosts_start = netloc.rfind('@').map_or(0, |at| at + 1);
    let hosts = &netloc[hosts_start..];
    let has_port = |host: &str| match host.strip_prefix('[') {
        Some(bracketed) => bracketed.contains("]:"),
        None => host.contains(':'),
    };
    if hosts.is_empty() || hosts.split(',').any(has_port) {
        return Ok(None);
    }
    let port = port
        .parse::<u16>()
        .map_err(|_| Error::Config(format!("{from}: port={port:?} is not a port number")))?;
    let with_ports = hosts
        .split(',')
        .map(|host| format!("{host}:{port}"))
        .collect::<Vec<_>>()
        .join(",");
    let scheme_len = text.len() - rest.len();
    Ok(Some(format!(
        "{}{}{with_ports}{}",
        &text[..scheme_len],
        &netloc[..hosts_start],
        &rest[netloc_end..]
    )))
}

/// libpq's default socket directory: Debian builds use /var/run/postgresql, upstream /tmp.
pub(crate) fn default_socket_dir() -> &'static str {
    if Path::new("/var/run/postgresql").is_dir() {
        "/var/run/postgresql"
    } else {
        "/tmp"
    }
}

fn os_user() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .or_else(|_| whoami::username())
        .unwrap_or_else(|_| "unknown".to_owned())
}
