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
qlsched-migrate(1), qlsched-publish(1), qlsched-run(1), qlsched-demo(1). The design: DESIGN.md and ADR-0105.";

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
        _ => return None,
    })
}
