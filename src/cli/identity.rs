//! Who an operator action is by, as it is written to claims and the audit.

/// `USER@HOST:manual`: who claimed by hand, readable in `inspect claims` and the audit.
pub fn manual_owner() -> String {
    format!("{}:manual", operator_name())
}

/// `USER@HOST`, the actor of operator actions.
pub fn operator_name() -> String {
    // whoami 1 named a user it could not look up "unknown": so does this.
    let user = whoami::username().unwrap_or_else(|_| "unknown".to_owned());
    format!("{user}@{}", crate::lifecycle::host_name())
}
