//! Connection service files, as libpq reads them: `service=NAME` in the connection string, else
//! `PGSERVICE`, names a section of the user's file (`PGSERVICEFILE`, else `~/.pg_service.conf`),
//! else of the system's (`PGSYSCONFDIR/pg_service.conf`, `/etc/postgresql-common` when unset, as
//! Debian builds libpq). A section found in the user's file is the whole answer; the system's is
//! read only when the user's has none. Its settings fill what the connection string leaves
//! out, before the `PG*` variables do: explicit settings, then the service, then the environment,
//! then the defaults, libpq's order.

use std::path::{Path, PathBuf};

use tokio_postgres::Config;

use crate::Error;
use crate::parse::OWN_KEYWORDS;

/// Where the system's service file lies when `PGSYSCONFDIR` is not set (Debian's libpq).
const DEFAULT_SYSCONFDIR: &str = "/etc/postgresql-common";

/// The keywords a service may set: those tokio-postgres reads and those read here
/// (`OWN_KEYWORDS`, minus `service`, which libpq refuses to nest).
const DRIVER_KEYWORDS: [&str; 8] = [
    "host",
    "hostaddr",
    "port",
    "user",
    "dbname",
    "password",
    "options",
    "application_name",
];

/// The settings of service `name`, in file order, and the file they came from.
pub(crate) fn lookup(
    name: &str,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<(Vec<(String, String)>, PathBuf), Error> {
    let user_file = env("PGSERVICEFILE")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|home| Path::new(&home).join(".pg_service.conf")));
    let system_file = Path::new(&env("PGSYSCONFDIR").unwrap_or_else(|| DEFAULT_SYSCONFDIR.into()))
        .join("pg_service.conf");
    for file in user_file.into_iter().chain([system_file]) {
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => {
                return Err(Error::Config(format!(
                    "service file {}: {error}",
                    file.display()
                )));
            }
        };
        if let Some(settings) = section(&text, name, &file)? {
            return Ok((settings, file));
        }
    }
    Err(Error::Config(format!(
        "definition of service \"{name}\" not found (looked in PGSERVICEFILE or \
         ~/.pg_service.conf, then PGSYSCONFDIR/pg_service.conf)"
    )))
}

/// Section `[name]` of a service file, `None` when it has none. Lines are `key=value`, `#`
/// comments and blank lines are skipped, as libpq does.
fn section(text: &str, name: &str, file: &Path) -> Result<Option<Vec<(String, String)>>, Error> {
    let mut current: Option<&str> = None;
    let mut found: Option<Vec<(String, String)>> = None;
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if found.is_some() && current == Some(name) {
                break;
            }
            current = Some(section);
            if section == name {
                found = Some(Vec::new());
            }
            continue;
        }
        if current != Some(name) {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(Error::Config(format!(
                "service file {} line {}: syntax error (not key=value)",
                file.display(),
                number + 1
            )));
        };
        let key = key.trim();
        if key == "service" {
            return Err(Error::Config(format!(
                "service file {} line {}: nested service specifications are not supported",
                file.display(),
                number + 1
            )));
        }
        if let Some(settings) = found.as_mut() {
            settings.push((key.to_owned(), value.trim().to_owned()));
        }
    }
    Ok(found)
}

/// Fills what `config` (the driver's keywords) and `own` (the keywords read here) leave unset
/// with the service's `settings`. A keyword not read here is refused, naming the file.
pub(crate) fn apply(
    config: &mut Config,
    own: &mut std::collections::BTreeMap<String, String>,
    settings: &[(String, String)],
    file: &Path,
) -> Result<(), Error> {
    let hosts_given = !config.get_hosts().is_empty();
    let hostaddrs_given = !config.get_hostaddrs().is_empty();
    let ports_given = !config.get_ports().is_empty();
    for (key, value) in settings {
        let key = key.as_str();
        match key {
            "host" if !hosts_given => {
                for host in value.split(',') {
                    config.host(host);
                }
            }
            "hostaddr" if !hostaddrs_given => {
                for addr in value.split(',') {
                    config.hostaddr(addr.parse().map_err(|_| {
                        Error::Config(format!(
                            "service file {}: hostaddr={addr:?} is not an IP address",
                            file.display()
                        ))
                    })?);
                }
            }
            "port" if !ports_given => {
                for port in value.split(',') {
                    config.port(port.parse().map_err(|_| {
                        Error::Config(format!(
                            "service file {}: port={port:?} is not a port number",
                            file.display()
                        ))
                    })?);
                }
            }
            "user" if config.get_user().is_none() => {
                config.user(value);
            }
            "dbname" if config.get_dbname().is_none() => {
                config.dbname(value);
            }
            "password" if config.get_password().is_none() => {
                config.password(value.as_str());
            }
            "options" if config.get_options().is_none() => {
                config.options(value);
            }
            "application_name" if config.get_application_name().is_none() => {
                config.application_name(value);
            }
            _ if DRIVER_KEYWORDS.contains(&key) => {}
            _ if OWN_KEYWORDS.contains(&key) => {
                own.entry(key.to_owned()).or_insert_with(|| value.clone());
            }
            _ => {
                return Err(Error::Config(format!(
                    "service file {}: keyword {key:?} is not one read from a service file (host, \
                     hostaddr, port, user, dbname, password, options, application_name, sslmode, \
                     sslrootcert, sslcert, sslkey, passfile, connect_timeout, \
                     target_session_attrs)",
                    file.display()
                )));
            }
        }
    }
    Ok(())
}
