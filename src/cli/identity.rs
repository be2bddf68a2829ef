//! Who an operator action is by, as it is written to claims and the audit.

/// `USER@HOST:manual`: who claimed by hand, readable in `inspect claims` and the audit.
pub fn manual_owner() -> String {
    format!("{}:manual", operator_name())
}

/// `USER@HOST`, the actor of operator actions.
pub fn operator_name() -> String {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    format!("{}@{host}", whoami::username())
}
