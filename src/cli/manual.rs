//! The prose of the man pages that clap cannot derive: exit statuses, environment, examples, and
//! the JSON wire format of each subcommand. JSON shapes are stable: fields are only ever added.

pub const EXIT_STATUS: &str = "\
The same for every subcommand:

  0   success
  1   unexpected error
  2   usage error (bad flag or argument; a destructive action without --yes and without a terminal)
  3   fence rejected: the claim named no longer holds (other owner, newer version, expired)
  4   not found
  5   nothing eligible (no due, unclaimed row)
  65  bad input data (manifest, cron expression, time zone, UUID)
  69  database unavailable
  75  transient conflict, retries exhausted
  77  permission denied by the database role
  78  schema not ready or configuration invalid

A closed standard output (qlsched ... | head) ends the command quietly with status 0.";

pub const ENVIRONMENT: &str = "\
QLSCHED_DATABASE_URL, DATABASE_URL
PostgreSQL URL (postgres://user@host:port/db) or key=value string, used when --database-url is not given, in this order.

PGHOST, PGPORT, PGUSER, PGDATABASE, PGPASSWORD, PGSSLMODE, PGAPPNAME
As for libpq: used when no URL is given, and to fill what a URL leaves out. Defaults as libpq's: the local socket, the operating-system user, a database of the user's name. A password is never printed or logged. sslmode=require is refused: this build connects without TLS.

QLSCHED_SCHEMA
The schema that holds the qlsched tables (default qlsched), as --schema.

QLSCHED_OWNER
The claim owner of qlsched run, as --owner.

QLSCHED_LOG
Log filter for stderr, e.g. debug or qlsched=trace (default: info for run and demo, warn otherwise).

NO_COLOR
When set and not empty, no colour under --color auto.";

pub const SEE_ALSO: &str = "\
qlsched-migrate(1), qlsched-publish(1), qlsched-run(1), qlsched-demo(1), qlsched-bench(1). The design: DESIGN.md and ADR-0105.";

pub fn examples(command: &str) -> &'static str {
    match command {
        "migrate" => {
            "\
Create or upgrade the schema:
  qlsched -D postgres://admin@db/prod migrate

Check checksums and grants from a deployment script (exit 78 on any difference):
  qlsched migrate verify -o json"
        }
        "publish" => {
            "\
Publish a manifest, or see first what it would change:
  qlsched publish -f triggers.json --dry-run
  qlsched publish -f triggers.json

From standard input, for scripts:
  generate-manifest | qlsched publish -f - -o json"
        }
        "run" => {
            "\
A replica with the defaults (16 claims a round, 30 s leases, 1 s cadence):
  QLSCHED_DATABASE_URL=postgres://runtime@db/prod qlsched run

A replica with a fixed owner name and short leases, e.g. under a supervisor:
  qlsched run --owner sched-1 --lease 10s --drain-timeout 5s"
        }
        "demo" => {
            "\
The first look, against the local server:
  qlsched demo

For a minute, against another server:
  qlsched -D postgres://postgres@127.0.0.1/postgres demo --duration 1m"
        }
        "bench" => {
            "\
The issue-5 figure: 10,000 due triggers, 4 replicas, as JSON:
  qlsched -D postgres://postgres@127.0.0.1/postgres bench --triggers 10000 --replicas 4 -o json

Claim cost at a million schedule rows, 1 % of them due:
  qlsched bench --triggers 10000 --rows-total 1000000

Larger batches, and a database kept for a look afterwards:
  qlsched bench --batch 64 --keep

The bench creates (and drops, unless --keep) its own database qlsched_bench_PID on the server
the connection settings name; it needs the right to create databases. It exits 1 after printing
its report when the --duration cap cut it short or an invariant was broken."
        }
        _ => {
            "\
  qlsched demo
  qlsched migrate && qlsched publish -f examples/demo.json && qlsched run"
        }
    }
}

/// The documented JSON wire format of a subcommand's `-o json`, if it prints data.
pub fn json_section(command: &str) -> Option<&'static str> {
    Some(match command {
        "migrate" => "\
migrate up: {\"schema\": string, \"version\": int, \"applied\": [migration]}.

migrate status: [migration], where migration is {\"version\": int, \"name\": string, \"state\": \"applied\"|\"pending\"|\"checksum_mismatch\"|\"unknown\", \"checksum\": sha256 hex, \"applied_at_ms\": int|null, \"execution_ms\": int|null}.

migrate verify: {\"schema\": string, \"ok\": bool, \"findings\": [{\"kind\": \"checksum\"|\"pending\"|\"unknown_migration\"|\"missing_grant\"|\"extra_grant\"|\"schema_usage\"|\"role\", \"message\": string}]}.",
        "publish" => "\
{\"dry_run\": bool, \"items\": [{\"kind\": \"project\"|\"task\"|\"trigger\", \"name\": \"PROJECT\" or \"PROJECT/ID\", \"change\": \"created\"|\"changed\"|\"unchanged\", \"revision\": int|null}]}.",
        "bench" => "\
One object. Configuration: \"triggers\" (published), \"due\" (of them, due at once), \"rows_total\" (schedule rows, padding included), \"replicas\", \"batch\".

Throughput: \"admitted\" (runs admitted while measuring), \"complete\" (every due occurrence admitted before the cap), \"elapsed_s\" (first round's start to the end of the last round that admitted), \"admissions_per_s\" (admitted / elapsed_s), \"commit_ceiling_per_s\" (single-row INSERT transactions per second with as many connections as replicas, probed before the replicas start), \"ratio\" (admissions_per_s / commit_ceiling_per_s).

Latency, nearest-rank percentiles over rounds, in milliseconds: \"claim_p50_ms\", \"claim_p99_ms\" (the claim statement, every round), \"admit_p50_ms\", \"admit_p99_ms\" (the round's whole admission, retries and fallbacks included, rounds that claimed anything).

Work: \"rounds\", \"failed_rounds\", \"transactions\" (admission transactions, retries included), \"serialization_retries\", \"serialization_retry_rate\" (per admission), \"batch_fallbacks\" (batches admitted row by row after failing whole), \"fence_lost\", \"round_trips\" (exchanges with the server the rounds waited on: claim 1, each admission transaction 1, a ROLLBACK after a failure 1, a release 2, each first-time statement preparation on a connection 1), \"round_trips_per_admission\".

Checks on the database afterwards: \"runs\", \"duplicates\" (occurrences admitted more than once), \"runs_without_one_attempt\", \"runs_without_two_events\", \"orphans\" (attempts or events without their run).

Other: \"seed_s\" (creating, migrating, publishing and padding), \"database\" (the scratch database's name), \"kept\".",
        _ => return None,
    })
}
