//! The password file (`~/.pgpass`, `PGPASSFILE`, `passfile`), read as libpq reads it.
//!
//! Operators keep the password out of the URL, the process list and the environment by putting
//! it in this file; a program must find it where psql does. Each line is
//! `hostname:port:database:username:password`; a field of `*` matches anything, `\:` and `\\`
//! stand for `:` and `\`, lines starting with `#` are comments, and the first matching line wins.
//! A file that the group or others may read is ignored with a warning, as psql does, because a
//! password others can read is no secret. The password is never logged.

use std::path::Path;
use std::sync::Mutex;

/// What to match a line against: one host of the connection.
#[derive(Debug, Clone, Copy)]
pub struct Lookup<'a> {
    pub host: &'a str,
    pub port: u16,
    pub dbname: &'a str,
    pub user: &'a str,
}

/// The password of the first line matching `lookup`, or `None` (no file, no line, or a file
/// ignored for its permissions, with a warning on stderr once per file).
pub fn password(path: &Path, lookup: Lookup<'_>) -> Option<String> {
    let metadata = std::fs::metadata(path).ok()?;
    if !metadata.is_file() {
        warn_once(path, "is not a plain file");
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if metadata.permissions().mode() & 0o077 != 0 {
            warn_once(
                path,
                "has group or world access; permissions should be u=rw (0600) or less",
            );
            return None;
        }
    }
    let text = std::fs::read_to_string(path).ok()?;
    find(&text, lookup)
}

/// The matching rules, on the file's text.
pub fn find(text: &str, lookup: Lookup<'_>) -> Option<String> {
    let port = lookup.port.to_string();
    let wanted = [lookup.host, port.as_str(), lookup.dbname, lookup.user];
    text.lines()
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .find_map(|line| {
            let mut rest = line;
            for value in wanted {
                rest = matches_field(rest, value)?;
            }
            Some(unescape(rest))
        })
}

/// The rest of `line` after its first field, when that field is `*` or equals `value`.
fn matches_field<'a>(line: &'a str, value: &str) -> Option<&'a str> {
    if let Some(rest) = line.strip_prefix("*:") {
        return Some(rest);
    }
    let mut chars = line.char_indices();
    let mut wanted = value.chars();
    while let Some((at, c)) = chars.next() {
        let c = match c {
            ':' => {
                // The field ends: a match only if the whole value was consumed.
                return wanted.next().is_none().then(|| &line[at + 1..]);
            }
            '\\' => chars.next().map(|(_, escaped)| escaped)?,
            c => c,
        };
        if wanted.next() != Some(c) {
            return None;
        }
    }
    // A line with fewer than five fields matches nothing.
    None
}

fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            c => out.push(c),
        }
    }
    out
}

fn warn_once(path: &Path, problem: &str) {
    static WARNED: Mutex<Vec<std::path::PathBuf>> = Mutex::new(Vec::new());
    let mut warned = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    if !warned.iter().any(|seen| seen == path) {
        warned.push(path.to_owned());
        // stderr, as psql, under the running program's name: a pool opens many connections,
        // one warning is enough.
        let program = std::env::args_os()
            .next()
            .and_then(|arg0| {
                Path::new(&arg0)
                    .file_name()
                    .map(|name| name.to_string_lossy().into_owned())
            })
            .map_or_else(String::new, |name| format!("{name}: "));
        eprintln!(
            "{program}warning: password file \"{}\" {problem}; it is ignored",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOOKUP: Lookup<'static> = Lookup {
        host: "db.example",
        port: 5432,
        dbname: "prod",
        user: "ops",
    };

    #[test]
    fn first_matching_line_wins() {
        let text = "# a comment\n\
                    other:5432:prod:ops:wrong-host\n\
                    db.example:5433:prod:ops:wrong-port\n\
                    db.example:5432:prod:ops:right\n\
                    *:*:*:*:fallback\n";
        assert_eq!(find(text, LOOKUP).as_deref(), Some("right"));
        let other = Lookup {
            user: "someone",
            ..LOOKUP
        };
        assert_eq!(find(text, other).as_deref(), Some("fallback"));
    }

    #[test]
    fn escapes_in_fields_and_password() {
        let text = "db.example:5432:pr\\:od:o\\\\ps:pa\\:ss\\\\word:tail\n";
        let lookup = Lookup {
            dbname: "pr:od",
            user: "o\\ps",
            ..LOOKUP
        };
        assert_eq!(find(text, lookup).as_deref(), Some("pa:ss\\word:tail"));
        assert_eq!(find(text, LOOKUP), None);
    }

    #[test]
    fn partial_and_short_lines_do_not_match() {
        for text in [
            "db.example:5432:prod:ops\n",
            "db.exampl:5432:prod:ops:x\n",
            "db.example.org:5432:prod:ops:x\n",
            "db.example:5432:prod\n",
            "",
        ] {
            assert_eq!(find(text, LOOKUP), None, "{text:?}");
        }
        assert_eq!(
            find("db.example:5432:prod:ops:\n", LOOKUP).as_deref(),
            Some("")
        );
    }
}
