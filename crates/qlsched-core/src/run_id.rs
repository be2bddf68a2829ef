//! The layout of run ids: UUIDv8 (RFC 9562 §5.8), keyed first by the admitting claim owner,
//! then by time.
//!
//! Why not plain UUIDv7: every admission inserts its runs into `runs_pkey`, and the foreign keys
//! from `attempts` and `run_events` make the same SERIALIZABLE transaction read the page its run
//! went to. With time-ordered ids every replica inserts into, and reads, the one rightmost leaf
//! page, so PostgreSQL's page-level predicate locks turn concurrent admissions of different
//! replicas into read-write conflicts on that page, and some of them into serialization failures
//! (docs/PERFORMANCE.md measured a quarter of all batch transactions retried at four replicas).
//! Leading with a shard of the owner gives each replica its own insertion point in the index:
//! its admissions read and write only pages no other replica writes, while ids stay ordered by
//! time within a replica, which keeps inserts on one hot page per replica as UUIDv7 does.
//!
//! ```text
//!  bits   0..16  shard: the first two bytes of SHA-256(claim owner)
//!        16..48  unix milliseconds, bits 47..16
//!        48..52  version (8)
//!        52..64  unix milliseconds, bits 15..4
//!        64..66  variant (RFC 9562)
//!        66..70  unix milliseconds, bits 3..0
//!        70..128 random
//! ```
//!
//! The time is the database's clock at the claim (`claimed_at_ms`; docs/DESIGN.md §4.1: there is no
//! other clock) and serves only index locality: nothing reads it back or compares it. Two
//! owners share a shard with probability 1/65,536 per pair; they then share a hot page, which
//! costs retries, never correctness: run ids stay unique by their 58 random bits and the
//! primary key.

use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The random part a run id needs (the top 6 bits of the first byte are not used).
pub type RunIdEntropy = [u8; 8];

/// The run id an admission by `owner` at `unix_ms` gets; `entropy` supplies the random bits.
pub fn run_id(owner: &str, unix_ms: u64, entropy: RunIdEntropy) -> Uuid {
    let shard = Sha256::digest(owner.as_bytes());
    let ms = unix_ms & 0xFFFF_FFFF_FFFF;
    let mut bytes = [0u8; 16];
    bytes[0] = shard[0];
    bytes[1] = shard[1];
    bytes[2..6].copy_from_slice(&((ms >> 16) as u32).to_be_bytes());
    bytes[6] = 0x80 | ((ms >> 12) & 0x0F) as u8;
    bytes[7] = ((ms >> 4) & 0xFF) as u8;
    bytes[8] = 0x80 | (((ms & 0x0F) as u8) << 2) | (entropy[0] & 0x03);
    bytes[9..16].copy_from_slice(&entropy[1..8]);
    Uuid::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_796_000_000_123;

    /// The shard and the unix milliseconds [`run_id`] put in.
    fn run_id_parts(id: Uuid) -> Option<(u16, u64)> {
        let b = id.as_bytes();
        if id.get_version_num() != 8 || b[8] & 0xC0 != 0x80 {
            return None;
        }
        let high = u64::from(u32::from_be_bytes([b[2], b[3], b[4], b[5]]));
        let ms = (high << 16)
            | (u64::from(b[6] & 0x0F) << 12)
            | (u64::from(b[7]) << 4)
            | u64::from((b[8] >> 2) & 0x0F);
        Some((u16::from_be_bytes([b[0], b[1]]), ms))
    }

    #[test]
    fn is_an_rfc_9562_version_8_uuid() {
        let id = run_id("replica-a", MS, [0xFF; 8]);
        assert_eq!(id.get_version_num(), 8);
        assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
    }

    #[test]
    fn one_owner_keeps_one_shard() {
        let a = run_id("replica-a", MS, [1; 8]);
        let b = run_id("replica-a", MS + 86_400_000, [2; 8]);
        assert_eq!(a.as_bytes()[..2], b.as_bytes()[..2]);
        assert_ne!(
            a.as_bytes()[..2],
            run_id("replica-b", MS, [1; 8]).as_bytes()[..2]
        );
    }

    /// The shard is the first two bytes of SHA-256 of the owner, as the layout says: a replica
    /// that renamed its hash would scatter its own runs over another replica's pages.
    #[test]
    fn the_shard_is_the_head_of_sha_256_of_the_owner() {
        // SHA-256("replica-a") = 63f963e0…, SHA-256("") = e3b0c442…
        assert_eq!(
            run_id("replica-a", MS, [0; 8]).as_bytes()[..2],
            [0x63, 0xf9]
        );
        assert_eq!(run_id("", MS, [0; 8]).as_bytes()[..2], [0xe3, 0xb0]);
    }

    #[test]
    fn entropy_tells_ids_of_one_millisecond_apart() {
        assert_ne!(
            run_id("r", MS, [0; 8]),
            run_id("r", MS, [0, 0, 0, 0, 0, 0, 0, 1])
        );
    }

    proptest! {
        #[test]
        fn the_parts_read_back(ms in 0u64..(1 << 48), entropy in any::<[u8; 8]>()) {
            let id = run_id("owner", ms, entropy);
            let shard = u16::from_be_bytes([id.as_bytes()[0], id.as_bytes()[1]]);
            prop_assert_eq!(run_id_parts(id), Some((shard, ms)));
        }

        #[test]
        fn ids_of_one_owner_sort_by_time(
            a in 0u64..(1 << 48), b in 0u64..(1 << 48),
            ea in any::<[u8; 8]>(), eb in any::<[u8; 8]>(),
        ) {
            prop_assume!(a < b);
            prop_assert!(run_id("owner", a, ea) < run_id("owner", b, eb));
        }
    }

    #[test]
    fn other_uuids_have_no_parts() {
        assert_eq!(run_id_parts(Uuid::now_v7()), None);
        assert_eq!(run_id_parts(Uuid::nil()), None);
    }
}
