//! The idempotency key of an admitted run. docs/DESIGN.md §4.4 fixes its format; the `runs` table
//! holds it under a unique constraint, so two replicas can never admit the same occurrence twice,
//! even if every fence check were somehow bypassed.

/// `ql3:cron:v1:<triggerId>:<triggerRevision>:<scheduledForMs>`. Trigger ids cannot contain `:`
/// (the manifest refuses it), so the key parses back unambiguously.
pub fn idempotency_key(trigger_id: &str, trigger_revision: i64, scheduled_for_ms: i64) -> String {
    format!("ql3:cron:v1:{trigger_id}:{trigger_revision}:{scheduled_for_ms}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_adr_format() {
        assert_eq!(
            idempotency_key("nightly", 3, 1_767_225_600_000),
            "ql3:cron:v1:nightly:3:1767225600000"
        );
    }

    #[test]
    fn differs_by_revision_and_occurrence() {
        let base = idempotency_key("t", 1, 1_000);
        assert_ne!(base, idempotency_key("t", 2, 1_000));
        assert_ne!(base, idempotency_key("t", 1, 2_000));
    }
}
