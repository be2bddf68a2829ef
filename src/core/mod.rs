//! The pure scheduler logic of ADR-0105: cron evaluation, the misfire decider, the claim fence,
//! idempotency keys, manifest validation and configuration bounds. Nothing here does I/O or
//! reads a clock; every "now" is passed in, taken from the database by the caller (ADR-0107).
